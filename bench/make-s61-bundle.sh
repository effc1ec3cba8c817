#!/usr/bin/env bash
# The bundle for bench/s61-h200.sh (session 54), in .dev61: k3-run, k3-bench,
# k3-mkcheckpoint, mla_check.py; the full-width k3-small slice (slice.json,
# seed 3 on the device) for sm_90a at 8192 tokens a step, 128 sequences,
# 33024 positions:
#   slice-bf16   the default
#   k/slice-KS   --kda-state-dtype=bf16 (#13: the KDA state's bytes halved)
#   k/slice-G3   K3C_CONV_DECODE_GROUPS=3 (the decode convolutions' channel
#                groups loaded three at a time; bit-identical)
#   k/slice-KSG3 both
#   k/slice-S224 K3C_SPLITK_TILE=128,224,4,0 (the split-K tile of the
#                7168-wide outputs, mlp_down and kda_out at 128 tokens: 32
#                column tiles x 4 ways = 128 blocks where 256 columns give
#                112 of the 132 SMs one; the same K slices: bit-identical)
#   k/slice-GR2  K3C_GEMV_ROWS=2 (#13's one-token GEMVs at 2 weight rows a
#                block: mla_q_up's 4608 blocks of 192 threads are 3.49 waves
#                at 4 rows, 6.98 at 2; 8 and 16 were slower in session 21)
# and in v/ (#15: one-token MLA decode rounds on the transposed warpgroup
# core, K3C_MLA_DECODE_WG_FROM=1, two 48-head blocks a split, against the
# default's 16-head mma.sync core, 6 groups x 22 splits):
#   W133    33 splits
#   W122    22 splits
#   W1S33   33 splits, both warpgroups scoring (K3C_MLA_DECODE_SPLIT_S=1;
#           session 54's H100: 36.6 against the default's 39.2 us at 8k)
#   W1S22   22 splits, both scoring
#   W1S44   44 splits, both scoring
#   W1SO33  33 splits, both scoring in one-token rounds only
#           (K3C_MLA_DECODE_SPLIT_S=2: multi-token rounds as W133)
#   RC      the default with the one-token combine clustered
#           (K3C_MLA_COMBINE_ROWS_CLUSTER=1: a head's 4 blocks merge the
#           splits once, each a quarter of the latent columns, and share
#           o_lat through distributed shared memory)
#   RC6     RC with 6 splits a lane a round (one round at 22 splits)
#   W1S33RC W1S33 with RC
#   W1C66   (session 56) 66 splits on the clustered transposed core
#           (K3C_MLA_DECODE_CLUSTER=1: a split's two 48-head blocks one
#           cluster, the cache tiles multicast to both)
#   W1SC66  W1C66 with both warpgroups scoring
# and dense k3-tiny (bf16) by default and with --kda-state-dtype=bf16, for
# the checks against the reference executor.
# Carry .dev61; run: bash .dev61/s61-h200.sh (~8 min; PART=1|2).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev61}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
bundle_slice_checkpoint
slice -o $D/slice-bf16
mkdir -p $D/v $D/k
slice -o $D/k/slice-KS --kda-state-dtype=bf16
K3C_CONV_DECODE_GROUPS=3 slice -o $D/k/slice-G3
K3C_CONV_DECODE_GROUPS=3 slice -o $D/k/slice-KSG3 --kda-state-dtype=bf16
K3C_GEMV_ROWS=2 slice -o $D/k/slice-GR2
K3C_SPLITK_TILE=128,224,4,0 slice -o $D/k/slice-S224
W=K3C_MLA_DECODE_WG_FROM=1 S=K3C_MLA_DECODE_SPLIT_S=1 P=K3C_MLA_DECODE_SPLITS
RC=K3C_MLA_COMBINE_ROWS_CLUSTER=1
bundle_variants "W133=$W;$P=33 W122=$W;$P=22 W1S33=$W;$S;$P=33 W1S22=$W;$S;$P=22 W1S44=$W;$S;$P=44 W1SO33=$W;K3C_MLA_DECODE_SPLIT_S=2;$P=33 RC=$RC RC6=$RC;K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS=6 W1S33RC=$W;$S;$P=33;$RC W1C66=$W;K3C_MLA_DECODE_CLUSTER=1;$P=66 W1SC66=$W;$S;K3C_MLA_DECODE_CLUSTER=1;$P=66" slice $D/v/slice
bundle_tiny_dense
tiny_dense -o $D/tiny-dense-bf16
tiny_dense -o $D/tiny-dense-KS --kda-state-dtype=bf16
rm -rf $D/*/ptx $D/[vk]/*/ptx $D/*/model.fused.mlir $D/[vk]/*/model.fused.mlir
cp bench/s61-h200.sh bench/mla_check.py bench/kda_check.py bench/bench_common.py $D/
du -sh $D

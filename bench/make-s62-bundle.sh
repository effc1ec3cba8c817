#!/usr/bin/env bash
# The bundle for bench/s62-h200.sh (session 56), in .dev62: k3-run, k3-bench,
# k3-mkcheckpoint, the checks (mla_check.py, kda_check.py, bench_common.py);
# the full-width k3-small slice (slice.json, seed 3 on the device) for sm_90a
# at 8192 tokens a step, 128 sequences, 33024 positions:
#   slice-bf16  the defaults (since session 56: the KDA state in bf16,
#               one-token MLA rounds on the transposed warpgroup core)
#   slice-old   the defaults before session 56 (--kda-state-dtype=f32,
#               K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_SPLIT_S=0)
#   slice-TR    K3C_MLA_COMBINE_TRIM=1 (the one-token combine merges only
#               the splits that hold positions: short contexts)
#   slice-GW    K3C_GEMV_WARP=1 (the one-token GEMVs of rows of at most
#               2048 a warp per 2 rows: mla_q_up, K = 1536)
# and dense k3-tiny (bf16, the defaults) for the checks against the
# reference executor.
# Carry .dev62; run: bash .dev62/s62-h200.sh (~7 min; QUICK=1 ~1.5 min).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev62}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
bundle_slice_checkpoint
slice -o $D/slice-bf16
K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_SPLIT_S=0 slice -o $D/slice-old --kda-state-dtype=f32
K3C_GEMV_WARP=1 slice -o $D/slice-GW
K3C_MLA_COMBINE_TRIM=1 slice -o $D/slice-TR
bundle_tiny_dense
tiny_dense -o $D/tiny-dense-bf16
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s62-h200.sh bench/mla_check.py bench/kda_check.py bench/bench_common.py $D/
du -sh $D

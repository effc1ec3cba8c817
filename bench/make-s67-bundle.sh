#!/usr/bin/env bash
# The bundle for bench/s67-h200.sh (session 61), in .dev67: k3-run, k3-bench,
# k3-mkcheckpoint; the full-width k3-small slice (slice.json, seed 3 on the
# device) for sm_90a at 8192 tokens a step, 128 sequences, 33024 positions:
#   slice-bf16  the defaults (since session 60: the fused head, the
#               embedding a block a token, MLA rounds of 128 tokens, the
#               convolutions' fused products explicit)
#   slice-old   session 59's defaults (K3C_FUSE_HEAD=0 K3C_EMBED_ROWS=0
#               K3C_MLA_ROUND_TOKENS=64)
#   slice-CT0   the taps a load a tap (K3C_CONV_TAP_VEC=0): since the fused
#               products are explicit its tokens must equal the defaults'
#   slice-PW1   K3C_MLA_PREFETCH_WUV=1: the MLA core's blocks ask the L2 for
#               W_UV at their start
#   slice-PW2   K3C_MLA_PREFETCH_WUV=2: the same after their grid wait
#   slice-S44P  PW2 with 44 splits of a token's positions (33 by default at
#   slice-S66P  one sequence on 132 SMs), and with 66
# and dense k3-tiny with the defaults (bf16, f32) for the checks against the
# reference executor.
# Carry .dev67; run: bash .dev67/s67-h200.sh (~5 min; QUICK=1 ~2.5 min).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev67}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
bundle_slice_checkpoint
slice -o $D/slice-bf16
K3C_FUSE_HEAD=0 K3C_EMBED_ROWS=0 K3C_MLA_ROUND_TOKENS=64 slice -o $D/slice-old
K3C_CONV_TAP_VEC=0 slice -o $D/slice-CT0
K3C_MLA_PREFETCH_WUV=1 slice -o $D/slice-PW1
K3C_MLA_PREFETCH_WUV=2 slice -o $D/slice-PW2
K3C_MLA_PREFETCH_WUV=2 K3C_MLA_DECODE_SPLITS=44 slice -o $D/slice-S44P
K3C_MLA_PREFETCH_WUV=2 K3C_MLA_DECODE_SPLITS=66 slice -o $D/slice-S66P
bundle_tiny_dense
tiny_dense -o $D/tiny-dense
tiny_dense -o $D/tiny-dense-f32 --activation-dtype=f32
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s67-h200.sh bench/mla_check.py bench/bench_common.py bench/kbench_table.py $D/
du -sh $D

#!/usr/bin/env bash
# The bundle for bench/s68-h200.sh (session 61), in .dev68: k3-run, k3-bench,
# k3-mkcheckpoint; the full-width k3-small slice (slice.json, seed 3 on the
# device) for sm_90a at 8192 tokens a step, 128 sequences, 33024 positions:
#   slice-bf16  the defaults
#   slice-old   session 59's defaults (K3C_FUSE_HEAD=0 K3C_EMBED_ROWS=0
#               K3C_MLA_ROUND_TOKENS=64): #13's ratio against them
#   slice-CW    K3C_MLA_COMBINE_WEIGHTS=1: the one-token MLA combine's split
#               weights formed once a block (warp 0), the partials summed
#               with them 12 splits a round
#   slice-CW44  CW with 44 splits of a one-token round (33 by default): a
#               tile less a core block, 4 weighted rounds instead of 3
# Carry .dev68; run: bash .dev68/s68-h200.sh (~3 min on an H200, ~1.5 on
# another card).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev68}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
bundle_slice_checkpoint
slice -o $D/slice-bf16
K3C_FUSE_HEAD=0 K3C_EMBED_ROWS=0 K3C_MLA_ROUND_TOKENS=64 slice -o $D/slice-old
K3C_MLA_COMBINE_WEIGHTS=1 slice -o $D/slice-CW
K3C_MLA_COMBINE_WEIGHTS=1 K3C_MLA_DECODE_SPLITS=44 slice -o $D/slice-CW44
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s68-h200.sh bench/mla_check.py bench/bench_common.py bench/kbench_table.py $D/
du -sh $D

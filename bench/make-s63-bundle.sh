#!/usr/bin/env bash
# The bundle for bench/s63-h200.sh (session 57), in .dev63: k3-run, k3-bench,
# k3-mkcheckpoint, the checks (mla_check.py, bench_common.py); the
# full-width k3-small slice (slice.json, seed 3 on the device) for sm_90a at
# 8192 tokens a step, 128 sequences, 33024 positions:
#   slice-bf16  the defaults
#   slice-PB    K3C_GEMV_PROLOGUE=2: one-token GEMVs build their normed row
#               in every block (the norm's launch gone) where the norm's
#               input rows are at most 4096 bytes: mla_q_up's q_a norm
#   slice-PBA   the same with K3C_GEMV_PROLOGUE_BYTES=65536: every norm-fed
#               one-token GEMV (mla_q_up, mla_in, kda_in, mlp_in, kda_out,
#               lm_head; AttnRes keeps its launch)
#   slice-TR    K3C_MLA_COMBINE_TRIM=1, its sequence's length now counted
#               before the grid wait
# and dense k3-tiny (bf16): the defaults and PBA, for the checks against
# the reference executor.
# Carry .dev63; run: bash .dev63/s63-h200.sh (~5 min).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev63}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
bundle_slice_checkpoint
slice -o $D/slice-bf16
K3C_GEMV_PROLOGUE=2 slice -o $D/slice-PB
K3C_GEMV_PROLOGUE=2 K3C_GEMV_PROLOGUE_BYTES=65536 slice -o $D/slice-PBA
K3C_MLA_COMBINE_TRIM=1 slice -o $D/slice-TR
bundle_tiny_dense
tiny_dense -o $D/tiny-dense-bf16
K3C_GEMV_PROLOGUE=2 K3C_GEMV_PROLOGUE_BYTES=65536 tiny_dense -o $D/tiny-dense-PBA
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s63-h200.sh bench/mla_check.py bench/bench_common.py $D/
du -sh $D

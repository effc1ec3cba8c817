#!/usr/bin/env bash
# The bundle for bench/s59-h200.sh (#13's batch-1 linears behind norms and
# #15's one-token q_abs, session 53), in .dev59: k3-run, k3-bench,
# k3-mkcheckpoint; the full-width k3-small slice (slice.json, seed 3 on the
# device) for sm_90a at 8192 tokens a step, 8 sequences, 8448 positions as
# built by default (slice-bf16) and with
#   GE  K3C_GEMV_EARLY=1: the one-token GEMVs after a norm load their first
#       K step's weights before their grid wait, the norm triggering them
#       early (mla_q_up, kda_out, ...: bit-identical)
#   QE  K3C_MLA_QABS_EARLY=1: the one-token wide q_abs loads its W_UK
#       vectors before its grid wait, mla_q_up's GEMV triggering it early
#       (bit-identical)
#   GQ  both
# In .dev59 (BUNDLE_DIR), so that it travels beside s60's .dev: carry .dev59;
# run: bash .dev59/s59-h200.sh (~3 min).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev59}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
python3 bench/slice-config.py $D slice
[ -d /tmp/slice ] || $B/k3-mkcheckpoint --config $D/slice.json -o /tmp/slice --seed 3 --quiet
slice() { $B/k3-compile /tmp/slice --max-tokens 8192 --max-seqs 8 --max-context 8448 --target=sm_90a --quiet "$@"; }
slice -o $D/slice-bf16
mkdir -p $D/v
bundle_variants "GE=K3C_GEMV_EARLY=1 QE=K3C_MLA_QABS_EARLY=1 GQ=K3C_GEMV_EARLY=1;K3C_MLA_QABS_EARLY=1" slice $D/v/slice
rm -rf $D/*/ptx $D/v/*/ptx $D/*/model.fused.mlir $D/v/*/model.fused.mlir
cp bench/s59-h200.sh $D/
du -sh $D

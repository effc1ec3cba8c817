#!/usr/bin/env bash
# The bundle for one device call after session 43's (bench/s44-h200.sh):
# k3-run, k3-bench, k3-mkcheckpoint; dense k3-tiny bf16 (the checks); the
# full-width k3-small slice with this session's defaults (STS: warpgroup
# tiles staged through shared memory; CT: the KDA gate's column table,
# dt_bias and exp(A_log) loaded once a block ahead of f_b's MMAs) and two
# variants: CT0 (K3C_EPILOGUE_COL_TABLE=0: the gate's per-column loads in
# the store, session 43's first call) and STS0 (K3C_WGMMA_STAGED_STORE=0:
# the direct pair stores, the default before session 43); slice32k (33024
# positions a sequence, 64 sequences) for #15's decode grid at 32k; fla from
# .dev/peers/fla or PEER_FLA=DIR (git-ignored, never committed).
# Carry .dev; run: bash .dev/s44-h200.sh.
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dense.json $D/
python3 bench/slice-config.py $D slice
tdense() { $B/k3-compile $D/k3-tiny-dense.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 33024 --quiet "$@"; }
tdense -o $D/tdense
slice -o $D/slice
bundle_variants "CT0=K3C_EPILOGUE_COL_TABLE=0 STS0=K3C_WGMMA_STAGED_STORE=0" slice $D/slice
$B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 64 --max-context 33024 --quiet -o $D/slice32k
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s44-h200.sh bench/mla-grid-h200.sh bench/kda_peer.py bench/bench_common.py bench/ncu_mix.py $D/
bundle_fla
du -sh $D

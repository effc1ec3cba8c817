#!/usr/bin/env bash
# The bundle for a short device call after session 43's second
# (bench/s45-h200.sh): k3-run, k3-bench, k3-mkcheckpoint; the full-width
# k3-small slice with the default (mapped stores direct: f_b's gate tile no
# longer staged), SM (K3C_WGMMA_STAGED_MAP=1: staged as in the s44 call) and
# STS0 (K3C_WGMMA_STAGED_STORE=0: every warpgroup tile's stores direct).
# Carry .dev; run: bash .dev/s45-h200.sh.
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
python3 bench/slice-config.py $D slice
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 33024 --quiet "$@"; }
slice -o $D/slice
bundle_variants "SM=K3C_WGMMA_STAGED_MAP=1 STS0=K3C_WGMMA_STAGED_STORE=0" slice $D/slice
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s45-h200.sh $D/
du -sh $D

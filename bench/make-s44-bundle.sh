#!/usr/bin/env bash
# The bundle for one device call on persistent warpgroup tiles
# (bench/s44-h200.sh): k3-run, k3-bench, k3-mkcheckpoint; the full-width
# k3-small slice and its variants: P (K3C_WGMMA_SHALLOW_TILE=128,128,3,0,1:
# KDA's shallow gate projection f_b, 8192 x 12288 x 128 at prefill, on
# persistent 128 x 128 blocks, two an SM, whose ring runs on across their
# tiles), FGP (P with the gate in f_b's store, K3C_FUSE_GATE=1), PT (every
# prefill GEMM persistent: K3C_WGMMA_TILE=128,256,4,1,1); dense k3-tiny bf16
# default and PT (k3-tiny's prefill GEMMs persistent: the checks); fla from
# .dev/peers/fla or PEER_FLA=DIR (git-ignored). Carry .dev; run:
# bash .dev/s44-h200.sh
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dense.json $D/
python3 bench/slice-config.py $D slice
tdense() { $B/k3-compile $D/k3-tiny-dense.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet "$@"; }
tdense -o $D/tdense
K3C_WGMMA_TILE=128,256,4,1,1 tdense -o $D/tdense-PT
slice -o $D/slice
K3C_WGMMA_SHALLOW_TILE=128,128,3,0,1 slice -o $D/slice-P
K3C_WGMMA_SHALLOW_TILE=128,128,3,0,1 K3C_FUSE_GATE=1 slice -o $D/slice-FGP
K3C_WGMMA_TILE=128,256,4,1,1 slice -o $D/slice-PT
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s44-h200.sh bench/kda_peer.py bench/bench_common.py $D/
fla=${PEER_FLA:-}
[ -z "$fla" ] && [ -d $D/peers/fla/fla ] && fla=$D/peers/fla
if [ -n "$fla" ] && [ "$fla" != "$D/peers/fla" ]; then
  mkdir -p $D/peers && rm -rf $D/peers/fla && cp -r "$fla" $D/peers/fla
fi
du -sh $D

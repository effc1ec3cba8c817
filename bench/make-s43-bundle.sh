#!/usr/bin/env bash
# The bundle for one device call after session 42's (bench/s43-h200.sh):
# k3-run, k3-bench, k3-mkcheckpoint; the full-width k3-small slice and its
# variants: ON (--kda-out-norm-in-chunk, its count ahead of the token
# kernel's state stores), NG (K3C_FUSE_GATE=0: the KDA gate's own launch
# after f_b, the default before session 42; the default computes it in f_b's
# store), GF (K3C_GATE_FAST=1: the gate's sigmoid by rcp.approx), S3
# (K3C_WGMMA_SHALLOW_TILE=128,128,3,0: f_b's tile with both of its k tiles'
# copies issued at its start instead of one: 97 KB, still two blocks an SM),
# STS (K3C_WGMMA_STAGED_STORE=1: every plain warpgroup tile's outputs staged
# in shared memory and copied out in 16-byte chunks); dense k3-tiny
# bf16 / f32 with ON, and bf16 with NG, GF and STS (the checks); fla from
# .dev/peers/fla or PEER_FLA=DIR (git-ignored, never committed). (Session 42's
# call ran it as FG = K3C_FUSE_GATE=1 against the then default, and FGF.)
# Carry .dev (~42 MB); run: bash .dev/s43-h200.sh, then (the same or another
# call) bash .dev/mla-grid-h200.sh for #15's decode grid.
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dense.json $D/
python3 bench/slice-config.py $D slice
tdense() { $B/k3-compile $D/k3-tiny-dense.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet "$@"; }
tdense -o $D/tdense
tdense -o $D/tdense-ON --kda-out-norm-in-chunk
tdense -o $D/tdense-ON-f32 --kda-out-norm-in-chunk --activation-dtype=f32
K3C_FUSE_GATE=0 tdense -o $D/tdense-NG
K3C_GATE_FAST=1 tdense -o $D/tdense-GF
K3C_WGMMA_STAGED_STORE=1 tdense -o $D/tdense-STS
slice -o $D/slice
slice -o $D/slice-ON --kda-out-norm-in-chunk
K3C_FUSE_GATE=0 slice -o $D/slice-NG
K3C_GATE_FAST=1 slice -o $D/slice-GF
K3C_WGMMA_SHALLOW_TILE=128,128,3,0 slice -o $D/slice-S3
K3C_WGMMA_STAGED_STORE=1 slice -o $D/slice-STS
# #15's decode grid (bench/mla-grid-h200.sh): contexts up to 32768 tokens.
$B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 64 --max-context 33024 --quiet -o $D/slice32k
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s43-h200.sh bench/mla-grid-h200.sh bench/kda_peer.py bench/kda_check.py bench/bench_common.py bench/ncu_mix.py $D/
bundle_fla
du -sh $D

#!/usr/bin/env bash
# The bundle for one H200 call measuring session 41's defaults against the
# open bounds with the peers beside them (bench/s42-h200.sh): k3-run,
# k3-bench, k3-mkcheckpoint; the full-width k3-small slice (its
# model.fused.mlir kept for gemm_peer.py); dense k3-tiny bf16 and f32 (the
# checks); dense k3-tiny with a 40000-token vocabulary (the argmax's vector
# loads); gemm_peer.py, kda_peer.py and fla (from .dev/peers/fla, else
# PEER_FLA=DIR: a checkout of fla-org/flash-linear-attention holding `fla`,
# git-ignored, never committed); slice-W128, slice-ON, slice-PRO, tdense-ON (below). Carry .dev (~25 MB); run: bash .dev/s42-h200.sh
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dense.json $D/
python3 bench/slice-config.py $D slice
tdense() { $B/k3-compile $D/k3-tiny-dense.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
tdense -o $D/tdense
tdense -o $D/tdense-f32 --activation-dtype=f32
python3 -c "
import json; c = json.load(open('$D/k3-tiny-dense.json')); c['vocab_size'] = 40000
json.dump(c, open('$D/tiny-v40k.json', 'w'), indent=1)"
$B/k3-compile $D/tiny-v40k.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet -o $D/tiny-v40k
$B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet -o $D/slice
# W128: batched decode's wide outputs (lm_head, mlp_in) on 128 x 128 tiles of
# three stages without a wgmma group in flight: 97 KB of shared memory and
# 90 registers (ptxas), so two blocks an SM, where the 128 x 256 tile (193 KB,
# 154 registers) runs one: one block's MMAs and stores then overlap the
# other's copies (#13's step at 128 sequences; prefill keeps its tiles).
K3C_WGMMA_WIDE_TILE=128,128,3,0 $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet -o $D/slice-W128
# ON: KDA's gated output norm in the delta rule's kernel (--kda-out-norm-in-
# chunk: at decode the token recurrence's last block of each head normalizes
# it; one launch fewer a KDA layer), the slice and dense k3-tiny (bf16, f32).
$B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet --kda-out-norm-in-chunk -o $D/slice-ON
# PRO: one-token GEMVs build their norm prologue in every block
# (K3C_GEMV_PROLOGUE=1): measured slower for kda_out (a 12288-wide gated
# norm) in session 41; here per family at one sequence (mla_q_up's norm is
# 1536 wide, mla_in's 7168).
K3C_GEMV_PROLOGUE=1 $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet -o $D/slice-PRO
tdense -o $D/tdense-ON --kda-out-norm-in-chunk
tdense -o $D/tdense-ON-f32 --kda-out-norm-in-chunk --activation-dtype=f32
rm -rf $D/*/ptx $D/tdense*/model.fused.mlir $D/tiny-v40k/model.fused.mlir $D/slice-W128/model.fused.mlir $D/slice-ON/model.fused.mlir $D/slice-PRO/model.fused.mlir
cp bench/s42-h200.sh bench/gemm_peer.py bench/kda_peer.py bench/bench_common.py $D/
cp test/Runtime/Inputs/lm-head-rows.py test/Runtime/Inputs/safetensors_shard.py $D/
bundle_fla
du -sh $D

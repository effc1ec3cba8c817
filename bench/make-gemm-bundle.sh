#!/usr/bin/env bash
# Builds the bundle bench/gemm-h200.sh runs on the GPU machine, in .dev/
# (git-ignored): k3-run, k3-bench, k3-mkcheckpoint; k3-tiny (f32) and dense
# k3-tiny (bf16) artifacts whose checkpoints the benchmark regenerates there;
# the full-width 2-layer k3-small slice (dense MLP, capacity 8192 tokens and
# 128 sequences) for sm_90a, and the same slice with mma.sync only
# (K3C_WGMMA=0) to compare logits. Tile variants for tuning:
#   VARIANTS="P1=K3C_WGMMA_TILE=128,256,4,0 D1=K3C_MMA_SMALL=32,64,64,2,2,6;K3C_MMA_FROM=2" \
#     bash bench/make-gemm-bundle.sh
# (names starting with P are benchmarked at prefill, D at decode, N compared
# bit for bit with the default build's decode logits, C checked against the
# reference and benchmarked at decode); TINY_VARIANTS the
# same for k3-tiny bf16 (checked against the reference).
# Carry .dev; run: bash .dev/gemm-h200.sh
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
mkdir -p $D/v
cp models/configs/k3-tiny.json test/Runtime/Inputs/k3-tiny-dense.json $D/
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o /tmp/k3c-ckpt-tiny --seed 11 --quiet
$B/k3-mkcheckpoint --config $D/k3-tiny-dense.json -o /tmp/k3c-ckpt-tiny-dense --seed 11 --quiet
$B/k3-compile /tmp/k3c-ckpt-tiny -o $D/tiny-f32 --activation-dtype=f32 --max-tokens 64 --max-seqs 4 --max-context 256 --target=sm_90a --quiet
$B/k3-compile /tmp/k3c-ckpt-tiny -o $D/tiny-bf16 --max-tokens 64 --max-seqs 4 --max-context 256 --target=sm_90a --quiet
$B/k3-compile /tmp/k3c-ckpt-tiny-dense -o $D/tiny-dense-bf16 --max-tokens 512 --max-seqs 16 --max-context 1024 --target=sm_90a --quiet
# Split-K on every linear deep enough for it (K3C_SPLITK_MIN_K=1), checked at
# 65-128 tokens against the reference.
K3C_SPLITK_MIN_K=1 $B/k3-compile /tmp/k3c-ckpt-tiny-dense -o $D/tiny-dense-split --max-tokens 512 --max-seqs 128 --max-context 1024 --target=sm_90a --quiet
python3 bench/slice-config.py $D slice
[ -d /tmp/slice ] || $B/k3-mkcheckpoint --config $D/slice.json -o /tmp/slice --seed 3 --quiet
slice() { $B/k3-compile /tmp/slice --max-tokens 8192 --max-seqs 128 --max-context 8448 --target=sm_90a --quiet "$@"; }
slice -o $D/slice-bf16
K3C_WGMMA=0 slice -o $D/v/slice-nowg
# Each variant: NAME=VAR=VALUE[;VAR=VALUE...]
bundle_variants "${VARIANTS:-}" slice $D/v/slice
# k3-tiny bf16 variants: TINY_VARIANTS="NAME=VAR=VALUE[;VAR=VALUE...] ..."
tinyv() { $B/k3-compile /tmp/k3c-ckpt-tiny --max-tokens 64 --max-seqs 4 --max-context 256 --target=sm_90a --quiet "$@"; }
bundle_variants "${TINY_VARIANTS:-}" tinyv $D/v/tiny
rm -rf $D/*/ptx $D/v/*/ptx $D/v/*/model.fused.mlir
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
for i in $(seq 1 16); do seq -s, $((i * 7)) $((i * 7 + i % 5 + 2)); done > $D/batch16.txt
printf '5\n9\n13\n17\n21\n25\n29\n33\n' > $D/batch8.txt
cp bench/gemm-h200.sh bench/gemm_peer.py bench/bench_common.py $D/
du -sh $D

#!/usr/bin/env bash
# One device call on persistent warpgroup tiles (bench/make-s44-bundle.sh):
#  1. checks: dense k3-tiny bf16, default and PT (every prefill GEMM on
#     persistent tiles), against the reference; the slice's logits of P, FGP
#     and PT against the default's (bit-identical expected: the same MMAs in
#     the same order) on prompts of 700 and 3000 tokens, 3 steps;
#  2. #14: k3-bench prefill 8192 of the default, P, FGP, PT, two rounds
#     alternating (kda_conv_gate, kda_chunk and the linears), and every
#     launch of the KDA layer's prefill in P and FGP (K3C_PROFILE_LAUNCHES);
#  3. on an H200 only: fla's chunk_kda and short convolution (kda_peer.py).
source "$(dirname "$0")/device-common.sh"
machine
dense_inputs
dense_checks tdense tdense-PT
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "== checks done (${SECONDS}s)"
seq 3 702 | paste -sd, > p700.txt
seq 5 3004 | paste -sd, > p3000.txt
logits() { timeout 150 k3-run $1 --checkpoint /tmp/slice --device cuda --batch $2 --max-new-tokens 3 --quiet --dump-logits $3 > /dev/null; }
for b in p700.txt p3000.txt; do
  logits slice $b /tmp/ref.npy
  for v in P FGP PT; do
    logits slice-$v $b /tmp/x.npy
    python3 -c "
import numpy as n; a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('slice-$v vs default, $b: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
  done
done
echo "== logits done (${SECONDS}s)"
for round in 1 2; do
  for v in "" -P -FGP -PT; do
    kbench pre$v-$round slice$v /tmp/slice 'prefill' --prefill 8192 --decode none
  done
done
echo "== launches of the prefill, 8192 tokens (${SECONDS}s)"
for v in -P -FGP; do
  echo "-- slice$v"
  K3C_PROFILE_LAUNCHES=1 timeout 120 k3-run slice$v --checkpoint /tmp/slice --device cuda --quiet \
    --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1 2>&1 >/dev/null | grep -E "launch profile|kda_conv|kda_chunk" | head -12
done
if [ -d peers/fla/fla ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "== fla at T = 8192, H = 96 (${SECONDS}s)"
  timeout 200 python3 kda_peer.py --fla peers/fla --prefill 8192x96 --check "" --dump "" --decode "" --csv $OUT/kda_peer.csv
fi
echo "== s44 done (${SECONDS}s)"

#!/usr/bin/env bash
# A short device call after session 43's s44 call (bench/make-s45-bundle.sh):
# the default's logits against STS0's (bit-identical expected: 128 one-token
# prompts, a 3000-token prompt); the KDA layer's launches in steady state
# (K3C_PROFILE_REPEAT=20) at 8192 tokens (default and SM) and at 32768 (the
# prompt from a file: four steps of 8192); k3-bench prefill 8192 of the
# default and SM.
source "$(dirname "$0")/device-common.sh"
machine
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
seq 1 128 > b128.txt; seq 5 3004 | paste -sd, > p3000.txt
seq 1 8192 | paste -sd, > p8k.txt; seq 1 32768 | awk '{print $1 % 100000}' | paste -sd, > p32k.txt
logits() { timeout 150 k3-run $1 --checkpoint /tmp/slice --device cuda --batch $2 --max-new-tokens 3 --quiet --dump-logits $3 > /dev/null; }
for b in b128.txt p3000.txt; do
  logits slice $b /tmp/ref.npy; logits slice-STS0 $b /tmp/x.npy
  python3 -c "
import numpy as n; a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('slice vs slice-STS0, $b: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
done
echo "== checks done (${SECONDS}s)"
for run in "slice p8k.txt" "slice-SM p8k.txt" "slice p32k.txt"; do
  set -- $run
  echo "-- KDA launches in steady state, slice $1, prompt $2 (${SECONDS}s)"
  K3C_PROFILE_LAUNCHES=1 K3C_PROFILE_REPEAT=20 K3C_PROFILE_MATCH=k3_kda_ timeout 150 k3-run $1 \
    --checkpoint /tmp/slice --device cuda --quiet --batch $2 --max-new-tokens 1 2>&1 >/dev/null \
    | grep -E "launch profile|k3_kda|error" | grep -v "kda_in_\|linear_wgmma" | head -16
done
for v in "" -SM; do
  kbench s45$v slice$v /tmp/slice 'kda_conv_gate|kda_chunk|ttft' --prefill 8192 --decode 1
done
echo "== s45 done (${SECONDS}s)"

#!/usr/bin/env bash
# Session 38's call: the new defaults (TMA-filled warpgroup tiles, the KDA
# convolutions' window launch skipped where no sequence can be longer than a
# tile) checked and timed, with the decode convolutions at 3 and 6 blocks an
# SM (P3, P6), against .devk-tma's slice-T1 (TMA, the old window condition);
# continuous batching's decode graphs captured on a size's first step (that
# bundle's bin/k3-run-new) against on the second in a row (this build).
# Bundles: SPLIT_VARIANTS="P3=K3C_CONV_DECODE_BLOCKS_PER_SM=3
# P6=K3C_CONV_DECODE_BLOCKS_PER_SM=6" bash bench/make-splitk-bundle.sh, then
# cp bench/s38-h200.sh bench/ncu-step-h200.sh .dev/; .devk-tma is session
# 37's TMA bundle (docs/perf.md) with session 38's first k3-run as
# bin/k3-run-new. Carry .dev and .devk-tma; run: bash .dev/s38-h200.sh
# (NCU_BEFORE=S: Nsight Compute of a decode step if fewer than S seconds
# have passed).
source "$(dirname "$0")/device-common.sh"
ROUNDS=1 DECODE=1,64,128 ROWS='conv|TOTAL,graph' bash splitk-h200.sh > /dev/null 2>&1
echo "== tdense-f32 (the exact path, 1e-5) vs the reference"
for b in b128.txt p100.txt mix20.txt; do
  timeout 120 k3-run tdense-f32 --checkpoint ckpt-dense --device cuda --batch $b --max-new-tokens 3 --check --quiet | grep -E "check: (PASS|FAIL)|error"
done
O=../.devk-tma/slice-T1
seq -s, 5 704 > p700.txt
python3 -c "print('\n'.join(','.join(str(5 + (j * 37 + k) % 900) for k in range(1 + (j * 7) % 40)) for j in range(60)))" > mixed60.txt
for b in b128.txt p700.txt mixed60.txt; do
  timeout 150 k3-run $O --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 3 --quiet --dump-logits /tmp/ref.npy > /dev/null
  timeout 150 k3-run slice --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 3 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy'); b=n.load('/tmp/x.npy')
print('slice (new window condition) vs slice-T1, $b x 3 steps: bit-identical %s' % bool((a==b).all()))"
done
for round in 1; do
  kbench oldwin-$round $O /tmp/slice 'conv|TOTAL,graph' --prefill none --decode 1,64,128
  kbench newwin-$round slice /tmp/slice 'conv|TOTAL,graph' --prefill none --decode 1,64,128
done
kbench ttft-new slice /tmp/slice 'TOTAL' --prefill 512,8192 --decode none
# Continuous batching with staggered finishes (300 prompts of 1-1000
# tokens over 128 slots): graphs captured on a size's first decode step
# (k3-run-new, this session's earlier build) against on the second in a row.
python3 -c "
import random; r = random.Random(5)
print('\\n'.join(','.join(str(r.randrange(5, 900)) for _ in range(r.randrange(1, 1000))) for _ in range(300)))" > stagger.txt
for round in 1; do
  for b in ../.devk-tma/bin/k3-run-new k3-run; do
    timeout 200 $b slice --checkpoint /tmp/slice --device cuda --batch stagger.txt --max-new-tokens 16 --quiet > /tmp/cb-$(basename $b).txt 2>&1
    echo "$b: $(grep -E 'continuous batching|error' /tmp/cb-$(basename $b).txt)"
  done
  cmp <(grep '^sequence' /tmp/cb-k3-run-new.txt) <(grep '^sequence' /tmp/cb-k3-run.txt) && echo "   same tokens"
done
echo "== s38 done (${SECONDS}s)"
if [ $SECONDS -lt ${NCU_BEFORE:-0} ]; then
  echo "== Nsight Compute: every launch of a decode step at 128 sequences, the TMA default"
  ART=slice NCU_TIMEOUT=$((540 - SECONDS)) bash ncu-step-h200.sh 2>&1 | head -45
fi

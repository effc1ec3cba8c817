#!/usr/bin/env bash
# Session 41's device call, on bench/make-s41-bundle.sh's bundle:
#  * the argmax kernel (16-byte loads, four in flight a thread, 1024 threads):
#    greedy tokens picked on the device against the host's pick on dense
#    k3-tiny with 40000 logits a row (random weights; lm_head rows tied near
#    and far apart; NaN rows), 128 sequences, and on the slice;
#  * then bench/splitk-h200.sh on the variants N0, N30, PRO (and slice-OLD):
#    k3-tiny checks, the slice's logits against the default's, k3-bench at
#    DECODE (1,33,128) sequences, ROUNDS (2) rounds alternating: the GEMVs at
#    batch 1, mla_in / mla_q_up at 33 and 128, the step, and the greedy wall
#    step (the argmax kernel's share: slice-OLD against the default).
source "$(dirname "$0")/device-common.sh"
machine
seq 1 128 > b128.txt
k3-mkcheckpoint --config tiny-v40k.json -o ck40 --seed 5 --quiet
greedy_same v40k tiny-v40k ck40 b128.txt
for m in tie2 tiefar nan0 nanmid; do
  rm -rf ck40-$m && cp -r ck40 ck40-$m && python3 lm-head-rows.py ck40-$m $m
  greedy_same v40k-$m tiny-v40k ck40-$m b128.txt --allow-nonfinite
done
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
greedy_same slice slice /tmp/slice b128.txt
echo "== argmax checks done (${SECONDS}s)"
TINY="${TINY:-N0 N30 PRO}" ROUNDS=${ROUNDS:-2} DECODE=${DECODE:-1,33,128} \
  ROWS=${ROWS:-'mla_in|mla_q_up|kda_out|argmax|TOTAL'} bash splitk-h200.sh
echo "== s41 done (${SECONDS}s)"

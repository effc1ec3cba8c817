#!/usr/bin/env bash
# Session 56's next device call (bundle: bash bench/make-s62-bundle.sh; carry
# .dev62; run: bash .dev62/s62-h200.sh, ~7 min): session 56's defaults (the
# KDA state in bf16, one-token MLA rounds on the transposed core) on the
# machine the criteria name, against the build with the earlier defaults:
# #13's decode step at 128 sequences against 1 (graph replay), both builds,
# two rounds; the copy ceiling; dense k3-tiny against the reference
# executor (128 one-token prompts, a 100-token prompt, a mixed batch of 20);
# the slice's delta rule in its 128-sequence decode launch and its one-token
# MLA kernel (a 5000-token prompt) against fp64; #15's decode table
# (mla_attn in the step graph) at 1 / 8 / 64 sequences and context 1024 /
# 8192 / 32768, the one-sequence rows for both builds; the one-token GEMVs
# a warp per rows (slice-GW: mla_q_up at one sequence, its --check); the
# trimmed one-token combine (slice-TR) at 64..32768 positions and vs fp64.
# Only log.txt and kbench.csv come back.
# QUICK=1 (~2.5 min, for the end of a session's device time): one round of
# the ratio, the one-sequence MLA rows at 8k and dense k3-tiny's checks.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
if [ "${QUICK:-0}" = 1 ]; then
  for a in slice-bf16 slice-old; do
    kbench s62q-ratio-$a $a /tmp/slice 'graph|kda_chunk|mla_attn|mla_q_up' --prefill none --decode 1,128
    kbench s62q-$a-1-8192 $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context 8192
  done
  kbench s62q-GW slice-GW /tmp/slice 'graph|mla_q_up' --prefill none --decode 1
  for c in 64 8192; do
    kbench s62q-TR-$c slice-TR /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context $c
  done
  mla_kernel_check slice-TR 60 200
  echo "== slice-GW vs the reference: one 2-token prompt, 2 new (${SECONDS}s)"
  timeout 100 k3-run slice-GW --checkpoint /tmp/slice --device cuda --prompt-ids 5,6 --max-new-tokens 2 --check --quiet | grep -E "check: (PASS|FAIL)|error"
  dense_inputs
  DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense-bf16
  find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
  echo "== done (${SECONDS}s)"
  exit 0
fi
R='graph|kda_chunk|mla_attn|mlp_down|mla_q_up'
for r in 1 2; do
  for a in slice-bf16 slice-old; do
    kbench s62-ratio-$a-$r $a /tmp/slice "$R" --prefill none --decode 1,128
  done
  kbench s62-GW-$r slice-GW /tmp/slice 'graph|mla_q_up' --prefill none --decode 1
done
echo "== slice-GW vs the reference: one 2-token prompt, 2 new (${SECONDS}s)"
timeout 100 k3-run slice-GW --checkpoint /tmp/slice --device cuda --prompt-ids 5,6 --max-new-tokens 2 --check --quiet | grep -E "check: (PASS|FAIL)|error"
copy_ceiling
dense_inputs
dense_checks tiny-dense-bf16
kda_decode_check slice-bf16 128
mla_kernel_check slice-bf16 60
for c in 8192 64 1024 4096 32768; do
  for a in slice-bf16 slice-old slice-TR; do
    kbench s62-$a-1-$c $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context $c
  done
done
mla_kernel_check slice-TR 60 200
# Nsight Compute: the duration of each mla_attn launch of a one-sequence
# step at 8k (each alone, clocks unlocked): q_abs, the core, the combine.
echo "== ncu: mla_attn's launches, one sequence at 8k (${SECONDS}s)"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:mla_attn \
  k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1 --context 8192 --steps 1 2>/dev/null |
  python3 -c "
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 5]
if not rows: print('no Nsight Compute rows'); sys.exit()
h = rows[0]; k, u, v = h.index('Kernel Name'), h.index('Metric Unit'), h.index('Metric Value')
sc = {'nsecond': 1e-3, 'ns': 1e-3, 'usecond': 1, 'us': 1, 'msecond': 1e3, 'ms': 1e3}
for r in rows[1:][-6:]: print('%-70s %8.2f us' % (r[k][:70], float(r[v].replace(',', '')) * sc.get(r[u], 1)))
"
for c in 8192 1024 32768; do
  [ $SECONDS -gt 500 ] && break
  kbench s62-slice-bf16-8,64-$c slice-bf16 /tmp/slice 'mla_attn' --prefill none --decode 8,64 --context $c
done
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

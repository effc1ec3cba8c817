#!/usr/bin/env bash
# Every launch of a batched decode step, timed by Nsight Compute (one metric:
# gpu__time_duration; launches serialized, so no overlap): the full-width
# slice (slice-bf16 of a bench/make-*-bundle.sh bundle, slice.json beside it),
# SEQS (128) prompts of CTX (64) tokens, 3 new tokens (a prefill round, then
# two decode rounds). Prints per kernel name: launches, mean and total µs of
# the decode rounds (the launches after the prefill's), and writes the raw
# csv to $OUT/ncu-step.csv. Carry .dev; run: bash .dev/ncu-step-h200.sh
# (ART: another artifact folder).
source "$(dirname "$0")/device-common.sh"
machine
which ncu > /dev/null || { echo "no ncu"; exit 1; }
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
SEQS=${SEQS:-128}; CTX=${CTX:-64}; ART=${ART:-slice-bf16}
for i in $(seq 1 $SEQS); do seq -s, $i $((i + CTX - 1)); done > /tmp/bstep.txt
timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  k3-run $ART --checkpoint /tmp/slice --device cuda --batch /tmp/bstep.txt --max-new-tokens 3 \
  --quiet > /tmp/ncu-step.csv 2> /tmp/ncu-step.err || { tail -5 /tmp/ncu-step.err; }
cp /tmp/ncu-step.csv $OUT/ncu-step.csv
python3 - <<'PY'
import csv, collections
rows = list(csv.reader(l for l in open('/tmp/ncu-step.csv') if l.startswith('"')))
head = rows[0]; data = [r for r in rows[1:] if r and r[0].isdigit()]
ki, ti = head.index('Kernel Name'), head.index('gpu__time_duration.sum')
unit = rows[1][ti] if not rows[1][0].isdigit() else 'ns'
names = [r[ki] for r in data]; times = [float(r[ti].replace(',', '')) for r in data]
# The decode rounds: from the second round's embedding launch (every round
# starts with it; the prefill round is the first).
emb = [i for i, n in enumerate(names) if '_embed_' in n]
start = emb[1] if len(emb) > 1 else 0
per = collections.OrderedDict()
for n, t in zip(names[start:], times[start:]):
    per.setdefault(n, []).append(t)
scale = 1e-3 if unit == 'ns' else (1.0 if unit in ('us', 'usecond') else 1e3)
print('decode rounds: %d launches (duration unit %s)' % (len(names) - start, unit))
print('%-70s %4s %9s %9s' % ('kernel', 'n', 'mean us', 'total us'))
tot = 0
for n, ts in sorted(per.items(), key=lambda kv: -sum(kv[1])):
    tot += sum(ts) * scale
    print('%-70s %4d %9.1f %9.1f' % (n[:70], len(ts), sum(ts) / len(ts) * scale, sum(ts) * scale))
print('sum of the decode rounds: %.1f us (%.1f a round)' % (tot, tot / 2))
PY
echo "== done (${SECONDS}s)"

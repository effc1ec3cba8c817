#!/usr/bin/env bash
# Session 54's device call (bundle: bash bench/make-s61-bundle.sh; carry
# .dev61; run: PART=1 bash .dev61/s61-h200.sh, then PART=2).
# PART=1 (~8 min), #13 with the KDA state in bf16 (--kda-state-dtype=bf16,
#   KS), the decode convolutions' channel groups (G3, KSG3), the one-token
#   GEMVs at 2 rows a block (GR2) and the split-K tile 224 columns wide
#   (S224): the decode step at 128 sequences against 1 (graph replay, with
#   the linears and the KDA launches), every build; the copy ceiling
#   (torch); Nsight Compute's duration of every launch of KS's step at 128
#   sequences; dense k3-tiny's checks against the reference executor with
#   the bf16 state (128 one-token prompts, a 100-token prompt, 20 mixed);
#   the slice's logits of each build against the default's (8 prompts of
#   40-1200 tokens, 4 steps: G3, GR2 and S224 bit-identical to the default,
#   KSG3 to KS); KS's slice against the reference at 16 sequences; a
#   second round of the timings while the call has time.
# PART=2, #15's one-token MLA decode rounds on the transposed warpgroup
#   core (v/): a smoke run of each build with a timeout; its one-token
#   decode kernel against fp64 attention (mla_check.py, a 5000-token
#   prompt); its logits against the default's; mla_attn and the step at one
#   sequence, context 8192 (two rounds), 1024 and 32768 (graph replay).
# PART=3: both parts' essentials in one call (below); PART=4 the least of
# them for a short call; PART=5 less still.
# Only log.txt and kbench.csv come back.
source "$(dirname "$0")/device-common.sh"
machine
# logits8 BUILD...: each build's logits of 8 prompts of 40-1200 tokens over
# 4 steps (/tmp/B-<name>.npy), then each pair below that both builds have:
# bit-identity, max relative difference, argmax agreement.
logits8() {
  for i in 1 2 3 4 5 6 7 8; do seq -s, $i $((i + 150 * i + 30)); done > /tmp/b8.txt
  for a in "$@"; do
    timeout 120 k3-run $a --checkpoint /tmp/slice --device cuda --batch /tmp/b8.txt --max-new-tokens 4 --quiet --dump-logits /tmp/B-$(basename $a).npy > /dev/null
  done
  python3 - <<'PY'
import numpy as n, os
L = lambda k: n.load('/tmp/B-slice-%s.npy' % k)
for x, y in [('bf16', 'KS'), ('bf16', 'G3'), ('KS', 'KSG3'), ('bf16', 'GR2'), ('bf16', 'S224')]:
    if not (os.path.exists('/tmp/B-slice-%s.npy' % x) and os.path.exists('/tmp/B-slice-%s.npy' % y)):
        continue
    a, b = L(x), L(y)
    print('8 prompts, %s vs %s: bit-identical %s, max rel %.2e, argmax equal %.3f' % (x, y,
          bool((a.view(n.uint32) == b.view(n.uint32)).all()), abs(a.astype(n.float64) - b).max() / abs(a).max(), (a.argmax(-1) == b.argmax(-1)).mean()))
PY
}
# ks_check SECONDS: the slice with the bf16 KDA state against the reference
# executor, 16 sequences (the staged decode kernel's bf16 form; k3-tiny's
# 32-column heads take the register form only).
ks_check() {
  for i in $(seq 1 16); do echo "$i,$((i + 20))"; done > /tmp/b16.txt
  echo "== k/slice-KS vs the reference: 16 prompts of 2 tokens, 2 new (${SECONDS}s)"
  timeout $1 k3-run k/slice-KS --checkpoint /tmp/slice --device cuda --batch /tmp/b16.txt --max-new-tokens 2 --check --quiet | grep -E "check: (PASS|FAIL)|error"
}
P5=$(seq -s, 1 5000)
# mla_checks BUILD...: a smoke run of each (a build that fails or hangs is
# removed), its kernel against fp64, then its logits of the 5000-token
# prompt against the first build's.
mla_checks() {
  for a in "$@"; do
    n=$(basename $a)
    if ! timeout 90 k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $P5 --max-new-tokens 4 --quiet --dump-logits /tmp/L-$n.npy > /tmp/smoke.txt 2>&1; then
      echo "$a: smoke run FAILED or hung:"; tail -5 /tmp/smoke.txt; rm -rf $a; continue
    fi
    mla_kernel_check $a 120
  done
  python3 - <<'PY'
import numpy as n, glob
a = n.load('/tmp/L-slice-bf16.npy')
for f in sorted(glob.glob('/tmp/L-*.npy')):
    b = n.load(f)
    print('5000-token prompt, default vs %s: max rel %.2e' % (f[7:-4], abs(a.astype(n.float64) - b).max() / abs(a).max()))
PY
}
if [ "${PART:-1}" = 5 ]; then
  # PART=5 (~3 min): dense k3-tiny with the bf16 KDA state against the
  # reference first (no slice needed), then the slice's step at 128 against
  # 1, default and KS.
  dense_inputs
  DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense-KS
  k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
  echo "== the slice's checkpoint made (${SECONDS}s)"
  for a in k/slice-KS slice-bf16; do
    kbench s61-ratio-$(basename $a) $a /tmp/slice 'graph|kda_chunk' --prefill none --decode 1,128
  done
  find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
  echo "== done (${SECONDS}s)"
  exit 0
fi
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
if [ "${PART:-1}" = 4 ]; then
  # PART=4 (~4 min): the least a short call answers: the step at 128
  # against 1 with the bf16 KDA state, its checks against the reference
  # (dense k3-tiny, the slice at 16 sequences), and the clustered one-token
  # combine (RC) against fp64 and in time.
  for a in slice-bf16 k/slice-KS; do
    kbench s61-ratio-$(basename $a) $a /tmp/slice 'graph|kda_chunk' --prefill none --decode 1,128
  done
  dense_inputs
  DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense-KS
  ks_check 100
  mla_kernel_check v/slice-RC 60
  for a in slice-bf16 v/slice-RC slice-bf16 v/slice-RC; do
    kbench s61-$(basename $a)-8192 $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context 8192
  done
elif [ "${PART:-1}" = 3 ]; then
  # PART=3 (~7 min): both parts' essentials in one call, for a session
  # whose device time allows one: #13's step at 128 against 1 for the
  # default, KS, KSG3 and S224; the copy ceiling; dense k3-tiny with the bf16
  # state and the slice's KS at 16 sequences against the reference; the
  # logits of S224 / KS against the default; then #15's clustered one-token
  # combine (RC, RC6, W1S33RC) and W1S33: the kernel against fp64, the
  # logits against the default's, mla_attn at one sequence, context 8192;
  # and (session 56) the one-token rounds on the clustered transposed core,
  # 66 splits (W1C66; W1SC66 with both warpgroups scoring): the two 48-head
  # blocks of a split one cluster, each cache tile read from L2 once for all
  # 96 heads, 132 blocks.
  R='graph|kda_chunk|kda_conv|lm_head|mlp_in|mlp_down|kda_out|mla_attn'
  for a in slice-bf16 k/slice-KS k/slice-KSG3 k/slice-S224; do
    kbench s61-ratio-$(basename $a) $a /tmp/slice "$R" --prefill none --decode 1,128
  done
  copy_ceiling
  dense_inputs
  dense_checks tiny-dense-KS
  logits8 slice-bf16 k/slice-KS k/slice-S224
  ks_check 200
  mla_checks slice-bf16 v/slice-RC v/slice-RC6 v/slice-W1S33 v/slice-W1S33RC v/slice-W1C66 v/slice-W1SC66
  for r in 1 2; do
    for a in slice-bf16 v/slice-RC v/slice-RC6 v/slice-W1S33 v/slice-W1S33RC v/slice-W1C66 v/slice-W1SC66; do
      [ $SECONDS -gt ${MLA_BEFORE:-540} ] && break 2
      [ -d $a ] && kbench s61-$(basename $a)-8192-$r $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context 8192
    done
  done
elif [ "${PART:-1}" = 1 ]; then
  R='graph|kda_chunk|kda_conv|kda_in|kda_out|lm_head|mlp_in|mlp_down|mla_in|mla_q_up|mla_out'
  for a in slice-bf16 k/*; do
    kbench s61-ratio-$(basename $a)-1 $a /tmp/slice "$R" --prefill none --decode 1,128
  done
  copy_ceiling
  # Every launch of a decode step at 128 sequences under Nsight Compute
  # (durations, each launch alone): where the 128-token step's time goes.
  for a in ${NCU_BUILDS:-k/slice-KS}; do
    [ $SECONDS -gt ${NCU_BEFORE:-330} ] && break
    echo "== ncu: the launches of a decode step at 128 sequences, $a (${SECONDS}s)"
    timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:k3_ \
      k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 128 --steps 1 > /tmp/n.csv 2>/dev/null
    python3 - <<'PY'
import csv, collections
rows = list(csv.reader(open('/tmp/n.csv')))
at = [i for i, r in enumerate(rows) if 'Kernel Name' in r and 'Metric Value' in r]
if not at:
    print('no Nsight Compute rows (%d lines)' % len(rows)); raise SystemExit
h = rows[at[0]]; rows = [r for r in rows[at[0]:] if len(r) == len(h)]
k, u, v = h.index('Kernel Name'), h.index('Metric Unit'), h.index('Metric Value')
scale = {'nsecond': 1, 'ns': 1, 'usecond': 1e3, 'us': 1e3, 'msecond': 1e6, 'ms': 1e6}
last = collections.OrderedDict()
for r in rows[1:]:
    last.setdefault(r[k], []).append(float(r[v].replace(',', '')) * scale.get(r[u], 1))
tot = 0
for name, ds in sorted(last.items(), key=lambda x: -min(x[1])):
    tot += min(ds)
    print('%-70s %8.1f us (min of %d)' % (name[:70], min(ds) / 1e3, len(ds)))
print('sum of the minima %.1f us' % (tot / 1e3))
PY
  done
  dense_inputs
  dense_checks ${DENSE_BUILDS:-tiny-dense-KS}
  logits8 slice-bf16 k/*
  ks_check 200
  # A second round of the timings while the call has time.
  if [ $SECONDS -lt ${ROUND2_BEFORE:-330} ]; then
    for a in slice-bf16 k/*; do
      kbench s61-ratio-$(basename $a)-2 $a /tmp/slice "$R" --prefill none --decode 1,128
    done
  fi
else
  mla_checks slice-bf16 v/*
  for c in 8192 1024 32768 8192; do
    [ $SECONDS -gt 400 ] && break
    for a in slice-bf16 v/*; do
      [ -d $a ] && kbench s61-$(basename $a)-$c-$SECONDS $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context $c
    done
  done
fi
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

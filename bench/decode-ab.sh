#!/usr/bin/env bash
# Decode step A/B on one H200: the slice's decode graph replayed on the
# device (k3-bench "graph replay") and the GEMV kernels (graph-profiled) for
# the default build and each variant in v/slice-* (e.g. N0 =
# K3C_GEMV_PROLOGUE=0); bit-identical logits expected across all of them. Bundle: VARIANTS="N0=K3C_GEMV_PROLOGUE=0 ..."
#   bash bench/make-gemm-bundle.sh; cp bench/decode-ab.sh .dev/
# Carry .dev; run: bash .dev/decode-ab.sh (DECODE: batch sizes; ROWS: a
# regex of the kernel rows printed besides the step; ONLY: a regex of the
# variant names to run; ROUNDS: the default and the variants alternating
# that many times, 1 by default).
source "$(dirname "$0")/device-common.sh"
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/ref.npy > /dev/null
builds=$(for a in slice-bf16 v/slice-*; do [ -d "$a" ] && { [ $a = slice-bf16 ] || [[ ${a#v/slice-} =~ ^(${ONLY:-.*})$ ]]; } && echo $a; done)
for a in $builds; do
  [ $a = slice-bf16 ] && continue
  k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n
a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('$a logits vs the default build: bit-identical %s, max rel %.2e' % (bool((a.view(n.uint32) == b.view(n.uint32)).all()), abs(a.astype(n.float64) - b).max() / abs(a).max()))"
done
for round in $(seq 1 ${ROUNDS:-1}); do
  for a in $builds; do
    echo "== $a (round $round)"
    k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode ${DECODE:-1,8,128} --steps 32 | grep -E "^decode|${ROWS:-mla_in|kda_out|mla_out|mla_q_up|lm_head}"
  done
done

#!/usr/bin/env bash
# The batched-decode split-K linears (K3C_SPLITK_WAYS, K3C_SPLITK_TILE: the
# deep narrow projections mlp_down, kda_out, mla_out at 33-128 tokens) on one
# H200, on the bundle of bench/make-splitk-bundle.sh:
#  * dense k3-tiny with split-K on every linear (tdense, and each
#    tdense-NAME variant) against the reference executor: 128 one-token
#    prompts (decode rounds of 128 tokens), a 100-token prompt, and that
#    prompt among 19 one-token prompts;
#  * the full-width slice: each variant's logits against the default build's
#    (128 one-token prompts, 3 new tokens: max rel, greedy tokens equal);
#  * k3-bench of the slice's decode at 64, 96 and 128 sequences, the default
#    and each variant alternating ROUNDS (2) times: the split linears and the
#    step (graph), into $OUT/kbench.csv (DECODE: other batch sizes);
#  * SLICE_CHECK=N: the slice against the reference on N one-token prompts.
# NO_TINY=1 skips the k3-tiny checks.
source "$(dirname "$0")/device-common.sh"
machine
variants=$(ls -d slice-* 2>/dev/null | sed 's#^slice-##')
dense_inputs
# TINY: the variants whose k3-tiny builds are checked (all by default).
[ -n "${NO_TINY:-}" ] || dense_checks tdense $(for n in ${TINY:-$variants}; do echo tdense-$n; done)
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "== slice checkpoint (${SECONDS}s)"
timeout 150 k3-run slice --checkpoint /tmp/slice --device cuda --batch b128.txt --max-new-tokens 3 --quiet --dump-logits /tmp/ref.npy > /dev/null
for n in $variants; do
  timeout 150 k3-run slice-$n --checkpoint /tmp/slice --device cuda --batch b128.txt --max-new-tokens 3 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy').astype(n.float64); b=n.load('/tmp/x.npy')
print('slice-$n vs default, 128 sequences x 3 steps: max rel %.2e, greedy tokens equal %.3f' % (abs(a-b).max()/abs(a).max(), (a.argmax(-1)==b.argmax(-1)).mean()))"
done
rows=${ROWS:-'mlp_down|kda_out|mla_out|TOTAL'}
for round in $(seq 1 ${ROUNDS:-2}); do
  kbench base-$round slice /tmp/slice "$rows" --prefill none --decode ${DECODE:-64,96,128}
  for n in $variants; do kbench $n-$round slice-$n /tmp/slice "$rows" --prefill none --decode ${DECODE:-64,96,128}; done
done
if [ -n "${SLICE_CHECK:-}" ]; then
  # The slice (default build) against the reference executor on SLICE_CHECK
  # one-token prompts: a decode round in the split-K band (33-128 tokens).
  seq 1 $SLICE_CHECK > bN.txt
  echo "== slice vs the reference: $SLICE_CHECK one-token prompts (${SECONDS}s)"
  timeout ${CHECK_TIMEOUT:-420} k3-run slice --checkpoint /tmp/slice --device cuda --batch bN.txt --max-new-tokens 2 --check --quiet | grep -E "check: (PASS|FAIL)|error"
fi
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# #13's batch-1 linears behind norms and #15's one-token q_abs with their
# early forms (bundle: bash bench/make-s59-bundle.sh; carry .dev59; run: bash
# .dev59/s59-h200.sh, ~3 min): each variant's decode logits against the
# default's bit for bit (a 16-token prompt, 6 steps); then two rounds of
# k3-bench at one sequence, context 8192 (graph replay), every build: the
# step, the eight linears' GB/s and mla_attn; the copy ceiling (torch).
# Output lines go out as they come; only log.txt and kbench.csv come back.
source "$(dirname "$0")/device-common.sh"
machine
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/ref.npy > /dev/null
for a in v/*; do
  k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n; a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('default vs $a: bit-identical', a.shape == b.shape and bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
done
R='graph|lm_head|mlp_in|mlp_down|kda_in|kda_out|mla_in|mla_q_up|mla_out|mla_attn'
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 150 ] && break # (a second round while the call has time)
  for a in slice-bf16 v/*; do
    kbench s59-$(basename $a)-$r $a /tmp/slice "$R" --prefill none --decode 1 --context 8192
  done
done
copy_ceiling
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

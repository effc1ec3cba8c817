#!/usr/bin/env bash
# Programmatic dependent launch on the full-width k3-small slice (#13's
# decode step and time to first token) on one H200: the bundle of
# bench/make-gemm-bundle.sh (its slice-bf16, whose kernels carry
# griddepcontrol; the manifest says grid_dependency). Carry .dev; run:
# bash .dev/pdl-slice-h200.sh. "nopdl" is the same artifact with K3C_PDL=0
# (plain launches). Variants v/slice-NAME (e.g. late: compiled with
# K3C_PDL=2, the wait without the early trigger) are checked and timed too.
#  * the slice's logits (16 sequences x 6 new tokens, and one 300-token
#    prompt) with and without PDL, bit for bit;
#  * k3-bench prefill 8192 and decode 1, 8, 32, 128, PDL and nopdl
#    alternating ROUNDS (2) times; the rows of every kernel family go to
#    $OUT/kbench.csv.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "checkpoint made (${SECONDS}s)"
same() {
  python3 -c "
import numpy as n; a=n.load('/tmp/pdl.npy'); b=n.load('/tmp/plain.npy')
print('$1: vs plain launches bit-identical %s' % bool(a.shape == b.shape and (a.view(n.uint32) == b.view(n.uint32)).all()))"
}
variants=$(ls -d v/slice-* 2>/dev/null | grep -v nowg | sed 's#^v/slice-##')
for prompts in "--batch batch16.txt" "--prompt-ids $(seq -s, 11 310)"; do
  K3C_PDL=0 timeout 150 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda $prompts --max-new-tokens 6 --quiet --dump-logits /tmp/plain.npy > /dev/null
  for a in slice-bf16 $(for n in $variants; do echo v/slice-$n; done); do
    timeout 150 k3-run $a --checkpoint /tmp/slice --device cuda $prompts --max-new-tokens 6 --quiet --dump-logits /tmp/pdl.npy > /dev/null
    same "$a ${prompts:0:20}"
  done
done
rows='TOTAL|mla_in|mla_q_up|kda_out|mla_out|mla_attn'
for round in $(seq 1 ${ROUNDS:-2}); do
  kbench pdl-$round slice-bf16 /tmp/slice "$rows" --prefill 8192 --decode 1,8,32,128 --reps 2
  K3C_PDL=0 kbench nopdl-$round slice-bf16 /tmp/slice "$rows" --prefill 8192 --decode 1,8,32,128 --reps 2
  for n in $variants; do kbench $n-$round v/slice-$n /tmp/slice "$rows" --prefill 8192 --decode 1,8,32,128 --reps 2; done
done
echo "== done (${SECONDS}s)"

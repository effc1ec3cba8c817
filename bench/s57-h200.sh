#!/usr/bin/env bash
# The device call for session 51's staged-W_UV MLA combine and session 52's early core tiles (bundle: bash
# bench/make-s57-bundle.sh; carry .dev; run: bash .dev/s57-h200.sh, ~6 min):
#  1. the slice's decode logits of SW16 / QEW / ET / ALL against the default's bit for
#     bit (a 16-token prompt over 6 steps, a 5000-token prompt, 8 prompts);
#  2. mla_attn in the step graph at context 8192 for 1, 8, 16 and 64
#     sequences, every build (session 52: ET and ALL added, 1 and 64 in round 1);
#  3. k3-tiny dv64 against the reference for the default and each variant
#     (100, 12 and 8 sequences: rounds of 64 + 36, 12 and 8 tokens);
#  4. while the call has time: a second round at 8 and 16;
#     #13's batch-1 linears with K3C_GEMV_EARLY=1 (ge) against the default
#     (logits bit for bit, two rounds); the decode step at 128 against 1.
# Only log.txt and kbench.csv come back.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
NO_TINY=1 NO_NCU=1 NO_BENCH=1 bash mla-decode-h200.sh | grep -v '^k3-mkcheckpoint\|^== machine\|^NVIDIA'
echo "=== round 1: 1, 8, 16, 64 sequences (${SECONDS}s)"
BATCHES=1,8,16,64 CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | grep -E "^-- |^decode|mla_attn  "
NO_CMP=1 NO_NCU=1 NO_BENCH=1 bash mla-decode-h200.sh | grep -v '^k3-mkcheckpoint\|^== machine\|^NVIDIA'
if [ $SECONDS -lt 320 ]; then
  echo "=== round 2: 8, 16 sequences (${SECONDS}s)"
  BATCHES=8,16 CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | grep -E "^-- |^decode|mla_attn  "
fi
if [ $SECONDS -lt 380 ]; then
  echo "== #13: the batch-1 linears, the default against ge (K3C_GEMV_EARLY=1), logits bit for bit (${SECONDS}s)"
  for a in slice-bf16 ge; do
    k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/G-$a.npy > /dev/null
  done
  python3 -c "
import numpy as n; a, b = n.load('/tmp/G-slice-bf16.npy'), n.load('/tmp/G-ge.npy')
print('ge vs default: bit-identical', bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
  R='graph|kda_out|mla_in|mla_q_up|mla_out'
  for r in 1 2; do
    kbench s57-lin-$r slice-bf16 /tmp/slice "$R" --prefill none --decode 1
    kbench s57-ge-$r ge /tmp/slice "$R" --prefill none --decode 1
  done
fi
if [ $SECONDS -lt 450 ]; then
  echo "== #13: the decode step at 128 against 1 (graph), the batch-1 linears (${SECONDS}s)"
  kbench s57-ratio slice-bf16 /tmp/slice 'graph|lm_head|mlp_in|mlp_down|kda_in|kda_out|mla_in|mla_q_up|mla_out' --prefill none --decode 1,128
fi
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# The MoE slice's shared-expert GLU tile with and without its ptxas
# serialization (bundle: bash bench/make-s55-bundle.sh; carry .devm; run:
# bash .devm/s55-h200.sh, ~4 min): the two builds' logits bit for bit (a
# 700-token prompt, then 4 decode steps; 8 prompts of 40-1200 tokens), then
# k3-bench prefill at 2048 / 8192 tokens and decode at 64 / 128 sequences,
# the moe_in rows and the totals, HEAD and BASE alternating, two rounds.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice-moe.json -o /tmp/smoe --seed 3 --quiet
echo "== logits, moe-head vs moe-base"
for i in 1 2 3 4 5 6 7 8; do seq -s, $i $((i + 150 * i + 30)); done > /tmp/b8.txt
for a in moe-head moe-base; do
  timeout 200 k3-run $a --checkpoint /tmp/smoe --device cuda --prompt-ids $(seq -s, 1 700) --max-new-tokens 4 --quiet --dump-logits /tmp/L-$a.npy > /dev/null
  timeout 200 k3-run $a --checkpoint /tmp/smoe --device cuda --batch /tmp/b8.txt --max-new-tokens 4 --quiet --dump-logits /tmp/B-$a.npy > /dev/null
done
python3 - <<'PY'
import numpy as n
for t in 'LB':
    a, b = n.load('/tmp/%s-moe-head.npy' % t), n.load('/tmp/%s-moe-base.npy' % t)
    print('%s: bit-identical %s, max rel %.2e' % ({'L': '700-token prompt', 'B': '8 prompts'}[t],
          bool((a.view(n.uint32) == b.view(n.uint32)).all()), abs(a.astype(n.float64) - b).max() / abs(a).max()))
PY
echo "== k3-bench (moe_in rows; prefill 2048 / 8192, decode 64 / 128)"
for r in 1 2; do
  for a in moe-head moe-base; do
    kbench $a-$r $a /tmp/smoe "moe_in|TOTAL,(ttft|graph)" --prefill 2048,8192 --decode 64,128 --context 512
  done
done
echo "== done (${SECONDS}s)"

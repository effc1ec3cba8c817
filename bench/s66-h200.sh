#!/usr/bin/env bash
# Session 60 (bundle: bash bench/make-s66-bundle.sh; carry .dev66; run: bash
# .dev66/s66-h200.sh, ~4 min). The defaults of session 60 (slice-bf16: the
# fused head, the embedding a block a token, MLA rounds of 128 tokens) against
# session 59's (slice-old). Rows: the copy ceiling; the step at 1 and 128
# sequences (graph replay, two rounds alternating; on an H200 the defaults'
# rows are #13's ratio); greedy tokens on 128 one-token prompts (slice-old,
# and slice-CT0: the scalar tap loads, now the same roundings by
# construction) and on prompts of 1 to 33 tokens (slice-old); the slice's
# --check; dense k3-tiny bf16 on 128 one-token prompts and a mixed batch of
# 20, f32 on the mixed batch; mla_attn at 1 and 8 sequences, context 8192
# (#15); k3-bench --ablate at 1 and 128 sequences (each family's cost to the
# step beside its event-timed share). QUICK=1 (~2 min): one round, the
# ablation, the 128-prompt tokens, --check.
QUICK=${QUICK:-0}
export KBENCH_TIMEOUT=${KBENCH_TIMEOUT:-100}
source "$(dirname "$0")/device-common.sh"
slice_setup
rounds="1 2"; [ $QUICK = 1 ] && rounds=1
for r in $rounds; do
  for a in slice-bf16 slice-old; do
    kbench s66-$a-$r $a /tmp/slice 'graph|lm_head|embed|mla_attn|mlp_in|kda_conv' --prefill none --decode 1,128
  done
done
# k3-bench --ablate (session 60): each family's cost to the step (the step
# without its launches) beside its event-timed share, at 1 and 128
# sequences: #13's batch-1 rates of mla_q_up, mla_in and kda_out by both.
kbench s66-slice-bf16-ablate slice-bf16 /tmp/slice '^ablate' --prefill none --decode 1,128 --ablate
same_tokens /tmp/b128s.txt slice-bf16 slice-CT0 slice-old
slice_check slice-bf16
if [ $QUICK = 1 ]; then python3 kbench_table.py $OUT/kbench.csv; echo "== done, QUICK (${SECONDS}s)"; exit 0; fi
same_tokens /tmp/b8.txt slice-bf16 slice-old
dense_inputs
DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense
DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-f32
kbench s66-slice-bf16-8k slice-bf16 /tmp/slice 'graph|mla_attn' --prefill none --decode 1,8 --context 8192
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
python3 kbench_table.py $OUT/kbench.csv
echo "== done (${SECONDS}s)"

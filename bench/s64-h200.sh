#!/usr/bin/env bash
# Prepared in session 57, whose device time ran out before it (bundle: bash
# bench/make-s64-bundle.sh; carry .dev64; run: bash .dev64/s64-h200.sh, ~5
# min): the model head in one launch (K3C_FUSE_HEAD=1: AttnRes, last_tokens
# and RMSNorm, slice-FH, which also has K3C_EMBED_ROWS=1: the embedding a
# block a token) against the defaults (slice-bf16): lm_head, embed and the step at 1 and 128 sequences (graph
# replay) and at a prefill of 8192 tokens; the greedy tokens of both on
# prompts of 1 to 33 tokens; the slice's --check; dense k3-tiny bf16 on 128
# one-token prompts and a mixed batch of 20, f32 on the mixed batch; the copy
# ceiling; the trimmed one-token MLA combine (slice-TR) at 64..32768
# positions and against fp64. On an H200 the defaults' decode rows are #13's
# ratio (two rounds).
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
copy_ceiling
# (two rounds: on an H200 the defaults' rows are #13's step at 128 sequences
# against one, graph replay)
for r in 1 2; do
  for a in slice-bf16 slice-FH; do
    kbench s64-$a-$r $a /tmp/slice 'graph|lm_head|embed' --prefill none --decode 1,128
  done
done
# (prompts of 1 to 33 tokens: the prefill round's last rows at varied offsets)
for i in $(seq 1 8); do seq -s, $((i * 11)) $((i * 11 + i * i / 2)); done > /tmp/b8.txt
same_tokens /tmp/b8.txt slice-bf16 slice-FH
slice_check slice-FH
dense_inputs
DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense-FH
DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-FH-f32
for a in slice-bf16 slice-FH; do
  [ $SECONDS -gt 230 ] && break
  kbench s64-$a-prefill $a /tmp/slice 'graph|lm_head' --prefill 8192 --decode none
done
# The trimmed one-token MLA combine (slice-TR) against the defaults at one
# sequence, 64..32768 positions, and against fp64 at 200 positions.
mla_context_rows s64 slice-bf16 slice-TR
mla_kernel_check slice-TR 60 200
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

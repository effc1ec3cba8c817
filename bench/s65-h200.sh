#!/usr/bin/env bash
# Session 58 (bundle: bash bench/make-s65-bundle.sh; carry .dev65; run: bash
# .dev65/s65-h200.sh, ~6 min): session 57's s64 plus one MLA round for
# batched decode of up to 128 sequences (K3C_MLA_ROUND_TOKENS=128,
# slice-R128). The model head in one launch (K3C_FUSE_HEAD=1: AttnRes,
# last_tokens and RMSNorm, slice-FH, which also has K3C_EMBED_ROWS=1: the
# embedding a block a token) and slice-R128 against the defaults
# (slice-bf16): the step at 1 and 128 sequences (graph replay; on an H200 the
# defaults' rows are #13's ratio, two rounds) and at a prefill of 8192
# tokens; greedy tokens on prompts of 1 to 33 tokens (FH) and on 128
# one-token prompts (R128: the rounds of 128); the slice's --check; dense
# k3-tiny bf16 on 128 one-token prompts and a mixed batch of 20, f32 on the
# mixed batch; the copy ceiling; the trimmed one-token MLA combine (slice-TR)
# at 64..32768 positions and against fp64; the TMA warpgroup tiles as
# clusters of 2 / 4 (slice-C2, slice-C4: K3C_WGMMA_CLUSTER) at decode 1 / 128,
# the prefill tile too (slice-C2P) at a prefill of 8192, their tokens on 128
# prompts. QUICK=1 (~4 min): one decode
# round, the token comparisons, the slice's and dense k3-tiny's bf16 checks
# (128 one-token prompts), the prefill of the defaults and C2 if time is left.
# QUICK=2 (~2 min): C2, C4 and FH against the defaults at 1 and 128 sequences,
# their tokens, FH's --check.
QUICK=${QUICK:-0}
export KBENCH_TIMEOUT=${KBENCH_TIMEOUT:-100}
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
copy_ceiling
if [ $QUICK = 2 ]; then
  # (the least: the step at 1 and 128 sequences of the defaults, C2, C4 and
  # FH; C2's and C4's tokens on 128 prompts, FH's on 8; FH's --check)
  for a in slice-bf16 slice-C2 slice-C4 slice-FH; do
    kbench s65-$a-1 $a /tmp/slice 'graph|lm_head|mlp_in' --prefill none --decode 1,128
  done
  seq 1 128 > /tmp/b128s.txt
  same_tokens /tmp/b128s.txt slice-bf16 slice-C2 slice-C4
  for i in $(seq 1 8); do seq -s, $((i * 11)) $((i * 11 + i * i / 2)); done > /tmp/b8.txt
  same_tokens /tmp/b8.txt slice-bf16 slice-FH
  slice_check slice-FH
  echo "== done, QUICK=2 (${SECONDS}s)"; exit 0
fi
for r in $([ $QUICK = 1 ] && echo 1 || echo 1 2); do
  for a in slice-bf16 slice-FH slice-R128 slice-C2 slice-C4; do
    kbench s65-$a-$r $a /tmp/slice 'graph|lm_head|embed|mla_attn|mlp_in' --prefill none --decode 1,128
  done
done
# (prompts of 1 to 33 tokens: the prefill round's last rows at varied offsets)
for i in $(seq 1 8); do seq -s, $((i * 11)) $((i * 11 + i * i / 2)); done > /tmp/b8.txt
same_tokens /tmp/b8.txt slice-bf16 slice-FH
seq 1 128 > /tmp/b128s.txt
same_tokens /tmp/b128s.txt slice-bf16 slice-R128 slice-C2 slice-C4 slice-C2P
slice_check slice-FH
dense_inputs
DENSE_BATCHES="b128.txt $([ $QUICK = 1 ] || echo mix20.txt)" dense_checks tiny-dense-FH tiny-dense-R128 tiny-dense-C2
if [ $QUICK = 1 ]; then
  for a in slice-bf16 slice-C2P; do
    [ $SECONDS -gt 260 ] && break
    kbench s65-$a-prefill $a /tmp/slice 'graph|lm_head|mlp_in|ttft' --prefill 8192 --decode none
  done
  echo "== done, QUICK (${SECONDS}s)"; exit 0
fi
DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-FH-f32
for a in slice-bf16 slice-C2P slice-FH; do
  [ $SECONDS -gt 300 ] && break
  kbench s65-$a-prefill $a /tmp/slice 'graph|lm_head|mlp_in|ttft' --prefill 8192 --decode none
done
# The trimmed one-token MLA combine (slice-TR) against the defaults at one
# sequence, 64..32768 positions, and against fp64 at 200 positions.
mla_context_rows s65 slice-bf16 slice-TR
mla_kernel_check slice-TR 60 200
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

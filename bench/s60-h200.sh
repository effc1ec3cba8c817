#!/usr/bin/env bash
# The device call for session 53's split-scoring MLA decode core (bundle:
# bash bench/make-s60-bundle.sh; carry .dev; run: bash .dev/s60-h200.sh):
#  1. smoke runs of each variant with short timeouts (a barrier mistake
#     hangs rather than fails): 8 prompts of 40-1200 tokens, 4 steps, and a
#     5000-token prompt; a failing build is left out of the rest;
#  2. the variants' decode logits against the default's (SPS bit for bit: a
#     16-token prompt, a 5000-token prompt, 8 prompts; W1S / W1S33 differ in
#     their one-token sums) and every build's decode kernel against fp64
#     attention (mla_check.py);
#  3. mla_attn in the step graph at context 8192 for 1, 8, 16 and 64
#     sequences, every build, two rounds while the call has time; Nsight
#     Compute's full set on SPS's core at 8 sequences.
# Output lines go out as they come; only log.txt, kbench.csv and
# ncu-full.txt come back.
source "$(dirname "$0")/device-common.sh"
machine
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for i in 1 2 3 4 5 6 7 8; do seq -s, $i $((i + 150 * i + 30)); done > /tmp/b8.txt
# (a build whose smoke run fails or hangs leaves v/ before the rest)
for a in v/*; do
  echo "== smoke: $a, 8 prompts, then one of 5000 tokens (timeout 90 s each)"
  if timeout 90 k3-run $a --checkpoint /tmp/slice --device cuda --batch /tmp/b8.txt --max-new-tokens 4 --quiet > /tmp/smoke.txt 2>&1 &&
     timeout 90 k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 5000) --max-new-tokens 3 --quiet >> /tmp/smoke.txt 2>&1; then
    echo "$a: smoke runs passed"
  else
    echo "$a: smoke run FAILED or hung:"; tail -5 /tmp/smoke.txt; rm -rf $a
  fi
done
g() { grep --line-buffered -v '^k3-mkcheckpoint\|^== machine\|^NVIDIA'; }
NO_TINY=1 NO_NCU=1 NO_BENCH=1 DUMP_CHECK=1 bash mla-decode-h200.sh | g
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 330 ] && break # (a second round while the call has time)
  echo "=== round $r: context 8192 (${SECONDS}s)"
  BATCHES=1,8,16,64 CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | g
done
echo "=== ncu --set full: SPS's core at 8 sequences (${SECONDS}s)"
CTX=8192 VDIR=none NO_TINY=1 NO_CMP=1 NO_BENCH=1 NO_NCU=1 NCU_FULL=absorbed_split_wgt NCU_BATCH=8 NCU_SLICE=v/slice-SPS bash mla-decode-h200.sh | g
find $OUT -type f ! -name log.txt ! -name kbench.csv ! -name ncu-full.txt -delete
echo "== done (${SECONDS}s)"

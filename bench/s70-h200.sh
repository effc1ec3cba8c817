#!/usr/bin/env bash
# Session 62 (bundle: bash bench/make-s70-bundle.sh; carry .dev70; two calls:
# `PART=1 bash .dev70/s70-h200.sh` (any card, ~6 min: 1., 4.'s dense checks, 5.)
# and `PART=2 bash .dev70/s70-h200.sh` (an H200, ~5 min: 2., 3., 4.; QUICK=1
# one round; on another card it stops at once unless ANY_CARD=1)).
# 1. The one-token MLA combine's split weights in f32 (dv64-f32-cw) against
#    the reference executor at 1e-5, beside the defaults (dv64-bf16,
#    dv64-f32): a 300-token prompt and a 40-token one, 6 one-token steps.
# 2. #13: the step at 1 and 128 sequences (graph replay), today's defaults
#    against session 59's, two rounds (QUICK: one); k3-bench --ablate at one
#    sequence (the batch-1 linears by their cost to the step).
#    Every launch of the 128-sequence step timed alone (K3C_PROFILE_LAUNCHES).
# 3. #15: mla_attn at 1, 8 and 64 sequences after 8192 positions, at 1 and
#    8 after 32768 (not QUICK).
# 4. Checks: the slice's greedy tokens (128 prompts) against session 59's
#    defaults, --check on the slice, dense k3-tiny bf16 and f32.
# 5. The merged decode convolutions (K3C_CONV_DECODE_MERGE=1, slice-CM) and the
#    KDA gate in the one-token GEMV (K3C_GEMV_MAP=1, slice-GG): the step and
#    kda_conv_gate at 1, 8, 128 sequences against the defaults, two rounds;
#    the greedy tokens equal; dense k3-tiny bf16 with both. The staged q_abs's
#    rope columns spread (K3C_MLA_QABS_ROPE_SPREAD=1, slice-QR): mla_attn at
#    8, 64, 128 sequences against the defaults, two rounds; tokens equal.
QUICK=${QUICK:-0}
export KBENCH_TIMEOUT=${KBENCH_TIMEOUT:-150}
PART=${PART:-1}
source "$(dirname "$0")/device-common.sh"
if [ "$PART" = 1 ]; then
machine
k3-mkcheckpoint --config k3-tiny-dv64.json -o /tmp/ck-dv64 --seed 5 --quiet
for m in dv64-bf16 dv64-f32 dv64-f32-cw; do
  echo "== $m vs the reference: prompts of 300 and 40 tokens, 6 new"
  for n in 300 40; do
    timeout 100 k3-run $m --checkpoint /tmp/ck-dv64 --device cuda --prompt-ids $(seq -s, 3 $((n + 2))) --max-new-tokens 6 --check --quiet | grep -E "check:|error"
  done
done
dense_inputs
DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense
# (p100.txt: one sequence, so its decode steps take the one-token GEMV's gate)
dense_checks tiny-dense-S62
DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-f32
DENSE_BATCHES="p100.txt mix20.txt" dense_checks tiny-dense-f32-S62
slice_setup
# The merged decode convolutions and the GEMV's gate (any card: an A/B in one call): the step and
# kda_conv_gate at 1 and 128 sequences, the builds alternating, two rounds;
# their greedy tokens against the defaults' (the same code a member: equal).
for r in 1 2; do
  for a in slice-bf16 slice-CM slice-GG; do
    kbench s70-$a-cm$r $a /tmp/slice 'graph|kda_conv_gate' --prefill none --decode 1,8,128
  done
done
# The staged q_abs's rope columns spread (slice-QR): mla_attn at 8, 64 and
# 128 sequences (rounds of 8..128 tokens take the staged q_abs), two rounds.
for r in 1 2; do
  for a in slice-bf16 slice-QR; do
    kbench s70-$a-qr$r $a /tmp/slice 'graph|mla_attn' --prefill none --decode 8,64,128
  done
done
same_tokens /tmp/b128s.txt slice-bf16 slice-CM slice-GG slice-QR
same_tokens /tmp/b8.txt slice-bf16 slice-CM slice-GG slice-QR
seq -s, 7 30 > /tmp/b1.txt # (one sequence: one-token decode steps, the GEMV's gate)
same_tokens /tmp/b1.txt slice-bf16 slice-CM slice-GG
slice_check slice-CM slice-GG slice-QR
python3 kbench_table.py $OUT/kbench.csv
echo "== done, PART=1 (${SECONDS}s)"
exit 0
fi
# PART=2: the H200's rows.
# (another card: nothing, unless ANY_CARD=1; an H100's rows of this part were
# measured in session 61)
if [ -z "${ANY_CARD:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "== not an H200: PART=2 is the H200's rows; stopped (${SECONDS}s)"; exit 0
fi
slice_setup
rounds="1 2"; [ $QUICK = 1 ] && rounds=1
for r in $rounds; do
  for a in slice-bf16 slice-old; do
    kbench s70-$a-$r $a /tmp/slice 'graph|lm_head|embed|mla_attn|mlp_in|kda_chunk' --prefill none --decode 1,128
  done
done
echo "== every launch of the 128-sequence step timed alone (K3C_PROFILE_LAUNCHES, median of 10)"
K3C_PROFILE_LAUNCHES=1 K3C_PROFILE_REPEAT=10 timeout 150 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 128 --steps 2 > /dev/null 2> /tmp/launches128.txt
grep -vE "^\s*$" /tmp/launches128.txt | head -60
echo "== Nsight Compute on the 128-token staged q_abs launch (the first step of 128 one-token prompts)"
ncu_kernel qabs128 absorbed_qabs_mma_t64 120 slice-bf16 --checkpoint /tmp/slice --device cuda --batch /tmp/b128s.txt --max-new-tokens 2 --quiet
ncu_kernel qabs128qr absorbed_qabs_mma_t64 120 slice-QR --checkpoint /tmp/slice --device cuda --batch /tmp/b128s.txt --max-new-tokens 2 --quiet
kbench s70-slice-bf16-ablate slice-bf16 /tmp/slice '^ablate' --prefill none --decode 1 --ablate
kbench s70-slice-bf16-8k slice-bf16 /tmp/slice 'graph|mla_attn' --prefill none --decode 1,8,64 --context 8192
[ $QUICK = 1 ] || kbench s70-slice-bf16-32k slice-bf16 /tmp/slice 'graph|mla_attn' --prefill none --decode 1,8 --context 32768
same_tokens /tmp/b128s.txt slice-bf16 slice-old
slice_check slice-bf16
python3 kbench_table.py $OUT/kbench.csv
echo "== done (${SECONDS}s)"

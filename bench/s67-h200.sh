#!/usr/bin/env bash
# Session 61 (bundle: bash bench/make-s67-bundle.sh; carry .dev67; run: bash
# .dev67/s67-h200.sh, ~5 min). s66's rows (session 60's defaults against
# session 59's: the step at 1 and 128 sequences, on an H200 #13's ratio;
# k3-bench --ablate at 1 and 128; the scalar taps' tokens; --check; dense
# k3-tiny's checks) and the W_UV L2 prefetch of the MLA decode core
# (K3C_MLA_PREFETCH_WUV=1 at the core block's start: slice-PW1; =2 after its
# grid wait: slice-PW2), also with 44 and 66 splits at one sequence
# (K3C_MLA_DECODE_SPLITS, default 33: slice-S44P, slice-S66P, with PW2: more
# core blocks leave fewer SMs to the combine's early W_UV loads, which the
# prefetch no longer needs): mla_attn at one sequence after 8192 positions,
# two rounds, the builds alternating, at 8 sequences and after 64 positions
# once; PW2's greedy tokens against the defaults' (a hint changes no value). QUICK=1 (~2.5 min): one round,
# the ablation, the PW rows at 8k, the tokens, --check. PW=0 leaves out the
# prefetch rows (measured in session 61: slower); `REQUIRE=H200 QUICK=1 PW=0`
# (~2 min on an H200, seconds elsewhere) is #13's ratio and the batch-1
# linears by both measures.
QUICK=${QUICK:-0}
export KBENCH_TIMEOUT=${KBENCH_TIMEOUT:-100}
source "$(dirname "$0")/device-common.sh"
# REQUIRE=H200: stop at once on another card (its rows would repeat an H100's).
if [ -n "${REQUIRE:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q "$REQUIRE"; then
  echo "== not an $REQUIRE: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); stopped"; exit 0
fi
slice_setup
rounds="1 2"; [ $QUICK = 1 ] && rounds=1
for a in slice-bf16 slice-old; do
  kbench s67-$a-1 $a /tmp/slice 'graph|lm_head|embed|mla_attn|mlp_in|kda_conv' --prefill none --decode 1,128
done
kbench s67-slice-bf16-ablate slice-bf16 /tmp/slice '^ablate' --prefill none --decode 1,128 --ablate
# (PW=0: without the prefetch rows, measured on an H100 in session 61: slower)
[ "${PW:-1}" = 0 ] && rounds=""
for r in $rounds; do
  for a in slice-bf16 slice-PW1 slice-PW2 slice-S44P slice-S66P; do
    kbench s67-$a-8k-$r $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context 8192
  done
done
for a in $([ "${PW:-1}" = 0 ] || echo slice-bf16 slice-PW2); do
  kbench s67-$a-8k8 $a /tmp/slice 'graph|mla_attn' --prefill none --decode 8 --context 8192
done
same_tokens /tmp/b128s.txt slice-bf16 slice-CT0 slice-old slice-PW2 slice-S66P
slice_check slice-bf16 slice-PW2 slice-S66P
if [ $QUICK = 1 ]; then python3 kbench_table.py $OUT/kbench.csv; echo "== done, QUICK (${SECONDS}s)"; exit 0; fi
for a in slice-bf16 slice-old; do
  kbench s67-$a-2 $a /tmp/slice 'graph|lm_head|embed|mla_attn|mlp_in|kda_conv' --prefill none --decode 1,128
done
for a in slice-bf16 slice-PW1 slice-PW2; do
  kbench s67-$a-64-1 $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context 64
done
same_tokens /tmp/b8.txt slice-bf16 slice-old
dense_inputs
DENSE_BATCHES="b128.txt mix20.txt" dense_checks tiny-dense
DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-f32
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
python3 kbench_table.py $OUT/kbench.csv
echo "== done (${SECONDS}s)"

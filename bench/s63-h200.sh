#!/usr/bin/env bash
# Session 57's device call (bundle: bash bench/make-s63-bundle.sh; carry
# .dev63; run: bash .dev63/s63-h200.sh, ~5 min): the one-token GEMVs that
# build their normed row in every block (K3C_GEMV_PROLOGUE=2: slice-PB for
# mla_q_up alone, slice-PBA for every norm-fed GEMV) against the defaults,
# GB/s of weight bytes at one sequence, two rounds alternating, the step
# graph beside them; their --check on the slice and dense k3-tiny's (PBA)
# against the reference executor, and PB's greedy tokens against the
# default's; the trimmed one-token combine (slice-TR, its length read
# before the grid wait) at 64..32768 positions against the defaults, and
# against fp64 at 200 and 5000 positions. Only log.txt and kbench.csv come
# back.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
R='graph|mla_q_up|mla_in|kda_out|mla_out|kda_in|mlp_in|lm_head'
for r in 1 2; do
  for a in slice-bf16 slice-PB slice-PBA; do
    kbench s63-$a-$r $a /tmp/slice "$R" --prefill none --decode 1
  done
done
mla_context_rows s63 slice-bf16 slice-TR
slice_check slice-PB slice-PBA
for i in $(seq 1 8); do echo "$i,$((i + 7)),$((i * 3))"; done > /tmp/b8.txt
same_tokens /tmp/b8.txt slice-bf16 slice-PB slice-PBA
dense_inputs
dense_checks tiny-dense-PBA
mla_kernel_check slice-TR 60 200
mla_kernel_check slice-TR 60 5000
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

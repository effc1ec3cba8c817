#!/usr/bin/env bash
# Session 61 (bundle: bash bench/make-s68-bundle.sh; carry .dev68; run: bash
# .dev68/s68-h200.sh). The one-token MLA combine with its split weights
# formed once a block (K3C_MLA_COMBINE_WEIGHTS=1, slice-CW) against the
# defaults (and with 44 splits, slice-CW44): mla_attn in the step graph at one sequence after 64, 8192 and
# 32768 positions (two rounds at 8192, the builds alternating); its
# one-token decode kernel against fp64 attention after 5000 positions
# (mla_check.py), the slice's --check and its greedy tokens on 128 one-token
# prompts against the defaults' (other roundings: a near tie may differ).
# Then, on an H200 only, #13's rows: the step at 1 and 128 sequences
# against session 59's defaults (slice-old) and k3-bench --ablate at 1 and
# 128 (~1.5 min more).
export KBENCH_TIMEOUT=${KBENCH_TIMEOUT:-100}
source "$(dirname "$0")/device-common.sh"
slice_setup
for r in 1 2; do
  for a in slice-bf16 slice-CW slice-CW44; do
    kbench s68-$a-8k-$r $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context 8192
  done
done
for c in 64 32768; do
  for a in slice-bf16 slice-CW; do
    kbench s68-$a-$c-1 $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context $c
  done
done
mla_kernel_check slice-CW 120
slice_check slice-CW
same_tokens /tmp/b128s.txt slice-bf16 slice-CW
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  for a in slice-bf16 slice-old; do
    kbench s68-$a-1 $a /tmp/slice 'graph|lm_head|mla_attn|mlp_in' --prefill none --decode 1,128
  done
  kbench s68-slice-bf16-ablate slice-bf16 /tmp/slice '^ablate' --prefill none --decode 1,128 --ablate
fi
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
python3 kbench_table.py $OUT/kbench.csv
echo "== done (${SECONDS}s)"

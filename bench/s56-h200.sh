#!/usr/bin/env bash
# #15's decode table with session 51's defaults (one call, ~7 min; bundle:
# bash bench/make-s57-bundle.sh, whose slice-bf16 is the default build since
# session 51: P^T by stmatrix, the staged append, the bulk partials; copy
# this script into .dev (cp bench/s56-h200.sh .dev/); carry .dev; run: bash
# .dev/s56-h200.sh):
#  1. mla_attn in the step graph at context 8192 for 1, 8 and 64 sequences;
#  2. Nsight Compute's duration and DRAM bytes of every MLA decode launch
#     (q_abs, the core, the combine) at 8 and 64 sequences, context 8192:
#     the core alone against copy, as FlashMLA counts its kernel;
#  3. the same graph timing at contexts 32768 and 1024 (#15's "decode batch
#     1, 8, 64 at context 1k, 8k, 32k");
# after #13's ratio (0.), the batch-1 mla_q_up GEMV under Nsight Compute.
#  0. first, #13's decode step at 128 sequences against 1 (graph replay, two
#     rounds) with the batch-1 linears' GB/s, and the copy ceiling measured
#     by torch in the same call (the H200 numbers #13 lacks since session
#     38, where the machine is one);
# Only log.txt and kbench.csv come back.
source "$(dirname "$0")/device-common.sh"
machine
export SLICE=slice-bf16 VDIR=none NO_TINY=1 NO_CMP=1
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "== #13: the decode step at 128 against 1 (graph), the batch-1 linears"
for round in 1 2; do
  kbench s56-ratio-$round $SLICE /tmp/slice 'graph|lm_head|mlp_in|mlp_down|kda_in|kda_out|mla_in|mla_q_up|mla_out' --prefill none --decode 1,128
done
copy_ceiling
# The batch-1 mla_q_up GEMV (#13's one linear below 85 % of copy on an
# H100: 74 %) under Nsight Compute's full set: what bounds it.
echo "== ncu --set full: mla_q_up's GEMV at one sequence"
timeout 150 ncu --clock-control none --set full --import-source no -k "regex:mla_q_up.*gemv1" --launch-skip 2 --launch-count 1 -f -o /tmp/qup \
  k3-bench $SLICE --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1 --steps 4 > /tmp/qup-run.txt 2>&1
ncu -i /tmp/qup.ncu-rep --page details --print-details all > /tmp/qup.txt 2>&1
grep -E "^    (Duration|Registers Per Thread|Block Size|Grid Size|Waves Per SM|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|One or More Eligible)" /tmp/qup.txt | head -16
grep -iE "stall|warp cycles per issued" /tmp/qup.txt | head -12
run() { bash mla-decode-h200.sh | grep -v '^k3-mkcheckpoint'; }
CTX=8192 BATCHES=1,8,64 NO_NCU=1 run
CTX=8192 BATCHES=8,64 NO_BENCH=1 run
CTX=32768 BATCHES=1,8,64 NO_NCU=1 run
CTX=1024 BATCHES=1,8,64 NO_NCU=1 run
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# Session 53's device calls (bundle: VARIANTS="OFF=K3C_MLA_DECODE_EARLY_TILES=0;K3C_MLA_QABS_EARLY_W=0;K3C_MLA_COMBINE_STAGE_W=0"
# bash bench/make-mla-bundle.sh, then cp bench/s58-h200.sh .dev/; carry .dev).
# PART=1 (~6 min): #13's decode step at 128 sequences against 1 (graph
#   replay, two rounds) with the batch-1 linears, beside torch's copy
#   ceiling; #15's mla_attn at context 8192 for 1, 8, 16 and 64 sequences,
#   the default (session 52's early forms) against OFF (session 51's forms),
#   two rounds; Nsight Compute's split of the MLA decode launches at 1, 8
#   and 64 sequences.
# PART=2 (~6 min): the default's logits against OFF's bit for bit; k3-tiny
#   dv64 (default, OFF) against the reference; #15's table at contexts 32768
#   and 1024; mla_q_up's batch-1 GEMV under Nsight Compute's full set.
# Output lines go out as they come (grep --line-buffered): a call cut at its
# limit still returns its log. Only log.txt and kbench.csv come back.
source "$(dirname "$0")/device-common.sh"
machine
export SLICE=slice-bf16
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
g() { grep --line-buffered -v '^k3-mkcheckpoint\|^== machine\|^NVIDIA'; }
if [ "${PART:-1}" = 1 ]; then
  echo "== #13: the decode step at 128 against 1 (graph), the batch-1 linears"
  for round in 1 2; do
    kbench s58-ratio-$round $SLICE /tmp/slice 'graph|lm_head|mlp_in|mlp_down|kda_in|kda_out|mla_in|mla_q_up|mla_out' --prefill none --decode 1,128
  done
  copy_ceiling
  for round in 1 2; do
    echo "=== #15 round $round: context 8192, default vs OFF (${SECONDS}s)"
    BATCHES=1,8,16,64 CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | g
  done
  echo "=== Nsight split at 1, 8, 64 sequences (${SECONDS}s)"
  CTX=8192 BATCHES=1,8,64 VDIR=none NO_TINY=1 NO_CMP=1 NO_BENCH=1 bash mla-decode-h200.sh | g
else
  echo "=== logits and k3-tiny dv64: default vs OFF (${SECONDS}s)"
  NO_NCU=1 NO_BENCH=1 bash mla-decode-h200.sh | g
  for c in 32768 1024; do
    echo "=== #15: context $c (${SECONDS}s)"
    CTX=$c BATCHES=1,8,64 VDIR=none NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | g
  done
  echo "== ncu --set full: mla_q_up's GEMV at one sequence (${SECONDS}s)"
  timeout 150 ncu --clock-control none --set full --import-source no -k "regex:mla_q_up.*gemv1" --launch-skip 2 --launch-count 1 -f -o /tmp/qup \
    k3-bench $SLICE --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1 --steps 4 > /tmp/qup-run.txt 2>&1
  ncu -i /tmp/qup.ncu-rep --page details --print-details all > /tmp/qup.txt 2>&1
  grep -E "^    (Duration|Registers Per Thread|Block Size|Grid Size|Waves Per SM|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|One or More Eligible)" /tmp/qup.txt | head -16
  grep -iE "stall|warp cycles per issued" /tmp/qup.txt | head -12
fi
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
echo "== done (${SECONDS}s)"

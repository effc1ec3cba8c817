#!/usr/bin/env bash
# #15: the MLA decode core (the transposed warpgroup core,
# absorbed_split_wgt_*) under Nsight Compute's full set with its SASS source,
# at context 8192 and batch NCU_B (default "8"; e.g. NCU_B="8 64"), after
# k3-bench's mla_attn at batch 8 and 64 (16 steps, graph replay) for
# reference. Bundle: bash bench/make-ncu-wgt-bundle.sh; carry .devs; run:
# bash .devs/ncu-wgt-h200.sh. Packs wgtB-details.txt, -raw.csv and
# -source.csv into $OUT/prof.tgz; read the stalls with
# python3 bench/ncu_mix.py wgt8-source.csv absorbed_split_wgt --loop.
source "$(dirname "$0")/device-common.sh"
machine
which ncu > /dev/null || { echo "no ncu"; exit 1; }
P=/tmp/prof; mkdir -p $P
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for b in 8 64; do
  echo "== k3-bench decode $b, context 8192 (${SECONDS}s)"
  timeout 120 k3-bench slice --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode $b \
    --context 8192 --steps 16 --csv /tmp/kb$b.csv > /dev/null
  grep -E "mla_attn" /tmp/kb$b.csv | head -3
done
for b in ${NCU_B:-8}; do
  echo "== ncu full, absorbed_split_wgt, batch $b (${SECONDS}s)"
  timeout 200 ncu --clock-control none --set full --import-source no -k "regex:absorbed_split_wgt" \
    --launch-skip 2 --launch-count 1 -f -o $P/wgt$b k3-bench slice --checkpoint /tmp/slice \
    --device cuda --quiet --prefill none --decode $b --context 8192 --steps 1 > $P/run$b.txt 2>&1
  tail -2 $P/run$b.txt
  ncu -i $P/wgt$b.ncu-rep --page details --print-details all > $P/wgt$b-details.txt 2>&1
  ncu -i $P/wgt$b.ncu-rep --page raw --csv > $P/wgt$b-raw.csv 2>&1
  ncu -i $P/wgt$b.ncu-rep --page source --csv --print-source sass > $P/wgt$b-source.csv 2>&1
  grep -E "^    (Duration|Registers Per Thread|Achieved Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Issue Slots Busy|No Eligible)" \
    $P/wgt$b-details.txt | head -12
done
tar czf $OUT/prof.tgz -C $P $(cd $P && ls *-details.txt *-raw.csv *-source.csv)
echo "== done (${SECONDS}s)"

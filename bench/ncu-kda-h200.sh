#!/usr/bin/env bash
# Nsight Compute profile of the KDA prefill on one H200: the slice (96 KDA
# heads of 128) at 8192 tokens, every KDA launch of its first layer
# (conv/gate, kda_prep, the tf32 chunk recurrence). Prints each kernel's
# duration, throughputs and pipe use, then the instruction mix and stall
# split of the recurrence and the prep (ncu_mix.py); packs the reports into
# $OUT/kda-prof.tgz. Bundle: bash bench/make-kda-bundle.sh; carry .dev; run:
# bash .dev/ncu-kda-h200.sh (T=8192 by default; ARTIFACT=v/slice-NAME
# profiles a variant).
source "$(dirname "$0")/device-common.sh"
machine
which ncu || { echo "no ncu"; exit 1; }
T=${T:-8192}; A=${ARTIFACT:-slice-bf16}; P=/tmp/kprof; mkdir -p $P
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "== ncu: $A, prefill $T tokens, KDA launches of layer 0 (${SECONDS}s)"
timeout 300 ncu --clock-control none --set full --import-source no -k "regex:k3_kda_(chunk|conv_gate)" \
  --launch-count 12 -f -o $P/kda k3-run $A --checkpoint /tmp/slice --device cuda --quiet \
  --prompt-ids $(seq -s, 1 $T) --max-new-tokens 1 > $P/run.txt 2>&1
tail -3 $P/run.txt
ncu -i $P/kda.ncu-rep --page details --print-details all > $P/details.txt 2>&1
ncu -i $P/kda.ncu-rep --page source --csv --print-source sass > $P/source.csv 2>&1
grep -E "^  [a-z_0-9]+ |^    (Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|SM: Pipe Tensor Cycles Active|Issue Slots Busy)" $P/details.txt | head -60
for k in kda_chunk_tf32 kda_prep; do python3 ncu_mix.py $P/source.csv $k; done
tar czf $OUT/kda-prof.tgz -C $P details.txt run.txt
echo "done (${SECONDS}s)"

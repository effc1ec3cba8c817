#!/usr/bin/env bash
# Nsight Compute profile of the KDA prefill on one H200: the slice (96 KDA
# heads of 128) at 8192 tokens, every KDA launch of its only KDA layer
# (short convs, gate, L2 norms, kda_prep, the tf32 chunk recurrence). Prints
# each kernel's duration, throughputs and pipe use, then the instruction mix
# and stall split of the recurrence, the prep, the short convolutions and
# the gate (ncu_mix.py), and of the decode kernel (DECODE below); packs the
# reports (details and the SASS source page) into $OUT/kda-prof-NAME.tgz.
# Bundle: bash bench/make-kda-bundle.sh (VARIANTS for v/); carry .dev; run:
# bash .dev/ncu-kda-h200.sh (T=8192 by default; ARTIFACTS="slice-bf16
# v/slice-NAME ..." profiles several builds, default slice-bf16; DECODE=N
# also profiles the token recurrence at N one-token sequences, default 128,
# 0 skips it).
source "$(dirname "$0")/device-common.sh"
machine
which ncu || { echo "no ncu"; exit 1; }
T=${T:-8192}; P=/tmp/kprof; mkdir -p $P
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for A in ${ARTIFACTS:-slice-bf16}; do
  N=$(basename $A)
  echo "== ncu: $A, prefill $T tokens, the KDA layer's launches (${SECONDS}s)"
  timeout 300 ncu --clock-control none --set full --import-source no -k "regex:k3_kda_(chunk|conv_gate)" \
    --launch-count 12 -f -o $P/$N k3-run $A --checkpoint /tmp/slice --device cuda --quiet \
    --prompt-ids $(seq -s, 1 $T) --max-new-tokens 1 > $P/$N-run.txt 2>&1
  tail -3 $P/$N-run.txt
  ncu -i $P/$N.ncu-rep --page details --print-details all > $P/$N-details.txt 2>&1
  ncu -i $P/$N.ncu-rep --page source --csv --print-source sass > $P/$N-source.csv 2>&1
  grep -E "^  [a-z_0-9]+ |^    (Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|SM: Pipe Tensor Cycles Active|Issue Slots Busy)" $P/$N-details.txt | awk '/^  [a-z]/{delete s} !s[$0]++' | head -80
  for k in kda_chunk_tf32 kda_prep short_conv kda_gate; do python3 ncu_mix.py $P/$N-source.csv $k; done
  # The token recurrence (decode) at DECODE sequences of one token each
  # (their prefill step runs the decode kernel: T <= 2N); DECODE=0 skips it.
  D=${DECODE:-128}
  if [ "$D" -gt 0 ]; then
    echo "== ncu: $A, the token recurrence at $D one-token sequences (${SECONDS}s)"
    for i in $(seq $D); do echo $((i + 6)); done > $P/dec.txt
    timeout 200 ncu --clock-control none --set full --import-source no -k "regex:kda_tokens" \
      --launch-count 1 -f -o $P/$N-dec k3-run $A --checkpoint /tmp/slice --device cuda --quiet \
      --batch $P/dec.txt --max-new-tokens 1 > $P/$N-dec-run.txt 2>&1
    tail -2 $P/$N-dec-run.txt
    ncu -i $P/$N-dec.ncu-rep --page details --print-details all > $P/$N-dec-details.txt 2>&1
    ncu -i $P/$N-dec.ncu-rep --page source --csv --print-source sass > $P/$N-dec-source.csv 2>&1
    grep -E "^  [a-z_0-9]+ |^    (Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy|L2 Hit Rate)" $P/$N-dec-details.txt | awk '/^  [a-z]/{delete s} !s[$0]++' | head -20
    python3 ncu_mix.py $P/$N-dec-source.csv kda_tokens
  fi
  tar czf $OUT/kda-prof-$N.tgz -C $P $N-details.txt $N-run.txt $N-source.csv \
    $(cd $P && ls $N-dec-details.txt $N-dec-source.csv 2>/dev/null)
done
echo "done (${SECONDS}s)"

#!/usr/bin/env bash
# Nsight Compute profiles of the MLA flash prefill on one H200 (bundle:
# VARIANTS="..." bash bench/make-mla-bundle.sh; carry .dev; run
# bash .dev/ncu-mla-h200.sh). The slice's one MLA layer at 8192 tokens, the
# flash kernel of the default build and of each variant in v/ (full set).
# Packs NAME-details.txt, NAME-raw.csv and NAME-source.csv per run into
# $OUT/prof.tgz (the device call brings back few files); read them with
# bench/ncu_mix.py.
source "$(dirname "$0")/device-common.sh"
P=/tmp/prof; mkdir -p $P
machine
which ncu || { echo "no ncu"; exit 1; }
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
prof() { # NAME ARTIFACT
  local name=$1 art=$2
  echo "== $name (${SECONDS}s)"
  timeout 240 ncu --clock-control none --set full --import-source no -k "regex:mla_flash" \
    --launch-count 1 -f -o $P/$name k3-run $art --checkpoint /tmp/slice --device cuda --quiet \
    --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1 > $P/$name-run.txt 2>&1
  tail -2 $P/$name-run.txt
  ncu -i $P/$name.ncu-rep --page details --print-details all > $P/$name-details.txt 2>&1
  ncu -i $P/$name.ncu-rep --page raw --csv > $P/$name-raw.csv 2>&1
  ncu -i $P/$name.ncu-rep --page source --csv --print-source sass > $P/$name-source.csv 2>&1
  grep -E "^    (Duration|Registers Per Thread|Achieved Occupancy|Compute \(SM\) Throughput|SM: Pipe Tensor|Issue Slots Busy|No Eligible)" $P/$name-details.txt | head -12
}
prof default slice-bf16
for v in v/*; do [ -d "$v" ] && prof ${v#v/slice-} $v; done
tar czf $OUT/prof.tgz -C $P $(cd $P && ls *-details.txt *-raw.csv *-source.csv)
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# The routed experts under skewed routing on one H200 (bundle:
# bench/make-moe-bundle.sh): the MoE slice with uniform routing, then the same
# checkpoint skewed in place (bench/skew-router.py: low expert ids hot, as
# k3-mkcheckpoint --router-skew S), S = 0.3 and 1.0: the routing statistics of
# a 1024-token prefill (moe_check.py over a dump, which also checks it) and
# k3-bench prefill 2340 / 8192, decode 16.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
( time k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
seq -s, 1 64 > c64.txt; for i in $(seq 2 16); do seq -s, $((i*100)) $((i*100+63)) >> c64.txt; done
for skew in 0 0.3 1.0; do
  echo "== router skew $skew"
  [ "$skew" != 0 ] && python3 skew-router.py /tmp/moe1 $skew > /dev/null
  rm -rf /tmp/s1; K3C_DUMP_KERNEL=moe_experts@1024:/tmp/s1 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch c64.txt --max-new-tokens 1 --quiet > /dev/null; python3 moe_check.py /tmp/s1 --experts 2; rm -rf /tmp/s1
  timeout 150 k3-bench moe1 --checkpoint /tmp/moe1 --prefill 2340,8192 --decode 16 --steps 16 --quiet > $OUT/skew$skew.txt; grep -E "moe_experts|time to first|step" $OUT/skew$skew.txt
done

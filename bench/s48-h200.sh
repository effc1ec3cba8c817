#!/usr/bin/env bash
# One device call in priority order, for a session short of device time
# (bundles: PEER_FLA=<fla> bash bench/make-s46-bundle.sh; bash
# bench/make-s47-bundle.sh; rm -rf .devm/bin, the same tools as .dev/bin,
# to keep the carry under 64 MiB). Run from the repository root:
#   bash bench/s48-h200.sh          (call 1, ~10 min)
#   S48=2 bash bench/s48-h200.sh    (call 2: what call 1 left)
# Call 1: #14's KDA layer at T = 8192 beside fla (the done-when shape), the
# s47 smoke runs of #15's new decode variants, their k3-bench decode at
# context 8192 for batch 1 and 8 beside the default, #13's decode step at
# 128 sequences against one (graph), s46's checks, then the
# rest of s46's KDA shapes. Call 2: s47 part 1 (each variant's numerics)
# and its timings at batch 64 / 8k and 8 / 32k. Everything is also in
# $OUT/log.txt, in the order run.
set -u
cd "$(dirname "$0")/.."
[ -d .devm/bin ] || cp -r .dev/bin .devm/bin
if [ "${S48:-1}" = 1 ]; then
  S46_ORDER="t8192 fla" bash .dev/s46-h200.sh
  PART=smoke bash .devm/s47-h200.sh
  SLICE=slice-bf16 NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=1,8 CTX=8192 bash .devm/mla-decode-h200.sh
  S46_ORDER="ratio checks trest" bash .dev/s46-h200.sh
else
  # The pools' trim on the GPU (.dev/bin/k3-run-trim: session 45's k3-run,
  # stripped): 140 prompts over the slice's 128 slots (4 of 2000 tokens,
  # then 10-60), so sequences retire and the pools unmap past the highest
  # held page and grow again; the tokens against K3C_POOL_TRIM=0 and the
  # older k3-run.
  (
    cd .dev && export PATH=$PWD/bin:$PATH
    [ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
    { for i in 1 2 3 4; do seq -s, $i $((i + 1999)); done; for i in $(seq 1 136); do seq -s, $i $((i + 9 + i % 51)); done; } > /tmp/c140.txt
    echo "== pool trim: 140 prompts over 128 slots"
    timeout 200 k3-run-trim slice --checkpoint /tmp/slice --device cuda --batch /tmp/c140.txt --max-new-tokens 3 --quiet > /tmp/trim.txt 2>&1
    K3C_POOL_TRIM=0 timeout 200 k3-run-trim slice --checkpoint /tmp/slice --device cuda --batch /tmp/c140.txt --max-new-tokens 3 --quiet > /tmp/notrim.txt 2>&1
    timeout 200 k3-run slice --checkpoint /tmp/slice --device cuda --batch /tmp/c140.txt --max-new-tokens 3 --quiet > /tmp/old.txt 2>&1
    grep -E "error|paged MLA|sequences over" /tmp/trim.txt /tmp/notrim.txt /tmp/old.txt
    for f in notrim old; do
      if diff <(grep '^sequence' /tmp/trim.txt) <(grep '^sequence' /tmp/$f.txt) > /dev/null && [ -n "$(grep '^sequence' /tmp/trim.txt)" ]; then
        echo "trim vs $f: same tokens ($(grep -c '^sequence' /tmp/trim.txt) sequences)"
      else echo "trim vs $f: DIFFERENT"; fi
    done
  ) 2>&1 | tee -a $OUT/log.txt
  PART=checks bash .devm/s47-h200.sh
  SLICE=slice-bf16 NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=64 CTX=8192 bash .devm/mla-decode-h200.sh
  NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=8 CTX=32768 bash .devm/mla-decode-h200.sh
  S46_ORDER=bench bash .dev/s46-h200.sh
fi

#!/usr/bin/env bash
# The device call after session 47, in priority order (bundles:
# PEER_FLA=<fla> bash bench/make-s46-bundle.sh; bash bench/make-s50-bundle.sh;
# rm -rf .devm/bin). Run from the repository root:
#   bash bench/s50-h200.sh          (call 1, ~8 min)
#   S50=2 bash bench/s50-h200.sh    (call 2, at once: the machine idles out)
# Call 1: #14's KDA layer at T = 8192 beside fla and #13's step ratio (the
# H200 numbers that decide both); the f32 build against exact math on 12
# prompts (bench/f32-probe.sh, MoE and dense k3-tiny); #15's decode at 8k
# for 1 / 4 / 6 / 8 sequences, the default (8-token q_abs on tensor cores)
# against WM8 (the wide form at 8), WM5 and CC2, with the k3-tiny dv64
# checks (100, 12 and 8 sequences: rounds of 8 take the new path). Call 2:
# batch 64 / 8k and 8 / 32k, the variants' logits and kernels against fp64
# on the slice, s46's checks, the other KDA shapes and k3-bench.
set -u
cd "$(dirname "$0")/.."
[ -d .devm/bin ] || cp -r .dev/bin .devm/bin
if [ "${S50:-1}" = 1 ]; then
  S46_ORDER="t8192 fla ratio" bash .dev/s46-h200.sh
  (
    cd .dev && export PATH=$PWD/bin:$PATH
    echo "== the f32 probe (${SECONDS}s)"
    timeout 150 bash ../bench/f32-probe.sh tiny-f32 k3-tiny.json --device cuda
    timeout 100 bash ../bench/f32-probe.sh tdense-GIC-f32 k3-tiny-dense.json --device cuda
  ) 2>&1 | grep -v "^check seq [0-9]* layer" | tee -a $OUT/log.txt
  SLICE=slice-bf16 NO_CMP=1 NO_NCU=1 BATCHES=1,4,6,8 CTX=8192 bash .devm/mla-decode-h200.sh
else
  SLICE=slice-bf16 NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=64 CTX=8192 bash .devm/mla-decode-h200.sh
  NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=8 CTX=32768 bash .devm/mla-decode-h200.sh
  SLICE=slice-bf16 NO_TINY=1 DUMP_CHECK=1 NO_NCU=1 NO_BENCH=1 bash .devm/mla-decode-h200.sh
  S46_ORDER="checks trest bench" bash .dev/s46-h200.sh
fi

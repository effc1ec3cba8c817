#!/usr/bin/env bash
# The device call after session 46, in priority order (bundles:
# PEER_FLA=<fla> bash bench/make-s46-bundle.sh; bash bench/make-s49-bundle.sh;
# rm -rf .devm/bin). Run from the repository root:
#   bash bench/s49-h200.sh          (call 1, ~8 min)
#   S49=2 bash bench/s49-h200.sh    (call 2, at once: the machine idles out)
# Call 1: #14's KDA layer at T = 8192 beside fla and #13's step ratio (the
# H200 numbers that decide both); #15's decode at 8k for batch 1 and 8, the
# default (the transposed core) against the seesaw (SS), the cluster (WGT)
# and the clustered combine (CC2); the f32 probe (k3-tiny's f32 build on a
# 150-token prompt at 1.21e-5 of its 1e-5 bound in session 46): the
# per-layer check, then the KDA and MLA kernels of its prefill and first
# decode step against fp64 (kda_check.py, mla_check.py at 1e-6), to find
# which kernel carries the excess. Call 2: batch 64 / 8k and 8 / 32k, the
# variants' numerics (k3-tiny dv64, the slice's logits, mla_check on the
# slice), s46's checks, the other KDA shapes and k3-bench.
set -u
cd "$(dirname "$0")/.."
[ -d .devm/bin ] || cp -r .dev/bin .devm/bin
if [ "${S49:-1}" = 1 ]; then
  S46_ORDER="t8192 fla ratio" bash .dev/s46-h200.sh
  SLICE=slice-bf16 NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=1,8 CTX=8192 bash .devm/mla-decode-h200.sh
  (
    cd .dev && export PATH=$PWD/bin:$PATH
    echo "== the f32 probe: k3-tiny f32, 150 tokens, seed 3 (${SECONDS}s)"
    [ -d /tmp/ck3 ] || k3-mkcheckpoint --config k3-tiny.json -o /tmp/ck3 --seed 3 --quiet
    p=$(seq -s, 1 150)
    timeout 120 k3-run tiny-f32 --checkpoint /tmp/ck3 --device cuda --prompt-ids $p --max-new-tokens 4 --check 2>&1 | grep -E "^check|error"
    for d in kda_chunk@150-150:/tmp/pk kda_chunk@1-1:/tmp/dk mla_attn@150-150:/tmp/pm mla_attn@1-1:/tmp/dm; do
      rm -rf ${d#*:}
      K3C_DUMP_KERNEL=$d timeout 60 k3-run tiny-f32 --checkpoint /tmp/ck3 --device cuda --prompt-ids $p --max-new-tokens 2 --quiet > /dev/null
    done
    for d in /tmp/pk /tmp/dk; do timeout 120 python3 kda_check.py $d; done
    for d in /tmp/pm /tmp/dm; do timeout 120 python3 ../.devm/mla_check.py $d --rms-tol 1e-6; done
  ) 2>&1 | tee -a $OUT/log.txt
else
  SLICE=slice-bf16 NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=64 CTX=8192 bash .devm/mla-decode-h200.sh
  NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=8 CTX=32768 bash .devm/mla-decode-h200.sh
  SLICE=slice-bf16 DUMP_CHECK=1 NO_NCU=1 NO_BENCH=1 bash .devm/mla-decode-h200.sh
  S46_ORDER="checks trest bench" bash .dev/s46-h200.sh
fi

#!/usr/bin/env bash
# Session 40's device checks, run from a bundle folder after session 39's
# (bench/s39-h200.sh, whose PARTs stay as they were):
#  PART=mla (default) — s39's PART=1 timing first, then the logits, then c64;
#  PART=c64 — KDA chunks of 64 tokens on the GPU (k3-compile --kda-chunk-size=64:
#    the prep in dynamic shared memory, pairs with exp(G_i - G_j), the exact FMA
#    recurrence): k3-tiny bf16 and f32 and the softplus k3-tiny against the
#    reference on prompts of 150, 71 and 3 tokens; with every dt_bias at 20
#    (each gate at its bound, g = -5) the f32 build's delta rule against fp64
#    (kda_check.py, 1e-6) and its logits at 1e-5.
# Bundle (here): bash bench/make-c64-bundle.sh (adds c64/ to .devm); carry .devm;
# run: bash .devm/s40-h200.sh (PART=mla, then c64) or PART=c64 alone.
source "$(dirname "$0")/device-common.sh"
machine
PART=${PART:-mla}
if [ "$PART" = quick ]; then
  # For a call with little device time left: the 64-token KDA chunks, then
  # the MLA timing alone.
  PART=c64 bash s40-h200.sh
  NO_TINY=1 NO_CMP=1 NO_NCU=1 CTX=8192 BATCHES=1,8 VDIR=v bash mla-decode-h200.sh
fi
if [ "$PART" = mla ]; then
  # Session 39's PART=1 reordered for one short call: the timing first
  # (`mla_attn` at context 8192, batch 1 and 8, each build of v/ against
  # the default), then the 64-token KDA chunks (below), then the logits of
  # each build of v/ against the default's.
  NO_TINY=1 NO_CMP=1 NO_NCU=1 CTX=8192 BATCHES=1,8 VDIR=v bash mla-decode-h200.sh
  PART=c64 bash s40-h200.sh
  NO_TINY=1 NO_BENCH=1 NO_NCU=1 VDIR=v bash mla-decode-h200.sh
fi
if [ "$PART" = c64 ]; then
  cd c64
  printf '%s\n%s\n%s\n' $(seq -s, 1 150) $(seq -s, 7 77) 9,8,7 > /tmp/b224.txt
  k3-mkcheckpoint --config k3-tiny.json -o /tmp/ck3 --seed 3 --quiet
  k3-mkcheckpoint --config k3-tiny-softplus.json -o /tmp/cksp --seed 5 --quiet
  rm -rf /tmp/ck3s && cp -r /tmp/ck3 /tmp/ck3s && python3 fill-tensors.py /tmp/ck3s dt_bias 20
  for a in bf16 f32; do
    echo "-- k3-tiny $a, chunks of 64"
    timeout 120 k3-run t64-$a --checkpoint /tmp/ck3 --device cuda --batch /tmp/b224.txt --max-new-tokens 3 --check --quiet | grep -E "check: (PASSED|FAILED)"
    echo "-- k3-tiny $a, chunks of 64, gates at their bound"
    timeout 120 k3-run t64-$a --checkpoint /tmp/ck3s --device cuda --batch /tmp/b224.txt --max-new-tokens 3 --check --quiet | grep -E "check: (PASSED|FAILED)"
  done
  echo "-- softplus k3-tiny bf16, chunks of 64 (pairwise)"
  timeout 120 k3-run sp64-bf16 --checkpoint /tmp/cksp --device cuda --batch /tmp/b224.txt --max-new-tokens 3 --check --quiet | grep -E "check: (PASSED|FAILED)"
  echo "-- the f32 delta rule at 64 against fp64, gates at their bound"
  rm -rf /tmp/d64 && K3C_DUMP_KERNEL=kda_chunk@100:/tmp/d64 timeout 120 k3-run t64-f32 --checkpoint /tmp/ck3s --device cuda --batch /tmp/b224.txt --max-new-tokens 1 --quiet > /dev/null
  python3 kda_check.py /tmp/d64 --rms-tol 1e-6
fi
echo "== s40 part $PART done (${SECONDS}s)"

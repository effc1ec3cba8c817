#!/usr/bin/env bash
# The chained expert launch (K3C_MOE_CHAIN, lowering/tile/Gemm.cpp
# mxfpGroupedMmaChain) against two launches, on one H200, with torch's grouped
# GEMM as the peer in the same call. Bundle:
#   NO_FMA=1 NO_T128=1 MOE_VARIANTS="nochain=K3C_MOE_CHAIN=0" \
#   TINY_VARIANTS="nochain=K3C_MOE_CHAIN=0" bash bench/make-moe-bundle.sh
#   cp bench/moe-chain-h200.sh .dev/
# Carry .dev; run: bash .dev/moe-chain-h200.sh. PHASES (default
# "checks slice k3") picks the parts:
#  * checks: k3-tiny bf16, chained and not, against the reference executor
#    (mixed batch: the 64-row chain in prefill, the 16-row one in decode) and
#    its decode experts against fp64; the f32 k3-tiny on the GPU at 1e-5; the
#    wide k3-tiny; the MoE slice's logits (16 prompts x 4 new tokens) chained
#    and not, bit for bit, and its chained decode experts against fp64;
#  * slice: k3-bench of the MoE slice (moe_experts and the step), chained and
#    not alternating ROUNDS (2) times, decode 8, 16, 64 sequences; then the
#    peer (moe_peer.py) at 8, 16, 64 tokens;
#  * k3: K3's 896 experts (a 15.7 GB checkpoint, ~150 s to make), decode 8 /
#    16 / 64 chained and not, the launch profile of decode 64 for both, then
#    the peer at 8, 16, 64 tokens.
source "$(dirname "$0")/device-common.sh"
machine
phase() { [[ " ${PHASES:-checks slice k3} " == *" $1 "* ]]; }
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
rows='moe_experts|TOTAL'
profile() { # NAME ARTIFACT CHECKPOINT: the launch profile of decode 64
  echo "-- launch profile, decode 64: $1"
  K3C_PROFILE_LAUNCHES=1 timeout 100 k3-bench $2 --checkpoint $3 --device cuda --quiet --prefill none --decode 64 --steps 4 --reps 1 2>&1 >/dev/null | grep -A14 "launch profile" | grep -E "profile|moe_experts"
}
if phase checks; then
  tiny_moe_checks nochain
  echo "== tiny-f32 on the GPU vs the reference (1e-5)"
  run tiny-f32 --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error|max rel"
  echo "== wide k3-tiny (chained 16-row decode, warpgroup prefill with tails) vs the reference"
  k3-mkcheckpoint --config k3-tiny-wide.json -o ckpt-wide --seed 11 --quiet
  for v in wide-bf16 wide-bf16-nochain; do
    [ -d $v ] || continue
    echo "-- $v"; run $v --checkpoint ckpt-wide --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
  done
  rm -rf ckpt-wide
fi
if phase slice || phase checks; then
  echo "== MoE slice (${SECONDS}s)"
  k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
fi
if phase checks; then
  for i in $(seq 1 16); do seq -s, $((i * 7)) $((i * 7 + 5)); done > b16.txt
  timeout 150 k3-run moe1-nochain --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/ref.npy > /dev/null
  rm -rf /tmp/w7 /tmp/x.npy; K3C_DUMP_KERNEL=moe_experts@16-16:/tmp/w7 timeout 90 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy'); b=n.load('/tmp/x.npy')
print('moe1 chained vs two launches: logits bit-identical %s' % bool(a.shape == b.shape and (a.view(n.uint32) == b.view(n.uint32)).all()))"
  echo "moe1 chained decode round vs fp64:"; python3 moe_check.py /tmp/w7 --experts 4 | tail -1
  [ -f /tmp/x.npy ] || { echo "the chained slice did not finish: stopping"; exit 1; }
fi
if phase slice; then
  for round in $(seq 1 ${ROUNDS:-2}); do
    kbench dec-chain-$round moe1 /tmp/moe1 "$rows" --prefill none --decode 8,16,64
    kbench dec-nochain-$round moe1-nochain /tmp/moe1 "$rows" --prefill none --decode 8,16,64
  done
  profile slice-chain moe1 /tmp/moe1
  profile slice-nochain moe1-nochain /tmp/moe1
  rm -rf /tmp/moe1
  timeout 150 python3 moe_peer.py --cases slice --tokens 8,16,64 2>&1 | tail -5
fi
rm -rf /tmp/moe1
if phase k3; then
  echo "== K3 shapes (${SECONDS}s)"
  k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
  echo "checkpoint made (${SECONDS}s)"
  kbench k3-chain moe896 /tmp/moe896 "$rows" --prefill none --decode 8,16,64
  kbench k3-nochain moe896-nochain /tmp/moe896 "$rows" --prefill none --decode 8,16,64
  profile k3-chain moe896 /tmp/moe896
  profile k3-nochain moe896-nochain /tmp/moe896
  rm -rf /tmp/moe896
  timeout 150 python3 moe_peer.py --cases k3 --tokens 8,16,64 2>&1 | tail -5
fi
echo "== done (${SECONDS}s)"

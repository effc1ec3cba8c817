#!/usr/bin/env bash
# Split-K in the chained decode expert launch (K3C_MOE_SPLITK_BELOW,
# lowering/tile/Gemm.cpp mxfpGroupedMmaChain) on one H200. Bundle:
#   NO_FMA=1 NO_T128=1 MOE_VARIANTS="splitk=K3C_MOE_SPLITK_BELOW=4" bash bench/make-moe-bundle.sh
# (split-K is off by default: the -splitk artifacts have it, the others not;
# session 32 ran it as the default, with nosplit=K3C_MOE_SPLITK_BELOW=0).
# Carry .dev; run: bash .dev/moe-splitk-h200.sh. PHASES (default
# "checks slice") picks the parts:
#  * checks: k3-tiny with K3's expert k tiles (tsplit: latent and width 512,
#    whose decode items split), split and not, against the reference executor
#    (a mixed batch decoding 4 sequences, and one prompt decoding alone: an
#    expert has one token), and the split decode rounds' routed experts
#    against fp64 (moe_check.py); the MoE slice (K3's expert shapes) with
#    `--check` on an 8-token prompt (its decode steps split), and its one-token
#    decode experts against fp64;
#  * slice: k3-bench of the MoE slice, split and not alternating ROUNDS (2)
#    times, decode 1, 2, 4, 8 sequences (moe_experts and the step);
#  * k3: K3's 896 experts (a 15.7 GB checkpoint, ~150 s), decode 1, 2, 4.
source "$(dirname "$0")/device-common.sh"
machine
phase() { [[ " ${PHASES:-checks slice} " == *" $1 "* ]]; }
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
rows='moe_experts|TOTAL'
if phase checks; then
  k3-mkcheckpoint --config k3-tiny-split.json -o ckpt-split --seed 11 --quiet
  printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
  for v in tsplit-splitk tsplit; do
    [ -d $v ] || continue
    echo "== $v vs the reference: mixed batch, then one prompt"
    run $v --checkpoint ckpt-split --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
    run $v --checkpoint ckpt-split --prompt-ids $(seq -s, 11 30) --max-new-tokens 4 --check | grep -E "check: (PASSED|FAILED)|error"
    rm -rf /tmp/w4; K3C_DUMP_KERNEL=moe_experts@4-4:/tmp/w4 run $v --checkpoint ckpt-split --batch mix.txt --max-new-tokens 3 > /dev/null
    echo "$v decode round of 4 vs fp64:"; python3 moe_check.py /tmp/w4 --experts 16 | tail -1
    rm -rf /tmp/w1; K3C_DUMP_KERNEL=moe_experts@1-1:/tmp/w1 run $v --checkpoint ckpt-split --prompt-ids $(seq -s, 11 30) --max-new-tokens 3 > /dev/null
    echo "$v decode of 1 vs fp64:"; python3 moe_check.py /tmp/w1 --experts 16 | tail -1
  done
  rm -rf ckpt-split /tmp/w4 /tmp/w1
fi
if phase slice || phase checks; then
  echo "== MoE slice (${SECONDS}s)"
  k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
fi
if phase checks; then
  rm -rf /tmp/w1; K3C_DUMP_KERNEL=moe_experts@1-1:/tmp/w1 timeout 120 k3-run moe1-splitk --checkpoint /tmp/moe1 --device cuda --quiet --prompt-ids 11,12,13,14,15,16,17,18 --max-new-tokens 2 > /dev/null
  echo "moe1 split decode of 1 vs fp64:"; python3 moe_check.py /tmp/w1 --experts 4 | tail -1
  rm -rf /tmp/w1
  echo "== the MoE slice vs the reference executor, 8-token prompt + 3 new tokens (${SECONDS}s)"
  timeout 420 k3-run moe1-splitk --checkpoint /tmp/moe1 --device cuda --quiet --prompt-ids 11,12,13,14,15,16,17,18 \
    --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error|step"
fi
if phase slice; then
  for round in $(seq 1 ${ROUNDS:-2}); do
    kbench dec-split-$round moe1-splitk /tmp/moe1 "$rows" --prefill none --decode 1,2,4,8
    kbench dec-nosplit-$round moe1 /tmp/moe1 "$rows" --prefill none --decode 1,2,4,8
  done
fi
rm -rf /tmp/moe1
if phase k3; then
  echo "== K3 shapes (${SECONDS}s)"
  k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
  kbench k3-split moe896-splitk /tmp/moe896 "$rows" --prefill none --decode 1,2,4
  kbench k3-nosplit moe896 /tmp/moe896 "$rows" --prefill none --decode 1,2,4
  rm -rf /tmp/moe896
fi
echo "== done (${SECONDS}s)"

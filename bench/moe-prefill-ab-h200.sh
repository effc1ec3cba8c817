#!/usr/bin/env bash
# The warpgroup-MMA expert kernels (prefill) of two k3c builds on one H200:
# this build in .dev (k3-run, k3-bench, k3-mkcheckpoint in .dev/bin; moe1,
# moe896 and wide-bf16 compiled by it as in bench/make-moe-bundle.sh) and an
# earlier one in .dev/old (its bin/ and its moe1, moe896: each build runs
# with its own runtime); optional variants of this build as moe1-NAME,
# moe896-NAME and wide-bf16-NAME (compiled with the variant's settings). Carry
# .dev; run: bash .dev/moe-prefill-ab-h200.sh.
#  * checks of this build: the wide k3-tiny bf16 (wgmma at 400 tokens)
#    against the reference executor; expert dumps against fp64
#    (bench/moe_check.py): the wide k3-tiny, the same with edge-case and NaN
#    scales (the exact decode path), the MoE slice at 3072 tokens;
#  * k3-bench moe_experts rows, new, variants and old alternating (the slice
#    SLICE_ROUNDS times (2), K3 once; OLD_ROUNDS=1: old's first slice round
#    only): the MoE slice (256 experts) at 2340 and 8192 tokens, K3's 896 experts at 8192.
# Without .dev/old the old build is skipped. PHASES (default "checks slice
# k3") picks the parts; PEER=1 adds torch's grouped GEMM (moe_peer.py) on
# the same shapes after the slice and after K3. SLICE_TOKENS (2340,8192) and
# K3_TOKENS (8192) set the prefill sizes (e.g. 1024 / 2048,4096 for the
# mma.sync / warpgroup boundary, K3C_MOE_WGMMA_FROM).
# PRE_VARIANTS="NAME ..." limits the variants to those (default: every moe1-NAME).
source "$(dirname "$0")/device-common.sh"
machine
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
phase() { [[ " ${PHASES:-checks slice k3} " == *" $1 "* ]]; }
oldok() { [ -d old/bin ]; }
k3-mkcheckpoint --config k3-tiny-wide.json -o ckpt-wide --seed 11 --quiet
seq -s, 1 400 > long.txt; seq -s, 5 24 >> long.txt
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
variants=${PRE_VARIANTS:-$(ls -d moe1-* 2>/dev/null | sed 's/^moe1-//')}
python3 mxfp4-edge-scales.py ckpt-wide ckpt-wide-edge --nan > /dev/null
# PHASES: checks (all checks), tail (the 600-token ones only), low (the
# 200-token ones only), slice, k3.
phase checks && for v in wide-bf16 $(for n in $variants; do echo wide-bf16-$n; done); do
  echo "== $v vs the reference: 400 + 20 tokens, mixed batch"
  run $v --checkpoint ckpt-wide --batch long.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
  run $v --checkpoint ckpt-wide --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
  rm -rf /tmp/w1; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w1 run $v --checkpoint ckpt-wide --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null
  echo "$v 400 tokens:"; python3 moe_check.py /tmp/w1 --experts 16 | tail -1
  rm -rf /tmp/w3; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w3 run $v --checkpoint ckpt-wide-edge --allow-nonfinite --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null
  echo "$v edge and NaN scales:"; python3 moe_check.py /tmp/w3 --experts 16 | tail -1
done
# 600 tokens (ids below the 512-token vocabulary): ~150 pairs an expert,
# groups of more than 128 rows (the split tails), every expert against fp64.
p600="$(seq -s, 1 511),$(seq -s, 1 89)"
(phase checks || phase tail) && for v in wide-bf16 $(for n in $variants; do echo wide-bf16-$n; done); do
  echo "== $v: 600 tokens"
  run $v --checkpoint ckpt-wide --prompt-ids $p600 --max-new-tokens 2 --check | grep -E "check: (PASSED|FAILED)|error"
  rm -rf /tmp/w5; K3C_DUMP_KERNEL=moe_experts@600:/tmp/w5 run $v --checkpoint ckpt-wide --prompt-ids $p600 --max-new-tokens 1 > /dev/null
  python3 moe_check.py /tmp/w5 --experts 16 | tail -2
  rm -rf /tmp/w6; K3C_DUMP_KERNEL=moe_experts@600:/tmp/w6 run $v --checkpoint ckpt-wide-edge --allow-nonfinite --prompt-ids $p600 --max-new-tokens 1 > /dev/null
  echo "$v 600 tokens, edge and NaN scales:"; python3 moe_check.py /tmp/w6 --experts 16 | tail -1
done
# 200 tokens (50 pairs an expert): the mma.sync / warpgroup boundary
# (K3C_MOE_WGMMA_FROM) with groups below 128 rows.
(phase checks || phase low) && for v in wide-bf16 $(for n in $variants; do echo wide-bf16-$n; done); do
  echo "== $v: 200 tokens"
  run $v --checkpoint ckpt-wide --prompt-ids $(seq -s, 1 200) --max-new-tokens 2 --check | grep -E "check: (PASSED|FAILED)|error"
  rm -rf /tmp/w7; K3C_DUMP_KERNEL=moe_experts@200:/tmp/w7 run $v --checkpoint ckpt-wide-edge --allow-nonfinite --prompt-ids $(seq -s, 1 200) --max-new-tokens 1 > /dev/null
  echo "$v 200 tokens, edge and NaN scales:"; python3 moe_check.py /tmp/w7 --experts 16 | tail -1
done
bench() { kbench "$1" "$2" "$3" 'moe_experts' "${@:4}"; } # NAME K3-BENCH-DIR ARTIFACT CHECKPOINT args
kb2() { local name=$1 bin=$2; shift 2; PATH=$bin:$PATH bench $name "$@"; }
if phase slice || phase checks; then
echo "== MoE slice (${SECONDS}s)"
k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
phase checks && for v in moe1 $(for n in $variants; do echo moe1-$n; done); do
  rm -rf /tmp/w4; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w4 timeout 150 k3-run $v --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null
  echo "$v 3072 tokens:"; python3 moe_check.py /tmp/w4 --experts 3 | tail -1; rm -rf /tmp/w4
done
phase slice && for round in $(seq 1 ${SLICE_ROUNDS:-2}); do
  kb2 slice-new-$round $PWD/bin moe1 /tmp/moe1 --prefill ${SLICE_TOKENS:-2340,8192} --decode none
  for n in $variants; do kb2 slice-$n-$round $PWD/bin moe1-$n /tmp/moe1 --prefill ${SLICE_TOKENS:-2340,8192} --decode none; done
  oldok && ! { [ $round = 2 ] && [ -n "${OLD_ROUNDS:-}" ]; } && kb2 slice-old-$round $PWD/old/bin old/moe1 /tmp/moe1 --prefill ${SLICE_TOKENS:-2340,8192} --decode none
done
rm -rf /tmp/moe1
[ -n "${PEER:-}" ] && phase slice && timeout 150 python3 moe_peer.py --cases slice --tokens 2340,8192 2>&1 | tail -4
fi
phase k3 || { echo "== done (${SECONDS}s)"; exit 0; }
echo "== K3 shapes (${SECONDS}s)"
k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
kb2 k3-new $PWD/bin moe896 /tmp/moe896 --prefill ${K3_TOKENS:-8192} --decode none
k3variants=$(for n in $variants; do [ -d moe896-$n ] && echo $n; done) # slice-only variants (moe1-nowg) have no moe896
for n in $k3variants; do kb2 k3-$n $PWD/bin moe896-$n /tmp/moe896 --prefill ${K3_TOKENS:-8192} --decode none; done
oldok && kb2 k3-old $PWD/old/bin old/moe896 /tmp/moe896 --prefill ${K3_TOKENS:-8192} --decode none
[ -n "${K3_ROUNDS2:-}" ] && for n in $k3variants; do kb2 k3-$n-2 $PWD/bin moe896-$n /tmp/moe896 --prefill ${K3_TOKENS:-8192} --decode none; done
[ -n "${K3_ROUNDS2:-}" ] && kb2 k3-new-2 $PWD/bin moe896 /tmp/moe896 --prefill ${K3_TOKENS:-8192} --decode none
[ -n "${PEER:-}" ] && timeout 150 python3 moe_peer.py --cases k3 --tokens 8192 2>&1 | tail -3
echo "== done (${SECONDS}s)"

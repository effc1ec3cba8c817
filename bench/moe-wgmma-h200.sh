#!/usr/bin/env bash
# The warpgroup-MMA expert GEMM (prefill) on one H200, checks then timings,
# one run (bundle: NO_FMA=1 NO_T128=1 [MOE_VARIANTS="NAME=VAR=VALUE ..."]
# bash bench/make-moe-bundle.sh):
#  * the wide k3-tiny (latent 128, width 192: k_tile 128 up, 64 down,
#    partial column tiles) against the reference executor at 400 + 20
#    tokens and a mixed batch, with warpgroup MMA (>= 96 pairs an expert),
#    and without (K3C_MOE_WGMMA=0);
#  * expert kernel dumps against fp64 (moe_check.py): the wide k3-tiny at
#    400 tokens (warpgroup MMA) on its checkpoint and on one with edge-case
#    and NaN scales (both decode paths), the MoE slice at 3072 tokens;
#  * k3-bench on the MoE slice, prefill 1024, 2340 (K3's 146 pairs per expert
#    at 8192 tokens), 8192: warpgroup MMA, mma.sync (moe1-nowg) and the
#    variants moe1-* built with MOE_VARIANTS, alternating;
#  * the torch grouped-GEMM peer (bf16 weights) on the same shapes;
#  * K3=1: K3's expert shapes (896 experts; the 15.7 GB checkpoint made
#    there): a dump at 8192 tokens against fp64, k3-bench prefill 2048 and
#    8192 of moe896 and its variants, the torch peer.
# SKIP_TINY=1: no wide k3-tiny checks; ROUND1_ONLY=1: one benchmark round.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config k3-tiny-wide.json -o ckpt-wide --seed 11 --quiet
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
seq -s, 1 400 > long.txt; seq -s, 5 24 >> long.txt
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
[ -n "${SKIP_TINY:-}" ] || for v in wide-bf16 wide-bf16-nowg; do
  echo "== $v vs the reference: 400 + 20 tokens, mixed batch (474 tokens)"
  run $v --checkpoint ckpt-wide --batch long.txt --max-new-tokens 3 --check | grep -E "check:"
  run $v --checkpoint ckpt-wide --batch mix.txt --max-new-tokens 3 --check | grep -E "check:"
done
echo "== expert kernel dumps vs fp64"
if [ -z "${SKIP_TINY:-}" ]; then
rm -rf /tmp/w1; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w1 run wide-bf16 --checkpoint ckpt-wide --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null; python3 moe_check.py /tmp/w1 --experts 16
rm -rf /tmp/w2; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w2 run wide-bf16-nowg --checkpoint ckpt-wide --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null; python3 moe_check.py /tmp/w2 --experts 16
python3 mxfp4-edge-scales.py ckpt-wide ckpt-wide-edge --nan
rm -rf /tmp/w3; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w3 timeout 120 k3-run wide-bf16 --checkpoint ckpt-wide-edge --allow-nonfinite --device cuda --quiet --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null; python3 moe_check.py /tmp/w3 --experts 16
fi
echo "== MoE slice (1 layer, 256 experts, seed 3)"
( time k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
rm -rf /tmp/w4; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w4 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null; python3 moe_check.py /tmp/w4 --experts 3; rm -rf /tmp/w4
for v in $(ls -d moe1-* | grep -v -e nowg -e fma -e t128); do
  rm -rf /tmp/w5; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w5 timeout 150 k3-run $v --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null; echo "$v:"; python3 moe_check.py /tmp/w5 --experts 2 | tail -1; rm -rf /tmp/w5
done
echo "== k3-bench: MoE slice prefill (${SECONDS}s)"
bench() { timeout 200 k3-bench $1 --checkpoint /tmp/moe1 --prefill 1024,2340,8192 --decode none --quiet --csv $OUT/$1.csv > $OUT/$1.txt; grep -E "moe_experts" $OUT/$1.csv | head -10; }
for round in 1 2; do
  for v in moe1 moe1-nowg $(ls -d moe1-* | grep -v -e nowg -e fma -e t128); do
    [ -n "${ROUND1_ONLY:-}" ] && [ $round = 2 ] && continue
    echo "-- $v (round $round)"; bench $v
  done
done
echo "== peer: torch grouped GEMM, bf16 weights (${SECONDS}s)"
timeout 150 python3 moe_peer.py --cases slice --tokens 1024,2340,8192 2>&1 | tail -6
[ -z "${K3:-}" ] && { echo "== done (${SECONDS}s)"; exit 0; }
echo "== K3's expert shapes: 896 experts, top 16 (${SECONDS}s)"
rm -rf /tmp/moe1
( time k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
rm -rf /tmp/k2; K3C_DUMP_KERNEL=moe_experts@8192:/tmp/k2 timeout 150 k3-run moe896 --checkpoint /tmp/moe896 --device cuda --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1 --quiet > /dev/null; python3 moe_check.py /tmp/k2 --experts 2; rm -rf /tmp/k2
for v in moe896 $(ls -d moe896-*) moe896; do
  echo "-- $v"; timeout 200 k3-bench $v --checkpoint /tmp/moe896 --prefill 2048,8192 --decode none --quiet --csv $OUT/$v.csv > /dev/null; grep -E "moe_experts" $OUT/$v.csv
done
timeout 150 python3 moe_peer.py --cases k3 --tokens 2048,8192 2>&1 | tail -3
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# Routed experts (MXFP4, tensor cores) on one H200, checks then timings, one
# run (bundle: bench/make-moe-bundle.sh):
#  * k3-tiny f32 (exact FMA path, the new grouping kernel) against the
#    reference executor at 1e-5; k3-tiny bf16 `--check` (see docs/perf.md
#    for its known router near-tie);
#  * kernel dumps (K3C_DUMP_KERNEL) of the expert MLP against fp64 over the
#    MXFP4 weights decoded by moe_check.py: k3-tiny bf16 prefill and decode,
#    with 16-, 64- and 128-row tiles, and on a checkpoint with edge-case and
#    NaN scales (both decode paths); the MoE slice at decode (16 tokens) and
#    prefill (1024 tokens: 64-row tiles; 3072: 128-row tiles);
#  * k3-bench on the MoE slice: prefill 1024, 2340 (K3's 146 tokens per
#    expert at 8192 tokens over 896 experts), 8192; decode batch 8, 16, 64;
#    the tensor-core build and the FMA build;
#  * peers in the same run: torch grouped GEMM on bf16 weights
#    (moe_peer.py), triton_kernels' MXFP4 matmul_ogs (moe_peer_triton.py,
#    when .dev/peers/triton_kernels is there).
# QUICK=1: no FMA build timings, no E = 896 peer cases.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
run() { timeout 120 k3-run "$@" --checkpoint ckpt-tiny --device cuda --quiet; }
echo "== k3-tiny f32 (exact) vs the reference, mixed batch"
run tiny-f32 --batch batch.txt --max-new-tokens 4 --check | grep -E "check:"
echo "== k3-tiny bf16 vs the reference, mixed batch"
run tiny-bf16 --batch batch.txt --max-new-tokens 4 --check | grep -E "step|check:"
echo "== expert kernel dumps vs fp64 (k3-tiny: prefill 157 tokens, decode 3)"
printf '%s\n%s\n%s\n' $(seq -s, 1 100) $(seq -s, 50 89) $(seq -s, 200 216) > b3.txt
for v in tiny-bf16 tiny-bf16-t64 tiny-bf16-t128; do
  rm -rf /tmp/e1 /tmp/e2
  K3C_DUMP_KERNEL=moe_experts@64:/tmp/e1 run $v --batch b3.txt --max-new-tokens 2 > /dev/null; python3 moe_check.py /tmp/e1 --experts 16
  K3C_DUMP_KERNEL=moe_experts@1-3:/tmp/e2 run $v --batch b3.txt --max-new-tokens 2 > /dev/null; python3 moe_check.py /tmp/e2 --experts 16
done
echo "== edge-case and NaN scales (both decode paths), k3-tiny bf16 16- and 64-row tiles"
python3 mxfp4-edge-scales.py ckpt-tiny ckpt-edge --nan
for v in tiny-bf16 tiny-bf16-t64 tiny-bf16-t128; do
  rm -rf /tmp/e6 /tmp/e7
  K3C_DUMP_KERNEL=moe_experts@64:/tmp/e6 timeout 120 k3-run $v --checkpoint ckpt-edge --allow-nonfinite --device cuda --quiet --batch b3.txt --max-new-tokens 2 > /dev/null; python3 moe_check.py /tmp/e6 --experts 16
  K3C_DUMP_KERNEL=moe_experts@1-3:/tmp/e7 timeout 120 k3-run $v --checkpoint ckpt-edge --allow-nonfinite --device cuda --quiet --batch b3.txt --max-new-tokens 2 > /dev/null; python3 moe_check.py /tmp/e7 --experts 16
done
rm -rf /tmp/e3; K3C_DUMP_KERNEL=moe_experts@64:/tmp/e3 run tiny-f32 --batch b3.txt --max-new-tokens 1 > /dev/null; python3 moe_check.py /tmp/e3 --experts 16 --rms-tol 1e-6
echo "== MoE slice (1 layer, 256 experts, seed 3)"
( time k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
seq -s, 1 64 > c64.txt; for i in $(seq 2 16); do seq -s, $((i*100)) $((i*100+63)) >> c64.txt; done
rm -rf /tmp/e4; K3C_DUMP_KERNEL=moe_experts@16-16:/tmp/e4 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch c64.txt --max-new-tokens 2 --quiet > /dev/null; python3 moe_check.py /tmp/e4 --experts 6; rm -rf /tmp/e4
rm -rf /tmp/e5; K3C_DUMP_KERNEL=moe_experts@1024:/tmp/e5 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch c64.txt --max-new-tokens 1 --quiet > /dev/null; python3 moe_check.py /tmp/e5 --experts 4; rm -rf /tmp/e5
rm -rf /tmp/e8; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/e8 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null; python3 moe_check.py /tmp/e8 --experts 3; rm -rf /tmp/e8
echo "== k3-bench: MoE slice, tensor-core experts"
bench() { timeout 240 k3-bench $1 --checkpoint /tmp/moe1 --prefill 1024,2340,8192 --decode 8,16,64 --steps 16 --quiet --csv $OUT/$1.csv > $OUT/$1.txt; grep -E "moe_experts|^phase|time to first|step" $OUT/$1.txt | head -40; }
SECONDS=0; bench moe1; echo "(bench ${SECONDS} s)"
for v in moe1-t128; do [ -d $v ] && { echo "== k3-bench: $v"; bench $v; }; done
if [ -z "${QUICK:-}" ] && [ -d moe1-fma ]; then echo "== k3-bench: MoE slice, FMA experts (before)"; bench moe1-fma; fi
echo "== peer: torch grouped GEMM, bf16 weights"
timeout 150 python3 moe_peer.py --cases slice 2>&1 | tail -9
[ -z "${QUICK:-}" ] && timeout 150 python3 moe_peer.py --cases k3 --tokens 8,64,8192 2>&1 | tail -3
if [ -f moe_peer_triton.py ] && [ -d peers/triton_kernels ]; then
  echo "== peer: triton_kernels matmul_ogs, MXFP4 weights"
  timeout ${TRITON_TIMEOUT:-200} python3 moe_peer_triton.py ${TRITON_ARGS:---cases e256} 2>&1 | tail -30
fi

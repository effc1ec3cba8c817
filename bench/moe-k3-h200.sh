#!/usr/bin/env bash
# The routed experts at K3's shapes (896 MXFP4 experts, top 16, latent 3584,
# width 3072; a one-layer KDA + MoE slice) on one H200 (bundle:
# bench/make-moe-bundle.sh): the 15.7 GB checkpoint, a decode dump against
# fp64, k3-bench prefill 2048 and 8192 and decode 8, 64, then
# triton_kernels' MXFP4 matmul on the same shapes in the same call (torch's
# grouped GEMM on bf16 weights, moe_peer.py, when .dev/peers/triton_kernels is
# not there).
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
( time k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
printf '%s\n' $(for i in $(seq 1 8); do seq -s, $((i*100)) $((i*100+31)); done) > c8.txt
rm -rf /tmp/k1; K3C_DUMP_KERNEL=moe_experts@8-8:/tmp/k1 timeout 150 k3-run moe896 --checkpoint /tmp/moe896 --device cuda --batch c8.txt --max-new-tokens 2 --quiet > /dev/null; python3 moe_check.py /tmp/k1 --experts 4; rm -rf /tmp/k1
timeout 200 k3-bench moe896 --checkpoint /tmp/moe896 --prefill 2048,8192 --decode 8,64 --steps 16 --quiet --csv $OUT/moe896.csv > $OUT/moe896.txt; grep -E "moe_experts|time to first|step" $OUT/moe896.txt
if [ -d peers/triton_kernels ]; then
  timeout 200 python3 moe_peer_triton.py --cases e896_t8192 2>&1 | grep -E "^e896|case"
else
  # The issue's fallback peer when triton_kernels is not there: torch's
  # grouped GEMM on bf16 weights, same shapes (the checkpoint's memory freed).
  rm -rf /tmp/moe896
  timeout 200 python3 moe_peer.py --cases k3 --tokens ${PEER_TOKENS:-8,64,2048,8192} 2>&1 | tail -6
fi

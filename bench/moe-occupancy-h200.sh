#!/usr/bin/env bash
# Occupancy variants of the expert GEMMs on one H200 (bundle: NO_FMA=1
# NO_T128=1 MOE_VARIANTS="c5=K3C_MOE_CTAS_16=5;K3C_MOE_STAGES_16=3;K3C_LAUNCH_BOUNDS=mxfp4_mma_16=5
# s3=K3C_MOE_STAGES_16=3 bm64=K3C_MOE_WGMMA_BM=64" bash bench/make-moe-bundle.sh;
# carry .dev; run: bash .dev/moe-occupancy-h200.sh):
#  * c5: the 16-row decode tiles at 5 blocks an SM (3 stages; registers
#    capped to fit), s3: 4 blocks with 3 stages; bm64: 64-row warpgroup
#    tiles (one warpgroup a block) for K3's ~146 pairs an expert at 8192
#    tokens, where 128-row tiles leave 43 % of the second tile empty;
#  * checks: expert dumps against fp64 (decode 16 sequences for c5, 3072
#    tokens for bm64), then k3-bench, two alternating rounds, on the MoE slice
#    (decode 1, 16, 64) and K3's 896 experts (prefill 8192, decode 8, 64).
source "$(dirname "$0")/device-common.sh"
machine
for i in $(seq 1 64); do echo $((i * 7 + 3)); done > one64.txt
head -16 one64.txt > one16.txt
bench() { kbench "$1" "$2" "$3" 'moe_experts' "${@:4}"; } # NAME ARTIFACT CHECKPOINT k3-bench args...
k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
rm -rf /tmp/w; K3C_DUMP_KERNEL=moe_experts@16-16:/tmp/w timeout 150 k3-run moe1-c5 --checkpoint /tmp/moe1 --device cuda --batch one16.txt --max-new-tokens 2 --quiet > /dev/null
echo "c5, 16 one-token sequences:"; python3 moe_check.py /tmp/w --experts 8 | tail -1
rm -rf /tmp/w; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w timeout 150 k3-run moe1-bm64 --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null
echo "bm64, 3072 tokens:"; python3 moe_check.py /tmp/w --experts 3 | tail -1; rm -rf /tmp/w
for round in 1 2; do
  for v in moe1 moe1-c5 moe1-s3; do bench $v-$round $v /tmp/moe1 --prefill none --decode 1,16,64; done
done
rm -rf /tmp/moe1
echo "== K3 shapes (${SECONDS}s)"
k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
for round in 1 2; do
  bench k3-$round moe896 /tmp/moe896 --prefill 8192 --decode 8,64
  bench k3-bm64-$round moe896-bm64 /tmp/moe896 --prefill 8192 --decode none
  bench k3-c5-$round moe896-c5 /tmp/moe896 --prefill none --decode 8,64
done
echo "== done (${SECONDS}s)"

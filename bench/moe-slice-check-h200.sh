#!/usr/bin/env bash
# #16's remaining check on one H200: the MoE slice (K3's expert shapes, 256
# MXFP4 experts, top 16, tensor-core expert kernels, the chained decode
# launch) with `k3-run --check` against the reference executor on a short
# prompt (the reference dequantizes the slice's 11.4 B parameters to fp32 on
# the CPU: ~46 GB of the machine's 128), for the bf16 build; then the routed
# experts at one sequence (decode 1, where an expert has one token), chained
# and not. Bundle: as bench/moe-chain-h200.sh's (MOE_VARIANTS with nochain),
# then `cp bench/moe-slice-check-h200.sh .dev/`. Carry .dev; run:
# bash .dev/moe-slice-check-h200.sh.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
echo "== the MoE slice vs the reference executor, 8-token prompt + 3 new tokens (${SECONDS}s)"
timeout 420 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --quiet --prompt-ids 11,12,13,14,15,16,17,18 \
  --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error|step"
echo "== decode 1, chained and not (${SECONDS}s)"
kbench dec1-chain moe1 /tmp/moe1 'moe_experts|TOTAL' --prefill none --decode 1
kbench dec1-nochain moe1-nochain /tmp/moe1 'moe_experts|TOTAL' --prefill none --decode 1
rm -rf /tmp/moe1
echo "== done (${SECONDS}s)"

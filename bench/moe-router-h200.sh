#!/usr/bin/env bash
# The GPU router (the logits through the GEMM layer, a warp per token's top
# k) on one H200. Bundle: NO_FMA=1 NO_T128=1 bash bench/make-moe-bundle.sh,
# plus tiny-softmax-bf16 / tiny-softmax-f32 (k3-tiny with
# "moe_router_activation_func": "softmax"; the commands are in
# docs/perf.md); carry .dev; run: bash .dev/moe-router-h200.sh.
#  * checks against the reference executor: k3-tiny bf16 and f32 (sigmoid
#    router with bias), the softmax variant in both, the wide k3-tiny at 400 +
#    20 tokens and a mixed batch;
#  * k3-bench: the MoE slice (256 experts) prefill 2340, 8192 and decode 1,
#    16, 64, then K3's 896 experts at prefill 8192 and decode 8, 64
#    (moe_router and moe_experts rows, the decode step);
#  * stream_pattern.py: the expert weights' read pattern against contiguous
#    reads and torch's copy.
source "$(dirname "$0")/device-common.sh"
machine
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-softmax.json -o ckpt-softmax --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-wide.json -o ckpt-wide --seed 11 --quiet
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
seq -s, 1 400 > long.txt; seq -s, 5 24 >> long.txt
for v in tiny-bf16 tiny-f32; do
  echo "== $v vs the reference: mixed batch"
  run $v --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
done
for v in tiny-softmax-bf16 tiny-softmax-f32; do
  echo "== $v vs the reference: mixed batch"
  run $v --checkpoint ckpt-softmax --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
done
echo "== wide-bf16 vs the reference: 400 + 20 tokens, mixed batch"
run wide-bf16 --checkpoint ckpt-wide --batch long.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
run wide-bf16 --checkpoint ckpt-wide --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
bench() { kbench "$1" "$2" "$3" 'moe_router|moe_experts|,step,|,graph,' "${@:4}"; } # NAME ARTIFACT CHECKPOINT k3-bench args...
echo "== MoE slice (${SECONDS}s)"
k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
bench slice moe1 /tmp/moe1 --prefill 2340,8192 --decode 1,16,64
rm -rf /tmp/moe1
echo "== stream pattern (${SECONDS}s)"
timeout 120 python3 stream_pattern.py 2>&1 | tail -22
echo "== K3 shapes: 896 experts (${SECONDS}s)"
k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
bench k3 moe896 /tmp/moe896 --prefill 8192 --decode 8,64
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# The 192-row warpgroup expert tiles (K3C_MOE_WGMMA192_UPTO, opt-in) on one
# H200, checks then timings. Bundle: NO_FMA=1 NO_T128=1
# MOE_VARIANTS="w192=K3C_MOE_WGMMA192_UPTO=256" bash bench/make-moe-bundle.sh,
# then the wide k3-tiny with the same setting as wide-bf16-w192
# (K3C_MOE_WGMMA192_UPTO=256 k3-compile /tmp/k3c-ckpt-tiny-wide --target=sm_90a
# --max-tokens 1024 --max-seqs 16 --max-context 1024 -o .dev/wide-bf16-w192);
# cp bench/moe-w192-h200.sh test/Runtime/Inputs/{poison-tensor,safetensors_shard}.py
# .dev/; carry .dev; run: bash .dev/moe-w192-h200.sh.
#  * the GPU router with NaN scores (k3-tiny bf16/f32 --check);
#  * checks: the wide k3-tiny (100 pairs an expert at 400 tokens: 192-row
#    tiles) against the reference executor; expert dumps against fp64 at 400
#    tokens there and at 3072 tokens on the MoE slice (192 pairs an expert);
#  * k3-bench, two alternating rounds: the slice at 2340 and 8192 tokens,
#    K3's 896 experts at 8192 tokens (~146 pairs an expert), default against
#    w192 (moe_experts rows).
source "$(dirname "$0")/device-common.sh"
machine
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
# The GPU router with NaN scores (58f6b1d): every expert of layer 1's router
# (16) or all but 3 (top 4: the last round has no candidate above -inf) get a
# NaN weight; the reference executor's serial top k picks expert 0 with its
# (NaN) score, so the logits are NaN where the reference's are.
echo "== router with NaN scores, k3-tiny bf16 and f32 on the GPU"
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
for n in 16 13; do
  rm -rf ckpt-nan$n; cp -r ckpt-tiny ckpt-nan$n
  for e in $(seq 0 $((n - 1))); do python3 poison-tensor.py ckpt-nan$n model.layers.1.block_sparse_moe.gate.weight $((e * 128 + 5)) nan; done
  for v in tiny-bf16 tiny-f32; do
    echo -n "$v, $n NaN experts: "; run $v --checkpoint ckpt-nan$n --allow-nonfinite --batch batch.txt --max-new-tokens 2 --check 2>&1 | grep -E "check: (PASSED|FAILED)|error" | head -3
  done
done
k3-mkcheckpoint --config k3-tiny-wide.json -o ckpt-wide --seed 11 --quiet
seq -s, 1 400 > long.txt; seq -s, 5 24 >> long.txt
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
echo "== wide-bf16-w192 vs the reference: 400 + 20 tokens, mixed batch"
run wide-bf16-w192 --checkpoint ckpt-wide --batch long.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
run wide-bf16-w192 --checkpoint ckpt-wide --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
rm -rf /tmp/w1; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w1 run wide-bf16-w192 --checkpoint ckpt-wide --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null
echo "wide-bf16-w192 400 tokens:"; python3 moe_check.py /tmp/w1 --experts 16 | tail -1
bench() { kbench "$1" "$2" "$3" 'moe_experts' "${@:4}"; } # NAME ARTIFACT CHECKPOINT k3-bench args...
echo "== MoE slice (${SECONDS}s)"
k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
rm -rf /tmp/w4; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w4 timeout 150 k3-run moe1-w192 --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null
echo "moe1-w192 3072 tokens:"; python3 moe_check.py /tmp/w4 --experts 3 | tail -1; rm -rf /tmp/w4
for round in 1 2; do
  bench slice-$round moe1 /tmp/moe1 --prefill 2340,8192 --decode none
  bench slice-w192-$round moe1-w192 /tmp/moe1 --prefill 2340,8192 --decode none
done
rm -rf /tmp/moe1
echo "== K3 shapes (${SECONDS}s)"
k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
for round in 1 2; do
  bench k3-$round moe896 /tmp/moe896 --prefill 8192 --decode none
  bench k3-w192-$round moe896-w192 /tmp/moe896 --prefill 8192 --decode none
done
echo "== torch grouped GEMM peer (${SECONDS}s)"
timeout 150 python3 moe_peer.py --cases k3 --tokens 8192 2>&1 | tail -3
timeout 150 python3 moe_peer.py --cases slice --tokens 2340,8192 2>&1 | tail -4
echo "== done (${SECONDS}s)"

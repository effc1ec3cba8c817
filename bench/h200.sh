#!/usr/bin/env bash
# H200 benchmark + checks for k3c (run on the GPU machine from a bundle made by
# bench/make-bundle.sh): correctness against the reference, decode throughput
# at several batch sizes, per-kernel profile, a full-width k3-small slice, and
# the out-of-memory error. Prints tables; docs/perf.md records the numbers.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== k3-tiny f32 on the GPU vs the reference (per layer + logits)"
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --check-layers --quiet | grep -E "layer (0|6|12) |step 3|check:"
echo "== expert parallelism, R = 1 over NCCL (k3-tiny f32, MXFP4 experts) vs the run without EP"
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet --dump-logits plain.npy > /dev/null
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet --ep 1 --dump-logits ep1.npy | tail -3
k3-run tiny-f32 --checkpoint ckpt-tiny --device cpu --batch batch.txt --max-new-tokens 4 --quiet --ep 4 --dump-logits ep4cpu.npy | tail -5
python3 -c "
import numpy as n
a = n.load('plain.npy')
for f in ['ep1', 'ep4cpu']:
    b = n.load(f + '.npy'); e = abs(a - b).max() / abs(a).max()
    print(f, 'vs GPU run without EP: max rel', e, 'tokens equal', bool((a.argmax(-1) == b.argmax(-1)).all()), 'PASS' if e < 1e-5 else 'FAIL')
"
echo "== EP exchange bandwidth and planner time (NCCL, R = 1)"
k3-ep-bench --transport nccl --iters 20
echo "== k3-tiny bf16 decode throughput (prompt 64 tokens, 32 new tokens)"
printf "%-8s %12s %16s\n" batch "TTFT ms" "decode tok/s"
for b in 1 4 8; do
  rm -f prompts.txt; for i in $(seq $b); do seq -s, $i $((i+63)) >> prompts.txt; done
  out=$(k3-run tiny-bf16 --checkpoint ckpt-tiny --device cuda --batch prompts.txt --max-new-tokens 32 --quiet)
  ttft=$(echo "$out" | sed -n 's/time to first token: \([0-9.]*\) ms.*/\1/p')
  tps=$(echo "$out" | sed -n 's/.*decode: \([0-9.]*\) tokens.*/\1/p')
  printf "%-8s %12s %16s\n" $b "$ttft" "$tps"
done
echo "== k3-tiny bf16 profile (batch 1, prompt 64, 32 new tokens)"
seq -s, 1 64 > p64.txt
k3-run tiny-bf16 --checkpoint ckpt-tiny --device cuda --batch p64.txt --max-new-tokens 32 --profile --quiet | sed -n '/^kernel/,$p'
echo "== out of device memory (states for 100000 sequences x 8192 tokens)"
k3-run tiny-oom --checkpoint ckpt-tiny --device cuda --prompt-ids 1 --quiet; echo "rc=$?"
echo "== k3-small full-width slice (2 layers: KDA + dense, MLA + dense; vocab 163840)"
( time k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet ) 2>&1 | grep real
for b in 1 8; do
  rm -f sp.txt; for i in $(seq $b); do seq -s, $i $((i+31)) >> sp.txt; done
  k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --batch sp.txt --max-new-tokens 8 --quiet | grep -E "time to first|loaded"
done
echo "== k3-small slice bf16 vs the reference"
k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids 1,2,3,4 --max-new-tokens 3 --check --quiet | grep -E "step|check:"
k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 32) --max-new-tokens 8 --profile --quiet | sed -n '/^kernel/,$p'
echo "== peer: torch bf16 GEMV/GEMM (cuBLAS) on the slice's dense up-projection shape"
python3 - <<'PY'
import torch, time
for (t, k, n) in [(1, 7168, 67584), (8, 7168, 67584), (32, 7168, 67584), (1, 16384, 7168)]:
    x = torch.randn(t, k, device='cuda', dtype=torch.bfloat16)
    w = torch.randn(n, k, device='cuda', dtype=torch.bfloat16)
    for _ in range(3): y = x @ w.t()
    torch.cuda.synchronize(); s = time.perf_counter(); r = 50
    for _ in range(r): y = x @ w.t()
    torch.cuda.synchronize(); dt = (time.perf_counter() - s) / r
    print(f"torch x[{t},{k}] @ W[{n},{k}]^T: {dt*1e6:8.1f} us  {w.numel()*2/dt/1e9:7.0f} GB/s")
PY

#!/usr/bin/env bash
# Expert parallelism over every GPU of one host (R = the GPU count; run from the
# bench/make-bundle.sh bundle: bash .dev/ep-gpus.sh). Model: the k3-small
# full-width MoE slice (2 layers, KDA + gated MLA, 256 MXFP4 experts a layer,
# top 16, latent 3584, vocab 163840), bf16, with uniform and skewed routing
# (--router-skew 0.3: low expert ids hot). Prints: per routing, the
# single-GPU run (logits, TTFT, decode
# rate), the per-layer MoE latency at R = 1 over NCCL, and at R = GPUs balanced
# and home-only with the logits against the single GPU; the exchange bandwidth
# per message size (k3-ep-bench over R processes) next to NCCL's own
# all-to-all (torch.distributed, bench/nccl-alltoall.py); the slice against
# the reference executor on one GPU. NVLink multicast off.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee -a $OUT/log.txt) 2>&1
export PATH=$PWD/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 K3C_EP_TIMEOUT_S=120
R=$(nvidia-smi -L | wc -l)
echo "== $R GPUs"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== k3-tiny f32 (MXFP4 experts) on GPU 0 vs the reference executor"
CUDA_VISIBLE_DEVICES=0 timeout 60 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "step 3|check:"
echo "== checkpoints: k3-small MoE slice, uniform and skewed routing (same seed; ${SECONDS}s)"
( time k3-mkcheckpoint --config slice-moe.json -o /tmp/sm-uniform --seed 3 --quiet ) 2>&1 | grep -E "real|error"
# The skewed copy: the same bytes as k3-mkcheckpoint --router-skew 0.3 (ep.test checks that).
rm -rf /tmp/sm-skewed && cp -r /tmp/sm-uniform /tmp/sm-skewed && python3 skew-router.py /tmp/sm-skewed 0.3
rm -f b16.txt; for i in $(seq 16); do seq -s, $((i * 100)) $((i * 100 + 63)) >> b16.txt; done
cmp() { # cmp ONE.npy PREFIX LABEL: the ranks' logits (sequences split in order) vs one GPU
  python3 -c "
import numpy as n, sys
a = n.load('$1'); b = n.concatenate([n.load('$2.rank%d.npy' % r) for r in range($R)], axis=1)
e = abs(a.astype(n.float64) - b).max() / abs(a).max()
same_nan = bool((n.isnan(a) == n.isnan(b)).all() and (n.isinf(a) == n.isinf(b)).all())
print('$3: logits', b.shape, 'max rel', '%.3g' % e, 'tokens equal', bool((a.argmax(-1) == b.argmax(-1)).all()),
      'nan/inf positions equal', same_nan, 'PASS' if e < 1e-2 and same_nan else 'FAIL')"
}
table() { grep -E "^(rank|[0-9]+ )" | sed 's/^/    /'; }
for routing in uniform skewed; do
  ck=/tmp/sm-$routing
  echo "== $routing routing: one GPU, 16 prompts x 64 tokens, 8 new tokens"
  CUDA_VISIBLE_DEVICES=0 timeout 150 k3-run slice-moe --checkpoint $ck --device cuda --batch b16.txt --max-new-tokens 8 --quiet --dump-logits one-$routing.npy | grep -E "loaded|time to first|decode"
  if [ $routing = uniform ]; then
    echo "-- R = 1 over NCCL (MoE latency baseline; ${SECONDS}s)"
    CUDA_VISIBLE_DEVICES=0 timeout 150 k3-run slice-moe --checkpoint $ck --device cuda --batch b16.txt --max-new-tokens 8 --quiet --ep 1 | table
  fi
  if [ "$R" -gt 1 ]; then
    for bal in "" "--ep-no-balance"; do
      echo "-- R = $R ${bal:-balanced} (${SECONDS}s)"
      rm -f ep.npy.rank*.npy
      timeout 150 k3-run slice-moe --checkpoint $ck --device cuda --batch b16.txt --max-new-tokens 8 --quiet --ep $R $bal --dump-logits ep.npy | table
      cmp one-$routing.npy ep.npy "R=$R $routing ${bal:-balanced} vs one GPU"
    done
    if [ $routing = uniform ]; then
      echo "-- R = $R balanced without the NCCL warm-up (K3C_EP_WARMUP=0: the first layer connects the ranks; ${SECONDS}s)"
      K3C_EP_WARMUP=0 timeout 150 k3-run slice-moe --checkpoint $ck --device cuda --batch b16.txt --max-new-tokens 8 --quiet --ep $R | table
    fi
  fi
done
echo "== k3-ep-bench over $R processes (one per GPU; ${SECONDS}s)"
rm -f /tmp/k3c-bench-id
for r in $(seq 0 $((R - 1))); do CUDA_VISIBLE_DEVICES=$r K3C_EP_RANK=$r K3C_EP_WORLD=$R K3C_EP_ID_FILE=/tmp/k3c-bench-id timeout 200 k3-ep-bench --transport nccl --iters 20 > bench$r.txt 2>&1 & done; wait
sed -n '1,16p' bench0.txt
echo "== NCCL's own all-to-all (torch.distributed, $R processes)"
timeout 200 python3 nccl-alltoall.py --iters 20
left=$((560 - SECONDS)); [ $left -gt 240 ] && left=240
echo "== slice-moe bf16 vs the reference executor (one GPU, 4-token prompt, 2 steps; ${SECONDS}s, limit ${left}s)"
[ $left -gt 30 ] && CUDA_VISIBLE_DEVICES=0 timeout $left k3-run slice-moe --checkpoint /tmp/sm-uniform --device cuda --prompt-ids 1,2,3,4 --max-new-tokens 2 --check --quiet | grep -E "step|check:"

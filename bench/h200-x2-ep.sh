#!/usr/bin/env bash
# EP on 2 H200s (run from the bench/make-bundle.sh bundle on nvidia-h200-x2):
# k3-tiny f32 logits with R = 2, balanced and home-only, vs one GPU, and the
# NCCL exchange benchmark over two processes.
set -u
cd "$(dirname "$0")"; export PATH=$PWD/bin:$PATH NCCL_NVLS_ENABLE=0 K3C_EP_TIMEOUT_S=40
nvidia-smi --query-gpu=name --format=csv,noheader
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet --dump-logits one.npy > /dev/null
for bal in "" "--ep-no-balance"; do
  rm -f ep2.npy.rank*.npy
  timeout 150 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet --ep 2 $bal --dump-logits ep2.npy | grep -E "^(rank|0 |1 )|placement"; echo "rc=$?"
  python3 -c "
import numpy as n; a=n.load('one.npy'); b=n.concatenate([n.load('ep2.npy.rank0.npy'), n.load('ep2.npy.rank1.npy')], axis=1)
print('R=2 $bal vs one GPU: shape', b.shape, 'max rel', abs(a-b).max()/abs(a).max(), 'tokens equal', bool((a.argmax(-1)==b.argmax(-1)).all()))"
done
rm -f /tmp/k3c-bench-id
for r in 0 1; do CUDA_VISIBLE_DEVICES=$r K3C_EP_RANK=$r K3C_EP_WORLD=2 K3C_EP_ID_FILE=/tmp/k3c-bench-id timeout 120 k3-ep-bench --transport nccl --iters 10 > bench$r.txt 2>&1 & done; wait; cat bench0.txt | head -20

#!/usr/bin/env bash
# Expert parallelism on one H200 (run from the bench/make-bundle.sh bundle):
# R = 1 over NCCL end to end against the run without EP, the exchange/planner
# benchmark, a rank that never comes, and the R = 2 launcher on a machine with
# one GPU (rank 1 has no device: both ranks must end with an error).
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== expert parallelism, R = 1 over NCCL (k3-tiny f32, MXFP4 experts) vs the run without EP"
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet --dump-logits plain.npy > /dev/null
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet --ep 1 --dump-logits ep1.npy | tail -3
python3 -c "
import numpy as n
a = n.load('plain.npy')
for f in ['ep1']:
    b = n.load(f + '.npy'); e = abs(a - b).max() / abs(a).max()
    print(f, 'vs GPU run without EP: max rel', e, 'tokens equal', bool((a.argmax(-1) == b.argmax(-1)).all()), 'PASS' if e < 1e-5 else 'FAIL')
"
echo "== EP exchange bandwidth and planner time (NCCL, R = 1)"
k3-ep-bench --transport nccl --iters 20
echo "== a NCCL rank that never comes: the other rank ends with a clear error"
rm -f /tmp/k3c-ep-id
K3C_EP_RANK=1 K3C_EP_WORLD=2 K3C_EP_ID_FILE=/tmp/k3c-ep-id K3C_EP_TIMEOUT_S=10 timeout 100 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --ep 2 --quiet; echo "rc=$?"
echo "== k3-run --ep 2 --device cuda on one GPU: rank 1 finds no device"
K3C_EP_TIMEOUT_S=20 timeout 200 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --ep 2 --quiet; echo "rc=$?"

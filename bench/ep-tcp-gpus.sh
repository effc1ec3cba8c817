#!/usr/bin/env bash
# Expert parallelism over NCCL on two GPUs of one host with the launcher
# variables a multi-host launch uses (nvidia-h200-x2; bundle:
# bench/make-ep-tcp-bundle.sh): k3-tiny f32 (MXFP4 experts) without EP on GPU 0,
# then --ep 2 started as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT: NCCL's id over TCP from rank 0, the local rank picks
# the GPU), as Open MPI would (OMPI_COMM_WORLD_*), and by k3-run's own
# one-host launcher (id file); every rank's logits against the run without EP,
# balanced and home-only placement.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
echo "== machine"; nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
run() { timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --quiet "$@"; }
CUDA_VISIBLE_DEVICES=0 run --dump-logits plain.npy > /dev/null
echo "== torchrun variables, TCP rendezvous"
for bal in "" "--ep-no-balance"; do
  rm -f tcp.npy.rank*
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29531 run --ep 2 $bal --dump-logits tcp.npy > r1.txt 2>&1 &
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29531 run --ep 2 $bal --dump-logits tcp.npy 2>&1 | grep -E "rank|error" | head -4
  wait; grep -E "rank|error" r1.txt | head -3
  python3 ep_compare.py plain.npy tcp.npy.rank0.npy tcp.npy.rank1.npy "torchrun $bal"
done
echo "== Open MPI variables, TCP rendezvous"
rm -f mpi.npy.rank*
OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 run --ep 2 --dump-logits mpi.npy > r1.txt 2>&1 &
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 run --ep 2 --dump-logits mpi.npy > /dev/null 2>&1
wait; python3 ep_compare.py plain.npy mpi.npy.rank0.npy mpi.npy.rank1.npy "Open MPI"
echo "== k3-run's own launcher (id file)"
rm -f own.npy*; run --ep 2 --dump-logits own.npy > /dev/null 2>&1
python3 ep_compare.py plain.npy own.npy.rank0.npy own.npy.rank1.npy "k3-run --ep 2"
echo "== one prompt over two GPUs (rank 1 has none and serves its experts)"
rm -f one.npy*; timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --prompt-ids 5,6,7,8,9 --max-new-tokens 4 --quiet --ep 2 --dump-logits one.npy > /dev/null 2>&1; echo "rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --prompt-ids 5,6,7,8,9 --max-new-tokens 4 --quiet --dump-logits one-plain.npy > /dev/null
python3 ep_compare.py one-plain.npy one.npy.rank0.npy one.npy.rank1.npy "one prompt"

#!/usr/bin/env bash
# Builds the bundle bench/h200.sh runs on the GPU machine, in .dev/ (git-ignored):
# k3-run/k3-ref/k3-mkcheckpoint binaries, k3-tiny checkpoints and artifacts
# (sm_90a), and a full-width 2-layer k3-small slice artifact whose checkpoint
# the benchmark regenerates on the GPU machine from the same seed (the
# manifest's SHA-256 of config.json and the index proves it is the same).
# Carry .dev to the GPU machine and run: bash .dev/h200.sh
# The slice artifacts are compiled from their config alone (AOT: the
# checkpoints are made on the GPU machine and given with --checkpoint).
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-ref k3-mkcheckpoint k3-ep-bench
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o $D/ckpt-tiny --seed 11 --quiet
$B/k3-compile $D/ckpt-tiny -o $D/tiny-f32 --activation-dtype=f32 --max-tokens 64 --max-seqs 4 --max-context 256 --target=sm_90a --quiet
$B/k3-compile $D/ckpt-tiny -o $D/tiny-bf16 --max-tokens 512 --max-seqs 16 --max-context 1024 --target=sm_90a --quiet
# (a contiguous MLA cache: allocated whole at load, so the load itself runs out of
# device memory; a paged pool reserves address space and grows with the tokens)
$B/k3-compile $D/ckpt-tiny -o $D/tiny-oom --max-tokens 100000 --max-seqs 65536 --max-context 16384 --mla-page 0 --target=sm_90a --quiet
python3 bench/slice-config.py $D
$B/k3-compile $D/slice-moe.json -o $D/slice-moe --max-tokens 1024 --max-seqs 16 --max-context 128 --target=sm_90a --quiet
$B/k3-compile $D/slice.json -o $D/slice-bf16 --max-tokens 256 --max-seqs 8 --max-context 512 --target=sm_90a --quiet
rm -rf $D/*/ptx $D/*/model.fused.mlir
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
cp bench/h200.sh bench/h200-ep.sh bench/ep-gpus.sh bench/nccl-alltoall.py bench/skew-router.py $D/
du -sh $D

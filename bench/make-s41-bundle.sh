#!/usr/bin/env bash
# Session 41's bundle (.dev): bench/make-splitk-bundle.sh with #13's
# narrow-tile and GEMV-prologue variants (N0, N30: the 128 x 64 batched-decode
# tile of mla_in / mla_q_up without a wgmma group in flight, four or three
# stages; PRO: the batch-1 norms inside the GEMVs' blocks), plus dense k3-tiny
# with a 40000-token vocabulary (tiny-v40k: the argmax kernel's 16-byte loads
# over 32768 columns, then 7232 read one at a time) and, when .devg/slice
# exists, session 39's slice build as slice-OLD (the argmax before its 16-byte
# loads; otherwise the same kernels). Carry .dev; run: bash .dev/s41-h200.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SPLIT_VARIANTS="N0=K3C_WGMMA_NARROW_TILE=128,64,4,0 N30=K3C_WGMMA_NARROW_TILE=128,64,3,0 PRO=K3C_GEMV_PROLOGUE=1" \
  bash bench/make-splitk-bundle.sh
python3 -c "
import json; c = json.load(open('test/Runtime/Inputs/k3-tiny-dense.json')); c['vocab_size'] = 40000
json.dump(c, open('.dev/tiny-v40k.json', 'w'), indent=1)"
build/bin/k3-compile .dev/tiny-v40k.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet -o .dev/tiny-v40k
rm -rf .dev/tiny-v40k/ptx .dev/tiny-v40k/model.fused.mlir
[ -d .devg/slice ] && cp -r .devg/slice .dev/slice-OLD
cp bench/s41-h200.sh .dev/
du -sh .dev

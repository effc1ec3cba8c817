#!/usr/bin/env bash
# README command 1: installs, builds and runs the main job on a fresh machine:
# generate a k3-tiny checkpoint, compile it (whole-model k3 IR, verified),
# and generate tokens from it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
build=${K3C_BUILD_DIR:-build}
bin=$build/bin
work=${K3C_WORK_DIR:-$build/quickstart}
rm -rf "$work"
mkdir -p "$work"

echo "== 1. generate a seeded k3-tiny checkpoint (HF layout, MXFP4 experts)"
"$bin/k3-mkcheckpoint" --config models/configs/k3-tiny.json -o "$work/k3-tiny" --seed 0

echo "== 2. compile it: checkpoint checked by name/shape/dtype, whole-model k3 IR"
"$bin/k3-compile" "$work/k3-tiny" -o "$work/k3-tiny.mlir"
echo "   $(grep -c '= k3\.' "$work/k3-tiny.mlir") k3 ops in $work/k3-tiny.mlir"

echo "== 3. generate tokens (reference executor on the CPU)"
"$bin/k3-ref" "$work/k3-tiny" --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 16 \
  --dump-logits "$work/logits.npy"

echo "== full K3 (93 layers, 2.78T parameters) from the released config.json"
"$bin/k3-compile" models/configs/k3.json -o "$work/k3.mlir"

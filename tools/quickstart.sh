#!/usr/bin/env bash
# README command 1: installs, builds and runs the main job on a fresh machine:
# generate a k3-tiny checkpoint, compile it ahead of time (PTX for sm_90a plus
# the x86-64 host kernels), generate tokens with k3-run (on the GPU when one is
# present, otherwise on the CPU), and check an f32 build against the reference
# executor.
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

echo "== 2. compile it ahead of time: checkpoint checked, passes, kernels, artifact"
"$bin/k3-compile" "$work/k3-tiny" -o "$work/k3-tiny.k3c" --max-tokens 256 --max-seqs 4 \
  --max-context 1024 --report > "$work/fusion-report.txt"
echo "   fusion report: $work/fusion-report.txt"

echo "== 3. generate (GPU if present, else CPU): text in, streamed text out (a random model"
echo "   with a generated vocabulary: the text is noise), then token ids"
"$bin/k3-run" "$work/k3-tiny.k3c" --prompt "Write a haiku about compilers." --chat \
  --max-new-tokens 16 --quiet
"$bin/k3-run" "$work/k3-tiny.k3c" --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 16 \
  --dump-logits "$work/logits.npy"

echo "== 4. the same model with f32 activations, checked against the reference executor"
echo "   (per layer and per step, 1e-5 of the logits' scale; bf16 agreement is looser,"
echo "   see docs/runtime.md)"
"$bin/k3-compile" "$work/k3-tiny" -o "$work/k3-tiny-f32.k3c" --activation-dtype=f32 \
  --max-tokens 256 --max-seqs 4 --max-context 1024 --quiet
"$bin/k3-run" "$work/k3-tiny-f32.k3c" --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 16 --check \
  --quiet | grep -E "generated|check:"

echo "== full K3 (93 layers, 2.78T parameters) from the released config.json"
"$bin/k3-compile" models/configs/k3.json --emit=fused --report -o "$work/k3.fused.mlir" \
  > "$work/k3-fusion-report.txt"
tail -n 1 "$work/k3-fusion-report.txt"

#!/usr/bin/env bash
# The bundle for bench/s69-h200.sh (session 61), in .dev69: k3-run,
# k3-mkcheckpoint and k3-tiny with v 64, nope 64, latent 128
# (test/Runtime/Inputs/k3-tiny-dv64.json: its one-token decode takes the
# row-sliced MLA combine, since session 61 with its split weights first) for
# sm_90a: bf16 and f32 activations with the defaults (f32 keeps the online
# merge by default), f32 with the weights first (K3C_MLA_COMBINE_WEIGHTS=1);
# and dense k3-tiny (bf16, f32).
# Carry .dev69; run: bash .dev69/s69-h200.sh (~1 min).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev69}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dv64.json $D/
$B/k3-mkcheckpoint --config $D/k3-tiny-dv64.json -o /tmp/k3c-ckpt-dv64 --seed 5 --quiet
tiny64() { $B/k3-compile /tmp/k3c-ckpt-dv64 --target=sm_90a --max-tokens 1024 --max-seqs 128 --max-context 512 --quiet "$@"; }
tiny64 -o $D/dv64-bf16
tiny64 -o $D/dv64-f32 --activation-dtype=f32
K3C_MLA_COMBINE_WEIGHTS=1 tiny64 -o $D/dv64-f32-cw --activation-dtype=f32
bundle_tiny_dense
tiny_dense -o $D/tiny-dense
tiny_dense -o $D/tiny-dense-f32 --activation-dtype=f32
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s69-h200.sh $D/
du -sh $D

#!/usr/bin/env bash
# The bundle for bench/s69-h200.sh (session 61), in .dev69: k3-run,
# k3-mkcheckpoint and dense k3-tiny for sm_90a with the defaults (bf16 and
# f32 activations: since session 61 the one-token MLA combine forms its
# split weights first). Carry .dev69; run: bash .dev69/s69-h200.sh (~1 min).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev69}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-mkcheckpoint
bundle_tiny_dense
tiny_dense -o $D/tiny-dense
tiny_dense -o $D/tiny-dense-f32 --activation-dtype=f32
K3C_MLA_COMBINE_WEIGHTS=0 tiny_dense -o $D/tiny-dense-f32-om --activation-dtype=f32
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s69-h200.sh $D/
du -sh $D

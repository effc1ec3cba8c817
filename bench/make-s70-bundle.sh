#!/usr/bin/env bash
# The bundle for bench/s70-h200.sh (session 62), in .dev70: k3-run, k3-bench,
# k3-mkcheckpoint, mla_check.py, kbench_table.py;
#   dv64-bf16, dv64-f32, dv64-f32-cw  k3-tiny with v 64, nope 64, latent 128
#               (its one-token decode takes the row-sliced MLA combine): the
#               defaults in bf16 and f32 (f32 keeps the online merge), f32
#               with the split weights first (K3C_MLA_COMBINE_WEIGHTS=1)
#   slice-bf16  the full-width k3-small slice with today's defaults (session
#               61's: the one-token combine's weights first)
#   slice-old   session 59's defaults (K3C_FUSE_HEAD=0 K3C_EMBED_ROWS=0
#               K3C_MLA_ROUND_TOKENS=64 K3C_MLA_COMBINE_WEIGHTS=0)
#   slice-CM    a KDA layer's three decode convolutions in one launch
#               (K3C_CONV_DECODE_MERGE=1, session 62)
#   slice-GG    the KDA gate in the one-token GEMV's store (K3C_GEMV_MAP=1,
#               session 62)
#   slice-QR    the staged q_abs's rope columns spread over its column
#               blocks (K3C_MLA_QABS_ROPE_SPREAD=1, session 62)
# and dense k3-tiny (bf16, f32, and both with CM, GG and QR: S62) for the checks
# against the reference.
# Carry .dev70; run: bash .dev70/s70-h200.sh (~4 min on an H200).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev70}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dv64.json $D/
$B/k3-mkcheckpoint --config $D/k3-tiny-dv64.json -o /tmp/k3c-ckpt-dv64 --seed 5 --quiet
tiny64() { $B/k3-compile /tmp/k3c-ckpt-dv64 --target=sm_90a --max-tokens 1024 --max-seqs 128 --max-context 512 --quiet "$@"; }
tiny64 -o $D/dv64-bf16
tiny64 -o $D/dv64-f32 --activation-dtype=f32
K3C_MLA_COMBINE_WEIGHTS=1 tiny64 -o $D/dv64-f32-cw --activation-dtype=f32
bundle_slice_checkpoint
slice -o $D/slice-bf16
K3C_FUSE_HEAD=0 K3C_EMBED_ROWS=0 K3C_MLA_ROUND_TOKENS=64 K3C_MLA_COMBINE_WEIGHTS=0 slice -o $D/slice-old
K3C_CONV_DECODE_MERGE=1 slice -o $D/slice-CM
K3C_GEMV_MAP=1 slice -o $D/slice-GG
K3C_MLA_QABS_ROPE_SPREAD=1 slice -o $D/slice-QR
bundle_tiny_dense
tiny_dense -o $D/tiny-dense
tiny_dense -o $D/tiny-dense-f32 --activation-dtype=f32
K3C_CONV_DECODE_MERGE=1 K3C_GEMV_MAP=1 K3C_MLA_QABS_ROPE_SPREAD=1 tiny_dense -o $D/tiny-dense-S62
K3C_CONV_DECODE_MERGE=1 K3C_GEMV_MAP=1 tiny_dense -o $D/tiny-dense-f32-S62 --activation-dtype=f32
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s70-h200.sh bench/ncu_mix.py bench/mla_check.py bench/bench_common.py bench/kbench_table.py $D/
du -sh $D

#!/usr/bin/env bash
# The MLA decode bundle for the device call after session 44 (#15: the
# transposed warpgroup core), in .devm (BUNDLE_DIR; carried beside the s46
# bundle in .dev): make-mla-bundle.sh's builds (k3-tiny f32, dense, dv32,
# dv64; the full-width slice with 65536 tokens a step, 128 sequences, 33024
# positions, the paged cache) and three variants of the slice and of k3-tiny
# dv64:
#   WGT   K3C_MLA_DECODE_WGMMA=4: the transposed core, 96 heads as two
#         clustered blocks of 48 sharing multicast tiles (rounds of 2+ tokens)
#   WGT0  the same without the cluster (each block copies the whole tile)
#   WGT1  WGT for one-token rounds too (K3C_MLA_DECODE_WG_FROM=1)
# Carry .devm (and .dev); run: bash .devm/s47-h200.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUNDLE_DIR=.devm
VARIANTS="WGT=K3C_MLA_DECODE_WGMMA=4 WGT0=K3C_MLA_DECODE_WGMMA=4;K3C_MLA_DECODE_CLUSTER=0 WGT1=K3C_MLA_DECODE_WGMMA=4;K3C_MLA_DECODE_WG_FROM=1" \
  bash bench/make-mla-bundle.sh
cp bench/s47-h200.sh .devm/
du -sh .devm

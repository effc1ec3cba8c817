#!/usr/bin/env bash
# The bundle for bench/s53-h200.sh (#15, session 49: the wgmma descriptors as
# an i32 low word and a constant high word, and the transposed decode core's
# latent tiles moved off its scoring warpgroup), in .dev: make-mla-bundle.sh's
# builds with six variants,
#   D64   K3C_WGMMA_DESC_I64=1: the descriptors formed and stepped as i64 (the
#         same values: its logits must be the default's bit for bit)
#   W2    K3C_MLA_DECODE_WG0_TILES=2: warpgroup 0 accumulates 2 of the 8
#         latent tiles, warpgroup 1 six (the same sums: bit for bit)
#   W3    K3C_MLA_DECODE_WG0_TILES=3
#   SM    K3C_MLA_DECODE_STMATRIX=1: P^T written by transposed stmatrix (the
#         same values: bit for bit)
#   W2SM  W2 and SM
#   FA    K3C_MLA_FUSE_APPEND_STAGED=1: decode launches of 8..64 tokens append
#         in extra blocks of the staged q_abs launch (one launch fewer; the
#         same values: bit for bit; k3-tiny dv64's 8 and 12 sequences take it)
# (W2, W3 and W2SM for the slice only: k3-tiny dv64's latent 128 has two
# tiles.)
# Carry .dev; run: bash .dev/s53-h200.sh. (Ran in session 50, docs/perf.md; since then
# K3C_WGMMA_DESC_I64 is gone, SM and FA are the default, so D64, SM and FA build the
# default again.)
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="D64=K3C_WGMMA_DESC_I64=1 SM=K3C_MLA_DECODE_STMATRIX=1 FA=K3C_MLA_FUSE_APPEND_STAGED=1" FLAG_VARIANTS="W2=K3C_MLA_DECODE_WG0_TILES=2 W3=K3C_MLA_DECODE_WG0_TILES=3 W2SM=K3C_MLA_DECODE_WG0_TILES=2;K3C_MLA_DECODE_STMATRIX=1" bash bench/make-mla-bundle.sh
cp bench/s53-h200.sh .dev/
du -sh .dev

#!/usr/bin/env bash
# The MLA decode bundle for the device call after session 44 (#15: the
# transposed warpgroup core), in .devm (BUNDLE_DIR; carried beside the s46
# bundle in .dev): make-mla-bundle.sh's builds (k3-tiny f32, dense, dv32,
# dv64; the full-width slice with 65536 tokens a step, 128 sequences, 33024
# positions, the paged cache) and six variants of the slice and of k3-tiny
# dv64:
#   WGT   K3C_MLA_DECODE_WGMMA=4: the transposed core, 96 heads as two
#         clustered blocks of 48 sharing multicast tiles (rounds of 2+ tokens)
#   WGT0  the same without the cluster (each block copies the whole tile)
#   CC2   K3C_MLA_COMBINE_CLUSTER=2: the multi-token combine as clusters of 2
#         blocks a (head, 16 tokens), each merging and projecting half the
#         latent columns, summed through distributed shared memory (k3-tiny
#         dv64's latent 128 allows 2)
#   WGTC  WGT with K3C_MLA_COMBINE_CLUSTER=4 (the slice; k3-tiny: CL 1)
#   QP0   K3C_MLA_QABS_PAD=0: the wide q_abs's old sums layout (8-way bank
#         conflicts on its stores; the default's logits bit for bit)
#   WGT1  WGT for one-token rounds too (K3C_MLA_DECODE_WG_FROM=1: batch 1 on
#         66 clusters of two 48-head blocks instead of the mma.sync core)
# The k3-tiny f32 / dense builds the s47 script does not run are dropped
# (the carry limit: .dev and .devm together under 64 MiB).
# VARIANTS=... replaces the six (bench/make-s49-bundle.sh).
# Carry .devm (and .dev); run: bash .devm/s47-h200.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUNDLE_DIR=.devm
VARIANTS="${VARIANTS:-WGT=K3C_MLA_DECODE_WGMMA=4 WGT0=K3C_MLA_DECODE_WGMMA=4;K3C_MLA_DECODE_CLUSTER=0 CC2=K3C_MLA_COMBINE_CLUSTER=2 WGTC=K3C_MLA_DECODE_WGMMA=4;K3C_MLA_COMBINE_CLUSTER=4 WGT1=K3C_MLA_DECODE_WGMMA=4;K3C_MLA_DECODE_WG_FROM=1 QP0=K3C_MLA_QABS_PAD=0}" \
  bash bench/make-mla-bundle.sh
rm -rf .devm/tiny-f32 .devm/tiny-dense-bf16 .devm/tiny-dense-from2
cp bench/s47-h200.sh .devm/
du -sh .devm

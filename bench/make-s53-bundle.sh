#!/usr/bin/env bash
# The bundle for bench/s53-h200.sh (#15: the wgmma descriptors as an i32 low
# word and a constant high word, session 49, against the i64 form), in .dev:
# make-mla-bundle.sh's builds with one variant,
#   D64   K3C_WGMMA_DESC_I64=1: the descriptors formed and stepped as i64 (the
#         same values: its logits must be the default's bit for bit)
# Carry .dev; run: bash .dev/s53-h200.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="D64=K3C_WGMMA_DESC_I64=1" bash bench/make-mla-bundle.sh
cp bench/s53-h200.sh .dev/
du -sh .dev

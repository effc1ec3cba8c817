#!/usr/bin/env bash
# The bundle for bench/s54-h200.sh (#15, session 50: the MLA decode cores
# asking the L2 for cache tiles ahead of their copies, the bulk partial
# stores), in .dev:
# make-mla-bundle.sh's builds (the default: P^T by stmatrix and the staged
# append, session 50's defaults) with two variants,
#   PF2   K3C_MLA_DECODE_L2_PREFETCH=2: whole tiles two ahead of each copy
#         asked of the L2 (the same values: logits bit for bit)
#   PF4   K3C_MLA_DECODE_L2_PREFETCH=4
#   PB    K3C_MLA_PARTIAL_BULK=1: the transposed core's partials staged in
#         shared memory and written by one bulk copy (the same values)
# and v/slice-base, the slice built at 40850c2: before the unsplit warpgroup
# tiles took constant K bounds (6df9d89; the same K tiles in the same
# order), so every build's logits are compared with it bit for bit too (the
# 5000-token prompt's prefill runs those tiles).
# Carry .dev; run: bash .dev/s54-h200.sh. Run in session 51 (docs/perf.md,
# "Session 51"); K3C_MLA_DECODE_L2_PREFETCH was removed after it and the bulk
# partials became the default: build at 3102cd4 to reproduce PF2 / PF4.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-40850c2} VARIANTS="PF2=K3C_MLA_DECODE_L2_PREFETCH=2 PF4=K3C_MLA_DECODE_L2_PREFETCH=4 PB=K3C_MLA_PARTIAL_BULK=1" bash bench/make-mla-bundle.sh
cp bench/s54-h200.sh .dev/
du -sh .dev

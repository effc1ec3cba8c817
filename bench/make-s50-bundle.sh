#!/usr/bin/env bash
# The MLA decode bundle for the device call after session 47 (#15), in
# .devm (carried beside the s46 bundle in .dev). The default slice build
# takes q_abs of 8-token rounds on tensor cores (K3C_MLA_QABS_WIDE_MAX=7,
# session 47); the variants against it:
#   WM8   K3C_MLA_QABS_WIDE_MAX=8: the wide q_abs for 8-token rounds too (the
#         default until session 47)
#   WM5   K3C_MLA_QABS_WIDE_MAX=5: tensor cores from 6 tokens (the crossover
#         lies between 4 and 8 tokens)
#   CC2   K3C_MLA_COMBINE_CLUSTER=2: the multi-token combine as clusters of
#         2 blocks (4 % faster at batch 8 in session 47, within 2 % elsewhere)
# Then: rm -rf .devm/bin (the same tools as .dev/bin: the carry limit).
# Carry .dev and .devm; run: bash bench/s50-h200.sh (from the repository root).
set -euo pipefail
VARIANTS="WM8=K3C_MLA_QABS_WIDE_MAX=8 WM5=K3C_MLA_QABS_WIDE_MAX=5 CC2=K3C_MLA_COMBINE_CLUSTER=2" \
  exec bash "$(dirname "$0")/make-s47-bundle.sh"

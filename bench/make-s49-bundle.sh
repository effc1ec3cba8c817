#!/usr/bin/env bash
# The MLA decode bundle for the device call after session 46 (#15), in
# .devm (BUNDLE_DIR; carried beside the s46 bundle in .dev). The default
# slice build now takes the transposed decode core without a cluster
# (session 46: 78 against the seesaw's 94 us at batch 8, 8k on an H100);
# the variants against it:
#   SS    K3C_MLA_DECODE_WGMMA=2: the seesaw core (the default until then)
#   WGT   K3C_MLA_DECODE_CLUSTER=1: the transposed core's two 48-head blocks
#         as one cluster sharing multicast tiles
#   CC2   K3C_MLA_COMBINE_CLUSTER=2: the multi-token combine as clusters of
#         2 blocks a (head, 16 tokens) (90 against 94 us with the seesaw)
# Then: rm -rf .devm/bin (the same tools as .dev/bin: the carry limit).
# Carry .dev and .devm; run: bash bench/s49-h200.sh (from the repository root).
set -euo pipefail
VARIANTS="SS=K3C_MLA_DECODE_WGMMA=2 WGT=K3C_MLA_DECODE_CLUSTER=1 CC2=K3C_MLA_COMBINE_CLUSTER=2" \
  exec bash "$(dirname "$0")/make-s47-bundle.sh"

#!/usr/bin/env bash
# The bundle for bench/s60-h200.sh (#15, session 53: the transposed MLA
# decode core with both warpgroups scoring, K3C_MLA_DECODE_SPLIT_S=1), in
# .dev: make-mla-bundle.sh's builds (the default) with the slice variants
#   SPS    K3C_MLA_DECODE_SPLIT_S=1 (the same values as the default)
#   W1S    SPS with one-token rounds on the transposed core too
#          (K3C_MLA_DECODE_WG_FROM=1: two 48-head blocks x 66 splits at one
#          sequence, against the 16-head mma.sync core's 6 x 22, which reads
#          each tile six times; the row-sliced combine triggered early as
#          the mma.sync core triggers it; other sums: not bit-identical)
#   W1S33  W1S with 33 splits (half the partials, 66 blocks)
# (k3-tiny dv64's 4 heads take the seesaw core: only the slice runs the new
# forms.) Carry .dev; run: bash .dev/s60-h200.sh (~7 min).
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="SPS=K3C_MLA_DECODE_SPLIT_S=1 W1S=K3C_MLA_DECODE_WG_FROM=1;K3C_MLA_DECODE_SPLIT_S=1 W1S33=K3C_MLA_DECODE_WG_FROM=1;K3C_MLA_DECODE_SPLIT_S=1;K3C_MLA_DECODE_SPLITS=33" bash bench/make-mla-bundle.sh
rm -rf .dev/tiny-dv32-* .dev/v64
cp bench/s60-h200.sh .dev/
du -sh .dev

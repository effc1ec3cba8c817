#!/usr/bin/env bash
# The bundle for bench/s60-h200.sh (#15, session 53: the transposed MLA
# decode core with both warpgroups scoring, K3C_MLA_DECODE_SPLIT_S=1), in
# .dev: make-mla-bundle.sh's builds (the default) with the variant SPS (the
# slice and k3-tiny dv64; dv64's 4 heads take the seesaw core, so only the
# slice runs the new form). Carry .dev; run: bash .dev/s60-h200.sh (~6 min).
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="SPS=K3C_MLA_DECODE_SPLIT_S=1" bash bench/make-mla-bundle.sh
rm -rf .dev/tiny-dv32-* .dev/v64
cp bench/s60-h200.sh .dev/
du -sh .dev

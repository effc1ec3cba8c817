#!/usr/bin/env bash
# The device call for session 50's MLA decode change (bundle: bash
# bench/make-s54-bundle.sh; carry .dev; run: bash .dev/s54-h200.sh, ~6 min):
#  1. the k3-tiny dv32 / dv64 checks of the default (session 50's defaults:
#     P^T by stmatrix, the append in the staged q_abs launch, first timed
#     together here) and of PF2 / PF4 (K3C_MLA_DECODE_L2_PREFETCH) and PB
#     (K3C_MLA_PARTIAL_BULK), their
#     slice logits against the default's bit for bit, the default's decode
#     kernel against fp64;
#  2. mla_attn in the step graph at context 8192 for 1, 8 and 64 sequences
#     (one sequence: the one-token rounds' mma.sync core, which prefetches
#     too), then 8 and 64 again, every build.
# Only log.txt comes back (the per-build tables stay in /tmp/b: the device
# returns 8 files at most).
source "$(dirname "$0")/device-common.sh"
NO_NCU=1 NO_BENCH=1 DUMP_CHECK=1 bash mla-decode-h200.sh
for b in 1,8,64 8,64; do
  echo "=== round: $b sequences"
  BATCHES=$b CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | grep -E "^-- |^decode|mla_attn  "
done
find $OUT -type f ! -name log.txt -delete
echo "== done (${SECONDS}s)"

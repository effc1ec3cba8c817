#!/usr/bin/env bash
# The device call for session 50's MLA decode changes (bundle: bash
# bench/make-s54-bundle.sh; carry .dev; run: bash .dev/s54-h200.sh, then
# S54=2 bash .dev/s54-h200.sh at once, ~4-5 min each):
#  S54=1 (default) the checks: k3-tiny dv32 / dv64 for the default build
#     (session 50's defaults, P^T by stmatrix and the append in the staged
#     q_abs launch, first run together here) and the dv64 builds of PF2 / PF4
#     (K3C_MLA_DECODE_L2_PREFETCH) and PB (K3C_MLA_PARTIAL_BULK); every
#     variant's slice logits against the default's and slice-base's (the
#     build before the unsplit wgmma tiles' constant K bounds) bit for bit; the
#     default's decode kernel against fp64 attention;
#  S54=2 the timings: mla_attn in the step graph at context 8192 for 1, 8
#     and 64 sequences (one sequence: the one-token rounds' mma.sync core,
#     which prefetches too), then 8 and 64 again, every build.
# Only log.txt comes back (the per-build tables stay in /tmp/b: the device
# returns 8 files at most).
source "$(dirname "$0")/device-common.sh"
case "${S54:-1}" in
  1)
    NO_NCU=1 NO_BENCH=1 bash mla-decode-h200.sh
    VDIR=none NO_TINY=1 NO_CMP=1 NO_NCU=1 NO_BENCH=1 DUMP_CHECK=1 bash mla-decode-h200.sh ;;
  *)
    for b in 1,8,64 8,64; do
      echo "=== round: $b sequences"
      BATCHES=$b CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh | grep -E "^-- |^decode|mla_attn  "
    done ;;
esac
find $OUT -type f ! -name log.txt -delete
echo "== done (${SECONDS}s)"

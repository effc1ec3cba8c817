#!/usr/bin/env bash
# The device call for session 49's MLA decode changes (bundle: bash
# bench/make-s53-bundle.sh; carry .dev; run: bash .dev/s53-h200.sh, then
# S53=2 and S53=3 the same way):
#  1. MLA decode (mla-decode-h200.sh): the k3-tiny dv32 / dv64 checks, the
#     default's decode logits against D64's (K3C_WGMMA_DESC_I64=1: the same
#     descriptors), W2's / W3's (K3C_MLA_DECODE_WG0_TILES: the same sums by
#     the other warpgroup), SM's (K3C_MLA_DECODE_STMATRIX: the same P^T by
#     stmatrix), W2SM's and FA's (K3C_MLA_FUSE_APPEND_STAGED: the append in
#     the staged q_abs launch), each bit for bit, the default's decode kernel
#     against fp64, and mla_attn in the step graph at context 8192 for 1, 8 and 64
#     sequences, then 8 at 32768;
#  2. the MLA flash prefill (mla-prefill-h200.sh): its checks and k3-bench
#     at 2048 / 8192 tokens for every build, beside torch SDPA.
# Three calls of ~4-6 min (the machine idles out 30 s after a call):
# S53=1 (the default) the checks (k3-tiny, every build's logits against the
# default's, the default's decode kernel against fp64), S53=2 the decode
# timings (8k: 1 / 8 / 64 sequences; 32k: 8), S53=3 the flash prefill.
source "$(dirname "$0")/device-common.sh"
case "${S53:-1}" in
  1)
    NO_NCU=1 NO_BENCH=1 bash mla-decode-h200.sh
    VDIR=none NO_TINY=1 NO_CMP=1 NO_NCU=1 NO_BENCH=1 DUMP_CHECK=1 bash mla-decode-h200.sh ;;
  2)
    BATCHES=1,8,64 CTX=8192 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh
    BATCHES=8 CTX=32768 NO_TINY=1 NO_CMP=1 NO_NCU=1 bash mla-decode-h200.sh ;;
  *)
    bash mla-prefill-h200.sh ;;
esac
echo "== done (${SECONDS}s)"

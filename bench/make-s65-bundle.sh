#!/usr/bin/env bash
# The bundle for bench/s65-h200.sh (session 58; it carries session 57's s64
# rows), in .dev65: k3-run, k3-bench, k3-mkcheckpoint; the full-width
# k3-small slice (slice.json, seed 3 on the
# device) for sm_90a at 8192 tokens a step, 128 sequences, 33024 positions:
#   slice-bf16  the defaults
#   slice-FH    K3C_FUSE_HEAD=1: the head's AttnRes, last_tokens and RMSNorm
#               in one launch, a block per sequence mixing only its last row;
#               and K3C_EMBED_ROWS=1: the embedding a block a token, 16-byte
#               copies (both built in session 57, neither yet on a GPU)
#   slice-TR    K3C_MLA_COMBINE_TRIM=1, its merge loop bounded by P with
#               rounds past the live splits skipped by a branch (8 / 16 bytes
#               of spills against 32 / 32 for the Pm-bounded loop measured in
#               s63)
#   slice-R128  K3C_MLA_ROUND_TOKENS=128 (session 58): batched decode of up
#               to 128 sequences in one MLA round (q_abs, core, combine)
#               instead of two, the append inside the staged q_abs launch
#   slice-C2/C4 K3C_WGMMA_CLUSTER=2 / 4 (session 58): the batched-decode
#               TMA warpgroup tiles as clusters of 2 / 4 adjacent column
#               tiles sharing the x tile by multicast
#   slice-C2P   C2 and the prefill tile as clusters of 2 too
#               (K3C_WGMMA_CLUSTER_PREFILL=2)
#   slice-CT0   the convolutions' taps a load a tap (K3C_CONV_TAP_VEC=0),
#               the default before session 59's 16-byte tap loads
#   slice-CG3   K3C_CONV_DECODE_GROUPS=3: a decode thread's one-token channel
#               groups three at a time (measured no faster while the scalar
#               tap loads bound the kernel)
#   slice-ALL   C2, R128, FH (with EMBED_ROWS) and CG3 together: the step
#               a switch of every candidate default at once would give
# and dense k3-tiny with FH (bf16 and f32), R128 and C2P, for the checks
# against the reference executor.
# Carry .dev65; run: bash .dev65/s65-h200.sh (~8 min; QUICK=1 or 2 shorter).
export BUNDLE_DIR=${BUNDLE_DIR:-.dev65}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
bundle_slice_checkpoint
slice -o $D/slice-bf16
K3C_FUSE_HEAD=1 K3C_EMBED_ROWS=1 slice -o $D/slice-FH
K3C_MLA_COMBINE_TRIM=1 slice -o $D/slice-TR
K3C_MLA_ROUND_TOKENS=128 slice -o $D/slice-R128
K3C_WGMMA_CLUSTER=2 slice -o $D/slice-C2
K3C_WGMMA_CLUSTER=4 slice -o $D/slice-C4
K3C_WGMMA_CLUSTER=2 K3C_WGMMA_CLUSTER_PREFILL=2 slice -o $D/slice-C2P
K3C_CONV_TAP_VEC=0 slice -o $D/slice-CT0
K3C_CONV_DECODE_GROUPS=3 slice -o $D/slice-CG3
K3C_WGMMA_CLUSTER=2 K3C_MLA_ROUND_TOKENS=128 K3C_FUSE_HEAD=1 K3C_EMBED_ROWS=1 K3C_CONV_DECODE_GROUPS=3 \
  slice -o $D/slice-ALL
bundle_tiny_dense
K3C_FUSE_HEAD=1 K3C_EMBED_ROWS=1 tiny_dense -o $D/tiny-dense-FH
K3C_FUSE_HEAD=1 K3C_EMBED_ROWS=1 tiny_dense -o $D/tiny-dense-FH-f32 --activation-dtype=f32
K3C_MLA_ROUND_TOKENS=128 tiny_dense -o $D/tiny-dense-R128
K3C_WGMMA_CLUSTER=2 K3C_WGMMA_CLUSTER_PREFILL=2 tiny_dense -o $D/tiny-dense-C2
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s65-h200.sh bench/mla_check.py bench/bench_common.py bench/kbench_table.py $D/
du -sh $D

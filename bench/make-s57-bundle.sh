#!/usr/bin/env bash
# The bundle for bench/s57-h200.sh (#15, session 51: the tensor-core MLA
# combine with its head's W_UV staged in shared memory before its grid
# wait; the staged q_abs with its W_UK slice copied before its wait), in .dev: make-mla-bundle.sh's builds (the default: session 51's)
# with these variants,
#   SW16  K3C_MLA_COMBINE_STAGE_W=16: rounds of 8..16 tokens (one block a
#         head: 96 blocks on the slice) stage W_UV (the same values)
#   QEW   K3C_MLA_QABS_EARLY_W=1: the staged q_abs tiles copy their W_UK
#         slice before their grid wait (the same values)
#   ET    K3C_MLA_DECODE_EARLY_TILES=1 (session 52): the transposed core
#         issues its first two cache tiles before its grid wait where they
#         hold only positions cached before the round (the one-token
#         mma.sync core its first), the q_abs launches triggering them
#         early (the same values)
#   ALL   SW16 + QEW + ET
# (K3C_MLA_DECODE_PV_OVERLAP=1 is left out: ptxas serializes its wgmma,
# C7520.)
# (SW16 and ALL: the core also triggers the combine right after its
# wait since session 52, K3C_MLA_DECODE_EARLY_NEXT's default with a staged
# W_UV, so the combine's W_UV copies run beside the core's blocks.)
# (SW64, every multi-token round, dropped in session 52 to keep the call
# under 10 minutes; k3-tiny dv32 dropped: its combine is not the
# tensor-core one); and ge
# (below).
# Run in session 52 (docs/perf.md "Session 52"); since then SW16's, QEW's and
# ET's forms are the default, so these variants equal the default build: to
# repeat that A/B, build the default with K3C_MLA_DECODE_EARLY_TILES=0
# K3C_MLA_QABS_EARLY_W=0 K3C_MLA_COMBINE_STAGE_W=0 (BASE=... or a variant).
# Carry .dev; run: bash .dev/s57-h200.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANTS="SW16=K3C_MLA_COMBINE_STAGE_W=16 QEW=K3C_MLA_QABS_EARLY_W=1 ET=K3C_MLA_DECODE_EARLY_TILES=1 ALL=K3C_MLA_COMBINE_STAGE_W=16;K3C_MLA_QABS_EARLY_W=1;K3C_MLA_DECODE_EARLY_TILES=1" bash bench/make-mla-bundle.sh
rm -rf .dev/tiny-dv32-*
# ge: the slice with K3C_GEMV_EARLY=1 (#13: the one-token GEMVs after a norm
# load their first K step's weights before their grid wait, the norm
# triggering them early; for mla_q_up's K = 1536 all of a block's weights;
# bit-identical), timed at batch 1 in s57's #13 part (outside v/: no MLA A/B).
K3C_GEMV_EARLY=1 build/bin/k3-compile /tmp/slice --max-tokens 65536 --max-seqs 128 --max-context 33024 \
  --target=sm_90a --quiet -o .dev/ge
rm -rf .dev/ge/ptx .dev/ge/model.fused.mlir
cp bench/s57-h200.sh .dev/
du -sh .dev

#!/usr/bin/env bash
# Session 39's prepared device calls (no GPU was lent in session 39): the MLA
# warpgroup core's cache tiles by TMA (K3C_MLA_DECODE_TMA=1) checked and
# timed against the cp.async default, contiguous and paged (#15); then every
# launch of a batched decode step under Nsight Compute with the TMA GEMM
# default (#13's ratio, prepared in session 38).
# Bundle (here): VARIANTS="TMA=K3C_MLA_DECODE_TMA=1" FLAG_VARIANTS="P64=--mla-page=64
#   TP64=--mla-page=64;K3C_MLA_DECODE_TMA=1" bash bench/make-mla-bundle.sh
#   cp bench/s39-h200.sh bench/ncu-step-h200.sh bench/decode-ab.sh .dev/
#   mv .dev .devm; mkdir .devm/vp; mv .devm/v/slice-*P64 .devm/vp/ (the paged
#   builds, checked in PART=2); plus .devm/v/slice-TMA1: the slice with
#   K3C_MLA_DECODE_TMA=1 K3C_MLA_DECODE_WG_FROM=1 (one-token rounds on the
#   warpgroup core too: two 64-head groups x 66 splits at batch 1) and
#   .devm/v/slice-TMA1S32, the same with K3C_MLA_DECODE_SPLITS=32 (half the
#   blocks, half the partials), both with --mla-page 0 like the bundle's
# and BUNDLE_DIR=.devg SPLIT_VARIANTS="N0=K3C_WGMMA_NARROW_TILE=128,64,4,0
#   N30=K3C_WGMMA_NARROW_TILE=128,64,3,0" bash bench/make-splitk-bundle.sh
# and BUNDLE_DIR=.devk2 VARIANTS="BV64=K3C_KDA_BV=64 BV128=K3C_KDA_BV=128
#   BX=K3C_KDA_BF16X3=1 BX64=K3C_KDA_BF16X3=1;K3C_KDA_BV=64" TINY=""
#   KL="BV64 BV128 BX BX64" K128="BV64 BV128 BX BX64" bash bench/make-kda-bundle.sh;
#   cp bench/s39-h200.sh .devk2/
# Carry .devm (PARTs 1, 2, 5), .devm and .devg (PART 3), .devk2 alone (PARTs
# 4 and 6: 52 MB; run them as bash .devk2/s39-h200.sh); run: PART=1 bash
# .devm/s39-h200.sh, then the others (each < 600 s).
#  PART=1: k3-tiny dv32 / dv64 against the reference (dv64 with TMA too: its
#          rounds of 4+ tokens take the warpgroup core), TMA's and TMA1's
#          decode logits against the default's (a 16-token prompt, a
#          5000-token prompt, 8 prompts of 40-1200 tokens: TMA must be
#          bit-identical), each build's decode kernel against fp64 attention
#          (context 5000; 4 sequences), and `mla_attn` in the step graph at
#          context 8192, batch 1 and 8.
#  PART=2: the same for the paged builds P64 and TP64 (batch 8; both must be
#          bit-identical to the default), `mla_attn` at context 32768 (batch
#          1, 2), the decode step and `mla_attn` at 8 / 64 / 128 sequences of
#          64 tokens, two rounds alternating (decode-ab.sh).
#  PART=5: ncu-step-h200.sh (every launch of a decode step at 128 sequences).
#  PART=7 (.devm and .devg): #13's batch-1 GEMVs behind norms with the norm in
#          the GEMV's blocks (.devg/p/slice-PRO, K3C_GEMV_PROLOGUE=1, built with
#          --mla-page 0 like the bundle's slice) against the default, two rounds.
#  PART=3: #13's narrow batched-decode tile (mla_in, mla_q_up from 33 tokens:
#          128 x 64, four stages, a wgmma group in flight, so two stages of
#          8 KB of weights ahead a block, two blocks an SM: ~32 KB in
#          flight an SM, which at ~1.5 us of latency is ~21 GB/s an SM, the
#          2.4 TB/s `mla_in` streams at 128 tokens; and mla_q_up's 288 tiles
#          take 1.09 waves of 264 slots) against N0 (no group in flight:
#          three stages ahead) and N30 (three stages, none in flight: two
#          ahead, three blocks an SM, 396 slots): dense k3-tiny N0 / N30
#          against the reference, the slice's logits against the default
#          (bit-identical expected), the step and the two kernels at 33 / 64
#          / 128 sequences, two rounds; then Nsight Compute's full page of
#          `lm_head` at 128 tokens (the wide tile at 84 % of copy).
#  PART=4: #14's KDA recurrence with 64 or 128 value rows a block
#          (K3C_KDA_BV, 32 by default): a chunk's W^, Qd and Kr (24 KB of
#          fp32) are read by every block of a head, so 384 blocks re-read
#          ~10 MB from L2 a chunk step at 8192 tokens (3.5 us a step); BV64
#          halves that (192 blocks of 8 warps, 128 registers, the same sums:
#          bit-identical expected), BV128 quarters it (96 blocks, no key
#          split: other sums, checked against fp64). kda-quick-h200.sh: the
#          k3-tiny checks (8 heads of 128 with each variant too), the slice
#          against the reference and fp64, k3-bench prefill 2048 / 8192 and
#          decode, the Kimi Linear slice with each variant.
#  PART=6: the same for BX (K3C_KDA_BF16X3=1: the recurrence's products as
#          bf16 hi/lo MMAs, half the MMAs of 3xTF32: 2.79 against 2.96 ms
#          in session 16, o against fp64 2.0e-3 on the slice, 4.8e-3 on Kimi
#          Linear) and BX64 (with 64 value rows a block).
# What decides: TMA's `mla_attn` at batch 8, context 8192 against the
# default's (90 us in session 35; #15's bound ~22 us) with bit-identical
# logits; if it wins, K3C_MLA_DECODE_TMA's default becomes 1.
source "$(dirname "$0")/device-common.sh"
machine
PART=${PART:-1}
if [ "$PART" = 1 ]; then
  DUMP_CHECK=1 NO_NCU=1 CTX=8192 BATCHES=1,8 VDIR=v bash mla-decode-h200.sh
fi
if [ "$PART" = 2 ]; then
  NO_TINY=1 DUMP_CHECK=1 NO_NCU=1 CTX=8192 BATCHES=8 VDIR=vp bash mla-decode-h200.sh
  NO_TINY=1 NO_CMP=1 NO_NCU=1 CTX=32768 BATCHES=1,2 VDIR=v bash mla-decode-h200.sh
  DECODE=8,64,128 ROWS='mla_attn' ROUNDS=2 bash decode-ab.sh
fi
if [ "$PART" = 7 ]; then
  # #13 at batch 1: the norm computed in the GEMV's blocks (K3C_GEMV_PROLOGUE=1,
  # measured slower in session 7, before programmatic dependent launch)
  # against the norm's own launch: the one-token GEMVs behind norms, graph-timed.
  [ -d /tmp/slice ] || k3-mkcheckpoint --config ../.devg/slice.json -o /tmp/slice --seed 3 --quiet
  k3-run ../.devg/slice --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/ref.npy > /dev/null
  k3-run ../.devg/p/slice-PRO --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n; a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('PRO logits vs the default: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
  for round in 1 2; do
    kbench def-$round ../.devg/slice /tmp/slice 'mla_in|kda_out|mla_q_up|mla_out|TOTAL' --prefill none --decode 1,8
    kbench pro-$round ../.devg/p/slice-PRO /tmp/slice 'mla_in|kda_out|mla_q_up|mla_out|TOTAL' --prefill none --decode 1,8
  done
fi
if [ "$PART" = 5 ]; then
  bash ncu-step-h200.sh 2>&1 | head -45
fi
if [ "$PART" = 3 ]; then
  TINY="N0 N30" ROUNDS=2 DECODE=33,64,128 ROWS='mla_in|mla_q_up|TOTAL,graph' bash ../.devg/splitk-h200.sh
  if [ $SECONDS -lt 380 ] && which ncu > /dev/null; then
    echo "== ncu --set full: lm_head at 128 tokens (the wide tile)"
    cd ../.devg
    timeout 180 ncu --clock-control none --set full -k regex:lm_head --launch-skip 1 --launch-count 1 -f -o /tmp/lmfull \
      k3-bench slice --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 128 --steps 1 > /tmp/lmfull.txt 2>&1
    ncu -i /tmp/lmfull.ncu-rep --page details --print-details all > $OUT/ncu-lmhead.txt 2>&1
    grep -E "^    (Duration|Registers Per Thread|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|No Eligible)" $OUT/ncu-lmhead.txt | head -12
  fi
fi
if [ "$PART" = 4 ]; then
  ONLY="BV64|BV128" VAR_FP64="BV64 BV128" bash ../.devk2/kda-quick-h200.sh
fi
if [ "$PART" = 6 ]; then
  ONLY="BX|BX64" VAR_FP64="BX BX64" bash ../.devk2/kda-quick-h200.sh
fi
echo "== s39 part $PART done (${SECONDS}s)"

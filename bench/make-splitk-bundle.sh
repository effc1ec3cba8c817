#!/usr/bin/env bash
# Builds the bundle bench/splitk-h200.sh runs on the GPU machine, in .dev/:
# k3-run, k3-bench, k3-mkcheckpoint; dense k3-tiny with split-K on every
# linear and projection set deep enough (K3C_SPLITK_MIN_K=1,
# K3C_SPLITK_SETS=2 unless a variant sets it; capacity 128 sequences) and the
# full-width 2-layer k3-small slice (bench/slice-config.py), both compiled
# from their configs as by default and once per variant of
#   SPLIT_VARIANTS="NAME=VAR=VALUE[;VAR=VALUE...] ..."
# (e.g. W4=K3C_SPLITK_WAYS=4;K3C_SPLITK_TILE=128,256,4,1) as tdense-NAME and
# slice-NAME; and once per FLAG_VARIANTS="NAME=FLAG[;FLAG...] ..." with
# those k3-compile options (P64=--mla-page=64: the paged MLA cache, whose
# logits must equal the default build's bit for bit). Carry .dev; run: bash .dev/splitk-h200.sh (or, for the TMA
# A/B with SPLIT_VARIANTS="T1=K3C_WGMMA_TMA=1 T2=K3C_WGMMA_TMA=2",
# bash .dev/tma-h200.sh).
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp test/Runtime/Inputs/k3-tiny-dense.json $D/
python3 bench/slice-config.py $D slice
tdense() { K3C_SPLITK_MIN_K=1 K3C_SPLITK_SETS=${K3C_SPLITK_SETS:-2} $B/k3-compile $D/k3-tiny-dense.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet "$@"; }
tdense -o $D/tdense
# The f32 build of the same model (the exact path: 1e-5 against the reference).
tdense -o $D/tdense-f32 --activation-dtype=f32
slice -o $D/slice
bundle_variants "${SPLIT_VARIANTS:-}" tdense $D/tdense
bundle_variants "${SPLIT_VARIANTS:-}" slice $D/slice
bundle_flag_variants "${FLAG_VARIANTS:-}" tdense $D/tdense
bundle_flag_variants "${FLAG_VARIANTS:-}" slice $D/slice
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/splitk-h200.sh bench/tma-h200.sh bench/bench_common.py $D/
cp test/Runtime/Inputs/lm-head-rows.py test/Runtime/Inputs/safetensors_shard.py $D/
du -sh $D

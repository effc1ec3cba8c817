#!/usr/bin/env bash
# The bundle for bench/s51-h200.sh (the pairwise prep's phase B on tensor
# cores, kdaPairsMma, and the prep's padded rows), in .devp (BUNDLE_DIR;
# git-ignored): k3-run, k3-mkcheckpoint; the softplus-gate k3-tiny
# (pairwise path, C = 16) bf16 by default (the exact loop) and with the MMA
# form (sp-PM: K3C_KDA_PAIR_MMA=1, rows padded by 4); the Kimi Linear slice
# (32 heads of 128, softplus gate) the same two ways; the full-width
# k3-small slice (96 heads, factorized path, phase B on tensor cores) with
# the prep's rows padded by 1 (the default) and by 4 (slice-PAD4:
# K3C_KDA_PREP_PAD=4); MoE k3-tiny's f32 build with its exp in fp64 (the
# default since session 48) and with the ex2.approx form (tiny-f32-EX2:
# K3C_F32_EXP=ex2), for the f32 probe's failing prompt. fla from .dev/peers/fla or PEER_FLA=DIR. Carry .devp;
# run: bash .devp/s51-h200.sh.
export BUNDLE_DIR=${BUNDLE_DIR:-.devp}
fla_from=${PEER_FLA:-.dev/peers/fla}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-mkcheckpoint k3-ref
cp test/Runtime/Inputs/k3-tiny-softplus.json models/configs/k3-tiny.json $D/
python3 bench/slice-config.py $D slice slice-kl
sp() { $B/k3-compile $D/k3-tiny-softplus.json --target=sm_90a --max-tokens 512 --max-seqs 16 --max-context 1024 --quiet "$@"; }
kl() { $B/k3-compile $D/slice-kl.json --target=sm_90a --max-tokens 8192 --max-seqs 16 --max-context 8448 --quiet "$@"; }
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 16 --max-context 8448 --quiet "$@"; }
tf32() { $B/k3-compile $D/k3-tiny.json --target=sm_90a --activation-dtype=f32 --max-tokens 512 --max-seqs 8 --max-context 1024 --quiet "$@"; }
echo "compiling 8 artifacts"
sp -o $D/sp-bf16
K3C_KDA_PAIR_MMA=1 sp -o $D/sp-PM

kl -o $D/kl
K3C_KDA_PAIR_MMA=1 kl -o $D/kl-PM
slice -o $D/slice
K3C_KDA_PREP_PAD=4 slice -o $D/slice-PAD4
tf32 -o $D/tiny-f32
K3C_F32_EXP=ex2 tf32 -o $D/tiny-f32-EX2
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s51-h200.sh bench/f32-probe.sh bench/kda_peer.py bench/kda_check.py bench/bench_common.py $D/
PEER_FLA=$fla_from bundle_fla
du -sh $D

#!/usr/bin/env bash
# Builds the bundle bench/kda-h200.sh runs on the GPU machine, in .dev/
# (git-ignored; .dev/peers, where the fla checkout lives, is kept):
# k3-run, k3-bench, k3-mkcheckpoint; k3-tiny f32, dense k3-tiny bf16 and the
# softplus-gate (pairwise) k3-tiny in both builds; the full-width 2-layer
# k3-small slice (96 KDA heads of 128) for sm_90a with capacity 32768 tokens
# and 128 sequences; the 2-layer Kimi Linear slice (32 heads, the pairwise
# path) the same way. The fla checkout goes to .dev/peers/fla (see
# docs/perf.md). Variants (VARIANTS, below) go to .dev/v (slice-NAME, and
# tiny-dense-NAME, sp-NAME: k3-tiny bf16). Carry .dev; run: bash
# .dev/kda-h200.sh (everything, with fla), .dev/kda-quick-h200.sh (the
# three-minute A/B of the variants), .dev/kda-decode-h200.sh (the decode
# A/B with fla's decode) or .dev/ncu-kda-h200.sh (the prefill under Nsight
# Compute)
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp models/configs/k3-tiny.json test/Runtime/Inputs/k3-tiny-dense.json test/Runtime/Inputs/k3-tiny-softplus.json \
   test/Runtime/Inputs/k3-tiny-kda128.json $D/
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o /tmp/k3c-ckpt-tiny --seed 11 --quiet
$B/k3-mkcheckpoint --config $D/k3-tiny-dense.json -o /tmp/k3c-ckpt-tiny-dense --seed 11 --quiet
$B/k3-mkcheckpoint --config $D/k3-tiny-softplus.json -o /tmp/k3c-ckpt-tiny-sp --seed 5 --quiet
tiny() { $B/k3-compile "$@" --target=sm_90a --quiet 2> /dev/null; }
tiny /tmp/k3c-ckpt-tiny -o $D/tiny-f32 --activation-dtype=f32 --max-tokens 64 --max-seqs 4 --max-context 256
tiny /tmp/k3c-ckpt-tiny-dense -o $D/tiny-dense-bf16 --max-tokens 512 --max-seqs 16 --max-context 1024
tiny /tmp/k3c-ckpt-tiny-sp -o $D/sp-bf16 --max-tokens 512 --max-seqs 16 --max-context 1024
# k3-tiny with 8 KDA heads of 128 (1024 channels: the staged prefill
# convolution and the norm in its store run, which k3-tiny's 128 channels
# do not): bf16 by default, with the register-form convolution and with
# split norms (kda-quick-h200.sh: each against the reference, and bit for
# bit against each other).
$B/k3-mkcheckpoint --config $D/k3-tiny-kda128.json -o /tmp/k3c-ckpt-kda128 --seed 7 --quiet
tiny /tmp/k3c-ckpt-kda128 -o $D/k128-bf16 --max-tokens 512 --max-seqs 16 --max-context 1024
K3C_CONV_STAGE=0 tiny /tmp/k3c-ckpt-kda128 -o $D/k128-reg --max-tokens 512 --max-seqs 16 --max-context 1024
tiny /tmp/k3c-ckpt-kda128 -o $D/k128-sn --kda-split-norms --max-tokens 512 --max-seqs 16 --max-context 1024
# ... and for batches of up to 64 sequences (kda-decode-h200.sh: decode
# launches of 17-64 tokens, the warpgroup tiles and the staged recurrence)
tiny /tmp/k3c-ckpt-tiny-dense -o $D/tiny-dense-b64-bf16 --max-tokens 512 --max-seqs 64 --max-context 1024
tiny /tmp/k3c-ckpt-tiny-sp -o $D/sp-f32 --activation-dtype=f32 --max-tokens 512 --max-seqs 16 --max-context 1024
python3 bench/slice-config.py $D slice
[ -d /tmp/slice ] || $B/k3-mkcheckpoint --config $D/slice.json -o /tmp/slice --seed 3 --quiet
slice() { $B/k3-compile /tmp/slice --max-tokens 32768 --max-seqs 128 --max-context 33024 --target=sm_90a --quiet "$@"; }
slice -o $D/slice-bf16
# The Kimi Linear slice (32 KDA heads, softplus gate: the pairwise path).
python3 bench/slice-config.py $D slice-kl
[ -d /tmp/slice-kl ] || $B/k3-mkcheckpoint --config $D/slice-kl.json -o /tmp/slice-kl --seed 3 --quiet
$B/k3-compile /tmp/slice-kl --max-tokens 32768 --max-seqs 128 --max-context 33024 --target=sm_90a --quiet -o $D/slice-kl-bf16 2> /dev/null
# Variants: VARIANTS="NAME=VAR=VALUE[;VAR=VALUE...] ..." (kda-h200.sh times
# each one's decode), e.g. VARIANTS="LB5=K3C_LAUNCH_BOUNDS=kda_tokens=5".
mkdir -p $D/v
bundle_variants "${VARIANTS:-}" slice $D/v/slice
# ... and the dense and softplus-gate k3-tiny bf16 builds (the model checks
# of kda-quick-h200.sh) of the variants named in TINY (space-separated;
# default all: leave out those bit-identical by construction to keep the
# bundle under the 64 MiB carry); the Kimi Linear slice's builds (v/kl-NAME)
# of those named in KL (default none); the softplus k3-tiny f32 builds
# (v/sp-f32-NAME, the exact path) of those named in F32 (default none).
tinyd() { tiny /tmp/k3c-ckpt-tiny-dense --max-tokens 512 --max-seqs 16 --max-context 1024 "$@"; }
tinysp() { tiny /tmp/k3c-ckpt-tiny-sp --max-tokens 512 --max-seqs 16 --max-context 1024 "$@"; }
tinyList=""
for v in ${VARIANTS:-}; do
  [ -z "${TINY+x}" ] || [[ " $TINY " == *" ${v%%=*} "* ]] && tinyList="$tinyList $v"
done
klList=""
for v in ${VARIANTS:-}; do
  [[ " ${KL:-} " == *" ${v%%=*} "* ]] && klList="$klList $v"
done
f32List=""
for v in ${VARIANTS:-}; do
  [[ " ${F32:-} " == *" ${v%%=*} "* ]] && f32List="$f32List $v"
done
tinyspf32() { tiny /tmp/k3c-ckpt-tiny-sp --activation-dtype=f32 --max-tokens 512 --max-seqs 16 --max-context 1024 "$@"; }
bundle_variants "$f32List" tinyspf32 $D/v/sp-f32
slicekl() { $B/k3-compile /tmp/slice-kl --max-tokens 32768 --max-seqs 128 --max-context 33024 --target=sm_90a --quiet "$@" 2> /dev/null; }
bundle_variants "$klList" slicekl $D/v/kl
# ... and the 8-heads-of-128 k3-tiny builds (v/k128-NAME) of those named in
# K128 (default none; for variants k3-tiny's 32-wide heads cannot take, e.g.
# K3C_KDA_BV=64).
k128List=""
for v in ${VARIANTS:-}; do
  [[ " ${K128:-} " == *" ${v%%=*} "* ]] && k128List="$k128List $v"
done
tiny128() { tiny /tmp/k3c-ckpt-kda128 --max-tokens 512 --max-seqs 16 --max-context 1024 "$@"; }
bundle_variants "$k128List" tiny128 $D/v/k128
bundle_variants "$tinyList" tinyd $D/v/tiny-dense
bundle_variants "$tinyList" tinysp $D/v/sp
rm -rf $D/*/ptx $D/v/*/ptx
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
cp bench/kda-h200.sh bench/kda-quick-h200.sh bench/kda-decode-h200.sh bench/kda-common.sh bench/kda_check.py bench/kda_peer.py bench/bench_common.py bench/ncu-kda-h200.sh bench/ncu_mix.py $D/
du -sh $D

#!/usr/bin/env bash
# Builds the bundle bench/mla-h200.sh runs on the GPU machine, in .dev/
# (git-ignored; .dev/peers is kept): k3-run, k3-bench, k3-mkcheckpoint; k3-tiny
# f32 (the exact path: absorbed kernels only); dense
# k3-tiny bf16 (MLA with nope 16, rope 8, v 16: the flash prefill's padded
# head dims) as compiled by default and with K3C_MLA_FLASH_FROM=2
# K3C_MLA_FLASH_DECODE=1 (every launch of 2+ tokens, decode included, takes
# the prefill branch: decode runs its absorbed kernel for cached sequences);
# the full-width 2-layer k3-small
# slice (96 MLA heads, latent 512 + 64, nope 128, v 128) for sm_90a with
# capacity 65536 tokens a step (decode benches of 64 x 1024 tokens), 128
# sequences and 33024 positions, and one slice build a variant:
#   VARIANTS="FMA=K3C_MLA_DECODE_MMA=0 HT2=K3C_MLA_DECODE_HEAD_TILES=2" \
#     bash bench/make-mla-bundle.sh
# (settings separated by ';'; mla-h200.sh times each variant's decode);
# FLAG_VARIANTS likewise with k3-compile options (see below);
# BASE=COMMIT adds that commit's build of the slice as v/slice-base.
# Carry .dev; run: bash .dev/mla-h200.sh
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp models/configs/k3-tiny.json test/Runtime/Inputs/k3-tiny-dense.json $D/
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o /tmp/k3c-ckpt-tiny --seed 11 --quiet
$B/k3-compile /tmp/k3c-ckpt-tiny -o $D/tiny-f32 --activation-dtype=f32 --target=sm_90a --max-tokens 64 --max-seqs 4 --max-context 256 --quiet
$B/k3-mkcheckpoint --config $D/k3-tiny-dense.json -o /tmp/k3c-ckpt-tiny-dense --seed 11 --quiet
tiny() { $B/k3-compile /tmp/k3c-ckpt-tiny-dense --target=sm_90a --max-tokens 512 --max-seqs 16 --max-context 1024 --quiet "$@"; }
tiny -o $D/tiny-dense-bf16
K3C_MLA_FLASH_FROM=2 K3C_MLA_FLASH_DECODE=1 tiny -o $D/tiny-dense-from2
# k3-tiny with v 32, nope 32 and latent 64 (the dense config otherwise): its
# decode takes the row-sliced combine (dv a multiple of 32), bf16 and f32.
python3 - $D <<'PY'
import json, sys
c = json.load(open('test/Runtime/Inputs/k3-tiny-dense.json'))
c.update(kv_lora_rank=64, v_head_dim=32, qk_nope_head_dim=32)
json.dump(c, open(sys.argv[1] + '/k3-tiny-dv32.json', 'w'), indent=1)
PY
$B/k3-mkcheckpoint --config $D/k3-tiny-dv32.json -o /tmp/k3c-ckpt-dv32 --seed 5 --quiet
tiny32() { $B/k3-compile /tmp/k3c-ckpt-dv32 --target=sm_90a --max-tokens 512 --max-seqs 16 --max-context 1024 --quiet "$@"; }
tiny32 -o $D/tiny-dv32-bf16
tiny32 -o $D/tiny-dv32-f32 --activation-dtype=f32
# k3-tiny with v 64, nope 64, latent 128 (test/Runtime/Inputs/k3-tiny-dv64.json):
# rounds of 9+ tokens take the staged q_abs tiles and the tensor-core
# combine (dv a multiple of 64), for up to 128 sequences.
cp test/Runtime/Inputs/k3-tiny-dv64.json $D/
$B/k3-mkcheckpoint --config $D/k3-tiny-dv64.json -o /tmp/k3c-ckpt-dv64 --seed 5 --quiet
tiny64() { $B/k3-compile /tmp/k3c-ckpt-dv64 --target=sm_90a --max-tokens 1024 --max-seqs 128 --max-context 512 --quiet "$@"; }
tiny64 -o $D/tiny-dv64-bf16
python3 bench/slice-config.py $D slice
[ -d /tmp/slice ] || $B/k3-mkcheckpoint --config $D/slice.json -o /tmp/slice --seed 3 --quiet
slice() { $B/k3-compile /tmp/slice --max-tokens 65536 --max-seqs 128 --max-context 33024 --target=sm_90a --quiet "$@"; }
slice -o $D/slice-bf16
mkdir -p $D/v
bundle_variants "${VARIANTS:-}" slice $D/v/slice
# FLAG_VARIANTS="NAME=FLAG[;FLAG|;K3C_VAR=VALUE...] ...": slice builds with
# those k3-compile options (e.g. TP64=--mla-page=64;K3C_MLA_DECODE_TMA=1: the
# paged cache under the TMA core), also in v/.
bundle_flag_variants "${FLAG_VARIANTS:-}" slice $D/v/slice
# ... and each variant's k3-tiny-dv64 (its batched MLA decode against the
# reference in mla-decode-h200.sh), outside v/.
mkdir -p $D/v64
bundle_variants "${VARIANTS:-}" tiny64 $D/v64/dv64
# BASE=COMMIT: the slice compiled by that commit's k3-compile (a worktree in
# /tmp/k3c-base, only k3-compile built) as v/slice-base, the baseline
# mla-decode-h200.sh compares every build with bit for bit.
if [ -n "${BASE:-}" ]; then
  [ -d /tmp/k3c-base ] || git worktree add --detach /tmp/k3c-base "$BASE"
  git -C /tmp/k3c-base checkout --quiet --detach "$BASE"
  cmake -G Ninja -S /tmp/k3c-base -B /tmp/k3c-base/build -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit > /dev/null
  nice cmake --build /tmp/k3c-base/build --target k3-compile
  /tmp/k3c-base/build/bin/k3-compile /tmp/slice --max-tokens 65536 --max-seqs 128 --max-context 33024 \
    --target=sm_90a --quiet -o $D/v/slice-base
fi
rm -rf $D/*/ptx $D/v/*/ptx $D/v64/*/ptx $D/*/model.fused.mlir $D/v/*/model.fused.mlir $D/v64/*/model.fused.mlir
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
cp bench/mla-h200.sh bench/mla-prefill-h200.sh bench/mla-decode-h200.sh bench/ncu-mla-h200.sh bench/mla_check.py bench/mla_peer.py bench/bench_common.py $D/
du -sh $D

#!/usr/bin/env bash
# MLA decode precision per build variant (e.g. K3C_MLA_DECODE_MMA=0, the FMA
# core), on one H200: kernel dumps of the slice's MLA attention (decode at contexts 300
# and 5000) against fp64 attention (mla_check.py), and k3-tiny bf16 (MXFP4)
# against the reference executor, for the default build and each variant.
# Bundle: VARIANTS="M0=K3C_MLA_DECODE_MMA=0 ..." TINY_VARIANTS="f0=..."
#   bash bench/make-gemm-bundle.sh; cp bench/mla-precision.sh bench/mla_check.py .dev/
# Carry .dev; run: bash .dev/mla-precision.sh
source "$(dirname "$0")/device-common.sh"
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for a in tiny-bf16 v/tiny-*; do
  [ -d "$a" ] || continue
  echo "== $a: k3-tiny bf16 vs the reference"
  k3-run $a --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)|step [0-3]:" | sort -t: -k2 | tail -3
done
for a in slice-bf16 v/slice-M*; do
  [ -d "$a" ] || continue
  for ctx in 300 5000; do
    echo "== $a: MLA decode at context $ctx vs fp64"
    K3C_DUMP_KERNEL=mla_attn@1-1:/tmp/md timeout 120 k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 $ctx) --max-new-tokens 2 --quiet > /dev/null
    python3 mla_check.py /tmp/md --head-stride 3 | tail -2; rm -rf /tmp/md
  done
done

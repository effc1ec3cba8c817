#!/usr/bin/env bash
# The routed experts' decode kernels (register decode, 16-row tiles) of this
# build against its variants on one H200: the bundle of
# bench/make-moe-bundle.sh with MOE_VARIANTS and TINY_VARIANTS (k3-tiny
# bf16 compiled with each variant's settings as tiny-bf16-NAME). Carry .dev;
# run: bash .dev/moe-decode-ab-h200.sh.
#  * checks: k3-tiny bf16 and each tiny-bf16-NAME against the reference
#    executor (mixed batch, 3 new tokens: decode rounds of 4 sequences), and
#    the decode round's expert kernel dumped and checked against fp64;
#  * k3-bench of the MoE slice at decode batch 16 and 64 (moe_experts rows),
#    this build and each moe1-NAME alternating ROUNDS times (2).
# DEC_VARIANTS="NAME ..." limits the variants to those (default: every moe1-NAME).
# PROFILE=1 adds the launch profile of this build's decode (per kernel).
# With .dev/old (an earlier build: old/bin, old/moe1) its logits and timing too.
source "$(dirname "$0")/device-common.sh"
machine
variants=${DEC_VARIANTS:-$(ls -d moe1-* 2>/dev/null | sed 's/^moe1-//' | grep -v -e nowg -e fma -e t128)}
tiny_moe_checks "$variants"
echo "== MoE slice decode (${SECONDS}s)"
k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
# 16 prompts, 4 new tokens: decode rounds of 16 sequences (16-row tiles, the
# slice's 28 and 24 k chunks); each variant's logits against this build's
# bit for bit, its last decode round's experts against fp64.
for i in $(seq 1 16); do seq -s, $((i * 7)) $((i * 7 + 5)); done > b16.txt
k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/ref.npy > /dev/null
for n in $variants; do
  rm -rf /tmp/w7; K3C_DUMP_KERNEL=moe_experts@16-16:/tmp/w7 timeout 150 k3-run moe1-$n --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy'); b=n.load('/tmp/x.npy')
print('moe1-$n logits vs moe1: bit-identical %s' % bool(a.shape == b.shape and (a.view(n.uint32) == b.view(n.uint32)).all()))"
  echo "moe1-$n decode round vs fp64:"; python3 moe_check.py /tmp/w7 --experts 4 | tail -1
done
# An earlier build in .dev/old (its bin/ and moe1, as in
# bench/moe-prefill-ab-h200.sh; e.g. another MXFP4 layout format, which no
# variant can switch): its decode logits against this build's (a layout
# format moves bits, not values or summation order: bit-identical expected)
# and its timing alternating with this build's.
if [ -d old/bin ]; then
  PATH=$PWD/old/bin:$PATH timeout 150 k3-run old/moe1 --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/old.npy > /dev/null
  python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy'); b=n.load('/tmp/old.npy')
print('old/moe1 logits vs moe1: bit-identical %s, max abs diff %.3g' % (bool(a.shape == b.shape and (a.view(n.uint32) == b.view(n.uint32)).all()), float(abs(a - b).max())))"
fi
for round in $(seq 1 ${ROUNDS:-2}); do
  kbench dec-new-$round moe1 /tmp/moe1 moe_experts --prefill none --decode 16,64
  for n in $variants; do kbench dec-$n-$round moe1-$n /tmp/moe1 moe_experts --prefill none --decode 16,64; done
  [ -d old/bin ] && PATH=$PWD/old/bin:$PATH kbench dec-old-$round old/moe1 /tmp/moe1 moe_experts --prefill none --decode 16,64
done
# PROFILE=1: each kernel's share of the decode step (the grouping kernel,
# one block, next to the expert GEMMs), by the runtime's launch profile.
if [ -n "${PROFILE:-}" ]; then
  echo "== launch profile, this build, decode 16 and 64 sequences"
  K3C_PROFILE_LAUNCHES=1 timeout 200 k3-bench moe1 --checkpoint /tmp/moe1 --device cuda --quiet --prefill none --decode 16,64 --steps 4 --reps 1 2>&1 >/dev/null | grep -A40 "launch profile"
fi
rm -rf /tmp/moe1
echo "== done (${SECONDS}s)"

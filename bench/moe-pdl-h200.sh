#!/usr/bin/env bash
# Programmatic dependent launch (PDL) on one H200, with the routed experts'
# table of #16 (decode 8 / 16 / 64 sequences, prefill 1024 / 8192 tokens) and
# torch's grouped GEMM as the peer in the same call. The bundle of
# bench/make-moe-bundle.sh (`NO_FMA=1 NO_T128=1 bash bench/make-moe-bundle.sh`,
# optionally with MOE_VARIANTS / TINY_VARIANTS: moe1-NAME, tiny-bf16-NAME).
# Carry .dev; run: bash .dev/moe-pdl-h200.sh. Every kernel of these
# artifacts starts with griddepcontrol.wait; the runtime launches them with
# programmatic stream serialization unless K3C_PDL=0 ("nopdl" below: the
# same artifact, plain launches).
#  * checks: k3-tiny bf16 (and each tiny-bf16-NAME) against the reference
#    executor (mixed batch, decode rounds), its decode experts against fp64;
#    the f32 k3-tiny on the GPU at 1e-5; the MoE slice's logits (16 prompts x
#    4 new tokens) with PDL, without, and per moe1-NAME, bit for bit;
#  * k3-bench of the MoE slice (moe_experts and the whole step graph), PDL
#    and nopdl and each moe1-NAME alternating ROUNDS (3) times, decode 8, 16,
#    64 sequences; prefill 1024 and 8192 tokens with and without PDL;
#  * PHASES (default "checks slice peer k3") picks the parts; k3: K3's 896
#    experts (a 15.7 GB checkpoint, ~150 s to make), decode 8 / 16 / 64 and
#    prefill K3_TOKENS (1024,1536,8192), PDL and nopdl, then the peer;
#    profile: the launch profile (K3C_PROFILE_LAUNCHES) of decode at 64
#    sequences (PROFILE_DECODE: "8 16 64" for several), the slice's and
#    K3's (per expert kernel: is K3's slower time per expert in the up or
#    the down kernel?).
# PDL_VARIANTS="NAME ..." limits the moe1-NAME builds (default: all but
# the bundle's fixed nowg / fma / t128 builds).
source "$(dirname "$0")/device-common.sh"
machine
phase() { [[ " ${PHASES:-checks slice peer k3} " == *" $1 "* ]]; }
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
variants=${PDL_VARIANTS:-$(ls -d moe1-* 2>/dev/null | sed 's/^moe1-//' | grep -v -e nowg -e fma -e t128)}
rows='moe_experts|TOTAL'
if phase checks; then
  tiny_moe_checks "$variants" # with PDL (the artifacts' default)
  echo "== tiny-bf16 vs the reference, plain launches (K3C_PDL=0)"
  K3C_PDL=0 run tiny-bf16 --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
  echo "== tiny-f32 on the GPU vs the reference (1e-5, PDL)"
  run tiny-f32 --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error|max rel"
fi
if phase slice || phase checks; then
  echo "== MoE slice (${SECONDS}s)"
  k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet
fi
if phase checks; then
  for i in $(seq 1 16); do seq -s, $((i * 7)) $((i * 7 + 5)); done > b16.txt
  k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/ref.npy > /dev/null
  same() {
    python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy'); b=n.load('$2')
print('$1 logits vs moe1 (PDL): bit-identical %s' % bool(a.shape == b.shape and (a.view(n.uint32) == b.view(n.uint32)).all()))"
  }
  K3C_PDL=0 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/x.npy > /dev/null
  same "moe1 K3C_PDL=0" /tmp/x.npy
  for n in $variants; do
    rm -rf /tmp/w7; K3C_DUMP_KERNEL=moe_experts@16-16:/tmp/w7 timeout 150 k3-run moe1-$n --checkpoint /tmp/moe1 --device cuda --batch b16.txt --max-new-tokens 4 --quiet --dump-logits /tmp/x.npy > /dev/null
    same "moe1-$n" /tmp/x.npy
    echo "moe1-$n decode round vs fp64:"; python3 moe_check.py /tmp/w7 --experts 4 | tail -1
  done
fi
if phase slice; then
  for round in $(seq 1 ${ROUNDS:-3}); do
    kbench dec-pdl-$round moe1 /tmp/moe1 "$rows" --prefill none --decode 8,16,64
    K3C_PDL=0 kbench dec-nopdl-$round moe1 /tmp/moe1 "$rows" --prefill none --decode 8,16,64
    for n in $variants; do kbench dec-$n-$round moe1-$n /tmp/moe1 "$rows" --prefill none --decode 8,16,64; done
  done
  kbench pre-pdl moe1 /tmp/moe1 "$rows" --prefill 1024,8192 --decode none
  K3C_PDL=0 kbench pre-nopdl moe1 /tmp/moe1 "$rows" --prefill 1024,8192 --decode none
fi
rm -rf /tmp/moe1
phase peer && timeout 200 python3 moe_peer.py --cases slice --tokens 8,16,64,1024,8192 2>&1 | tail -7
if phase k3; then
  echo "== K3 shapes (${SECONDS}s)"
  k3-mkcheckpoint --config moe896.json -o /tmp/moe896 --seed 3 --quiet
  echo "checkpoint made (${SECONDS}s)"
  kbench k3-pdl moe896 /tmp/moe896 "$rows" --prefill ${K3_TOKENS:-1024,1536,8192} --decode 8,16,64
  K3C_PDL=0 kbench k3-nopdl moe896 /tmp/moe896 "$rows" --prefill ${K3_TOKENS:-1024,1536,8192} --decode 8,16,64
  for n in ${K3_VARIANTS:-}; do kbench k3-$n moe896-$n /tmp/moe896 "$rows" --prefill none --decode 8,16,64; done
  rm -rf /tmp/moe896
  phase peer && timeout 200 python3 moe_peer.py --cases k3 --tokens 8,16,64,1024,8192 2>&1 | tail -6
fi
if phase profile; then
  for c in moe1 moe896; do
    k3-mkcheckpoint --config $c.json -o /tmp/$c --seed 3 --quiet
    for d in ${PROFILE_DECODE:-64}; do
      echo "== $c, decode $d, launch profile (${SECONDS}s)"
      K3C_PROFILE_LAUNCHES=1 timeout 100 k3-bench $c --checkpoint /tmp/$c --device cuda --quiet --prefill none --decode $d --steps 4 --reps 1 2>&1 >/dev/null | grep -A12 "launch profile" | grep -E "profile|moe_experts"
    done
    rm -rf /tmp/$c
  done
fi
echo "== done (${SECONDS}s)"

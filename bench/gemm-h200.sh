#!/usr/bin/env bash
# The GEMM tile layer on one H200: checks, then k3-bench on the full-width
# k3-small slice next to torch (cuBLAS) on the same linears, in one run.
#  * k3-tiny f32: the exact FMA path against the reference executor (1e-5);
#  * dense k3-tiny bf16 (the suite's bf16 model): 20 tokens (mma.sync 64x64),
#    300 tokens (wgmma 128x128) and a mixed batch against the reference; the
#    same with split-K on every linear at 100 and 128 tokens;
#  * the slice bf16 at 16 tokens and 8 one-token prompts against the reference, and at 300 tokens
#    (wgmma) against the same slice compiled with mma.sync only (K3C_WGMMA=0);
#  * variants v/slice-N* (e.g. N0=K3C_GEMV_PROLOGUE=0): decode logits
#    bit-identical to the default build's; v/slice-C* (e.g. C4=K3C_MLA_QABS_MMA=1):
#    checked against the reference (8 one-token prompts), then timed at decode;
#  * k3-bench: prefill T = 512, 2048, 8192, decode batch 1, 8, 32, 128;
#    bench/gemm_peer.py: the same linears through torch, and the ceilings.
# Bundle: bash bench/make-gemm-bundle.sh here; carry .dev; run bash .dev/gemm-h200.sh
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
echo "== k3-tiny f32 (exact FMA path) vs the reference"
k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
echo "== k3-tiny bf16 (MXFP4 experts; the reference follows the compiled routing at near ties)"
k3-run tiny-bf16 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "routing|check"
for a in v/tiny-*; do
  [ -d "$a" ] || continue
  echo "== variant $a: k3-tiny bf16 vs the reference"
  k3-run $a --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "routing|check"
done
echo "== dense k3-tiny bf16 vs the reference: 20 tokens, 300 + 20 tokens, mixed batch"
seq -s, 1 300 > long.txt; seq -s, 5 24 >> long.txt
k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --prompt-ids $(seq -s, 7 26) --max-new-tokens 4 --check --quiet | grep -E "check:"
k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch long.txt --max-new-tokens 4 --check --quiet | grep -E "step 0|check:"
k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
echo "== dense k3-tiny bf16, 16 sequences (decode rounds of 16 tokens: the multi-token MLA combine)"
k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch batch16.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
echo "== dense k3-tiny bf16 with split-K on every linear (K3C_SPLITK_MIN_K=1): 128 one-token prompts, a 100-token prompt"
seq 1 128 > b128.txt; seq 3 102 | paste -sd, > p100.txt
for b in b128.txt p100.txt; do
  k3-run tiny-dense-split --checkpoint ckpt-tiny-dense --device cuda --batch $b --max-new-tokens 3 --check --quiet | grep -E "check: (PASS|FAIL)"
done
echo "== full-width k3-small slice (seed 3): bf16 vs the reference at 16 tokens"
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
timeout 300 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 16) --max-new-tokens 2 --check --quiet | grep -E "step|check:"
echo "== the slice, 8 one-token prompts (rounds of 8 tokens: the MLA combine on tensor cores) vs the reference"
timeout 400 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --batch batch8.txt --max-new-tokens 2 --check --quiet | grep -E "check:"
echo "== slice at 300 tokens: wgmma build vs the mma.sync-only build (logits)"
k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 11 310) --max-new-tokens 4 --quiet --dump-logits $OUT/wg.npy | grep -E "time to first"
k3-run v/slice-nowg --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 11 310) --max-new-tokens 4 --quiet --dump-logits $OUT/mma.npy | grep -E "time to first"
python3 -c "
import numpy as n
a, b = n.load('$OUT/wg.npy'), n.load('$OUT/mma.npy')
e = abs(a - b).max() / abs(b).max()
print('wgmma vs mma.sync logits: max rel %.3e, nan/inf positions equal %s, greedy tokens equal %s -> %s' % (e, bool((~n.isfinite(a) == ~n.isfinite(b)).all()), bool((a.argmax(-1) == b.argmax(-1)).all()), 'PASS' if e < 5e-2 else 'FAIL'))"
rm -f $OUT/wg.npy $OUT/mma.npy
for a in v/slice-N*; do
  [ -d "$a" ] || continue
  echo "== decode: $a vs slice-bf16, one sequence and 16 (bit-identical logits expected)"
  for prompts in "--prompt-ids $(seq -s, 3 18)" "--batch batch16.txt"; do
    k3-run slice-bf16 --checkpoint /tmp/slice --device cuda $prompts --max-new-tokens 6 --quiet --dump-logits $OUT/n1.npy > /dev/null
    k3-run $a --checkpoint /tmp/slice --device cuda $prompts --max-new-tokens 6 --quiet --dump-logits $OUT/n0.npy > /dev/null
    python3 -c "
import numpy as n
a, b = n.load('$OUT/n1.npy'), n.load('$OUT/n0.npy')
print('logits of %d steps x %d sequences: bit-identical %s, max abs diff %.3e (max rel %.3e) -> %s' % (a.shape[0], a.shape[1], bool((a.view(n.uint32) == b.view(n.uint32)).all()), abs(a - b).max(), abs(a - b).max() / abs(b).max(), 'PASS' if (a.view(n.uint32) == b.view(n.uint32)).all() else 'FAIL'))"
    rm -f $OUT/n0.npy $OUT/n1.npy
  done
done
echo "== k3-bench on the slice"
k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --csv $OUT/slice-bench.csv ${BENCH_ARGS:-} > $OUT/slice-bench.txt; grep -E "^(prefill|decode)" $OUT/slice-bench.txt
echo "== the same linears through torch (cuBLAS), same run"
python3 gemm_peer.py slice-bf16 $OUT/slice-bench.csv | tee $OUT/peer.txt
for a in v/slice-P*; do
  [ -d "$a" ] || continue
  echo "== tile variant $a (prefill)"
  k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill 2048,8192 --decode none --reps 2 --csv $OUT/$(basename $a).csv | grep -E "^prefill|mlp_in|mlp_down|kda_in|kda_out|mla_out|mla_in|kda_conv_gate|kda_chunk"
done
echo "== where each kernel's time goes: every launch timed (K3C_PROFILE_LAUNCHES), prefill 8192, decode 1 and 128"
K3C_PROFILE_LAUNCHES=1 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 8192 --decode 1,128 --steps 4 --reps 1 > /dev/null 2> $OUT/launches.txt
grep -A60 "launch profile" $OUT/launches.txt | head -70
for a in slice-bf16 v/slice-M*; do
  [ -d "$a" ] || continue
  [ "$a" = slice-bf16 ] && [ -z "$(ls -d v/slice-M* 2>/dev/null)" ] && continue
  echo "== MLA decode variant $a (context 1024: batch 1, 8; context 8000: batch 1)"
  k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1,8 --context 1024 --steps 16 | grep -E "^decode|mla_attn"
  k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1 --context 8000 --steps 16 | grep -E "^decode|mla_attn"
done
for a in v/slice-C*; do
  [ -d "$a" ] || continue
  echo "== checked variant $a: 8 one-token prompts vs the reference, then decode"
  timeout 400 k3-run $a --checkpoint /tmp/slice --device cuda --batch batch8.txt --max-new-tokens 2 --check --quiet | grep -E "check:"
  k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode ${DECODE_VARIANTS:-8,32,128} --steps 16 --csv $OUT/$(basename $a).csv | grep -E "^decode|mla_attn|lm_head"
done
for a in v/slice-D* v/slice-N*; do
  [ -d "$a" ] || continue
  echo "== tile variant $a (decode)"
  k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode ${DECODE_VARIANTS:-8,32,128} --steps 16 --csv $OUT/$(basename $a).csv | grep -E "^decode|mlp_in|mlp_down|kda_in|lm_head|mla_attn|kda_conv_gate"
done

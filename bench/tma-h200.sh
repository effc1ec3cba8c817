#!/usr/bin/env bash
# The warpgroup tiles' TMA loads (K3C_WGMMA_TMA=1: one thread issues tensor
# copies completing on a slot's mbarrier; 2: a warp-specialized producer)
# against cp.async on one H200, on the bundle of bench/make-splitk-bundle.sh
# built with SPLIT_VARIANTS="T1=K3C_WGMMA_TMA=1 T2=K3C_WGMMA_TMA=2":
#  * smoke: each variant on dense k3-tiny, one prompt, a short timeout (a
#    hang or a launch error drops the variant from the rest of the run);
#  * dense k3-tiny (split-K on every linear and set) against the reference
#    executor: 128 one-token prompts, a 100-token prompt, a mixed batch of 20;
#    its f32 build (tdense-f32) at 1e-5;
#  * the full-width slice: each variant's logits against the default build's
#    (128 one-token prompts and one 700-token prompt, 3 new tokens; the same
#    sums in the same order: bit-identical expected). A bundle built with
#    FLAG_VARIANTS="P64=--mla-page=64" adds the paged MLA cache as variant
#    P64 (tdense-P64 against the reference, slice-P64 bit for bit against
#    the contiguous cache: its GPU cores' block-table reads);
#  * a batch sharing a 40-token prompt prefix (prefilled once, states
#    forked by device copies) against the reference, on tdense and tdense-P64;
#  * continuous batching (160 prompts over 128 slots) against two batches;
#  * greedy decoding with the argmax kernel on the GPU against the host's
#    pick (K3C_HOST_GREEDY=1): dense k3-tiny at 128 sequences and on lm_head
#    weights edited to tie and to hold NaNs (test/Runtime/Inputs), the slice
#    at 128 sequences: the same tokens;
#  * the default build with K3C_ASYNC_LAUNCHES=1 (no stream wait after each
#    eager launch): the slice's logits bit for bit, TTFT at 16 / 512 /
#    PREFILL tokens against the synchronized launches;
#  * TTFT of 16 prompts sharing a 4096-token prefix, prefilled whole and
#    with the prefix once (slice, slice-P64);
#  * k3-bench of the slice, the default and each variant alternating ROUNDS
#    (2) times: decode at DECODE (1,64,128) sequences in the step graph and
#    prefill at PREFILL (8192) tokens, the linear launches and the totals,
#    into $OUT/kbench.csv.
# PART=checks runs the smoke and the checks, PART=bench the smoke and the
# timings (each fits one device call; the whole script takes ~16 min).
source "$(dirname "$0")/device-common.sh"
machine
variants=$(ls -d slice-* 2>/dev/null | sed 's#^slice-##')
dense_inputs
seq -s, 5 704 > p700.txt
ok=""
for n in $variants; do
  echo "== smoke: tdense-$n, a 100-token prompt"
  if timeout 40 k3-run tdense-$n --checkpoint ckpt-dense --device cuda --batch p100.txt --max-new-tokens 2 --check --quiet | grep -E "check: (PASS|FAIL)|error"; then
    ok="$ok $n"
  else
    echo "   tdense-$n failed or hung: dropped"
  fi
done
echo "== variants that ran: ${ok:-none}"
part=${PART:-all}
if [ "$part" != bench ]; then
dense_checks tdense $(for n in $ok; do echo tdense-$n; done)
if [ -d tdense-f32 ]; then
  echo "== tdense-f32 (the exact path, 1e-5) vs the reference: a 100-token prompt, a mixed batch of 20"
  for b in p100.txt mix20.txt; do
    timeout 120 k3-run tdense-f32 --checkpoint ckpt-dense --device cuda --batch $b --max-new-tokens 3 --check --quiet | grep -E "check: (PASS|FAIL)|error"
  done
fi
# A prompt prefix shared by the batch (prefilled once, states forked with
# device copies; the paged build shares its pages) against the reference.
python3 -c "p=','.join(str(i) for i in range(101, 141)); print('\n'.join(p + ',' + s for s in ['1,2,3', '7,8,9,10,11', '100', '450,1,5']))" > shared.txt
for a in tdense tdense-P64; do
  [ -d $a ] || continue
  echo "== $a: 4 prompts sharing 40 tokens vs the reference"
  timeout 120 k3-run $a --checkpoint ckpt-dense --device cuda --batch shared.txt --max-new-tokens 3 --check --quiet | grep -E "shared prefix|pages held|check: (PASS|FAIL)|error"
done
greedy_same tdense tdense ckpt-dense b128.txt
# Continuous batching: 160 prompts (1-4 tokens: 128 of them fit one step)
# over 128 slots against the same prompts
# as two batches (128 + 32), the f32 build (its kernels' sums do not depend
# on the batch): the same tokens expected.
if [ -d tdense-f32 ]; then
  python3 -c "import random; r=random.Random(5); print('\n'.join(','.join(str(r.randrange(1, 500)) for _ in range(r.randrange(1, 5))) for _ in range(160)))" > p160.txt
  timeout 150 k3-run tdense-f32 --checkpoint ckpt-dense --device cuda --batch p160.txt --max-new-tokens 6 --quiet | grep -E '^sequence|slots|error' > /tmp/cb.txt
  head -128 p160.txt > /tmp/p1.txt; tail -32 p160.txt > /tmp/p2.txt
  (timeout 150 k3-run tdense-f32 --checkpoint ckpt-dense --device cuda --batch /tmp/p1.txt --max-new-tokens 6 --quiet | grep '^sequence'
   timeout 150 k3-run tdense-f32 --checkpoint ckpt-dense --device cuda --batch /tmp/p2.txt --max-new-tokens 6 --quiet | grep '^sequence') | sed 's/^sequence [0-9]*://' > /tmp/two.txt
  grep slots /tmp/cb.txt
  grep '^sequence' /tmp/cb.txt | sed 's/^sequence [0-9]*://' | cmp -s - /tmp/two.txt && echo "continuous batching: 160 sequences as two batches" || { echo "continuous batching: DIFFERENT"; grep '^sequence' /tmp/cb.txt | sed 's/^sequence [0-9]*://' | diff - /tmp/two.txt | head -4; }
fi
for m in tie2 nan0 nanmid; do
  rm -rf ck-$m && cp -r ckpt-dense ck-$m && python3 lm-head-rows.py ck-$m $m
  greedy_same tdense-$m tdense ck-$m b128.txt --allow-nonfinite
done
fi
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "== slice checkpoint (${SECONDS}s)"
if [ "$part" != bench ]; then
greedy_same slice slice /tmp/slice b128.txt
for b in b128.txt p700.txt; do
  timeout 150 k3-run slice --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 3 --quiet --dump-logits /tmp/ref.npy > /dev/null
  for n in $ok; do
    timeout 150 k3-run slice-$n --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 3 --quiet --dump-logits /tmp/x.npy > /dev/null
    python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy').astype(n.float64); b=n.load('/tmp/x.npy')
print('slice-$n vs default, $b x 3 steps: max rel %.2e, bit-identical %s, greedy tokens equal %.3f' % (abs(a-b).max()/abs(a).max(), bool((a==b).all()), (a.argmax(-1)==b.argmax(-1)).mean()))"
  done
done
# Launches without the launch code's per-launch stream waits (a run-time
# switch of the default build): logits bit-identical, then TTFT.
timeout 150 k3-run slice --checkpoint /tmp/slice --device cuda --batch p700.txt --max-new-tokens 3 --quiet --dump-logits /tmp/ref.npy > /dev/null
K3C_ASYNC_LAUNCHES=1 timeout 150 k3-run slice --checkpoint /tmp/slice --device cuda --batch p700.txt --max-new-tokens 3 --quiet --dump-logits /tmp/x.npy > /dev/null
python3 -c "
import numpy as n; a=n.load('/tmp/ref.npy'); b=n.load('/tmp/x.npy')
print('slice with K3C_ASYNC_LAUNCHES=1 vs default, p700.txt x 3 steps: bit-identical %s' % bool((a==b).all()))"
fi
[ "$part" = checks ] && { echo "== done (${SECONDS}s)"; exit 0; }
# A shared prompt prefix: 16 prompts of a 4096-token prefix + 16 tokens
# each, TTFT prefilled whole (9 rounds of 8192) and with the prefix once.
python3 -c "p=','.join(str(5 + i % 1000) for i in range(4096)); print('\n'.join(p + ',' + ','.join(str(7 + 16 * j + k) for k in range(16)) for j in range(16)))" > shared4k.txt
for a in slice slice-P64; do
  [ -d $a ] || continue
  for flag in --no-shared-prefix ""; do
    echo "== $a, 16 prompts sharing 4096 tokens ${flag:-(shared)}"
    timeout 150 k3-run $a --checkpoint /tmp/slice --device cuda --batch shared4k.txt --max-new-tokens 2 --quiet $flag | grep -E "shared prefix|time to first token|pages held|error"
  done
done
rows=${ROWS:-'lm_head|mlp_in|mlp_down|kda_in|kda_out|mla_in|mla_out|TOTAL'}
for round in $(seq 1 ${ROUNDS:-2}); do
  kbench base-$round slice /tmp/slice "$rows" --prefill ${PREFILL:-8192} --decode ${DECODE:-1,64,128}
  for n in $ok; do kbench $n-$round slice-$n /tmp/slice "$rows" --prefill ${PREFILL:-8192} --decode ${DECODE:-1,64,128}; done
  K3C_ASYNC_LAUNCHES=1 kbench async-$round slice /tmp/slice 'TOTAL' --prefill 16,512,${PREFILL:-8192} --decode none
  kbench sync-$round slice /tmp/slice 'TOTAL' --prefill 16,512,${PREFILL:-8192} --decode none
done
echo "== done (${SECONDS}s)"

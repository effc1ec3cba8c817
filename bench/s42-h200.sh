#!/usr/bin/env bash
# One H200 call for the open bounds after session 41 (bench/make-s42-bundle.sh):
#  1. checks: dense k3-tiny bf16 against the reference (128 one-token prompts,
#     a 100-token prompt, a mixed batch of 20) and f32 at 1e-5; the argmax
#     kernel's greedy tokens against the host's pick (40000 logits a row,
#     random and with ties far apart; the slice);
#  2. #13: k3-bench of the slice, prefill 8192 and decode at 1 / 64 / 128
#     sequences (graph-timed, two rounds), and torch/cuBLAS on the same linear
#     shapes (gemm_peer.py): the batch-128 / batch-1 step ratio (bound 1.5),
#     each linear at batch 1 against copy (bound 85 %);
#     and slice-W128 (the wide decode outputs on 128 x 128 tiles, two blocks
#     an SM) against the default at 64 / 128 sequences, and slice-ON (KDA's
#     gated output norm in the token recurrence's last blocks: kda_out one
#     GEMV) at 1 / 64 / 128, and slice-PRO (one-token GEMVs with their norm
#     built in every block) at 1, their logits first (bit-identical expected);
#  3. #15: mla_attn at context 8192, batch 1 and 8;
#  4. #14: fla's chunk_kda (with and without gate and norm) and its Triton
#     short convolution on the q/k/v channels at T = 8192, H = 96
#     (kda_peer.py), beside k3c's kda_chunk + kda_conv_gate from step 2.
source "$(dirname "$0")/device-common.sh"
machine
dense_inputs
dense_checks tdense $( [ -d tdense-ON ] && echo tdense-ON )
for a in tdense-f32 $( [ -d tdense-ON-f32 ] && echo tdense-ON-f32 ); do
  echo "== $a (1e-5) vs the reference: a 100-token prompt, a mixed batch of 20"
  for b in p100.txt mix20.txt; do
    timeout 120 k3-run $a --checkpoint ckpt-dense --device cuda --batch $b --max-new-tokens 3 --check --quiet | grep -E "check: (PASS|FAIL)|error"
  done
done
k3-mkcheckpoint --config tiny-v40k.json -o ck40 --seed 5 --quiet
greedy_same v40k tiny-v40k ck40 b128.txt
rm -rf ck40-t && cp -r ck40 ck40-t && python3 lm-head-rows.py ck40-t tiefar
greedy_same v40k-tiefar tiny-v40k ck40-t b128.txt
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
greedy_same slice slice /tmp/slice b128.txt
echo "== checks done (${SECONDS}s)"
# Each variant's logits against the default's: 128 one-token prompts and a
# 700-token prompt (a prefill round on the chunked form), 3 steps.
seq 3 702 | paste -sd, > p700.txt
for b in b128.txt p700.txt; do
  timeout 150 k3-run slice --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 3 --quiet --dump-logits /tmp/ref.npy > /dev/null
  for v in W128 ON PRO; do
    [ -d slice-$v ] || continue
    timeout 150 k3-run slice-$v --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 3 --quiet --dump-logits /tmp/x.npy > /dev/null
    python3 -c "
import numpy as n; a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('slice-$v vs default, $b x 3 steps: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
  done
done
for round in 1 2; do
  kbench s42-$round slice /tmp/slice 'TOTAL|lm_head|mlp_in|mlp_down|kda_in|kda_out|mla_in|mla_out|mla_q_up|kda_chunk|kda_conv_gate' \
    --prefill 8192 --decode 1,64,128
  [ -d slice-W128 ] && kbench W128-$round slice-W128 /tmp/slice 'TOTAL|lm_head|mlp_in' --prefill none --decode 64,128
  [ -d slice-ON ] && kbench ON-$round slice-ON /tmp/slice 'TOTAL|kda_chunk|kda_out' --prefill none --decode 1,64,128
  [ -d slice-PRO ] && kbench PRO-$round slice-PRO /tmp/slice 'TOTAL|kda_out|mla_in|mla_q_up|mla_out|mlp_in|kda_in' --prefill none --decode 1
done
kbench ctx8k slice /tmp/slice 'mla_attn|TOTAL,graph' --prefill none --decode 1,8 --context 8192
echo "== torch/cuBLAS on the same linear shapes (${SECONDS}s)"
timeout 240 python3 gemm_peer.py slice /tmp/kbench-s42-1.csv
if [ -d peers/fla/fla ]; then
  echo "== fla at T = 8192, H = 96 (${SECONDS}s)"
  timeout 240 python3 kda_peer.py --fla peers/fla --prefill 8192x96 --check "" --dump "" --decode "" --csv $OUT/kda_peer.csv
fi
echo "== s42 done (${SECONDS}s)"

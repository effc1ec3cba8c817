#!/usr/bin/env bash
# One device call after session 42 (bench/make-s43-bundle.sh):
#  1. checks: dense k3-tiny bf16 with ON (the output norm's count ahead of
#     the state stores), NG, GF and STS against the reference, ON's f32
#     build at 1e-5, ON's decode kernel (bf16 and f32) against fp64
#     (kda_check.py: the normalized o); the slice's logits of ON, NG, S3
#     and STS against the default's (bit-identical expected: 128 one-token
#     prompts, a 700-token prompt, 3 steps);
#  2. #13: k3-bench decode at 1 / 64 / 128 sequences, default and ON, two
#     rounds alternating (ON lost 12-13 % of kda_chunk at 64 / 128 on an
#     H100 in session 42 with the count after the state stores);
#  3. #14 / #13: k3-bench prefill 8192 and decode 128 of the default, NG,
#     GF, S3, STS (kda_conv_gate, the linears),
#     two rounds; every launch of the default's KDA layer at 8192 tokens
#     (K3C_PROFILE_LAUNCHES, synchronized, ~10 us of overhead each); fla's
#     chunk_kda with gate and norm and its Triton short convolution beside
#     them (kda_peer.py); Nsight Compute on the default's f_b tile (the gate
#     in its store: 304 us for 403 MB on an H100, latency-bound) when ncu is
#     there (NO_NCU=1 skips it).
source "$(dirname "$0")/device-common.sh"
machine
dense_inputs
dense_checks tdense tdense-ON tdense-NG tdense-GF tdense-STS
echo "== tdense-ON-f32 (1e-5) vs the reference: a 100-token prompt, a mixed batch of 20"
for b in p100.txt mix20.txt; do
  timeout 120 k3-run tdense-ON-f32 --checkpoint ckpt-dense --device cuda --batch $b --max-new-tokens 3 --check --quiet | grep -E "check: (PASS|FAIL)|error"
done
echo "== ON's decode kernel (the last block of a head normalizes) vs fp64, 128 sequences"
for a in tdense-ON tdense-ON-f32; do
  tol=""; [ $a = tdense-ON-f32 ] && tol="--rms-tol 1e-6"
  rm -rf /tmp/don; K3C_DUMP_KERNEL=kda_chunk@100-128:/tmp/don timeout 120 k3-run $a --checkpoint ckpt-dense --device cuda --batch b128.txt --max-new-tokens 2 --quiet > /dev/null
  python3 kda_check.py /tmp/don $tol
done
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "== checks done (${SECONDS}s)"
seq 3 702 | paste -sd, > p700.txt
logits() { timeout 150 k3-run $1 --checkpoint /tmp/slice --device cuda --batch $2 --max-new-tokens 3 --quiet --dump-logits $3 > /dev/null; }
same() { python3 -c "
import numpy as n; a, b = n.load('$1'), n.load('$2')
print('$3: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"; }
for b in b128.txt p700.txt; do
  logits slice $b /tmp/ref.npy
  for v in ON NG S3 STS; do logits slice-$v $b /tmp/x.npy; same /tmp/ref.npy /tmp/x.npy "slice-$v vs default, $b"; done
done
echo "== logits done (${SECONDS}s)"
for round in 1 2; do
  kbench dec-$round slice /tmp/slice 'TOTAL,graph|kda_chunk|kda_out' --prefill none --decode 1,64,128
  kbench ON-$round slice-ON /tmp/slice 'TOTAL,graph|kda_chunk|kda_out' --prefill none --decode 1,64,128
  for v in "" -NG -GF -S3 -STS; do
    kbench pre$v-$round slice$v /tmp/slice 'kda_conv_gate|kda_chunk|ttft|graph|lm_head|mlp_in|mlp_down|kda_in' --prefill 8192 --decode 128
  done
done
echo "== launches of the prefill, 8192 tokens (${SECONDS}s)"
for v in "" -NG; do
  echo "-- slice$v"
  K3C_PROFILE_LAUNCHES=1 timeout 120 k3-run slice$v --checkpoint /tmp/slice --device cuda --quiet \
    --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1 2>&1 >/dev/null | grep -E "launch profile|kda|short_conv|gate" | head -20
done
if [ -d peers/fla/fla ]; then
  echo "== fla at T = 8192, H = 96 (${SECONDS}s)"
  timeout 200 python3 kda_peer.py --fla peers/fla --prefill 8192x96 --check "" --dump "" --decode "" --csv $OUT/kda_peer.csv
fi
echo "== ncu: the f_b tile with the gate in its store, prefill 8192 (${SECONDS}s)"
ncu_kernel fb linear_gate_wgmma 150 slice --checkpoint /tmp/slice --device cuda --quiet \
  --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1
echo "== s43 done (${SECONDS}s)"

#!/usr/bin/env bash
# #14's done-when on the session-49 defaults (bundle: bash
# bench/make-s52-bundle.sh; carry .devq; run: bash .devq/s52-h200.sh):
#  1. the KDA layer between its projections at T = 8192 (launches in steady
#     state, K3C_PROFILE_REPEAT=20) of the k3-small slice (96 heads) and the
#     Kimi Linear slice (32 heads), default and GIC, then fla's layer at
#     8192 x 96 and 8192 x 32 in the same call, then the k3c launches again;
#  2. every KDA-bearing k3-tiny check on the GPU: dense bf16 (default, GIC)
#     on 128 one-token prompts, a 100-token prompt and a mixed batch; GIC's
#     f32 build; MoE k3-tiny bf16 (mixed batch; its decode round's experts
#     against fp64) and f32; the softplus-gate k3-tiny bf16 on three batches
#     (six mixed prompts, 300 tokens, 100 + 19 one-token prompts) and f32;
#  3. both slices against the reference, their delta rule against fp64 (2048
#     tokens), GIC's against fp64 on the Kimi Linear slice (300 tokens);
#  4. the f32 probe (12 prompts each against fp64) on MoE k3-tiny f32 and
#     dense k3-tiny GIC f32.
source "$(dirname "$0")/device-common.sh"
machine
seq 1 8192 | paste -sd, > /tmp/prompt-8192.txt
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
k3-mkcheckpoint --config slice-kl.json -o /tmp/kl --seed 3 --quiet
layer() { # ROUND: the KDA layer's launches at T = 8192, each build
  local m ck
  for m in slice slice-GIC kl kl-GIC; do
    ck=/tmp/${m%%-*}
    echo "-- KDA launches in steady state, T = 8192, $m, round $1 (${SECONDS}s)"
    K3C_PROFILE_LAUNCHES=1 K3C_PROFILE_REPEAT=20 K3C_PROFILE_MATCH=k3_kda_ timeout 150 k3-run $m \
      --checkpoint $ck --device cuda --quiet --batch /tmp/prompt-8192.txt --max-new-tokens 1 2>&1 >/dev/null \
      | grep -E "launch profile|k3_kda|error" | grep -v "kda_in_\|kda_out_.*linear_" | tee /tmp/prof.txt \
      | grep -E "kda_prep|kda_chunk_|error"
    python3 -c "
import re
ms = sum(float(m.group(1)) for m in (re.match(r'\s+\S+ <\S+>\s+\d+\s+([0-9.]+)', l) for l in open('/tmp/prof.txt')) if m)
print('  KDA layer between its projections: %.3f ms' % ms)"
  done
}
echo "== #14: the KDA layer at T = 8192 (${SECONDS}s)"
layer 1
if [ -d peers/fla/fla ]; then
  for hp in 8192x96 8192x32; do
    echo "== fla's layer at $hp (${SECONDS}s)"
    timeout 240 python3 kda_peer.py --fla peers/fla --prefill $hp --check "" --dump "" --decode "" --csv $OUT/kda_peer_$hp.csv 2>&1 \
      | grep -E "^#|^case|layer_graph|^chunk_gate_norm_graph|Error|error"
  done
fi
layer 2
echo "== k3-tiny checks (${SECONDS}s)"
dense_inputs
dense_checks tdense tdense-GIC
DENSE_BATCHES="p100.txt mix20.txt" dense_checks tdense-GIC-f32
tiny_moe_checks ""
echo "== tiny-f32 vs the reference: mixed batch"
timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check --device cuda --quiet | grep -E "check: (PASSED|FAILED)|error"
k3-mkcheckpoint --config k3-tiny-softplus.json -o /tmp/ck-sp --seed 5 --quiet
printf '%s\n%s\n%s\n%s\n%s\n%s\n' $(seq -s, 1 70) $(seq -s, 3 35) 9,8,7,6,5 $(seq -s, 100 199) 42 $(seq -s, 200 239) > /tmp/b6.txt
seq -s, 1 300 > /tmp/p300.txt
for m in sp-bf16 sp-f32; do
  for b in /tmp/b6.txt /tmp/p300.txt mix20.txt; do
    echo "-- $m $(basename $b)"
    timeout 120 k3-run $m --checkpoint /tmp/ck-sp --device cuda --batch $b --max-new-tokens 4 --check --quiet \
      | grep -E "check: (PASSED|FAILED)|error"
  done
done
echo "== the slices vs the reference, their delta rule vs fp64 (${SECONDS}s)"
for m in slice kl; do
  echo "-- $m"
  timeout 150 k3-run $m --checkpoint /tmp/$m --device cuda --quiet --prompt-ids $(seq -s, 1 16) --max-new-tokens 2 --check | grep -E "check: (PASSED|FAILED)|error"
  K3C_DUMP_KERNEL=kda_chunk@2048:/tmp/dk timeout 120 k3-run $m --checkpoint /tmp/$m --device cuda --quiet --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 > /dev/null
  timeout 120 python3 kda_check.py /tmp/dk; rm -rf /tmp/dk
done
echo "-- kl-GIC vs fp64, 300 tokens"
K3C_DUMP_KERNEL=kda_chunk@9:/tmp/gd-kl timeout 90 k3-run kl-GIC --checkpoint /tmp/kl --device cuda --prompt-ids $(seq -s, 1 300) --max-new-tokens 1 --quiet > /dev/null
timeout 120 python3 kda_check.py /tmp/gd-kl --gate softplus; rm -rf /tmp/gd-kl
echo "== the f32 probe: MoE k3-tiny f32 (${SECONDS}s)"
timeout 200 bash f32-probe.sh tiny-f32 k3-tiny.json --device cuda | grep -v "^check seq [0-9]* layer"
echo "== the f32 probe: dense k3-tiny GIC f32 (${SECONDS}s)"
timeout 200 bash f32-probe.sh tdense-GIC-f32 k3-tiny-dense.json --device cuda | grep -v "^check seq [0-9]* layer"
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# The next device call after session 43 (bench/make-s46-bundle.sh):
#  1. checks: dense k3-tiny bf16, default and GIC (--kda-gate-in-chunk),
#     against the reference; GIC's f32 build at 1e-5; k3-tiny's f32 build
#     (the f32 build's exact exp) on session 38's 150-token prompt; the logits of the
#     slice's and the Kimi Linear slice's GIC builds against their defaults
#     (bit-identical expected: 128 one-token prompts, a 3000-token prompt, 3
#     steps: prefill through the prep, decode through the token kernels);
#     the GIC kernels against fp64 (kda_check.py --gate: k3-tiny's bounded
#     gate, prefill and decode; Kimi Linear's softplus gate, prefill);
#  2. #14: the KDA layer's launches in steady state (K3C_PROFILE_REPEAT=20)
#     at T = 2048, 8192, 32768 (the prompts from files), default and GIC;
#     the Kimi Linear slice (32 heads, softplus gate) at 8192, default and
#     GIC; fla's layer at the same T, H = 96, and at 8192, H = 32
#     (kda_peer.py: short_conv, f_b, chunk_gate_norm, out_norm and their
#     sum; fla's bounded gate at H = 32), in the same call;
#  3. k3-bench prefill 8192 and decode 1 / 128 of default and GIC, two
#     rounds alternating (kda_conv_gate, kda_chunk, the step).
# S46_ORDER (default "checks t8192 fla trest bench") picks the parts and
# their order: checks (1.), t8192 (the slice's KDA launches at T = 8192,
# default and GIC), fla (the peer, same T first), trest (T = 2048, 32768
# and the Kimi Linear slice), bench (3.), ratio (#13's step at 128 against
# 1, default only). A call short of device time runs
# "t8192 fla checks ..." so #14's comparison comes back first.
source "$(dirname "$0")/device-common.sh"
machine
checks() {
dense_inputs
dense_checks tdense tdense-GIC
DENSE_BATCHES="p100.txt mix20.txt" dense_checks tdense-GIC-f32
echo "== tiny-f32 (the exact exp) vs the reference at 1e-5: session 38's 150-token prompt (seed 3; was 1.02e-5)"
k3-mkcheckpoint --config k3-tiny.json -o /tmp/ck3 --seed 3 --quiet
timeout 150 k3-run tiny-f32 --checkpoint /tmp/ck3 --device cuda --prompt-ids $(seq -s, 1 150) --max-new-tokens 4 --check --quiet \
  | grep -E "step [0-9]+:|check: (PASS|FAIL)|error"
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
[ -d /tmp/kl ] || k3-mkcheckpoint --config slice-kl.json -o /tmp/kl --seed 3 --quiet
seq 5 3004 | paste -sd, > p3000.txt
logits() { timeout 150 k3-run $1 --checkpoint $2 --device cuda --batch $3 --max-new-tokens 3 --quiet --dump-logits $4 > /dev/null; }
for m in "slice /tmp/slice" "kl /tmp/kl"; do
  set -- $m
  for b in b128.txt p3000.txt; do
    logits $1 $2 $b /tmp/ref.npy; logits $1-GIC $2 $b /tmp/x.npy
    python3 -c "
import numpy as n; a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('$1-GIC vs $1, $b: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
  done
done
# The GIC kernels against an fp64 recurrence on their exact inputs
# (kda_check.py forms g from the dumped logits, a_log and dt_bias): dense
# k3-tiny's prefill and decode (bounded gate), the Kimi Linear slice's
# prefill of a 300-token prompt (softplus gate, 32 heads of 128).
echo "== GIC kernels vs fp64 (${SECONDS}s)"
K3C_DUMP_KERNEL=kda_chunk@9:/tmp/gd-p timeout 60 k3-run tdense-GIC --checkpoint ckpt-dense --device cuda --batch p100.txt --max-new-tokens 2 --quiet > /dev/null
python3 kda_check.py /tmp/gd-p --gate bounded=-5
K3C_DUMP_KERNEL=kda_chunk@1-20:/tmp/gd-d timeout 60 k3-run tdense-GIC --checkpoint ckpt-dense --device cuda --batch mix20.txt --max-new-tokens 2 --quiet > /dev/null
python3 kda_check.py /tmp/gd-d --gate bounded=-5
K3C_DUMP_KERNEL=kda_chunk@9:/tmp/gd-kl timeout 90 k3-run kl-GIC --checkpoint /tmp/kl --device cuda --prompt-ids $(seq -s, 1 300) --max-new-tokens 1 --quiet > /dev/null
timeout 120 python3 kda_check.py /tmp/gd-kl --gate softplus
rm -rf /tmp/gd-p /tmp/gd-d /tmp/gd-kl
echo "== checks done (${SECONDS}s)"
}
kda_layer() {
  local T=$1
  [ -f /tmp/prompt-$T.txt ] || seq 1 $T | paste -sd, > /tmp/prompt-$T.txt
  [ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
  for v in "" -GIC; do
    echo "-- KDA launches in steady state, T = $T, slice$v (${SECONDS}s)"
    K3C_PROFILE_LAUNCHES=1 K3C_PROFILE_REPEAT=20 K3C_PROFILE_MATCH=k3_kda_ timeout 150 k3-run slice$v \
      --checkpoint /tmp/slice --device cuda --quiet --batch /tmp/prompt-$T.txt --max-new-tokens 1 2>&1 >/dev/null \
      | grep -E "launch profile|k3_kda|error" | grep -v "kda_in_\|kda_out_.*linear_" | tee /tmp/prof.txt | head -14
    python3 -c "
import re
ms = sum(float(m.group(1)) for m in (re.match(r'\s+\S+ <\S+>\s+\d+\s+([0-9.]+)', l) for l in open('/tmp/prof.txt')) if m)
print('  KDA layer between its projections: %.3f ms' % ms)"
  done
}
t8192() { kda_layer 8192; }
trest() {
kda_layer 2048; kda_layer 32768
# Kimi Linear's head count (32, softplus gate, pairwise path) at 8192 tokens.
[ -d /tmp/kl ] || k3-mkcheckpoint --config slice-kl.json -o /tmp/kl --seed 3 --quiet
[ -f /tmp/prompt-8192.txt ] || seq 1 8192 | paste -sd, > /tmp/prompt-8192.txt
for v in "" -GIC; do
  echo "-- KDA launches in steady state, T = 8192, kl$v (${SECONDS}s)"
  K3C_PROFILE_LAUNCHES=1 K3C_PROFILE_REPEAT=20 K3C_PROFILE_MATCH=k3_kda_ timeout 150 k3-run kl$v \
    --checkpoint /tmp/kl --device cuda --quiet --batch /tmp/prompt-8192.txt --max-new-tokens 1 2>&1 >/dev/null \
    | grep -E "launch profile|k3_kda|error" | grep -v "kda_in_\|kda_out_.*linear_" | tee /tmp/prof.txt | head -14
  python3 -c "
import re
ms = sum(float(m.group(1)) for m in (re.match(r'\s+\S+ <\S+>\s+\d+\s+([0-9.]+)', l) for l in open('/tmp/prof.txt')) if m)
print('  KDA layer between its projections: %.3f ms' % ms)"
done
}
fla() {
if [ -d peers/fla/fla ]; then
  echo "== fla at T = 8192 / 32768 / 2048, H = 96, and 8192 at H = 32 (${SECONDS}s)"
  timeout 240 python3 kda_peer.py --fla peers/fla --prefill 8192x96,32768x96,2048x96,8192x32 --check "" --dump "" --decode "" --csv $OUT/kda_peer.csv \
    | grep -E "^#|^case|layer_graph|^chunk_gate_norm_graph|^short_conv_graph|^f_b_linear_graph|^out_norm_graph"
fi
}
bench() {
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for round in 1 2; do
  for v in "" -GIC; do
    kbench s46$v-$round slice$v /tmp/slice 'kda_conv_gate|kda_chunk|ttft|graph' --prefill 8192 --decode 1,128
  done
done
}
# #13's decode step at 128 sequences against one (graph replay), the
# default build alone, two rounds: the ratio's bound is 1.5.
ratio() {
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for round in 1 2; do kbench s46-ratio-$round slice /tmp/slice 'graph' --prefill none --decode 1,128; done
}
for part in ${S46_ORDER:-checks t8192 fla trest bench}; do $part; done
echo "== s46 done (${SECONDS}s)"

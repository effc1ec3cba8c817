#!/usr/bin/env bash
# One device call after session 43 (bench/make-s44-bundle.sh):
#  1. checks: dense k3-tiny bf16 (STS and CT by default) against the
#     reference; the slice's logits of CT0 and STS0 against the default's
#     (bit-identical expected: 128 one-token prompts, prompts of 700 and
#     3000 tokens, 3 steps);
#  2. #14, KDA like for like: every launch of the slice's KDA layer timed in
#     steady state (K3C_PROFILE_REPEAT=20: one untimed launch, then the
#     median of 20, as fla's loop times its kernels) at T = 2048, 8192 and
#     32768 (four steps of 8192), default and CT0; fla's chunk_kda with gate
#     and norm, its short convolution, the gate's up projection (cuBLAS) and
#     its gated output norm at the same T and H = 96 (kda_peer.py);
#  3. k3-bench: prefill 8192 and decode 1 / 128 of default, CT0, STS0
#     (#13: the linears, the 128 / 1 step ratio);
#  4. #15: the decode grid at context 32768 for 1 and 8 sequences
#     (mla-grid-h200.sh; the 64-sequence row needs 256 prefill steps);
#  5. Nsight Compute on kda_prep at 8192 tokens (NO_NCU=1 skips it).
source "$(dirname "$0")/device-common.sh"
machine
dense_inputs
dense_checks tdense
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
seq 5 3004 | paste -sd, > p3000.txt
logits() { timeout 150 k3-run $1 --checkpoint /tmp/slice --device cuda --batch $2 --max-new-tokens 3 --quiet --dump-logits $3 > /dev/null; }
same() { python3 -c "
import numpy as n; a, b = n.load('$1'), n.load('$2')
print('$3: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"; }
for b in b128.txt p3000.txt; do
  logits slice $b /tmp/ref.npy
  for v in CT0 STS0; do logits slice-$v $b /tmp/x.npy; same /tmp/ref.npy /tmp/x.npy "slice-$v vs default, $b"; done
done
echo "== checks done (${SECONDS}s)"
for T in 8192 2048 32768; do
  for v in "" -CT0; do
    [ $T != 8192 ] && [ -n "$v" ] && continue
    echo "-- KDA launches in steady state, T = $T, slice$v (${SECONDS}s)"
    # The prompt from a file: 32768 ids as one argument exceed Linux's 128 KB limit for one.
    seq 1 $T | paste -sd, > /tmp/prompt-$T.txt
    K3C_PROFILE_LAUNCHES=1 K3C_PROFILE_REPEAT=20 K3C_PROFILE_MATCH=k3_kda_ timeout 150 k3-run slice$v \
      --checkpoint /tmp/slice --device cuda --quiet --batch /tmp/prompt-$T.txt --max-new-tokens 1 2>&1 >/dev/null \
      | grep -E "launch profile|k3_kda" | tee /tmp/prof-$T$v.txt | head -24
    python3 - /tmp/prof-$T$v.txt <<'PY'
import re, sys
core = 0.0; proj = 0.0
for line in open(sys.argv[1]):
    m = re.match(r'\s+(\S+) <\S+>\s+\d+\s+([0-9.]+)', line)
    if not m: continue
    name, ms = m.group(1), float(m.group(2))
    if '_linear_wgmma' in name or '_linear_mma' in name or 'kda_in_' in name or '_linear_gemv' in name:
        proj += ms  # kda_in's projections and kda_out's o_proj (not in fla's rows)
    else:
        core += ms  # convolutions, f_b with the gate, prep, recurrence, the output norm
print(f'  KDA core (conv, f_b + gate, prep, recurrence, out norm): {core:.3f} ms; projections {proj:.3f} ms')
PY
  done
done
if [ -d peers/fla/fla ]; then
  echo "== fla at T = 2048 / 8192 / 32768, H = 96 (${SECONDS}s)"
  timeout 240 python3 kda_peer.py --fla peers/fla --prefill 2048x96,8192x96,32768x96 --check "" --dump "" --decode "" --csv $OUT/kda_peer.csv
fi
for round in 1 2; do
  for v in "" -CT0 -STS0; do
    kbench s44$v-$round slice$v /tmp/slice 'kda_conv_gate|kda_chunk|ttft|graph|lm_head|mlp_in|mlp_down|kda_in|mla_' --prefill 8192 --decode 1,128
  done
done
echo "== #15 grid at 32k (${SECONDS}s)"
CONTEXTS=32768 BATCHES=1,8 KBENCH_TIMEOUT=120 bash mla-grid-h200.sh
echo "== ncu: kda_prep, prefill 8192 (${SECONDS}s)"
ncu_kernel prep kda_prep 90 slice --checkpoint /tmp/slice --device cuda --quiet \
  --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1
echo "== s44 done (${SECONDS}s)"

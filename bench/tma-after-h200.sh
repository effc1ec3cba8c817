#!/usr/bin/env bash
# Run after PART=bench tma-h200.sh in the same call (/tmp/slice and the
# k3-bench CSVs exist), from the same bundle (bench/make-splitk-bundle.sh
# with the TMA variants and P64, plus gemm_peer.py, slice/model.fused.mlir
# from a k3-compile of slice.json, and a newer k3-run as bin/k3-run-new):
# the cuBLAS peer on the default, TMA=1 and TMA=2 CSVs, the paged pool's
# device memory with growable pools on and off, and continuous batching
# with a kept prefix. Session 38: PART=bench ROUNDS=1 bash
# .devk-tma/tma-h200.sh; bash .devk-tma/after.sh (docs/perf.md).
source "$(dirname "$0")/device-common.sh"
for n in base-1 T2-1 T1-1; do
  [ -f /tmp/kbench-$n.csv ] || continue
  echo "== cuBLAS peer vs $n"
  timeout 240 python3 gemm_peer.py slice /tmp/kbench-$n.csv
done
seq 1 128 > b128.txt
for g in 1 0; do
  echo "== slice-P64, --cache-tokens 4000000, K3C_GROWABLE_POOLS=$g: 128 one-token prompts, 8 new tokens"
  rm -f /tmp/smi.txt
  ( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> /tmp/smi.txt; sleep 0.1; done ) &
  sp=$!
  sleep 1
  base=$(head -1 /tmp/smi.txt)
  K3C_GROWABLE_POOLS=$g timeout 150 k3-run slice-P64 --checkpoint /tmp/slice --device cuda --batch b128.txt --max-new-tokens 8 --cache-tokens 4000000 --quiet 2>&1 | grep -E "MLA|pages|pool|memory|error" | head -8
  kill $sp; wait $sp 2>/dev/null
  echo "   nvidia-smi memory.used: idle ${base} MiB, peak $(sort -n /tmp/smi.txt | tail -1) MiB"
done
# Session 38: continuous batching keeping a shared prefix in the last slot
# (k3-run-new): 160 prompts sharing 20 tokens over 128 slots (127 decode),
# against the same prompts read whole (--no-shared-prefix); f32 dense and
# the bf16 paged build.
python3 -c "p=','.join(str(201 + i) for i in range(20)); print('\n'.join(p + ',' + ','.join(str(5 + (7 * j + k) % 400) for k in range(1 + j % 5)) for j in range(160)))" > pre160.txt
[ -d ckpt-dense ] || k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-dense --seed 11 --quiet
for a in tdense-f32 tdense-P64; do
  echo "== $a: 160 prompts sharing 20 tokens, kept prefix vs whole"
  timeout 120 k3-run-new $a --checkpoint ckpt-dense --device cuda --batch pre160.txt --max-new-tokens 6 --quiet > /tmp/kept.txt 2>&1
  timeout 120 k3-run-new $a --checkpoint ckpt-dense --device cuda --batch pre160.txt --max-new-tokens 6 --quiet --no-shared-prefix > /tmp/whole.txt 2>&1
  grep -E "slots|shared prefix|pages held|error" /tmp/kept.txt /tmp/whole.txt
  python3 -c "
import re
g=lambda f: [l for l in open(f) if l.startswith('sequence')]
a=g('/tmp/kept.txt'); b=g('/tmp/whole.txt')
print('$a kept vs whole: %d sequences, %d equal' % (len(a), sum(x==y for x,y in zip(a,b))))"
done
echo "== after.sh done (${SECONDS}s)"

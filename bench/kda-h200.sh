#!/usr/bin/env bash
# KDA on one H200, checks then timings, one run (bundle: bench/make-kda-bundle.sh):
#  * k3-tiny f32 (the exact FMA recurrence) and the softplus-gate k3-tiny
#    (pairwise path) in f32 and bf16 against the reference executor;
#  * dense k3-tiny bf16 (tf32 tensor-core recurrence) at 20, 300 + 20 tokens
#    and a mixed batch against the reference;
#  * kernel dumps (K3C_DUMP_KERNEL) against an fp64 recurrence (kda_check.py):
#    prefill and decode of k3-tiny bf16, the pairwise path, and the slice's
#    96-head layer at 2048 tokens and at batch 4 decode;
#  * the slice bf16 against the reference at 16 tokens;
#  * k3-bench on the slice: prefill 2048, 8192 and decode 1, 32, 128 (per
#    kernel); the Kimi Linear slice (32 heads, pairwise path) checked against
#    the reference and fp64 and timed the same way; then fla (chunk_kda / fused_recurrent_kda) on the same shapes
#    in the same run (kda_peer.py), then prefill 32768.
# VAR_PREFILL=2048,8192: the variants' prefill timed too; VAR_CHECK=1: each
# variant's delta rule against fp64 (kernel dumps) and its logits against the
# reference (300 tokens, --check). QUICK=1: checks and
# k3-bench only; FLA_PREFILL=TxH,...: fla prefill cases;
# NO_32K=1: no 32768-token prefill.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-softplus.json -o ckpt-sp --seed 5 --quiet
echo "== k3-tiny f32 (exact path) vs the reference"
timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
echo "== softplus k3-tiny (pairwise), f32 and bf16, 40 tokens + batch"
timeout 120 k3-run sp-f32 --checkpoint ckpt-sp --device cuda --prompt-ids $(seq -s, 0 39) --max-new-tokens 4 --check --quiet | grep -E "check:"
timeout 120 k3-run sp-bf16 --checkpoint ckpt-sp --device cuda --prompt-ids $(seq -s, 0 39) --max-new-tokens 4 --check --quiet | grep -E "check:"
timeout 120 k3-run sp-bf16 --checkpoint ckpt-sp --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
echo "== dense k3-tiny bf16 vs the reference: 20 tokens, 300 + 20 tokens, mixed batch"
seq -s, 1 300 > long.txt; seq -s, 5 24 >> long.txt
timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --prompt-ids $(seq -s, 7 26) --max-new-tokens 4 --check --quiet | grep -E "check:"
timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch long.txt --max-new-tokens 4 --check --quiet | grep -E "step 0|check:"
timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
echo "== kernel dumps vs an fp64 recurrence"
printf '%s\n%s\n%s\n' $(seq -s, 1 40) $(seq -s, 50 66) 7,8,9,10,11 > b3.txt
K3C_DUMP_KERNEL=kda_chunk@9:/tmp/d1 timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch b3.txt --max-new-tokens 2 --quiet > /dev/null; python3 kda_check.py /tmp/d1
K3C_DUMP_KERNEL=kda_chunk@1-3:/tmp/d2 timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch b3.txt --max-new-tokens 2 --quiet > /dev/null; python3 kda_check.py /tmp/d2
K3C_DUMP_KERNEL=kda_chunk@9:/tmp/d3 timeout 120 k3-run sp-bf16 --checkpoint ckpt-sp --device cuda --batch b3.txt --max-new-tokens 1 --quiet > /dev/null; python3 kda_check.py /tmp/d3
K3C_DUMP_KERNEL=kda_chunk@9:/tmp/d4 timeout 120 k3-run sp-f32 --checkpoint ckpt-sp --device cuda --batch b3.txt --max-new-tokens 1 --quiet > /dev/null; python3 kda_check.py /tmp/d4 --rms-tol 1e-6
echo "== full-width k3-small slice (seed 3)"
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
K3C_DUMP_KERNEL=kda_chunk@2048:/tmp/d5 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 --quiet | grep -E "time to first"; python3 kda_check.py /tmp/d5; rm -rf /tmp/d5
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 70) $(seq -s, 3 20) 9,8,7 $(seq -s, 100 140) > b4.txt
K3C_DUMP_KERNEL=kda_chunk@1-4:/tmp/d6 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --batch b4.txt --max-new-tokens 2 --quiet > /dev/null; python3 kda_check.py /tmp/d6; rm -rf /tmp/d6
timeout 150 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 16) --max-new-tokens 2 --check --quiet | grep -E "step|check:"
echo "== k3-bench on the slice"
k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 2048,8192 --decode 1,32,128 --csv $OUT/slice-bench.csv > $OUT/slice-bench.txt; grep -E "^(prefill|decode)" $OUT/slice-bench.txt
grep -E "kda|phase" $OUT/slice-bench.csv
source kda-common.sh # kimi_linear
kimi_linear
# Each variant in v/ (bench/make-kda-bundle.sh VARIANTS): its decode logits
# against the default build's, then decode at batch 1, 32, 128 (and prefill
# at VAR_PREFILL).
ls -d v/slice-* > /dev/null 2>&1 && k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 4 --quiet --dump-logits /tmp/ref.npy > /dev/null
for v in v/slice-*; do
  [ -d "$v" ] || continue
  echo "== variant $v"
  k3-run $v --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 4 --quiet --dump-logits /tmp/x.npy > /dev/null
  python3 -c "
import numpy as n
a, b = n.load('/tmp/ref.npy'), n.load('/tmp/x.npy')
print('logits vs the default build: bit-identical %s, max rel %.2e' % (bool((a.view(n.uint32) == b.view(n.uint32)).all()), abs(a.astype(n.float64) - b).max() / abs(a).max()))"
  if [ -n "${VAR_CHECK:-}" ]; then # the variant's delta rule against fp64 (2048 tokens; 4 mixed sequences)
    K3C_DUMP_KERNEL=kda_chunk@2048:/tmp/dv timeout 120 k3-run $v --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 --quiet > /dev/null; python3 kda_check.py /tmp/dv; rm -rf /tmp/dv
    K3C_DUMP_KERNEL=kda_chunk@1-4:/tmp/dv timeout 120 k3-run $v --checkpoint /tmp/slice --device cuda --batch b4.txt --max-new-tokens 2 --quiet > /dev/null; python3 kda_check.py /tmp/dv; rm -rf /tmp/dv
    timeout 150 k3-run $v --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 300) --max-new-tokens 2 --check --quiet | grep -E "check:"
  fi
  k3-bench $v --checkpoint /tmp/slice --device cuda --quiet --prefill ${VAR_PREFILL:-none} --decode 1,32,128 --csv $OUT/$(basename $v).csv > $OUT/$(basename $v).txt; grep -E "^(prefill|decode)" $OUT/$(basename $v).txt; grep -E "kda_(chunk|conv)" $OUT/$(basename $v).csv
done
[ -n "${QUICK:-}" ] && exit 0
echo "== fla (chunk_kda, fused_recurrent_kda) on the same shapes, same run"
timeout 280 python3 kda_peer.py --csv $OUT/fla.csv --prefill ${FLA_PREFILL:-2048x96,8192x96,32768x96,8192x32} --check 2048x96 --dump "" --decode 1,32,128 2>&1 | tail -30
[ -n "${NO_32K:-}" ] && exit 0
echo "== prefill 32768"
timeout 150 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 32768 --decode none --reps 1 --csv $OUT/slice-32k.csv > $OUT/slice-32k.txt; grep -E "^prefill" $OUT/slice-32k.txt; grep -E "kda" $OUT/slice-32k.csv

#!/usr/bin/env bash
# MLA prefill on one H200, checks then timings, one run (bundle:
# bench/make-mla-bundle.sh):
#  * dense k3-tiny bf16 against the reference executor: 20 tokens (absorbed),
#    300 + 20 tokens (flash prefill, padded head dims), the mixed batch
#    (3, 18, 1, 2 tokens: absorbed; also the KDA tf32 recurrence's batch);
#    the K3C_MLA_FLASH_FROM=2 K3C_MLA_FLASH_DECODE=1 build on the mixed batch (decode through the
#    prefill branch's absorbed kernel for cached sequences);
#  * kernel dumps (K3C_DUMP_KERNEL) against fp64 attention (mla_check.py):
#    k3-tiny's flash prefill (3 sequences, 157 tokens) and cached decode, the
#    slice's 96-head layer at 2048 tokens;
#  * k3-tiny f32 (exact: absorbed kernels) against the reference, and its
#    prefill and decode kernels against fp64 at 1e-6;
#  * the slice's decode kernel (batch 4, batch 1 at context 300) vs fp64;
#  * k3-bench prefill on the slice (512, 2048, 8192, 32768; 8192 with
#    4-warp blocks too), decode at context 1024 (batch 1, 8, 32, 128) and 8192 (batch 1, 4), then
#    torch SDPA on the same heads (mla_peer.py). QUICK=1: no 4-warp build,
#    no SDPA; NO_PREFILL=1: no prefill timings.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
run() { timeout 120 k3-run "$@" --checkpoint ckpt-tiny-dense --device cuda --quiet; }
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
echo "== k3-tiny f32 (exact) vs the reference, mixed batch; its decode kernel vs fp64"
timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
printf '%s\n%s\n%s\n' $(seq -s, 1 40) $(seq -s, 50 66) 7,8,9,10,11 > b62.txt
K3C_DUMP_KERNEL=mla_attn@2-3:/tmp/m0 timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch b62.txt --max-new-tokens 2 --quiet > /dev/null; python3 mla_check.py /tmp/m0 --rms-tol 1e-6
K3C_DUMP_KERNEL=mla_attn@9:/tmp/m00 timeout 120 k3-run tiny-f32 --checkpoint ckpt-tiny --device cuda --batch b62.txt --max-new-tokens 1 --quiet > /dev/null; python3 mla_check.py /tmp/m00 --rms-tol 1e-6
echo "== dense k3-tiny bf16 vs the reference: 20 tokens, 300 + 20 tokens, mixed batch"
seq -s, 1 300 > long.txt; seq -s, 5 24 >> long.txt
run tiny-dense-bf16 --prompt-ids $(seq -s, 7 26) --max-new-tokens 4 --check | grep -E "check:"
run tiny-dense-bf16 --batch long.txt --max-new-tokens 4 --check | grep -E "step 0|check:"
run tiny-dense-bf16 --batch batch.txt --max-new-tokens 4 --check | grep -E "step|check:"
echo "== the same, K3C_MLA_FLASH_FROM=2 build"
run tiny-dense-from2 --batch batch.txt --max-new-tokens 4 --check | grep -E "step|check:"
run tiny-dense-from2 --batch long.txt --max-new-tokens 3 --check | grep -E "check:"
echo "== kernel dumps vs fp64 attention"
printf '%s\n%s\n%s\n' $(seq -s, 1 100) $(seq -s, 50 89) $(seq -s, 200 216) > b3.txt
K3C_DUMP_KERNEL=mla_attn@64:/tmp/m1 run tiny-dense-bf16 --batch b3.txt --max-new-tokens 2 > /dev/null; python3 mla_check.py /tmp/m1
K3C_DUMP_KERNEL=mla_attn@2-3:/tmp/m2 run tiny-dense-from2 --batch b3.txt --max-new-tokens 2 > /dev/null; python3 mla_check.py /tmp/m2
K3C_DUMP_KERNEL=mla_attn@2-3:/tmp/m3 run tiny-dense-bf16 --batch b3.txt --max-new-tokens 2 > /dev/null; python3 mla_check.py /tmp/m3
echo "== full-width k3-small slice (seed 3)"
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
K3C_DUMP_KERNEL=mla_attn@2048:/tmp/m4 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 --quiet | grep -E "time to first"; python3 mla_check.py /tmp/m4 --head-stride 3; rm -rf /tmp/m4
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 70) $(seq -s, 3 20) 9,8,7 $(seq -s, 100 140) > b4.txt
K3C_DUMP_KERNEL=mla_attn@1-4:/tmp/m5 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --batch b4.txt --max-new-tokens 2 --quiet > /dev/null; python3 mla_check.py /tmp/m5; rm -rf /tmp/m5
K3C_DUMP_KERNEL=mla_attn@1-1:/tmp/m6 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 300) --max-new-tokens 2 --quiet > /dev/null; python3 mla_check.py /tmp/m6; rm -rf /tmp/m6
echo "== k3-bench on the slice (prefill)"
[ -z "${NO_PREFILL:-}" ] && k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 512,2048,8192 --decode none --csv $OUT/slice-bench.csv > $OUT/slice-bench.txt; grep -E "^prefill" $OUT/slice-bench.txt
grep -E "mla_attn|kda_chunk" $OUT/slice-bench.csv
echo "== k3-bench on the slice (decode at context 1024)"
k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1,8,32,128 --context 1024 --steps 8 --csv $OUT/slice-decode.csv > $OUT/slice-decode.txt; grep -E "^decode" $OUT/slice-decode.txt
grep -E "mla_attn" $OUT/slice-decode.csv
k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode 1,4 --context 8192 --steps 8 --csv $OUT/slice-decode8k.csv > $OUT/slice-decode8k.txt; grep -E "^decode" $OUT/slice-decode8k.txt
grep -E "mla_attn" $OUT/slice-decode8k.csv
[ -z "${NO_PREFILL:-}" ] && timeout 150 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 32768 --decode none --reps 1 --csv $OUT/slice-32k.csv > $OUT/slice-32k.txt; grep -E "^prefill" $OUT/slice-32k.txt; grep -E "mla_attn" $OUT/slice-32k.csv
[ -n "${QUICK:-}" ] && exit 0
k3-bench slice-w4 --checkpoint /tmp/slice --device cuda --quiet --prefill 8192 --decode none --csv $OUT/slice-w4.csv > /dev/null; grep -E "mla_attn" $OUT/slice-w4.csv
echo "== torch SDPA on the same heads"
timeout 200 python3 mla_peer.py --tokens 1024,2048,8192,32768 --csv $OUT/sdpa.csv

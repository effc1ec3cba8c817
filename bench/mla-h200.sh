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
#  * the slice bf16 against the reference at 72 tokens;
#  * k3-bench prefill on the slice (512, 2048, 8192, 32768; 8192 with
#    4-warp blocks too), then torch SDPA on the same heads (mla_peer.py).
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
run() { timeout 120 k3-run "$@" --checkpoint ckpt-tiny-dense --device cuda --quiet; }
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
timeout 200 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 72) --max-new-tokens 2 --check --quiet | grep -E "step|check:"
echo "== k3-bench on the slice (prefill)"
k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 512,2048,8192 --decode none --csv $OUT/slice-bench.csv > $OUT/slice-bench.txt; grep -E "^prefill" $OUT/slice-bench.txt
grep -E "mla_attn|kda_chunk" $OUT/slice-bench.csv
k3-bench slice-w4 --checkpoint /tmp/slice --device cuda --quiet --prefill 8192 --decode none --csv $OUT/slice-w4.csv > /dev/null; grep -E "mla_attn" $OUT/slice-w4.csv
timeout 150 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 32768 --decode none --reps 1 --csv $OUT/slice-32k.csv > $OUT/slice-32k.txt; grep -E "^prefill" $OUT/slice-32k.txt; grep -E "mla_attn" $OUT/slice-32k.csv
echo "== torch SDPA on the same heads"
timeout 200 python3 mla_peer.py --tokens 1024,2048,8192,32768 --csv $OUT/sdpa.csv

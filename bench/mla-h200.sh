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
#  * the slice's decode at context 5000 (many splits) vs fp64;
#  * k3-bench decode of the slice and of every variant in v/ (batch 1, 8,
#    64 at context 1024; 1, 8 at 8192; 1 at 32768); with PREFILL=1 also
#    prefill (512, 2048, 8192, 32768) and torch SDPA on the same heads
#    (mla_peer.py).
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee -a $OUT/log.txt) 2>&1
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
echo "== long context: the slice's decode at context 5000 (many splits) vs fp64"
K3C_DUMP_KERNEL=mla_attn@1-1:/tmp/m7 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 5000) --max-new-tokens 2 --quiet > /dev/null; python3 mla_check.py /tmp/m7 --head-stride 6; rm -rf /tmp/m7
# Decode timings (mla_attn per execution, one MLA layer): batch 1 / 8 / 64 at
# context 1024, 1 / 8 at 8192, 1 at 32768 (a step's prefill must fit the
# artifact's 65536 tokens).
decode() { # artifact tag
  for spec in "1,8,64 1024" "1,8 8192" "1 32768"; do
    set -- $spec
    timeout 200 k3-bench $ART --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode $1 --context $2 --steps 8 --csv /tmp/b/decode-$TAG-$2.csv > /tmp/b/decode-$TAG-$2.txt
    echo "-- $TAG context $2"; grep -E "^decode" /tmp/b/decode-$TAG-$2.txt; grep -E "mla_attn" /tmp/b/decode-$TAG-$2.csv
  done
}
mkdir -p /tmp/b
echo "== the decode launches of mla_attn (K3C_PROFILE_LAUNCHES; batch 1 and 8 at 8192)"
for b in 1 8; do
  K3C_PROFILE_LAUNCHES=1 timeout 200 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode $b --context 8192 --steps 8 2>&1 | grep -E "^decode|launch profile|mla_attn"
done
[ -n "${PROFILE_ONLY:-}" ] && exit 0
echo "== k3-bench decode on the slice"
ART=slice-bf16 TAG=default decode
for v in v/*; do [ -d "$v" ] && ART=$v TAG=${v#v/slice-} decode; done
[ -z "${PREFILL:-}" ] && exit 0
echo "== k3-bench on the slice (prefill)"
k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 512,2048,8192 --decode none --csv /tmp/b/slice-bench.csv > /tmp/b/slice-bench.txt; grep -E "^prefill" /tmp/b/slice-bench.txt
grep -E "mla_attn|kda_chunk" /tmp/b/slice-bench.csv
timeout 150 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 32768 --decode none --reps 1 --csv /tmp/b/slice-32k.csv > /tmp/b/slice-32k.txt; grep -E "^prefill" /tmp/b/slice-32k.txt; grep -E "mla_attn" /tmp/b/slice-32k.csv
echo "== torch SDPA on the same heads"
timeout 200 python3 mla_peer.py --tokens 1024,2048,8192,32768 --csv /tmp/b/sdpa.csv

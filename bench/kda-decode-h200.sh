#!/usr/bin/env bash
# KDA decode (the token recurrence) on one H200, checks then timings, one run
# (bundle: bench/make-kda-bundle.sh with VARIANTS, e.g.
# VARIANTS="PL=K3C_KDA_STAGED_FROM=0 S1=K3C_KDA_STAGED_FROM=1" TINY="S1"):
#  * the default build at 16 sequences (where the staged token kernel takes
#    over) against the reference: dense and softplus-gate k3-tiny bf16, the
#    softplus k3-tiny f32 (exact path, 1e-5), dense k3-tiny bf16 at 40
#    sequences (decode on the warpgroup tiles); its delta rule at 16 and (the
#    slice) 20 sequences against the fp64 recurrence (kernel dumps,
#    kda_check.py) (the slice's reference executor does not finish 17
#    sequences within 200 s there, so the slice is checked by its dumps);
#  * each variant in v/: its k3-tiny builds against the reference (mixed
#    batch), then the slice's decode logits over 20 sequences and over one
#    sequence, bit for bit against the default build;
#  * k3-bench decode at batch 1, 32, 128 (context 64) of the default build,
#    fla's fused_recurrent_kda on the same shapes (kda_peer.py; NO_FLA=1
#    skips it), then every variant's.
# DECODE=B,...: other batch sizes; NO_CHECKS=1: no k3-tiny checks or kernel
# dumps (an A/B of variants by their logits and times only).
# Results under $OUT.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
t0=$(date +%s); stamp() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-softplus.json -o ckpt-sp --seed 5 --quiet
# 16 prompts of 1-5 tokens; 20 for the slice.
for i in $(seq 1 16); do seq -s, $((i * 7)) $((i * 7 + i % 5)); done > b16.txt
for i in $(seq 1 20); do seq -s, $((i * 11)) $((i * 11 + i % 7)); done > b20.txt
if [ -z "${NO_CHECKS:-}" ]; then
echo "== default build, 16 sequences, vs the reference (dense bf16, softplus bf16, softplus f32)"
for a in tiny-dense-bf16:ckpt-tiny-dense sp-bf16:ckpt-sp sp-f32:ckpt-sp; do
  timeout 120 k3-run ${a%%:*} --checkpoint ${a#*:} --device cuda --batch b16.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
done
echo "== dense k3-tiny bf16, 40 sequences (decode launches of 40 tokens) vs the reference"
for i in $(seq 1 40); do seq -s, $((i * 5)) $((i * 5 + i % 3)); done > b40.txt
timeout 150 k3-run tiny-dense-b64-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch b40.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
echo "== the delta rule at 16 sequences (decode; a prefill of 1-2 token prompts) vs fp64"
K3C_DUMP_KERNEL=kda_chunk@16-16:/tmp/dd1 timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch b16.txt --max-new-tokens 3 --quiet > /dev/null; python3 kda_check.py /tmp/dd1; rm -rf /tmp/dd1
K3C_DUMP_KERNEL=kda_chunk@16-16:/tmp/dd2 timeout 120 k3-run sp-f32 --checkpoint ckpt-sp --device cuda --batch b16.txt --max-new-tokens 3 --quiet > /dev/null; python3 kda_check.py /tmp/dd2 --rms-tol 1e-6; rm -rf /tmp/dd2
# 16 prompts of 1-2 tokens: the prefill (T <= 2 N) takes the token kernel
# too, sequences of two tokens through the staged form's loop.
for i in $(seq 1 16); do seq -s, $((i * 3)) $((i * 3 + i % 2)); done > b16s.txt
K3C_DUMP_KERNEL=kda_chunk@17-32:/tmp/dd4 timeout 120 k3-run sp-f32 --checkpoint ckpt-sp --device cuda --batch b16s.txt --max-new-tokens 1 --quiet > /dev/null; python3 kda_check.py /tmp/dd4 --rms-tol 1e-6; rm -rf /tmp/dd4
timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch b16s.txt --max-new-tokens 3 --check --quiet | grep -E "check: (PASSED|FAILED)"
stamp
fi
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
run() { timeout 150 k3-run "$1" --checkpoint /tmp/slice --device cuda --quiet "${@:2}"; }
if [ -z "${NO_CHECKS:-}" ]; then
  K3C_DUMP_KERNEL=kda_chunk@20-20:/tmp/dd3 run slice-bf16 --batch b20.txt --max-new-tokens 3 > /dev/null; python3 kda_check.py /tmp/dd3; rm -rf /tmp/dd3
fi
run slice-bf16 --batch b20.txt --max-new-tokens 4 --dump-logits /tmp/ref20.npy > /dev/null
run slice-bf16 --prompt-ids $(seq -s, 3 18) --max-new-tokens 4 --dump-logits /tmp/ref1.npy > /dev/null
source kda-common.sh # same, variant_tiny_checks
bench() { timeout 150 k3-bench $1 --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode ${DECODE:-1,32,128} --csv $OUT/$2.csv > $OUT/$2.txt; grep -E "^decode" $OUT/$2.txt; grep -E "kda_chunk" $OUT/$2.csv; }
echo "== k3-bench decode, default build"; bench slice-bf16 default; stamp
if [ -z "${NO_FLA:-}" ] && [ -z "${NO_CHECKS:-}" ]; then
  echo "== fla fused_recurrent_kda (kda_peer.py), same shapes"
  timeout 200 python3 kda_peer.py --csv $OUT/fla.csv --prefill "" --check "" --dump "" --decode 1,32,128 2>&1 | tail -12
  stamp
fi
for v in v/slice-*; do
  [ -d "$v" ] || continue
  name=${v#v/slice-}
  echo "== variant $name"
  variant_tiny_checks $name b16.txt
  run $v --batch b20.txt --max-new-tokens 4 --dump-logits /tmp/x20.npy > /dev/null; same /tmp/ref20.npy /tmp/x20.npy "20 sequences vs default"
  run $v --prompt-ids $(seq -s, 3 18) --max-new-tokens 4 --dump-logits /tmp/x1.npy > /dev/null; same /tmp/ref1.npy /tmp/x1.npy "1 sequence vs default"
  bench $v $name; stamp
done

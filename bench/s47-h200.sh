#!/usr/bin/env bash
# #15's decode core A/B (bench/make-s47-bundle.sh; run bash .devm/s47-h200.sh,
# then PART=2 bash .devm/s47-h200.sh in a second call):
# the transposed warpgroup core (v/slice-WGT: two clustered blocks of 48
# heads sharing multicast cache tiles; WGT0 without the cluster), the
# clustered multi-token combine (CC2: 2 blocks a head and 16 tokens; WGTC:
# the transposed core with 4-block combines; WGT1: the transposed core for
# one-token rounds too) against the default (slice-bf16):
#  1. k3-tiny dv64 with each variant against the reference executor (100 and
#     12 sequences: rounds through the new core, 4 heads in one 8-head
#     group); k3-tiny dv32 bf16 / f32 as before;
#  2. the slice's decode logits of each variant against the default's (a
#     16-token prompt, 6 steps; a 5000-token prompt; 8 prompts of 40-1200
#     tokens: not bit-identical, the products sum in another order) and
#     each build's decode kernel against fp64 attention (mla_check.py: one
#     sequence at context 5000, four at 70 / 18 / 3 / 41);
#  3. mla_attn in the step graph (k3-bench) at context 8192 for 1, 8, 64
#     sequences and at 32768 for 8, every build;
#  4. Nsight Compute's duration of each MLA decode launch at batch 8,
#     context 8192, the default and WGT.
source "$(dirname "$0")/device-common.sh"
machine
export K3C_DEVICE_LOG_TEE=1
# 0. A smoke run of each variant first, with short timeouts (the new core
# waits on mbarriers and cluster barriers: a bug there hangs rather than
# fails): 8 prompts of 40-1200 tokens, 2 steps (decode rounds of 8 tokens),
# and k3-tiny dv64 at 12 sequences. A variant that fails or hangs is moved to
# broken/ and left out of everything below.
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
[ -d /tmp/ck-dv64 ] || k3-mkcheckpoint --config k3-tiny-dv64.json -o /tmp/ck-dv64 --seed 5 --quiet
for i in 1 2 3 4 5 6 7 8; do seq -s, $i $((i + 150 * i + 30)); done > /tmp/s8.txt
for i in $(seq 1 12); do seq -s, $i $((i * 7 + 3)); done > /tmp/s12.txt
mkdir -p broken
# (PART=smoke: the smoke runs alone; PART=checks: part 1 without them)
case "${PART:-1}" in 1|smoke) SMOKE=1 ;; *) SMOKE=0 ;; esac
[ $SMOKE = 1 ] && rm -f /tmp/s47-broken.txt
[ $SMOKE = 1 ] && for v in WGT WGT0 CC2 WGTC WGT1; do
  [ -d v/slice-$v ] || continue
  ok=1
  timeout 60 k3-run v/slice-$v --checkpoint /tmp/slice --device cuda --batch /tmp/s8.txt --max-new-tokens 2 --quiet > /tmp/smoke.txt 2>&1 || ok=0
  timeout 30 k3-run v64/dv64-$v --checkpoint /tmp/ck-dv64 --device cuda --batch /tmp/s12.txt --max-new-tokens 2 --check --quiet >> /tmp/smoke.txt 2>&1 || ok=0
  grep -E "check:|error" /tmp/smoke.txt | head -3
  echo "smoke $v: $([ $ok = 1 ] && echo ok || echo FAILED, left out)"
  [ $ok = 1 ] || { echo $v >> /tmp/s47-broken.txt; tail -5 /tmp/smoke.txt; }
done
# (/tmp outlives a call on a warm machine; the carried bundle is copied anew)
for v in $(cat /tmp/s47-broken.txt 2>/dev/null); do mv v/slice-$v v64/dv64-$v broken/ 2>/dev/null; done
# Two device calls (each under the 10-minute limit of one command):
# PART=1 (the default) the smoke runs and the checks, PART=2 the timings. A
# variant PART=1 found broken stays out of PART=2 (/tmp/s47-broken.txt,
# on the same warm machine).
[ "${PART:-1}" = smoke ] && exit 0
if [ "${PART:-1}" = 1 ] || [ "${PART:-1}" = checks ]; then
  SLICE=slice-bf16 DUMP_CHECK=1 NO_NCU=1 NO_BENCH=1 bash mla-decode-h200.sh
  echo "== s47 part 1 done (${SECONDS}s); next: PART=2 bash .devm/s47-h200.sh"
  exit 0
fi
SLICE=slice-bf16 NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=1,8,64 CTX=8192 bash mla-decode-h200.sh
NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=8 CTX=32768 bash mla-decode-h200.sh
for s in slice-bf16 v/slice-WGT; do
  [ -d $s ] || continue
  SLICE=$s NO_TINY=1 NO_CMP=1 NO_BENCH=1 BATCHES=8 CTX=8192 bash mla-decode-h200.sh
done
echo "== s47 done (${SECONDS}s)"

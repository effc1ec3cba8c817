# Sourced first by the scripts that run on the GPU machine, from the bundle
# folder (.dev, where bundle_start in bench/bundle-common.sh copies this
# file): unset variables are errors, the bundle folder is the working
# directory with its tools on PATH, OUT (the device call's result folder;
# /tmp/out by default) exists, and everything the script prints is also
# appended to $OUT/log.txt (scripts run one after another in a call keep
# each other's log). `machine` prints the GPU, its memory and driver.
set -u
cd "$(dirname "${BASH_SOURCE[1]}")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
# (once: a script run from another's call, e.g. mla-grid-h200.sh from s44,
# writes through its caller's tee.)
if [ -z "${K3C_DEVICE_LOG_TEE:-}" ]; then
  export K3C_DEVICE_LOG_TEE=1
  exec > >(tee -a $OUT/log.txt) 2>&1
fi
machine() {
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
}
# kbench NAME ARTIFACT CHECKPOINT ROWS k3-bench-args...: k3-bench of ARTIFACT
# with CHECKPOINT's weights (16 decode steps), its csv appended to
# $OUT/kbench.csv under a "# NAME" line (one file for every run: the device
# call returns at most 8 files), then the rows matching the extended regex
# ROWS under "-- NAME".
kbench() {
  local name=$1 art=$2 ck=$3 rows=$4; shift 4
  timeout ${KBENCH_TIMEOUT:-200} k3-bench $art --checkpoint $ck --steps 16 --quiet --csv /tmp/kbench-$name.csv "$@" > /dev/null
  { echo "# $name"; cat /tmp/kbench-$name.csv; } >> $OUT/kbench.csv
  echo "-- $name"; grep -E "$rows" /tmp/kbench-$name.csv
}
# mla_kernel_check BUILD SECONDS [POSITIONS]: BUILD's one-token MLA decode
# kernel against fp64 attention (mla_check.py), its first one-token launch
# after a prompt of POSITIONS tokens (5000 by default) on the slice.
mla_kernel_check() {
  echo "== $1: one-token decode kernel vs fp64, ${3:-5000} positions (${SECONDS}s)"
  rm -rf /tmp/d1
  K3C_DUMP_KERNEL=mla_attn@1-1:/tmp/d1 timeout $2 k3-run $1 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 ${3:-5000}) --max-new-tokens 2 --quiet > /dev/null
  python3 mla_check.py /tmp/d1 --head-stride 6; rm -rf /tmp/d1
}
# kda_decode_check BUILD N: BUILD's delta rule in its N-sequence decode
# launch (N prompts of 2 tokens) against an fp64 recurrence (kda_check.py).
kda_decode_check() {
  echo "== $1: the delta rule's decode launch at $2 sequences vs fp64 (${SECONDS}s)"
  for i in $(seq 1 $2); do echo "$i,$((i + 20))"; done > /tmp/bk$2.txt
  rm -rf /tmp/kd; K3C_DUMP_KERNEL=kda_chunk@$2-$2:/tmp/kd timeout 90 k3-run $1 --checkpoint /tmp/slice --device cuda --batch /tmp/bk$2.txt --max-new-tokens 2 --quiet > /dev/null
  timeout 120 python3 kda_check.py /tmp/kd; rm -rf /tmp/kd
}
# slice_check BUILD...: each build against the reference executor on the
# slice (/tmp/slice): one 2-token prompt, 2 new tokens (--check).
slice_check() {
  local a
  for a in "$@"; do
    echo "== $a vs the reference: one 2-token prompt, 2 new (${SECONDS}s)"
    timeout 100 k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids 5,6 --max-new-tokens 2 --check --quiet | grep -E "check: (PASS|FAIL)|error"
  done
}
# same_tokens BATCH BASE OTHER...: the greedy tokens of each OTHER build on
# the slice (BATCH: a prompt a line, 4 new tokens) against BASE's.
same_tokens() {
  local b=$1 base=$2 a; shift 2
  echo "== greedy tokens, $(wc -l < $b) prompts x 4 steps: $* against $base (${SECONDS}s)"
  for a in $base "$@"; do
    timeout 100 k3-run $a --checkpoint /tmp/slice --device cuda --batch $b --max-new-tokens 4 --quiet | grep '^sequence' > /tmp/g-$a.txt
  done
  for a in "$@"; do
    if [ -s /tmp/g-$a.txt ] && cmp -s /tmp/g-$base.txt /tmp/g-$a.txt; then echo "$a: $base's tokens ($(wc -l < /tmp/g-$a.txt) sequences)"; else echo "$a: tokens DIFFER"; diff /tmp/g-$base.txt /tmp/g-$a.txt | head -4; fi
  done
}
# mla_context_rows PREFIX BUILD...: mla_attn and the step at one sequence
# after 64, 1024, 8192 and 32768 positions, the builds alternating.
mla_context_rows() {
  local p=$1 c a; shift
  for c in 64 1024 8192 32768; do
    for a in "$@"; do
      kbench $p-$a-1-$c $a /tmp/slice 'graph|mla_attn' --prefill none --decode 1 --context $c
    done
  done
}
# dense_inputs: the split-K / TMA bundles' dense k3-tiny checkpoint
# (ckpt-dense) and batches: 128 one-token prompts (b128.txt), a 100-token
# prompt (p100.txt) and it among 19 one-token prompts (mix20.txt: 119 tokens,
# 20 sequences: a prefill round of mixed lengths, then decode rounds of 20).
dense_inputs() {
  k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-dense --seed 11 --quiet
  seq 1 128 > b128.txt; seq 3 102 | paste -sd, > p100.txt
  { cat p100.txt; seq 200 218; } > mix20.txt
}
# dense_checks ARTIFACTS...: each against the reference executor on those
# three batches (3 new tokens; DENSE_BATCHES="p100.txt mix20.txt" picks
# some, e.g. for f32 builds, whose fp64 reference is slower).
dense_checks() {
  local a b
  for a in "$@"; do
    echo "== $a vs the reference: ${DENSE_BATCHES:-b128.txt p100.txt mix20.txt}"
    for b in ${DENSE_BATCHES:-b128.txt p100.txt mix20.txt}; do
      timeout 120 k3-run $a --checkpoint ckpt-dense --device cuda --batch $b --max-new-tokens 3 --check --quiet | grep -E "check: (PASS|FAIL)|error"
    done
  done
}
# tiny_moe_checks VARIANTS: k3-tiny's checkpoint (ckpt-tiny) and a mixed batch
# (mix.txt: prompts of 300, 40, 3 and 131 tokens); then tiny-bf16 and each
# tiny-bf16-NAME of VARIANTS that the bundle has against the reference
# executor (3 new tokens: decode rounds of 4 sequences), and their decode
# round's routed experts (dumped) against fp64 (moe_check.py).
tiny_moe_checks() {
  k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
  printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
  local v n
  for v in tiny-bf16 $(for n in $1; do [ -d tiny-bf16-$n ] && echo tiny-bf16-$n; done); do
    echo "== $v vs the reference: mixed batch"
    timeout 120 k3-run $v --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check --device cuda --quiet | grep -E "check: (PASSED|FAILED)|error"
    rm -rf /tmp/w5; K3C_DUMP_KERNEL=moe_experts@4-4:/tmp/w5 timeout 120 k3-run $v --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --device cuda --quiet > /dev/null
    echo "$v decode round vs fp64:"; python3 moe_check.py /tmp/w5 --experts 16 | tail -1
  done
}
# greedy_same NAME ARTIFACT CHECKPOINT BATCH [k3-run args]: the tokens of 4
# greedy steps picked on the device (the artifact's argmax kernel) against
# the host's pick (K3C_HOST_GREEDY=1: std::max_element on the copied logits).
greedy_same() {
  local n=$1 a=$2 c=$3 b=$4; shift 4
  timeout 150 k3-run $a --checkpoint $c --device cuda --batch $b --max-new-tokens 4 --quiet "$@" | grep '^sequence' > /tmp/gd.txt
  K3C_HOST_GREEDY=1 timeout 150 k3-run $a --checkpoint $c --device cuda --batch $b --max-new-tokens 4 --quiet "$@" | grep '^sequence' > /tmp/gh.txt
  if [ -s /tmp/gd.txt ] && cmp -s /tmp/gd.txt /tmp/gh.txt; then echo "greedy $n: device = host ($(wc -l < /tmp/gd.txt) sequences)"; else echo "greedy $n: DIFFERENT"; diff /tmp/gd.txt /tmp/gh.txt | head -4; fi
}
# ncu_kernel TAG REGEX SECONDS K3-RUN-ARGS...: Nsight Compute (full set,
# clocks unlocked) on the first launch whose kernel name matches REGEX in
# `k3-run K3-RUN-ARGS`, under a SECONDS limit; prints the headline metrics
# and the SASS opcode mix (ncu_mix.py), and returns details, source and the
# run's output as $OUT/TAG-prof.tgz. Skipped with NO_NCU=1 or without ncu.
ncu_kernel() {
  local tag=$1 re=$2 limit=$3; shift 3
  if [ -n "${NO_NCU:-}" ] || ! which ncu > /dev/null; then return 0; fi
  timeout $limit ncu --clock-control none --set full --import-source no -k "regex:$re" \
    --launch-count 1 -f -o /tmp/$tag k3-run "$@" > /tmp/$tag-run.txt 2>&1
  ncu -i /tmp/$tag.ncu-rep --page details --print-details all > /tmp/$tag-details.txt 2>&1
  ncu -i /tmp/$tag.ncu-rep --page source --csv --print-source sass > /tmp/$tag-source.csv 2>&1
  grep -E "^  [a-z_0-9]+ |^    (Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy|L2 Hit Rate|Block Limit|Compute \(SM\) Throughput)" /tmp/$tag-details.txt | head -20
  python3 ncu_mix.py /tmp/$tag-source.csv "$re"
  tar czf $OUT/$tag-prof.tgz -C /tmp $tag-details.txt $tag-source.csv $tag-run.txt
}
# slice_setup: the start of the slice scripts (s65, s66): the machine's line,
# the slice checkpoint in /tmp/slice (slice.json, seed 3), the copy ceiling,
# and their prompt files: /tmp/b8.txt (8 prompts of 1 to 33 tokens: the
# prefill round's last rows at varied offsets) and /tmp/b128s.txt (128
# one-token prompts).
slice_setup() {
  machine
  k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
  copy_ceiling
  for i in $(seq 1 8); do seq -s, $((i * 11)) $((i * 11 + i * i / 2)); done > /tmp/b8.txt
  seq 1 128 > /tmp/b128s.txt
}
# copy_ceiling: the device's copy bandwidth as torch measures it (1 GiB
# device to device, 20 copies after 3 warm-ups, read + write counted): the
# limit the bandwidth-bound kernels are reported against, in the same call.
copy_ceiling() {
  python3 - <<'PY'
import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(20): y.copy_(x)
e.record(); torch.cuda.synchronize()
t = s.elapsed_time(e) / 20 / 1e3
print('copy ceiling: %.0f GB/s (1 GiB device to device, read + write counted)' % (2 * x.numel() / t / 1e9))
PY
}

#!/usr/bin/env bash
# Nsight Compute profiles of the expert GEMMs and the KDA token recurrence on
# one H200 (Firecracker machines read the hardware counters; the clocks are
# left alone). Bundle: bash bench/make-moe-bundle.sh (NO_FMA=1 NO_T128=1 is
# enough; MOE_VARIANTS adds moe1-NAME builds, profiled with PROFILE_VARIANTS).
# Carry .dev; run: bash .dev/ncu-h200.sh. Packs, per profiled run,
# NAME-details.txt (every section, chart bodies included), NAME-raw.csv (every
# collected metric) and NAME-source.csv (SASS with per-instruction warp-state
# samples) into $OUT/prof.tgz (the device call brings back few files).
# bench/ncu_mix.py prints a source export's instruction mix (--loop: the
# main loop's, with instructions per MMA).
#  * prefill: the MoE slice (1 layer, 256 experts, top 16) at 8192 tokens,
#    the up and down warpgroup-MMA expert kernels (full set);
#  * decode: 16 one-token sequences, the mma.sync expert kernels and the KDA
#    token recurrence (64 sequences).
source "$(dirname "$0")/device-common.sh"
P=/tmp/prof; mkdir -p $P
machine
which ncu || { echo "no ncu"; exit 1; }
( time k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
prof() { # NAME KERNEL_REGEX COUNT ARTIFACT k3-run args...
  local name=$1 re=$2 count=$3 art=$4; shift 4
  echo "== $name: $re (${SECONDS}s)"
  timeout 240 ncu --clock-control none --set full --import-source no -k "regex:$re" \
    --launch-count $count -f -o $P/$name k3-run $art --checkpoint /tmp/moe1 --device cuda --quiet "$@" > $P/$name-run.txt 2>&1
  tail -3 $P/$name-run.txt
  ncu -i $P/$name.ncu-rep --page details --print-details all > $P/$name-details.txt 2>&1
  ncu -i $P/$name.ncu-rep --page raw --csv > $P/$name-raw.csv 2>&1
  ncu -i $P/$name.ncu-rep --page source --csv --print-source sass > $P/$name-source.csv 2>&1
  grep -E "^    (Duration|DRAM Throughput|Compute \(SM\) Throughput|SM: Pipe Alu Cycles Active|SM: Pipe Tensor Cycles Active)" $P/$name-details.txt | head -12
}
prof prefill 'experts_(up|down)_mxfp4_wgmma' 2 moe1 --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1
for v in ${PROFILE_VARIANTS:-}; do
  prof prefill-$v 'experts_(up|down)_mxfp4_wgmma' 2 moe1-$v --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1
done
for i in $(seq 1 64); do echo $((i * 7 + 3)); done > one64.txt
head -16 one64.txt > one16.txt
prof decode 'experts_((up|down)_)?mxfp4_mma_16' 2 moe1 --batch one16.txt --max-new-tokens 2
prof kda-decode 'kda_tokens' 2 moe1 --batch one64.txt --max-new-tokens 2
tar czf $OUT/prof.tgz -C $P $(cd $P && ls *-details.txt *-raw.csv *-source.csv)
echo "== done (${SECONDS}s)"

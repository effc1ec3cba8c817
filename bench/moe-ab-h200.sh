#!/usr/bin/env bash
# The routed experts of two k3c builds on one H200, checks then timings:
# the bundle of bench/make-moe-bundle.sh (this tree) and, in .dev/old, k3-bench,
# k3-run and the MoE slice artifact of an earlier build (OLD_REV; copy them
# there after making the bundle: the earlier k3-run repacks the checkpoint for
# its own kernels, so each build runs with its own runtime).
#  * checks of this build: the wide k3-tiny bf16 against the reference
#    executor (with and without warpgroup MMA), k3-tiny f32 at 1e-5 (the FMA
#    expert path), k3-tiny bf16 (16- and 64-row mma.sync tiles); expert
#    kernel dumps against fp64 (bench/moe_check.py decodes the layout
#    independently): the wide k3-tiny (wgmma, mma.sync, an edge-case and NaN
#    scale checkpoint), the MoE slice at 3072 tokens;
#  * k3-bench of the MoE slice, this build, its variants (moe1-NAME, built
#    with MOE_VARIANTS; each checked by a dump at 3072 tokens first) and the
#    old one alternating twice: prefill 1024, 2340, 8192 and decode batch 1,
#    16, 64 (moe_experts rows); SKIP_TINY=1 skips the k3-tiny checks;
#  * NCU=1: Nsight Compute profiles of this build's expert kernels (prefill
#    8192 warpgroup MMA, decode 16 mma.sync) into $OUT/prof.tgz.
source "$(dirname "$0")/device-common.sh"
machine
run() { timeout 120 k3-run "$@" --device cuda --quiet; }
k3-mkcheckpoint --config k3-tiny-wide.json -o ckpt-wide --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny.json -o ckpt-tiny --seed 11 --quiet
seq -s, 1 400 > long.txt; seq -s, 5 24 >> long.txt
printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 300) $(seq -s, 50 89) 7,8,9 $(seq -s, 200 330) > mix.txt
[ -n "${SKIP_TINY:-}" ] || {
for v in wide-bf16 wide-bf16-nowg; do
  echo "== $v vs the reference: 400 + 20 tokens, mixed batch"
  run $v --checkpoint ckpt-wide --batch long.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
  run $v --checkpoint ckpt-wide --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
done
for v in tiny-f32 tiny-bf16 tiny-bf16-t64; do
  echo "== $v vs the reference: mixed batch"
  run $v --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 --check | grep -E "check: (PASSED|FAILED)|error"
done
echo "== expert kernel dumps vs fp64"
for v in wide-bf16 wide-bf16-nowg; do
  rm -rf /tmp/w1; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w1 run $v --checkpoint ckpt-wide --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null; echo "$v:"; python3 moe_check.py /tmp/w1 --experts 16 | tail -1
done
python3 mxfp4-edge-scales.py ckpt-wide ckpt-wide-edge --nan
rm -rf /tmp/w3; K3C_DUMP_KERNEL=moe_experts@400:/tmp/w3 timeout 120 k3-run wide-bf16 --checkpoint ckpt-wide-edge --allow-nonfinite --device cuda --quiet --prompt-ids $(seq -s, 1 400) --max-new-tokens 1 > /dev/null; echo "edge scales:"; python3 moe_check.py /tmp/w3 --experts 16 | tail -1
rm -rf /tmp/w5; K3C_DUMP_KERNEL=moe_experts@4-4:/tmp/w5 run tiny-bf16 --checkpoint ckpt-tiny --batch mix.txt --max-new-tokens 3 > /dev/null; echo "tiny-bf16 (decode batch, 16-row tiles):"; python3 moe_check.py /tmp/w5 --experts 16 | tail -1
}
echo "== MoE slice (1 layer, 256 experts, seed 3) (${SECONDS}s)"
( time k3-mkcheckpoint --config moe1.json -o /tmp/moe1 --seed 3 --quiet ) 2>&1 | grep -E "real|error"
rm -rf /tmp/w4; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w4 timeout 150 k3-run moe1 --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null; python3 moe_check.py /tmp/w4 --experts 3 | tail -1; rm -rf /tmp/w4
variants=$(ls -d moe1-* 2>/dev/null | grep -v -e nowg -e fma -e t128)
for v in $variants; do
  rm -rf /tmp/w5; K3C_DUMP_KERNEL=moe_experts@3072:/tmp/w5 timeout 150 k3-run $v --checkpoint /tmp/moe1 --device cuda --prompt-ids $(seq -s, 1 3072) --max-new-tokens 1 --quiet > /dev/null; echo "$v:"; python3 moe_check.py /tmp/w5 --experts 2 | tail -1; rm -rf /tmp/w5
done
echo "== k3-bench: MoE slice (${SECONDS}s)"
bench() { # NAME BENCH ARTIFACT
  timeout 200 $2 $3 --checkpoint /tmp/moe1 --prefill 1024,2340,8192 --decode 1,16,64 --steps 16 --quiet --csv $OUT/$1.csv > /dev/null
  echo "-- $1"; grep -E "moe_experts" $OUT/$1.csv
}
for round in 1 2; do
  bench new-$round k3-bench moe1
  for v in $variants; do bench $v-$round k3-bench $v; done
  [ -d old ] && bench old-$round old/k3-bench old/moe1
done
if [ -n "${NCU:-}" ]; then
  echo "== ncu (${SECONDS}s)"
  mkdir -p /tmp/prof
  prof() { # NAME REGEX COUNT k3-run args
    local name=$1 re=$2 count=$3; shift 3
    timeout 150 ncu --clock-control none --set full --import-source no -k "regex:$re" --launch-count $count -f -o /tmp/prof/$name k3-run moe1 --checkpoint /tmp/moe1 --device cuda --quiet "$@" > /tmp/prof/$name-run.txt 2>&1
    ncu -i /tmp/prof/$name.ncu-rep --page details --print-details all > /tmp/prof/$name-details.txt 2>&1
    ncu -i /tmp/prof/$name.ncu-rep --page raw --csv > /tmp/prof/$name-raw.csv 2>&1
    ncu -i /tmp/prof/$name.ncu-rep --page source --csv --print-source sass > /tmp/prof/$name-source.csv 2>&1
    grep -E "^    (Duration|DRAM Throughput|Compute \(SM\) Throughput)" /tmp/prof/$name-details.txt | head -6
  }
  prof prefill 'experts_(up|down)_mxfp4_wgmma' 2 --prompt-ids $(seq -s, 1 8192) --max-new-tokens 1
  for i in $(seq 1 16); do echo $((i * 7 + 3)); done > one16.txt
  prof decode 'experts_((up|down)_)?mxfp4_mma_16' 2 --batch one16.txt --max-new-tokens 2
  tar czf $OUT/prof.tgz -C /tmp/prof $(cd /tmp/prof && ls *-details.txt *-raw.csv *-source.csv)
fi
echo "== done (${SECONDS}s)"

#!/usr/bin/env bash
# MLA decode on one H200, per launch: the slice's decode at context 8192
# (batch 1 and 8) timed inside the step graph by k3-bench for the default
# build and each variant in v/ (their decode logits compared bit for bit
# with the default build's first), then Nsight Compute's duration of every
# MLA decode launch (append, q_abs, core, combine) of one graph-replayed
# step, with its DRAM and L2 bytes (both head groups' blocks read each cache
# tile from L2). Bundle: VARIANTS="..." bash bench/make-mla-bundle.sh; carry
# .dev; run: bash .dev/mla-decode-h200.sh (CTX=8192 BATCHES=1,8 by default;
# NO_CMP=1 skips the logits comparison, NO_NCU=1 the Nsight Compute part,
# NO_TINY=1 the k3-tiny checks, NO_BENCH=1 the k3-bench timing;
# DUMP_CHECK=1 adds every build's decode kernel against fp64 attention).
# The next A/B: VARIANTS="WG=K3C_MLA_DECODE_WGMMA=1 SC2=K3C_MLA_DECODE_S_CHAINS=2".
source "$(dirname "$0")/device-common.sh"
machine
CTX=${CTX:-8192}; BATCHES=${BATCHES:-1,8}
# SLICE: the default build (slice-bf16); VDIR: the variants' folder (v).
SLICE=${SLICE:-slice-bf16}; VDIR=${VDIR:-v}
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
mkdir -p /tmp/b
if [ -d tiny-dv32-bf16 ] && [ -z "${NO_TINY:-}" ]; then
  # k3-tiny with dv 32 (the row-sliced combine) against the reference
  # executor: one prompt (one-token rounds), 4 and 12 sequences (rounds of 4
  # and 12 tokens), bf16 and f32 (1e-5).
  echo "== k3-tiny dv 32 vs the reference (bf16, f32)"
  k3-mkcheckpoint --config k3-tiny-dv32.json -o /tmp/ck-dv32 --seed 5 --quiet
  printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 70) $(seq -s, 3 20) 9,8,7 $(seq -s, 100 140) > /tmp/t4.txt
  for i in $(seq 1 12); do seq -s, $i $((i * 7 + 3)); done > /tmp/t12.txt
  for m in tiny-dv32-bf16 tiny-dv32-f32; do
    r() { timeout 120 k3-run $m --checkpoint /tmp/ck-dv32 --device cuda --quiet --check "$@" | grep -E "check:"; }
    r --prompt-ids $(seq -s, 5 300) --max-new-tokens 4
    r --batch /tmp/t4.txt --max-new-tokens 4
    r --batch /tmp/t12.txt --max-new-tokens 3
  done
fi
if [ -d tiny-dv64-bf16 ] && [ -z "${NO_TINY:-}" ]; then
  # k3-tiny with dv 64 (the staged q_abs of rounds of 8+ tokens, the
  # tensor-core combine) against the reference: 100, 12 and 8 sequences.
  echo "== k3-tiny dv 64 vs the reference (bf16; 100, 12 and 8 sequences)"
  k3-mkcheckpoint --config k3-tiny-dv64.json -o /tmp/ck-dv64 --seed 5 --quiet
  for i in $(seq 1 100); do seq -s, $i $((i + 2 + i % 9)); done > /tmp/t100.txt
  for i in $(seq 1 12); do seq -s, $i $((i * 7 + 3)); done > /tmp/t12b.txt
  for i in $(seq 1 8); do seq -s, $i $((i * 9 + 5)); done > /tmp/t8b.txt
  for m in tiny-dv64-bf16 v64/dv64-*; do
    [ -d "$m" ] || continue
    echo "-- $m"
    for b in t100 t12b t8b; do
      timeout 150 k3-run $m --checkpoint /tmp/ck-dv64 --device cuda --batch /tmp/$b.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
    done
  done
fi
if [ -z "${NO_CMP:-}" ]; then
echo "== decode logits, variants vs default (a 16-token prompt, 6 steps)"
k3-run $SLICE --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/ref.npy > /dev/null
# ($VDIR/slice-base, when there, is a baseline build: every variant is compared
# with it too; 1 prompt of 5000 tokens as well, for the long-context splits)
for a in $VDIR/*; do
  [ -d "$a" ] || continue
  k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 3 18) --max-new-tokens 6 --quiet --dump-logits /tmp/x-$(basename $a).npy > /dev/null
done
# ... and a batch of 8 prompts of 40-1200 tokens (decode rounds of 8 tokens:
# the warpgroup core and the batched combine), against slice-base where the
# bundle has one, else against the default build.
for i in 1 2 3 4 5 6 7 8; do seq -s, $i $((i + 150 * i + 30)); done > /tmp/b8.txt
for a in $SLICE $VDIR/*; do
  [ -d "$a" ] || continue
  k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 5000) --max-new-tokens 4 --quiet --dump-logits /tmp/L-$(basename $a).npy > /dev/null
  k3-run $a --checkpoint /tmp/slice --device cuda --batch /tmp/b8.txt --max-new-tokens 4 --quiet --dump-logits /tmp/B-$(basename $a).npy > /dev/null
done
[ -d $VDIR/slice-base ] || { cp /tmp/L-$(basename $SLICE).npy /tmp/L-slice-base.npy; cp /tmp/B-$(basename $SLICE).npy /tmp/B-slice-base.npy; }
python3 - <<'PY'
import numpy as n, glob, os
def cmp(x, y, tag):
    a, b = n.load(x), n.load(y)
    d = abs(a.astype(n.float64) - b).max() / abs(a).max()
    print('%s: bit-identical %s, max rel %.2e' % (tag, bool((a.view(n.uint32) == b.view(n.uint32)).all()), d))
for f in sorted(glob.glob('/tmp/x-*.npy')):
    cmp('/tmp/ref.npy', f, 'default vs ' + f[7:-4])
    if os.path.exists('/tmp/x-slice-base.npy') and 'base' not in f:
        cmp('/tmp/x-slice-base.npy', f, 'base vs ' + f[7:-4])
for f in sorted(glob.glob('/tmp/L-*.npy')):
    if 'base' not in f:
        cmp('/tmp/L-slice-base.npy', f, '5000-token prompt, base vs ' + f[7:-4])
for f in sorted(glob.glob('/tmp/B-*.npy')):
    if 'base' not in f:
        cmp('/tmp/B-slice-base.npy', f, '8 prompts, base vs ' + f[7:-4])
PY
fi
if [ -n "${DUMP_CHECK:-}" ]; then
  # Each variant's decode kernel against fp64 attention (mla_check.py): one
  # sequence at context 5000 (many splits) and four at contexts 70, 18, 3, 41.
  printf '%s\n%s\n%s\n%s\n' $(seq -s, 1 70) $(seq -s, 3 20) 9,8,7 $(seq -s, 100 140) > /tmp/b4.txt
  for a in $SLICE $VDIR/*; do
    [ -d "$a" ] || continue
    echo "== $a: decode kernel vs fp64"
    K3C_DUMP_KERNEL=mla_attn@1-1:/tmp/d1 timeout 120 k3-run $a --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 5000) --max-new-tokens 2 --quiet > /dev/null
    python3 mla_check.py /tmp/d1 --head-stride 6; rm -rf /tmp/d1
    K3C_DUMP_KERNEL=mla_attn@1-4:/tmp/d4 timeout 120 k3-run $a --checkpoint /tmp/slice --device cuda --batch /tmp/b4.txt --max-new-tokens 2 --quiet > /dev/null
    python3 mla_check.py /tmp/d4; rm -rf /tmp/d4
  done
fi
if [ -z "${NO_BENCH:-}" ]; then
echo "== k3-bench decode at context $CTX (graph-timed, us per kernel)"
for a in $SLICE $VDIR/*; do
  [ -d "$a" ] || continue
  echo "-- $a"
  t=$(basename $a)-$CTX
  timeout 200 k3-bench $a --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode $BATCHES --context $CTX --steps 16 --csv /tmp/b/$t.csv > /tmp/b/$t.txt
  grep -E "^decode|mla_attn" /tmp/b/$t.txt
done
fi
if [ -z "${NO_NCU:-}" ] && which ncu > /dev/null; then
  for b in ${BATCHES//,/ }; do
    echo "== ncu: MLA decode launches, batch $b, context $CTX"
    timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,launch__grid_size,launch__registers_per_thread \
      -k "regex:absorbed_(qabs|split|combine)|mla_attn.*append" --csv k3-bench $SLICE --checkpoint /tmp/slice --device cuda --quiet \
      --prefill none --decode $b --context $CTX --steps 1 > /tmp/b/ncu-$b.csv 2>&1
    python3 - /tmp/b/ncu-$b.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print(open(sys.argv[1]).read()[-2000:]); sys.exit()
h = rows[0]; ki, mi, vi, ii = h.index('Kernel Name'), h.index('Metric Name'), h.index('Metric Value'), h.index('ID')
per = collections.OrderedDict()
for r in rows[1:]:
    per.setdefault((r[ii], r[ki].split('(')[0]), {})[r[mi]] = r[vi]
for (i, k), m in list(per.items())[-12:]:
    print('%4s %-60s %s' % (i, k[-60:], '  '.join('%s=%s' % (a.split('__')[1], v) for a, v in m.items())))
PY
  done
fi
if [ -n "${NCU_FULL:-}" ] && which ncu > /dev/null; then
  # The full profile of one launch matching $NCU_FULL (a kernel-name regex)
  # at batch NCU_BATCH (1 unless set; of the build NCU_SLICE, the default
  # build unless set): its details page in $OUT/ncu-full.txt.
  echo "== ncu --set full: $NCU_FULL, batch ${NCU_BATCH:-1}, context $CTX"
  timeout 240 ncu --clock-control none --set full --import-source no -k "regex:$NCU_FULL" --launch-skip 2 --launch-count 1 -f -o /tmp/b/full \
    k3-bench ${NCU_SLICE:-$SLICE} --checkpoint /tmp/slice --device cuda --quiet --prefill none --decode ${NCU_BATCH:-1} --context $CTX --steps 1 > /tmp/b/full-run.txt 2>&1
  ncu -i /tmp/b/full.ncu-rep --page details --print-details all > $OUT/ncu-full.txt 2>&1
  grep -E "^    (Duration|Registers Per Thread|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|No Eligible)" $OUT/ncu-full.txt | head -12
fi
cp /tmp/b/*.csv /tmp/b/*.txt $OUT/ 2>/dev/null
echo "== done (${SECONDS}s)"

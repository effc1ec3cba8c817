#!/usr/bin/env bash
# #15's decode grid on one GPU (bench/make-s43-bundle.sh builds slice32k: the
# full-width k3-small slice with 33024 positions a sequence): `mla_attn` and
# the step, graph-timed by k3-bench, at 1 / 8 / 64 sequences and contexts of
# 1024, 8192 and 32768 tokens (the contexts prefilled in steps of 8192
# tokens), with the MLA cache bytes a step reads (sequences x context x 576
# x 2 bytes a layer) over `mla_attn`'s time beside the copy rate.
# Run: bash .dev/mla-grid-h200.sh (after s43-h200.sh in the same call, or
# alone; CONTEXTS / BATCHES override the grid).
source "$(dirname "$0")/device-common.sh"
machine
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for C in ${CONTEXTS:-1024 8192 32768}; do
  echo "== context $C (${SECONDS}s)"
  kbench grid-$C slice32k /tmp/slice 'mla_attn|TOTAL,graph' --prefill none \
    --decode ${BATCHES:-1,8,64} --context $C --steps 8
  python3 - "$C" /tmp/kbench-grid-$C.csv <<'PY'
import csv, sys
C = int(sys.argv[1])
for r in csv.DictReader(open(sys.argv[2])):
    if r['phase'] == 'decode' and r['family'] == 'mla_attn':
        b = int(r['size']); us = float(r['ms']) * 1e3
        mb = b * (C + 1) * 576 * 2 / 1e6
        print(f"  batch {b:3d} context {C:5d}: mla_attn {us:8.1f} us, cache {mb:8.1f} MB, {mb / us:6.2f} TB/s")
PY
done
echo "== grid done (${SECONDS}s)"

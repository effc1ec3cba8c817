#!/usr/bin/env bash
# Where #13's batched decode step goes, on one H200: the full-width k3-small
# slice (bench/slice-config.py `slice`, compiled as in bench/make-gemm-bundle.sh
# to .dev/slice-bf16 with slice.json beside it). k3-bench decode at 1, 32 and
# 128 sequences (context 64, then CONTEXT2 for MLA's share), every kernel
# family's row (eager launches) and the graph-replayed step (TOTAL); the
# csv goes to $OUT/kbench.csv. Carry .dev; run: bash .dev/slice-decode-profile-h200.sh.
source "$(dirname "$0")/device-common.sh"
machine
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
echo "checkpoint made (${SECONDS}s)"
kbench dec slice-bf16 /tmp/slice '.' --prefill none --decode 1,32,128
kbench dec-ctx slice-bf16 /tmp/slice 'TOTAL|mla_attn|kda' --prefill none --decode 1,128 --context ${CONTEXT2:-1024}
echo "== done (${SECONDS}s)"

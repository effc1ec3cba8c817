#!/usr/bin/env bash
# Adds c64/ to a bundle folder (BUNDLE_DIR, default .devm): k3-tiny bf16 and
# f32 and the softplus k3-tiny bf16 for sm_90a with 64-token KDA chunks
# (--kda-chunk-size=64), their configs, fill-tensors.py and kda_check.py, and
# bench/s40-h200.sh; bin/ gets this build's k3-run, k3-bench and
# k3-mkcheckpoint. Run bench/s40-h200.sh there (PART=c64).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=build/bin D=${BUNDLE_DIR:-.devm}
mkdir -p $D/bin && rm -rf $D/c64 && mkdir -p $D/c64
cp $B/k3-run $B/k3-bench $B/k3-mkcheckpoint $D/bin/
cp bench/device-common.sh bench/s40-h200.sh $D/
cp models/configs/k3-tiny.json test/Runtime/Inputs/k3-tiny-softplus.json \
   test/Runtime/Inputs/fill-tensors.py bench/kda_check.py $D/c64/
[ -f bench/bench_common.py ] && cp bench/bench_common.py $D/c64/ || true
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o /tmp/k3c-ck3 --seed 3 --quiet
$B/k3-mkcheckpoint --config test/Runtime/Inputs/k3-tiny-softplus.json -o /tmp/k3c-cksp --seed 5 --quiet
c() { $B/k3-compile "$@" --target=sm_90a --kda-chunk-size=64 --max-tokens 256 --max-seqs 4 --max-context 512 --quiet; }
c /tmp/k3c-ck3 -o $D/c64/t64-bf16
c /tmp/k3c-ck3 -o $D/c64/t64-f32 --activation-dtype=f32
c /tmp/k3c-cksp -o $D/c64/sp64-bf16 2> /dev/null
rm -rf $D/c64/*/ptx $D/c64/*/model.fused.mlir # (inspection only)
du -sh $D/c64

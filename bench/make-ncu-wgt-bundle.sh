#!/usr/bin/env bash
# The bundle for bench/ncu-wgt-h200.sh (#15: where the MLA decode core's time
# goes), in .devs (BUNDLE_DIR; git-ignored): k3-bench, k3-mkcheckpoint and the
# full-width k3-small slice (96 heads, max context 8448, 64 sequences) in its
# default build. Carry .devs; run: bash .devs/ncu-wgt-h200.sh.
export BUNDLE_DIR=${BUNDLE_DIR:-.devs}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-bench k3-mkcheckpoint
python3 bench/slice-config.py $D slice
$B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 64 --max-context 8448 \
  --quiet -o $D/slice
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/ncu-wgt-h200.sh $D/
du -sh $D

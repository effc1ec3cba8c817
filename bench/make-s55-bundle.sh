#!/usr/bin/env bash
# The bundle for bench/s55-h200.sh (session 50's ptxas finding): the MoE
# slice (bench/slice-config.py slice-moe: K3's widths, 256 MXFP4 experts and a
# shared expert in both layers) built at HEAD and at BASE (default 40850c2,
# the commit before the unsplit warpgroup tiles took constant K bounds),
# whose shared-expert GLU tile (moe_in ... linear_glu_wgmma_128x256x64_s4_f1_tma)
# ptxas compiled with every wgmma serialized (C7515). Into .devm (carry it;
# run: bash .devm/s55-h200.sh, ~4 min).
export BUNDLE_DIR=.devm
source "$(dirname "$0")/bundle-common.sh"
BASE=${BASE:-40850c2}
bundle_start k3-run k3-bench k3-mkcheckpoint
python3 bench/slice-config.py $D slice-moe > /dev/null
flags="--target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet"
$B/k3-compile $D/slice-moe.json $flags -o $D/moe-head
[ -d /tmp/k3c-base ] || git worktree add --detach /tmp/k3c-base "$BASE"
git -C /tmp/k3c-base checkout --quiet --detach "$BASE"
cmake -G Ninja -S /tmp/k3c-base -B /tmp/k3c-base/build -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit > /dev/null
nice cmake --build /tmp/k3c-base/build --target k3-compile
/tmp/k3c-base/build/bin/k3-compile $D/slice-moe.json $flags -o $D/moe-base 2>&1 | grep -E "ptxas on .*Performance" || true
rm -rf $D/moe-*/ptx $D/moe-*/model.fused.mlir
cp bench/s55-h200.sh $D/
du -sh $D

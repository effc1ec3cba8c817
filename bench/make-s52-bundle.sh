#!/usr/bin/env bash
# The bundle for bench/s52-h200.sh (#14's checks on the session-49 defaults:
# the pairwise prep's phase B on tensor cores, the f32 build's exp in fp64),
# in .devq (BUNDLE_DIR; git-ignored): k3-run, k3-ref, k3-mkcheckpoint; dense
# k3-tiny bf16, default and GIC (--kda-gate-in-chunk), and GIC's f32 build;
# MoE k3-tiny bf16 and f32; the softplus-gate k3-tiny (pairwise path) bf16
# and f32; the Kimi Linear slice (32 heads of 128, softplus gate) and the
# full-width k3-small slice (96 heads, factorized path), default and GIC; fla
# from .dev/peers/fla or PEER_FLA=DIR. Every build takes the defaults (no
# K3C_* variable). Carry .devq; run: bash .devq/s52-h200.sh.
export BUNDLE_DIR=${BUNDLE_DIR:-.devq}
fla_from=${PEER_FLA:-.dev/peers/fla}
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-mkcheckpoint k3-ref
cp test/Runtime/Inputs/k3-tiny-softplus.json test/Runtime/Inputs/k3-tiny-dense.json \
  models/configs/k3-tiny.json $D/
python3 bench/slice-config.py $D slice slice-kl
tiny() { # CONFIG [k3-compile options]
  local c=$1; shift
  $B/k3-compile $D/$c --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"
}
big() { # CONFIG [k3-compile options]
  local c=$1; shift
  $B/k3-compile $D/$c --target=sm_90a --max-tokens 8192 --max-seqs 16 --max-context 8448 --quiet "$@"
}
echo "compiling 12 artifacts"
tiny k3-tiny-dense.json -o $D/tdense
tiny k3-tiny-dense.json -o $D/tdense-GIC --kda-gate-in-chunk
tiny k3-tiny-dense.json -o $D/tdense-GIC-f32 --kda-gate-in-chunk --activation-dtype=f32
tiny k3-tiny.json -o $D/tiny-bf16
tiny k3-tiny.json -o $D/tiny-f32 --activation-dtype=f32
tiny k3-tiny-softplus.json -o $D/sp-bf16
tiny k3-tiny-softplus.json -o $D/sp-f32 --activation-dtype=f32
big slice-kl.json -o $D/kl
big slice-kl.json -o $D/kl-GIC --kda-gate-in-chunk
big slice.json -o $D/slice
big slice.json -o $D/slice-GIC --kda-gate-in-chunk
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s52-h200.sh bench/f32-probe.sh bench/kda_peer.py bench/kda_check.py bench/moe_check.py \
  bench/bench_common.py $D/
PEER_FLA=$fla_from bundle_fla
du -sh $D

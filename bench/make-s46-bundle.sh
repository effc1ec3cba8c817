#!/usr/bin/env bash
# The bundle for the next device call after session 43 (bench/s46-h200.sh):
# k3-run, k3-bench, k3-mkcheckpoint; dense k3-tiny bf16, default and GIC
# (--kda-gate-in-chunk: the KDA gate formed by the delta rule as it loads
# f_b's bf16 logits; f_b a plain bf16 projection), and GIC's f32 build; the
# full-width k3-small slice (max context 33024) and the Kimi Linear slice
# (32 heads, softplus gate, pairwise path), each default and GIC; k3-tiny's
# f32 build (the exact exp: session 38's 1.02e-5 prompt); fla from
# .dev/peers/fla or PEER_FLA=DIR (git-ignored, never committed).
# Carry .dev; run: bash .dev/s46-h200.sh.
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint k3-ref
cp test/Runtime/Inputs/k3-tiny-dense.json $D/
python3 bench/slice-config.py $D slice slice-kl
tdense() { $B/k3-compile $D/k3-tiny-dense.json --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
slice() { $B/k3-compile $D/slice.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 33024 --quiet "$@"; }
kl() { $B/k3-compile $D/slice-kl.json --target=sm_90a --max-tokens 8192 --max-seqs 128 --max-context 8448 --quiet "$@"; }
tdense -o $D/tdense
tdense -o $D/tdense-GIC --kda-gate-in-chunk
tdense -o $D/tdense-GIC-f32 --kda-gate-in-chunk --activation-dtype=f32
# k3-tiny (MoE) f32 with the exact exp: session 38's 150-token prompt sat at
# 1.02e-5 of its 1e-5 bound on the GPU (seed-3 checkpoint).
cp models/configs/k3-tiny.json $D/
$B/k3-compile $D/k3-tiny.json --target=sm_90a --activation-dtype=f32 --max-tokens 512 --max-seqs 8 --max-context 1024 --quiet -o $D/tiny-f32
slice -o $D/slice
slice -o $D/slice-GIC --kda-gate-in-chunk
kl -o $D/kl
kl -o $D/kl-GIC --kda-gate-in-chunk
rm -rf $D/*/ptx $D/*/model.fused.mlir
cp bench/s46-h200.sh bench/kda_peer.py bench/kda_check.py bench/bench_common.py $D/
bundle_fla
du -sh $D

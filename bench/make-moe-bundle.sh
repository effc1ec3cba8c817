#!/usr/bin/env bash
# Builds the bundle bench/moe-h200.sh runs on the GPU machine, in .dev/
# (git-ignored; .dev/peers is kept: triton_kernels for moe_peer_triton.py):
# k3-run, k3-bench, k3-mkcheckpoint; k3-tiny (16 MXFP4 experts, top 4) for
# sm_90a in bf16 as compiled by default (tensor-core experts, tile height
# chosen at run time), with always 64-row and always 128-row tiles, and in
# f32 (the exact FMA path); a 1-layer MoE slice of k3-small (KDA attention,
# 256 MXFP4 experts, top 16, latent 3584, width 3072: K3's expert shapes)
# by default and with K3C_MOE_MMA=0 (the previous FMA expert kernels, timed
# in the same run); a wider k3-tiny (latent 128, expert width 192: the
# warpgroup-MMA expert path's k_tile 128 and 64, partial column tiles) with
# and without warpgroup MMA, and the MoE slice without warpgroup MMA (K3C_MOE_WGMMA=0).
# NO_FMA=1: no FMA slice; NO_T128=1: no 128-row mma.sync slice.
# Carry .dev; run: bash .dev/moe-h200.sh (or .dev/moe-wgmma-h200.sh)
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-bench k3-mkcheckpoint
cp models/configs/k3-tiny.json $D/
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o /tmp/k3c-ckpt-tiny --seed 11 --quiet
tiny() { $B/k3-compile /tmp/k3c-ckpt-tiny --target=sm_90a --max-tokens 512 --max-seqs 16 --max-context 1024 --quiet "$@"; }
tiny -o $D/tiny-bf16
K3C_MOE_TILE16_UPTO=0 tiny -o $D/tiny-bf16-t64
K3C_MOE_TILE16_UPTO=0 K3C_MOE_TILE128_FROM=1 tiny -o $D/tiny-bf16-t128
tiny -o $D/tiny-f32 --activation-dtype=f32
python3 - $D <<'PY'
import json, sys
c = json.load(open('models/configs/k3-tiny.json'))
c['routed_expert_hidden_size'] = 128
c['moe_intermediate_size'] = 192
json.dump(c, open(sys.argv[1] + '/k3-tiny-wide.json', 'w'), indent=1)
PY
$B/k3-mkcheckpoint --config $D/k3-tiny-wide.json -o /tmp/k3c-ckpt-tiny-wide --seed 11 --quiet
# k3-tiny with K3's expert k tiles (latent 512, width 512: four 128-column
# chunks each), where the chained decode launch splits its items' k chunks
# (K3C_MOE_SPLITK_BELOW); compiled from the config (its checkpoint is made on
# the GPU machine).
python3 - $D <<'PY'
import json, sys
c = json.load(open('models/configs/k3-tiny.json'))
c['routed_expert_hidden_size'] = 512
c['moe_intermediate_size'] = 512
json.dump(c, open(sys.argv[1] + '/k3-tiny-split.json', 'w'), indent=1)
PY
tsplit() { $B/k3-compile $D/k3-tiny-split.json --target=sm_90a --max-tokens 512 --max-seqs 16 --max-context 1024 --quiet "$@"; }
tsplit -o $D/tsplit
wide() { $B/k3-compile /tmp/k3c-ckpt-tiny-wide --target=sm_90a --max-tokens 1024 --max-seqs 16 --max-context 1024 --quiet "$@"; }
wide -o $D/wide-bf16
K3C_MOE_WGMMA=0 wide -o $D/wide-bf16-nowg
python3 - $D <<'PY'
import json, sys
k = json.load(open('models/configs/k3-small.json'))
t = k['text_config']
t['num_hidden_layers'] = 1
t['linear_attn_config']['kda_layers'] = [1]
t['linear_attn_config']['full_attn_layers'] = []
t['attn_res_block_size'] = 1
t['first_k_dense_replace'] = 0
json.dump(k, open(sys.argv[1] + '/moe1.json', 'w'), indent=1)
# K3's full expert count (896, top 16) in the same one-layer slice, for
# bench/moe-k3-h200.sh (its checkpoint is 15.7 GB).
t['num_experts'] = 896
json.dump(k, open(sys.argv[1] + '/moe896.json', 'w'), indent=1)
PY
moe896() { $B/k3-compile $D/moe896.json --target=sm_90a --max-tokens 8192 --max-seqs 64 --max-context 8320 --quiet "$@"; }
moe896 -o $D/moe896
moe1() { $B/k3-compile $D/moe1.json --target=sm_90a --max-tokens 8192 --max-seqs 64 --max-context 8320 --quiet "$@"; }
moe1 -o $D/moe1
[ -n "${NO_FMA:-}" ] || K3C_MOE_MMA=0 moe1 -o $D/moe1-fma
K3C_MOE_WGMMA=0 moe1 -o $D/moe1-nowg
# With 128-row mma.sync tiles (shared decode) from 192 pairs per expert.
[ -n "${NO_T128:-}" ] || K3C_MOE_WGMMA=0 K3C_MOE_TILE128_FROM=192 moe1 -o $D/moe1-t128
# Variants: MOE_VARIANTS="NAME=VAR=VALUE[;VAR=VALUE...] ..." (the MoE slice,
# the 896-expert one and the wide k3-tiny).
bundle_variants "${MOE_VARIANTS:-}" moe1 $D/moe1
bundle_variants "${MOE_VARIANTS:-}" moe896 $D/moe896
bundle_variants "${MOE_VARIANTS:-}" wide $D/wide-bf16
bundle_variants "${MOE_VARIANTS:-}" tsplit $D/tsplit
# TINY_VARIANTS: the same form, k3-tiny bf16 as tiny-bf16-NAME (moe-decode-ab-h200.sh).
bundle_variants "${TINY_VARIANTS:-}" tiny $D/tiny-bf16
rm -rf $D/*/ptx
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
cp bench/ncu-h200.sh bench/moe-chain-h200.sh bench/moe-slice-check-h200.sh bench/moe-splitk-h200.sh bench/moe-pdl-h200.sh bench/moe-prefill-ab-h200.sh bench/moe-decode-ab-h200.sh bench/moe-ab-h200.sh bench/moe-h200.sh bench/moe-wgmma-h200.sh bench/moe-k3-h200.sh bench/moe-skew-h200.sh bench/skew-router.py bench/mxfp4-edge-scales.py bench/moe_check.py bench/moe_peer.py bench/bench_common.py $D/
[ -f bench/moe_peer_triton.py ] && cp bench/moe_peer_triton.py $D/
du -sh $D

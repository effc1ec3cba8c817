#!/usr/bin/env bash
# Builds the bundle bench/gemm-h200.sh runs on the GPU machine, in .dev/
# (git-ignored): k3-run, k3-bench, k3-mkcheckpoint; k3-tiny checkpoints and
# artifacts (f32 and bf16, sm_90a); the full-width 2-layer k3-small slice
# artifact (dense MLP, capacity 8192 tokens and 128 sequences) whose
# checkpoint the benchmark regenerates there from the same seed.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
D=.dev
mkdir -p $D/bin
cp $B/k3-run $B/k3-bench $B/k3-mkcheckpoint $D/bin/
[ -d $D/ckpt-tiny ] || $B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o $D/ckpt-tiny --seed 11 --quiet
rm -rf $D/tiny-f32 $D/tiny-bf16 $D/slice-bf16
$B/k3-compile $D/ckpt-tiny -o $D/tiny-f32 --activation-dtype=f32 --max-tokens 64 --max-seqs 4 --max-context 256 --target=sm_90a --quiet
$B/k3-compile $D/ckpt-tiny -o $D/tiny-bf16 --max-tokens 512 --max-seqs 16 --max-context 1024 --target=sm_90a --quiet
python3 - <<'PY'
import json
k = json.load(open('models/configs/k3-small.json'))
t = k['text_config']
t['num_hidden_layers'] = 2
t['linear_attn_config']['kda_layers'] = [1]
t['linear_attn_config']['full_attn_layers'] = [2]
t['attn_res_block_size'] = 2
t['num_experts'] = 0
t.pop('quantization_config', None)
json.dump(k, open('.dev/slice.json', 'w'), indent=1)
PY
[ -d /tmp/slice ] || $B/k3-mkcheckpoint --config $D/slice.json -o /tmp/slice --seed 3 --quiet
$B/k3-compile /tmp/slice -o $D/slice-bf16 --max-tokens 8192 --max-seqs 128 --max-context 8448 --target=sm_90a --quiet
rm -rf $D/*/ptx
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
cp bench/gemm-h200.sh bench/gemm_peer.py $D/
du -sh $D

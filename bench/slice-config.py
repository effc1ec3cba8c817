"""Writes the full-width 2-layer slice configs the H200 benchmarks use:
KDA layer 1, MLA layer 2; from k3-small `slice` dense (no experts:
bench/h200.sh, bench/gemm-h200.sh) and `slice-moe` (256 MXFP4 experts in
both layers: bench/ep-gpus.sh); from Kimi Linear 48B-A3B `slice-kl`, dense
(32 KDA heads of 128, the unbounded softplus gate: the pairwise chunk path;
bench/kda-h200.sh).
usage: slice-config.py OUT_DIR [slice|slice-moe|slice-kl ...]   (default: slice, slice-moe)
"""
import json
import sys

out, names = sys.argv[1], sys.argv[2:] or ['slice', 'slice-moe']
for name in names:
    if name == 'slice-kl':
        k = json.load(open('models/configs/kimi-linear-48b-a3b.json'))
        k['num_hidden_layers'] = 2
        k['linear_attn_config']['kda_layers'] = [1]
        k['linear_attn_config']['full_attn_layers'] = [2]
        k['num_experts'] = 0
        k['first_k_dense_replace'] = 2
        json.dump(k, open('%s/%s.json' % (out, name), 'w'), indent=1)
        continue
    k = json.load(open('models/configs/k3-small.json'))
    t = k['text_config']
    t['num_hidden_layers'] = 2
    t['linear_attn_config']['kda_layers'] = [1]
    t['linear_attn_config']['full_attn_layers'] = [2]
    t['attn_res_block_size'] = 2
    if name == 'slice-moe':
        t['first_k_dense_replace'] = 0
    elif name == 'slice':
        t['num_experts'] = 0
        t.pop('quantization_config', None)
    else:
        sys.exit('unknown slice ' + name)
    json.dump(k, open('%s/%s.json' % (out, name), 'w'), indent=1)

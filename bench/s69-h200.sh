#!/usr/bin/env bash
# Session 61 (bundle: bash bench/make-s69-bundle.sh; carry .dev69; run: bash
# .dev69/s69-h200.sh, ~1 min): dense k3-tiny with session 61's defaults (the
# one-token MLA combine's split weights first) against the reference
# executor on the GPU: bf16 on 128 one-token prompts, a 100-token prompt and
# a mixed batch of 20; f32 (1e-5) on the three, and f32 with the online
# merge (K3C_MLA_COMBINE_WEIGHTS=0) on the mixed batch.
source "$(dirname "$0")/device-common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
dense_inputs
dense_checks tiny-dense tiny-dense-f32
DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-f32-om
echo "== done (${SECONDS}s)"

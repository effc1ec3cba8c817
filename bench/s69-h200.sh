#!/usr/bin/env bash
# Session 61 (bundle: bash bench/make-s69-bundle.sh; carry .dev69; run: bash
# .dev69/s69-h200.sh, ~1 min): session 61's defaults (the one-token MLA
# combine's split weights first) against the reference executor on the GPU.
# k3-tiny dv64 (its one-token decode takes the row-sliced combine): one
# prompt of 300 tokens then 6 one-token steps, and one of 40 then 6, in
# bf16 and in f32 (1e-5; the online merge, the f32 default), f32 with the
# weights first (dv64-f32-cw: if it passes, the default can cover f32); dense
# k3-tiny bf16 and f32 on its three batches.
source "$(dirname "$0")/device-common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
k3-mkcheckpoint --config k3-tiny-dv64.json -o /tmp/ck-dv64 --seed 5 --quiet
for m in dv64-bf16 dv64-f32 dv64-f32-cw; do
  echo "-- $m"
  for n in 300 40; do
    timeout 100 k3-run $m --checkpoint /tmp/ck-dv64 --device cuda --prompt-ids $(seq -s, 3 $((n + 2))) --max-new-tokens 6 --check --quiet | grep -E "check:|error"
  done
done
dense_inputs
dense_checks tiny-dense tiny-dense-f32
echo "== done (${SECONDS}s)"

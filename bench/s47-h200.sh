#!/usr/bin/env bash
# #15's decode core A/B (bench/make-s47-bundle.sh; run bash .devm/s47-h200.sh):
# the transposed warpgroup core (v/slice-WGT: two clustered blocks of 48
# heads sharing multicast cache tiles; WGT0 without the cluster; WGT1 for
# one-token rounds too) against the default seesaw core (slice-bf16):
#  1. k3-tiny dv64 with each variant against the reference executor (100 and
#     12 sequences: rounds through the new core, 4 heads in one 8-head
#     group); k3-tiny dv32 bf16 / f32 as before;
#  2. the slice's decode logits of each variant against the default's (a
#     16-token prompt, 6 steps; a 5000-token prompt; 8 prompts of 40-1200
#     tokens: not bit-identical, the products sum in another order) and
#     each build's decode kernel against fp64 attention (mla_check.py: one
#     sequence at context 5000, four at 70 / 18 / 3 / 41);
#  3. mla_attn in the step graph (k3-bench) at context 8192 for 1, 8, 64
#     sequences and at 32768 for 8, every build;
#  4. Nsight Compute's duration of each MLA decode launch at batch 8,
#     context 8192, the default and WGT.
source "$(dirname "$0")/device-common.sh"
machine
export K3C_DEVICE_LOG_TEE=1
SLICE=slice-bf16 DUMP_CHECK=1 NO_NCU=1 BATCHES=1,8,64 CTX=8192 bash mla-decode-h200.sh
NO_TINY=1 NO_CMP=1 NO_NCU=1 BATCHES=8 CTX=32768 bash mla-decode-h200.sh
for s in slice-bf16 v/slice-WGT; do
  SLICE=$s NO_TINY=1 NO_CMP=1 NO_BENCH=1 BATCHES=8 CTX=8192 bash mla-decode-h200.sh
done
echo "== s47 done (${SECONDS}s)"

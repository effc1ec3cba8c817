#!/usr/bin/env bash
# The MLA flash prefill on one H200, checks then timings in one call (bundle:
# VARIANTS="FA2=K3C_MLA_FLASH_WGMMA=0 ..." bash bench/make-mla-bundle.sh, then
# carry .dev and run bash .dev/mla-prefill-h200.sh):
#  * the default build (warpgroup-MMA flash kernel) against the reference
#    executor: dense k3-tiny bf16 at 300 + 20 tokens (flash prefill, head
#    dims padded to 64-column blocks), the mixed batch, and the
#    K3C_MLA_FLASH_FROM=2 build (every launch of 2+ tokens through the
#    prefill branch);
#  * kernel dumps (K3C_DUMP_KERNEL) against fp64 attention (mla_check.py):
#    k3-tiny's flash prefill (3 sequences, 157 tokens), the slice's 96-head
#    layer at 2048 tokens, and three prompts of 700, 333 and 64 tokens in one
#    launch (varlen, partial tiles);
#  * k3-bench prefill (T = 2048, 8192; 32768 for the default build) of the
#    slice and of every variant in v/ (the mla_attn rows), the launches of
#    mla_attn at 8192 tokens (K3C_PROFILE_LAUNCHES), then torch SDPA on the
#    same up-projected heads (mla_peer.py) in the same call.
source "$(dirname "$0")/device-common.sh"
machine
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
run() { timeout 120 k3-run "$@" --checkpoint ckpt-tiny-dense --device cuda --quiet; }
echo "== dense k3-tiny bf16 vs the reference: 300 + 20 tokens, mixed batch"
seq -s, 1 300 > long.txt; seq -s, 5 24 >> long.txt
run tiny-dense-bf16 --batch long.txt --max-new-tokens 4 --check | grep -E "step 0|check:"
run tiny-dense-bf16 --batch batch.txt --max-new-tokens 4 --check | grep -E "check:"
run tiny-dense-from2 --batch batch.txt --max-new-tokens 4 --check | grep -E "check:"
run tiny-dense-from2 --batch long.txt --max-new-tokens 3 --check | grep -E "check:"
echo "== kernel dumps vs fp64 attention"
printf '%s\n%s\n%s\n' $(seq -s, 1 100) $(seq -s, 50 89) $(seq -s, 200 216) > b3.txt
K3C_DUMP_KERNEL=mla_attn@64:/tmp/m1 run tiny-dense-bf16 --batch b3.txt --max-new-tokens 2 > /dev/null; python3 mla_check.py /tmp/m1
K3C_DUMP_KERNEL=mla_attn@2-3:/tmp/m2 run tiny-dense-from2 --batch b3.txt --max-new-tokens 2 > /dev/null; python3 mla_check.py /tmp/m2
k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
K3C_DUMP_KERNEL=mla_attn@2048:/tmp/m4 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 --quiet | grep -E "time to first"; python3 mla_check.py /tmp/m4 --head-stride 3; rm -rf /tmp/m4
printf '%s\n%s\n%s\n' $(seq -s, 1 700) $(seq -s, 5 337) $(seq -s, 9 72) > b5.txt
K3C_DUMP_KERNEL=mla_attn@64:/tmp/m5 timeout 120 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --batch b5.txt --max-new-tokens 1 --quiet > /dev/null; python3 mla_check.py /tmp/m5 --head-stride 5; rm -rf /tmp/m5
echo "== k3-bench prefill of the slice (mla_attn per execution)"
mkdir -p /tmp/b
bench() { # artifact tag tokens
  timeout 200 k3-bench $1 --checkpoint /tmp/slice --device cuda --quiet --prefill $3 --decode none --reps ${REPS:-5} --csv /tmp/b/pf-$2.csv > /tmp/b/pf-$2.txt
  echo "-- $2"; grep -E "^prefill" /tmp/b/pf-$2.txt; grep -E "mla_attn" /tmp/b/pf-$2.csv
}
bench slice-bf16 default 2048,8192
for v in v/*; do [ -d "$v" ] && bench $v ${v#v/slice-} 2048,8192; done
REPS=2 bench slice-bf16 default-32k 32768
echo "== the launches of mla_attn at 8192 tokens (K3C_PROFILE_LAUNCHES: each launch synchronized)"
K3C_PROFILE_LAUNCHES=1 timeout 200 k3-bench slice-bf16 --checkpoint /tmp/slice --device cuda --quiet --prefill 8192 --decode none --reps 1 2>&1 | grep -E "launch profile|mla_attn"
echo "== torch SDPA on the same heads"
timeout 200 python3 mla_peer.py --tokens 2048,8192,32768 --csv $OUT/sdpa.csv
cp /tmp/b/*.csv $OUT/ 2>/dev/null || true

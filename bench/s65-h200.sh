#!/usr/bin/env bash
# Sessions 58-59 (bundle: bash bench/make-s65-bundle.sh; carry .dev65; run: bash
# .dev65/s65-h200.sh, ~8 min). Against the defaults (slice-bf16):
#   slice-FH    the model head in one launch (K3C_FUSE_HEAD=1: AttnRes,
#               last_tokens and RMSNorm) and the embedding a block a token
#               (K3C_EMBED_ROWS=1)
#   slice-R128  one MLA decode round for up to 128 sequences
#               (K3C_MLA_ROUND_TOKENS=128)
#   slice-C2/C4 the batched-decode TMA warpgroup tiles as clusters of 2 / 4
#               sharing the x tile (K3C_WGMMA_CLUSTER); slice-C2P the prefill
#               tile too (K3C_WGMMA_CLUSTER_PREFILL=2)
#   slice-TR    the trimmed one-token MLA combine (K3C_MLA_COMBINE_TRIM=1)
#   slice-CT0   the decode convolutions' taps a load a tap (the default
#               before session 59; the default loads a channel's 4 taps in one)
#   slice-CG3   three one-token channel groups a round in the decode
#               convolutions (K3C_CONV_DECODE_GROUPS=3), with the vector taps
#   slice-ALL   C2, R128, FH and CG3 together (every candidate default at
#               once): its step, tokens and --check
# Rows: the copy ceiling; the step at 1 and 128 sequences (graph replay, two
# rounds; on an H200 the defaults' rows are #13's ratio); greedy tokens on
# prompts of 1 to 33 tokens (FH) and on 128 one-token prompts (R128, C2, C4,
# C2P: bit-identical by construction); the slice's --check (FH); dense
# k3-tiny bf16 on 128 one-token prompts and a mixed batch of 20 (FH, R128,
# C2P), f32 on the mixed batch (FH); a prefill of 8192 tokens (C2P, FH);
# slice-TR at 64..32768 positions and against fp64 at 200.
# QUICK=1 (~4 min): one decode round, the token comparisons, --check, dense
# k3-tiny on the 128 prompts, the prefill of the defaults and C2P if time is
# left. QUICK=2 (~2.5 min): the defaults, C2, C4, FH, CT0 and ALL at 1 and 128
# sequences, their tokens, FH's and ALL's --check. Each mode ends with
# bench/kbench_table.py's summary of its kbench rows (run it here on a
# kbench.csv that came back from a call cut short).
QUICK=${QUICK:-0}
export KBENCH_TIMEOUT=${KBENCH_TIMEOUT:-100}
source "$(dirname "$0")/device-common.sh"
slice_setup
case $QUICK in
  2) rounds=1 builds="slice-bf16 slice-C2 slice-C4 slice-FH slice-CT0 slice-ALL" same128="slice-C2 slice-C4 slice-CT0 slice-ALL" ;;
  1) rounds=1 builds="slice-bf16 slice-FH slice-R128 slice-C2 slice-C4 slice-CT0 slice-CG3 slice-ALL" same128="slice-R128 slice-C2 slice-C4 slice-C2P slice-CT0 slice-CG3 slice-ALL" ;;
  *) rounds="1 2" builds="slice-bf16 slice-FH slice-R128 slice-C2 slice-C4 slice-CT0 slice-CG3 slice-ALL" same128="slice-R128 slice-C2 slice-C4 slice-C2P slice-CT0 slice-CG3 slice-ALL" ;;
esac
for r in $rounds; do
  for a in $builds; do
    kbench s65-$a-$r $a /tmp/slice 'graph|lm_head|embed|mla_attn|mlp_in|kda_conv' --prefill none --decode 1,128
  done
done
same_tokens /tmp/b128s.txt slice-bf16 $same128
same_tokens /tmp/b8.txt slice-bf16 slice-FH slice-ALL
slice_check slice-FH slice-ALL
if [ $QUICK = 2 ]; then python3 kbench_table.py $OUT/kbench.csv; echo "== done, QUICK=2 (${SECONDS}s)"; exit 0; fi
dense_inputs
DENSE_BATCHES="b128.txt $([ $QUICK = 1 ] || echo mix20.txt)" dense_checks tiny-dense-FH tiny-dense-R128 tiny-dense-C2
[ $QUICK = 1 ] || DENSE_BATCHES="mix20.txt" dense_checks tiny-dense-FH-f32
for a in slice-bf16 slice-C2P $([ $QUICK = 1 ] || echo slice-FH); do
  [ $SECONDS -gt $([ $QUICK = 1 ] && echo 260 || echo 300) ] && break
  kbench s65-$a-prefill $a /tmp/slice 'graph|lm_head|mlp_in|ttft' --prefill 8192 --decode none
done
if [ $QUICK = 1 ]; then python3 kbench_table.py $OUT/kbench.csv; echo "== done, QUICK (${SECONDS}s)"; exit 0; fi
mla_context_rows s65 slice-bf16 slice-TR
mla_kernel_check slice-TR 60 200
find $OUT -type f ! -name log.txt ! -name kbench.csv -delete
python3 kbench_table.py $OUT/kbench.csv
echo "== done (${SECONDS}s)"

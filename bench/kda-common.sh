# Sourced by bench/kda-h200.sh and bench/kda-quick-h200.sh on the GPU
# machine (the bundle folder as working directory, OUT set).
# The Kimi Linear slice (32 KDA heads of 128, softplus gate: the pairwise
# chunk path): the reference check, the delta rule against fp64 at 2048
# tokens, k3-bench (fla's H = 32 case is in kda_peer.py's list).
kimi_linear() {
  [ -d slice-kl-bf16 ] || return 0
  echo "== Kimi Linear slice (32 heads, pairwise path)"
  k3-mkcheckpoint --config slice-kl.json -o /tmp/slice-kl --seed 3 --quiet
  timeout 150 k3-run slice-kl-bf16 --checkpoint /tmp/slice-kl --device cuda --quiet --prompt-ids $(seq -s, 1 16) --max-new-tokens 2 --check | grep -E "check: (PASSED|FAILED)"
  K3C_DUMP_KERNEL=kda_chunk@2048:/tmp/dkl timeout 120 k3-run slice-kl-bf16 --checkpoint /tmp/slice-kl --device cuda --quiet --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 > /dev/null; python3 kda_check.py /tmp/dkl; rm -rf /tmp/dkl
  timeout 120 k3-bench slice-kl-bf16 --checkpoint /tmp/slice-kl --device cuda --quiet --prefill 2048,8192 --decode 1,32,128 --csv $OUT/slice-kl.csv > $OUT/slice-kl.txt; grep -E "^(prefill|decode)" $OUT/slice-kl.txt; grep -E "kda" $OUT/slice-kl.csv
}

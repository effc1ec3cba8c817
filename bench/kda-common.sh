# Sourced by bench/kda-h200.sh and bench/kda-quick-h200.sh on the GPU
# machine (the bundle folder as working directory, OUT set).
# The Kimi Linear slice (32 KDA heads of 128, softplus gate: the pairwise
# chunk path): the reference check, the delta rule against fp64 at 2048
# tokens, k3-bench (fla's H = 32 case is in kda_peer.py's list).
kimi_linear() { # [ARTIFACT [TAG [KDA_CHECK_FLAGS]]]: the default build, or a variant's (v/kl-NAME); NO_KL=1 skips it
  local art=${1:-slice-kl-bf16} tag=${2:-slice-kl} flags=${3:-}
  [ -d $art ] && [ -z "${NO_KL:-}" ] || return 0
  echo "== Kimi Linear slice (32 heads, pairwise path): $art"
  [ -d /tmp/slice-kl ] || k3-mkcheckpoint --config slice-kl.json -o /tmp/slice-kl --seed 3 --quiet
  timeout 150 k3-run $art --checkpoint /tmp/slice-kl --device cuda --quiet --prompt-ids $(seq -s, 1 16) --max-new-tokens 2 --check | grep -E "check: (PASSED|FAILED)"
  K3C_DUMP_KERNEL=kda_chunk@2048:/tmp/dkl timeout 120 k3-run $art --checkpoint /tmp/slice-kl --device cuda --quiet --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 > /dev/null; python3 kda_check.py /tmp/dkl $flags; rm -rf /tmp/dkl
  timeout 120 k3-bench $art --checkpoint /tmp/slice-kl --device cuda --quiet --prefill 2048,8192 --decode 1,32,128 --csv $OUT/$tag.csv > $OUT/$tag.txt; grep -E "^(prefill|decode)" $OUT/$tag.txt; grep -E "kda" $OUT/$tag.csv
}

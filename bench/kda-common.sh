# Sourced by bench/kda-h200.sh, kda-quick-h200.sh and kda-decode-h200.sh on the GPU
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

# same A B TAG: whether two --dump-logits files are bit-identical, and their
# largest difference relative to A's largest magnitude.
same() {
  python3 -c "
import numpy as n
a, b = n.load('$1'), n.load('$2')
print('  $3: bit-identical %s, max rel %.2e' % (bool((a.view(n.uint32) == b.view(n.uint32)).all()), abs(a.astype(n.float64) - b).max() / abs(a).max()))"
}
# variant_tiny_checks NAME BATCH: variant NAME's k3-tiny builds (dense and
# softplus-gate bf16, softplus f32 where built) against the reference on the
# BATCH prompt file (the f32 build on batch.txt).
variant_tiny_checks() {
  local name=$1 batch=$2 t
  for t in tiny-dense:ckpt-tiny-dense sp:ckpt-sp; do
    [ -d v/${t%%:*}-$name ] && timeout 120 k3-run v/${t%%:*}-$name --checkpoint ${t#*:} --device cuda --batch $batch --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
  done
  [ -d v/sp-f32-$name ] && timeout 120 k3-run v/sp-f32-$name --checkpoint ckpt-sp --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
  return 0
}

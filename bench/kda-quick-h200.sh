#!/usr/bin/env bash
# The short KDA A/B on one H200 (bundle: bench/make-kda-bundle.sh with
# VARIANTS; about 3 minutes plus up to a minute a variant, where kda-h200.sh
# takes 7-10 with fewer variants): the bf16 k3-tiny
# checks (dense and softplus) against the reference, the slice's default
# build against the reference (16 tokens) and its delta rule against fp64
# (2048 tokens), k3-bench prefill 2048 and 8192, decode 32 and 128; then per
# variant in v/: logits against the default build (16 tokens), its delta
# rule against fp64 where VAR_FP64 names it (space-separated names; those
# also in VAR_L2NORM were built with --kda-norm-in-chunk /
# K3C_KDA_NORM_IN_CHUNK=1: kda_check.py --l2norm), the
# same k3-bench, and its k3-tiny builds (dense, softplus gate) against the
# reference, and its Kimi Linear slice build where there is one (v/kl-NAME;
# NO_KL=1 skips the Kimi Linear slice; ONLY: a regex of the variant names
# to run).
# Results under $OUT.
set -u
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
t0=$(date +%s); stamp() { echo "  [$(( $(date +%s) - t0 )) s]"; }
k3-mkcheckpoint --config k3-tiny-dense.json -o ckpt-tiny-dense --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-softplus.json -o ckpt-sp --seed 5 --quiet
echo "== bf16 k3-tiny (dense; softplus gate) vs the reference, mixed batch"
timeout 120 k3-run tiny-dense-bf16 --checkpoint ckpt-tiny-dense --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
timeout 120 k3-run sp-bf16 --checkpoint ckpt-sp --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
stamp
if [ -d k128-bf16 ]; then
  # 8 heads of 128 (the staged convolution, the norm in its store): each
  # build against the reference on prompts of 70, 33, 5, 100, 1 and 40
  # tokens, then bit for bit against the default build.
  echo "== k3-tiny, 8 KDA heads of 128: default, register-form convolution, split norms"
  k3-mkcheckpoint --config k3-tiny-kda128.json -o ckpt-k128 --seed 7 --quiet
  printf '%s\n%s\n%s\n%s\n%s\n%s\n' $(seq -s, 1 70) $(seq -s, 3 35) 9,8,7,6,5 $(seq -s, 100 199) 42 $(seq -s, 200 239) > /tmp/b6.txt
  # (and each variant's build there, v/k128-NAME, against the reference and
  # the default build)
  k128v=$(for m in v/k128-*; do [ -d "$m" ] && [[ ${m#v/k128-} =~ ^(${ONLY:-.*})$ ]] && echo $m; done)
  for m in k128-bf16 k128-reg k128-sn $k128v; do
    echo "-- $m"
    timeout 120 k3-run $m --checkpoint ckpt-k128 --device cuda --batch /tmp/b6.txt --max-new-tokens 4 --check --quiet | grep -E "check: (PASSED|FAILED)"
    timeout 60 k3-run $m --checkpoint ckpt-k128 --device cuda --batch /tmp/b6.txt --max-new-tokens 4 --quiet --dump-logits /tmp/${m//\//_}.npy > /dev/null
  done
  source kda-common.sh
  same /tmp/k128-bf16.npy /tmp/k128-reg.npy "k128-reg logits vs k128-bf16"
  same /tmp/k128-bf16.npy /tmp/k128-sn.npy "k128-sn logits vs k128-bf16"
  for m in $k128v; do
    same /tmp/k128-bf16.npy /tmp/${m//\//_}.npy "$m logits vs k128-bf16"
  done
fi
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
stamp
run() { timeout 120 k3-run "$1" --checkpoint /tmp/slice --device cuda --quiet "${@:2}"; }
fp64() { K3C_DUMP_KERNEL=kda_chunk@2048:/tmp/dv run $1 --prompt-ids $(seq -s, 1 2048) --max-new-tokens 1 > /dev/null; python3 kda_check.py /tmp/dv ${2:-}; rm -rf /tmp/dv; }
bench() { timeout 120 k3-bench $1 --checkpoint /tmp/slice --device cuda --quiet --prefill 2048,8192 --decode 32,128 --csv $OUT/$2.csv > $OUT/$2.txt; grep -E "^(prefill|decode)" $OUT/$2.txt; grep -E "kda_(chunk|conv)" $OUT/$2.csv; }
echo "== slice, default build"
run slice-bf16 --prompt-ids $(seq -s, 1 16) --max-new-tokens 2 --check | grep -E "check: (PASSED|FAILED)"
run slice-bf16 --prompt-ids $(seq -s, 3 18) --max-new-tokens 4 --dump-logits /tmp/ref.npy > /dev/null
fp64 slice-bf16; stamp
bench slice-bf16 default; stamp
source kda-common.sh # kimi_linear, same, variant_tiny_checks
kimi_linear
for v in v/slice-*; do
  [ -d "$v" ] || continue
  name=${v#v/slice-}
  [[ $name =~ ^(${ONLY:-.*})$ ]] || continue
  echo "== variant $name"
  variant_tiny_checks $name batch.txt
  run $v --prompt-ids $(seq -s, 3 18) --max-new-tokens 4 --dump-logits /tmp/x.npy > /dev/null
  same /tmp/ref.npy /tmp/x.npy "logits vs the default build"
  l2=""; case " ${VAR_L2NORM:-} " in *" $name "*) l2=--l2norm;; esac
  case " ${VAR_FP64:-} " in *" $name "*) fp64 $v $l2;; esac
  bench $v $name; stamp
  kimi_linear v/kl-$name kl-$name $l2
done

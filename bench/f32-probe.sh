#!/usr/bin/env bash
# The f32 build against exact math on longer prompts: k3-run --check (the
# fp64 reference, bound 1e-5 of the logits' scale) per step, and the same
# logits against the f32 reference (k3-ref --precision f32) for comparison.
# Usage: bash bench/f32-probe.sh MODEL CONFIG [k3-run options...]
#   e.g. bash bench/f32-probe.sh .dev/tiny-f32 .dev/k3-tiny.json --device cuda
# Needs k3-run, k3-ref, k3-mkcheckpoint on PATH and python3 with numpy.
# Ends with a summary line; exits 1 if any case's --check failed.
set -u
if [ $# -lt 2 ]; then
  echo "usage: bash bench/f32-probe.sh MODEL CONFIG [k3-run options...]" >&2
  exit 2
fi
model=$1 config=$2; shift 2
cases=0 failed=0
for seed in 3 7; do
  ck=/tmp/f32probe-$(basename "$config" .json)-$seed
  [ -d $ck ] || k3-mkcheckpoint --config "$config" -o $ck --seed $seed --quiet
  for n in 150 300 500; do
    p=$(seq -s, 1 $n)
    echo "-- $(basename "$model"), seed $seed, $n-token prompt"
    out=$(k3-run "$model" --checkpoint $ck --prompt-ids $p --max-new-tokens 4 --check \
      --dump-logits /tmp/f32probe-run.npy "$@" 2>&1)
    rc=$?
    echo "$out" | grep -E "^check seq [0-9]+ step|^check:|error"
    cases=$((cases + 1))
    [ $rc = 0 ] || failed=$((failed + 1))
    k3-ref $ck --prompt-ids $p --max-new-tokens 4 --precision f32 --quiet \
      --dump-logits /tmp/f32probe-ref.npy > /dev/null
    ${PYTHON:-python3} -c "
import numpy as np
a = np.load('/tmp/f32probe-run.npy'); b = np.load('/tmp/f32probe-ref.npy')
print('   vs the f32 reference, max rel per step:',
      ' '.join('%.3e' % (np.abs(a[s] - b[s]).max() / np.abs(b[s]).max()) for s in range(a.shape[0])))"
  done
done
echo "f32 probe: $((cases - failed)) of $cases cases passed --check"
[ $failed = 0 ]

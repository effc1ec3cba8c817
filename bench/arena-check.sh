#!/usr/bin/env bash
# The scratch arena on the GPU (K3C_SCRATCH_ARENA=1: opt-in in session 40,
# the default since session 41's run of this script on an H100 passed): k3-tiny builds of a bundle (tiny-f32, tiny-dense-bf16, the
# 64-token KDA chunk builds in c64/) against the reference with it, then the
# slice's decode logits with and without it (bit-identical expected: the
# same kernels on the same values, only the scratch addresses differ).
# Carry .devm; run: bash .devm/arena-check.sh
source "$(dirname "$0")/device-common.sh"
machine
export K3C_SCRATCH_ARENA=1
k3-mkcheckpoint --config k3-tiny.json -o /tmp/ck --seed 11 --quiet
k3-mkcheckpoint --config k3-tiny-dense.json -o /tmp/ckd --seed 11 --quiet
echo "-- tiny-f32"
timeout 60 k3-run tiny-f32 --checkpoint /tmp/ck --device cuda --batch batch.txt --max-new-tokens 4 --check 2>&1 | grep -E "scratch|check:"
echo "-- tiny-dense-bf16"
timeout 60 k3-run tiny-dense-bf16 --checkpoint /tmp/ckd --device cuda --batch batch.txt --max-new-tokens 4 --check --quiet | grep -E "check:"
if [ -d c64 ]; then
  printf '%s\n%s\n%s\n' $(seq -s, 1 150) $(seq -s, 7 77) 9,8,7 > /tmp/b224.txt
  k3-mkcheckpoint --config c64/k3-tiny.json -o /tmp/ck3 --seed 3 --quiet
  echo "-- c64/t64-bf16"
  timeout 60 k3-run c64/t64-bf16 --checkpoint /tmp/ck3 --device cuda --batch /tmp/b224.txt --max-new-tokens 3 --check --quiet | grep -E "check:"
fi
[ -d /tmp/slice ] || k3-mkcheckpoint --config slice.json -o /tmp/slice --seed 3 --quiet
for a in 1 0; do
  K3C_SCRATCH_ARENA=$a timeout 100 k3-run slice-bf16 --checkpoint /tmp/slice --device cuda --batch batch.txt --max-new-tokens 4 --dump-logits /tmp/arena$a.npy 2>&1 | grep -E "memory plan"
done
python3 -c "
import numpy as n; a, b = n.load('/tmp/arena1.npy'), n.load('/tmp/arena0.npy')
print('slice logits, arena vs own buffers: bit-identical %s' % bool((a.view(n.uint32) == b.view(n.uint32)).all()))"
echo "== arena check done (${SECONDS}s)"

#!/usr/bin/env bash
# Bundle for bench/ep-tcp-gpus.sh in .dev/ (git-ignored; .dev/peers kept):
# k3-run, k3-mkcheckpoint, k3-tiny f32 for sm_90a. Carry .dev; run on
# nvidia-h200-x2: bash .dev/ep-tcp-gpus.sh
source "$(dirname "$0")/bundle-common.sh"
bundle_start k3-run k3-mkcheckpoint
cp models/configs/k3-tiny.json $D/
$B/k3-mkcheckpoint --config models/configs/k3-tiny.json -o /tmp/k3c-ckpt-tiny --seed 11 --quiet
$B/k3-compile /tmp/k3c-ckpt-tiny -o $D/tiny-f32 --activation-dtype=f32 --target=sm_90a --max-tokens 64 --max-seqs 4 --max-context 256 --quiet
rm -rf $D/*/ptx
printf '1,2,3\n7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n100\n450,1\n' > $D/batch.txt
cp bench/ep-tcp-gpus.sh bench/ep_compare.py $D/
du -sh $D

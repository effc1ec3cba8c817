# Sourced first by the scripts that run on the GPU machine, from the bundle
# folder (.dev, where bundle_start in bench/bundle-common.sh copies this
# file): unset variables are errors, the bundle folder is the working
# directory with its tools on PATH, OUT (the device call's result folder;
# /tmp/out by default) exists, and everything the script prints is also
# written to $OUT/log.txt. `machine` prints the GPU, its memory and driver.
set -u
cd "$(dirname "${BASH_SOURCE[1]}")"
export PATH=$PWD/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
machine() {
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
}
# kbench NAME ARTIFACT CHECKPOINT ROWS k3-bench-args...: k3-bench of ARTIFACT
# with CHECKPOINT's weights (16 decode steps), its csv appended to
# $OUT/kbench.csv under a "# NAME" line (one file for every run: the device
# call returns at most 8 files), then the rows matching the extended regex
# ROWS under "-- NAME".
kbench() {
  local name=$1 art=$2 ck=$3 rows=$4; shift 4
  timeout 200 k3-bench $art --checkpoint $ck --steps 16 --quiet --csv /tmp/kbench-$name.csv "$@" > /dev/null
  { echo "# $name"; cat /tmp/kbench-$name.csv; } >> $OUT/kbench.csv
  echo "-- $name"; grep -E "$rows" /tmp/kbench-$name.csv
}

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

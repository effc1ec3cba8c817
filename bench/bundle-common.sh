# Sourced by the bench/make-*-bundle.sh scripts (bundles the GPU machine runs):
# strict mode, the repository root as working directory, B = build/bin,
# D = .dev emptied (except .dev/peers, the git-ignored peer checkouts) and
# .dev/bin holding the tools given to bundle_start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=build/bin
D=${BUNDLE_DIR:-.dev} # BUNDLE_DIR: another folder, e.g. to carry several bundles
bundle_start() {
  find $D -mindepth 1 -maxdepth 1 ! -name peers -exec rm -rf {} + 2>/dev/null || true
  mkdir -p $D/bin
  for t in "$@"; do cp $B/$t $D/bin/; done
  cp bench/device-common.sh $D/ # sourced by the scripts the GPU machine runs
}
# bundle_fla: fla (fla-org/flash-linear-attention, a checkout holding `fla`;
# git-ignored, never committed) into $D/peers/fla from PEER_FLA=DIR, else the
# copy bundle_start kept there; a note when there is none (the KDA peer rows
# are then skipped).
bundle_fla() {
  local fla=${PEER_FLA:-}
  [ -z "$fla" ] && [ -d $D/peers/fla/fla ] && fla=$D/peers/fla
  if [ -n "$fla" ] && [ "$fla" != "$D/peers/fla" ]; then
    mkdir -p $D/peers && rm -rf $D/peers/fla && cp -r "$fla" $D/peers/fla
  fi
  [ -d $D/peers/fla/fla ] || echo "note: no fla in $D/peers/fla (PEER_FLA=DIR): the KDA peer rows will be skipped"
}
# bundle_slice_checkpoint: the full-width k3-small slice's config
# ($D/slice.json, for the device to regenerate the same weights) and its
# checkpoint in /tmp/slice (seed 3, made once per machine).
bundle_slice_checkpoint() {
  python3 bench/slice-config.py $D slice
  [ -d /tmp/slice ] || $B/k3-mkcheckpoint --config $D/slice.json -o /tmp/slice --seed 3 --quiet
}
# slice ARGS...: the slice (/tmp/slice) compiled for sm_90a at 8192 tokens a
# step, 128 sequences, 33024 positions (the decode benches' shape); ARGS go
# to k3-compile (-o DIR, flags; K3C_* settings from the caller's environment).
slice() { $B/k3-compile /tmp/slice --max-tokens 8192 --max-seqs 128 --max-context 33024 --target=sm_90a --quiet "$@"; }
# bundle_tiny_dense: dense k3-tiny's config ($D/k3-tiny-dense.json) and its
# checkpoint in /tmp/k3c-ckpt-tiny-dense (seed 11: the device's dense_inputs).
bundle_tiny_dense() {
  cp test/Runtime/Inputs/k3-tiny-dense.json $D/
  $B/k3-mkcheckpoint --config $D/k3-tiny-dense.json -o /tmp/k3c-ckpt-tiny-dense --seed 11 --quiet
}
# tiny_dense ARGS...: that checkpoint compiled for sm_90a (512 tokens a step,
# 128 sequences, 1024 positions); ARGS go to k3-compile.
tiny_dense() { $B/k3-compile /tmp/k3c-ckpt-tiny-dense --target=sm_90a --max-tokens 512 --max-seqs 128 --max-context 1024 --quiet "$@"; }
# bundle_variants LIST FN PREFIX: for each NAME=VAR=VALUE[;VAR=VALUE...] in
# LIST (space-separated), runs FN -o PREFIX-NAME with those settings in its
# environment (FN: a shell function of the bundle script whose last
# arguments are k3-compile's).
# bundle_flag_variants LIST FN PREFIX: for each NAME=FLAG[;FLAG...] in LIST,
# runs FN -o PREFIX-NAME FLAG... (k3-compile options, e.g.
# P64=--mla-page=64: the paged MLA cache); a K3C_VAR=VALUE among the flags
# is set in FN's environment instead (TP64=--mla-page=64;K3C_MLA_DECODE_TMA=1).
bundle_flag_variants() {
  local list=$1 fn=$2 prefix=$3 v name f
  for v in $list; do
    name=${v%%=*}
    local flags=() env=()
    IFS=';' read -r -a parts <<< "${v#*=}"
    for f in "${parts[@]}"; do
      if [[ $f == K3C_*=* ]]; then env+=("$f"); else flags+=("$f"); fi
    done
    (for e in "${env[@]}"; do export "$e"; done; $fn -o $prefix-$name "${flags[@]}")
  done
}
bundle_variants() {
  local list=$1 fn=$2 prefix=$3 v name settings
  for v in $list; do
    name=${v%%=*}; settings=${v#*=}
    (export ${settings//;/ }; $fn -o $prefix-$name)
  done
}

# Sourced by the bench/make-*-bundle.sh scripts (bundles the GPU machine runs):
# strict mode, the repository root as working directory, B = build/bin,
# D = .dev emptied (except .dev/peers, the git-ignored peer checkouts) and
# .dev/bin holding the tools given to bundle_start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=build/bin
D=.dev
bundle_start() {
  find $D -mindepth 1 -maxdepth 1 ! -name peers -exec rm -rf {} + 2>/dev/null || true
  mkdir -p $D/bin
  for t in "$@"; do cp $B/$t $D/bin/; done
  cp bench/device-common.sh $D/ # sourced by the scripts the GPU machine runs
}

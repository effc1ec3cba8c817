#!/usr/bin/env bash
# README command 2: installs, builds and runs the whole k3c test suite
# (lit/FileCheck suite and the GoogleTest unit suite, through ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
build=${K3C_BUILD_DIR:-build}
cd "$build"
ctest --output-on-failure

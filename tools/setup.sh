#!/usr/bin/env bash
# Installs what k3c needs (Debian 12 packages only; idempotent: nothing is
# installed twice), then configures and builds k3c in ./build with Ninja.
#
#   tools/setup.sh            # deps + build
#   K3C_BUILD_DIR=dir tools/setup.sh
#
# CUDA (/usr/local/cuda) is optional: with ptxas present the compiler
# validates PTX; without it everything else builds and every test passes.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools nlohmann-json3-dev
      libgtest-dev cmake ninja-build ccache g++ python3 python3-numpy
      libpcre2-dev pkg-config clang-22 libclang-rt-22-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "k3c setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Node.js + npm run the tokenizer's peer test (OpenAI's tiktoken as WASM from
# npm); Debian's packages unless node and npm are already there.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nodejs npm ||
    echo "k3c setup: warning: no Node.js; the tokenizer peer test will be skipped"
fi

build=${K3C_BUILD_DIR:-build}
if command -v npm >/dev/null && [ ! -f "$build/npm/node_modules/tiktoken/package.json" ]; then
  mkdir -p "$build/npm"
  npm install --prefix "$build/npm" --no-audit --no-fund --silent tiktoken@1.0.22 ||
    echo "k3c setup: warning: npm could not install tiktoken; the tokenizer peer test will be skipped"
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
start=$(date +%s)
cmake --build "$build"
echo "k3c setup: build done in $(( $(date +%s) - start )) s ($build)"

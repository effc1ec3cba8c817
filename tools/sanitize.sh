#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer:
# builds k3c with -fsanitize=address,undefined (the system compiler) in its
# own build directory and runs ctest there. Every tool the tests run (k3-compile,
# k3-run, k3-ref, ...) is then instrumented; a sanitizer report fails the test
# that ran it. Kernel libraries the tests compile are not instrumented (they are
# generated code, dlopen'ed into instrumented processes).
#   tools/sanitize.sh            K3C_SANITIZE_DIR=dir (default build-asan)
# Leak detection is off: MLIR/LLVM keep process-lifetime singletons.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh > /dev/null # packages (and the normal build) as README command 2
b=${K3C_SANITIZE_DIR:-build-asan}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [ ! -f "$b/build.ninja" ]; then
  cmake -G Ninja -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
start=$(date +%s)
cmake --build "$b"
echo "k3c sanitize: build done in $(( $(date +%s) - start )) s ($b)"
# allow_user_poisoning=0: LLVM's headers poison BumpPtrAllocator memory in our
# instrumented code while the uninstrumented libMLIR hands it out again, which
# would read as use-after-poison.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_odr_violation=0:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$b"
ctest --output-on-failure

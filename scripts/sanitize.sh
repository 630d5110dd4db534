#!/usr/bin/env bash
# Builds seqc with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# (and libFuzzer instrumentation, so scripts/fuzz.sh reuses the build) into
# ./build-sanitize (or $SEQC_SANITIZE_DIR), then runs the whole test suite
# there, and the thread pool's tests under ThreadSanitizer. Any sanitizer
# report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
DIR=${SEQC_SANITIZE_DIR:-build-sanitize}
# ccache keys on paths relative to the checkout, so a clone in another
# folder (CI's) reuses what an earlier build compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [ ! -f "$DIR/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSEQC_SANITIZE=address,undefined -DSEQC_FUZZ=ON
fi
cmake --build "$DIR" -j "${SEQC_JOBS:-$(nproc)}"
# Reports abort the process (so a test notices); leaks are reports too.
# allow_user_poisoning=0: LLVM's allocators poison memory from inline code
# compiled into seqc (instrumented) that the uninstrumented libLLVM/libMLIR
# then use legitimately; only ASan's own poisoning counts.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
/usr/lib/llvm-22/bin/lit -sv "$DIR/test"
ctest --test-dir "$DIR" --output-on-failure -j "$(nproc)"
# The runtime's lock-free thread pool under ThreadSanitizer: a separate small
# build, since TSan cannot be combined with ASan.
clang++-22 -std=c++17 -O1 -g -fsanitize=thread -Iruntime -Iinclude \
  runtime/ThreadPool.cpp runtime/CallScope.cpp runtime/BlockCache.cpp \
  runtime/CudaDriver.cpp \
  unittests/ThreadPoolTest.cpp -lgtest -lgtest_main -pthread -ldl \
  -o "$DIR/seqc-threadpool-tsan"
TSAN_OPTIONS=halt_on_error=1 "$DIR/seqc-threadpool-tsan"

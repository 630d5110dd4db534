#!/usr/bin/env bash
# The test command (README, CI): builds seqc and runs every test.
#   1. the lit suite (dialect, passes, integration against numpy references,
#      model blocks, install, fuzz-corpus replay) and the GoogleTest unit
#      tests, in ./build;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#      (a clang build in ./build-sanitize) and the thread pool's tests under
#      ThreadSanitizer (scripts/sanitize.sh);
#   3. a bounded run of each libFuzzer target with a fixed seed from a fresh
#      work directory (scripts/fuzz.sh; $SEQC_TEST_FUZZ_SECONDS, default 30).
# `--quick` runs step 1 only (the edit-compile-test loop).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
case "${1:-}" in
  "") ;;
  --quick) QUICK=1 ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 1 ;;
esac
./scripts/build.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
[ "$QUICK" = 1 ] && exit 0
./scripts/sanitize.sh
WORK=${SEQC_SANITIZE_DIR:-build-sanitize}/test-fuzz-work
rm -rf "$WORK"
SEQC_FUZZ_SEED=1 SEQC_FUZZ_WORK="$WORK" ./scripts/fuzz.sh "${SEQC_TEST_FUZZ_SECONDS:-30}"

#!/usr/bin/env bash
# Builds seqc and runs every test: the lit suite (dialect, passes, integration
# against numpy references) and the GoogleTest unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"

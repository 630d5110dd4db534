#!/usr/bin/env bash
# Installs missing system packages, configures with CMake + Ninja and builds
# seqc into ./build (or $SEQC_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
JOBS=${SEQC_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SEQC_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$JOBS"

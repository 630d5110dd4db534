#!/usr/bin/env bash
# Installs missing system packages, configures with CMake + Ninja and builds
# seqc into ./build (or $SEQC_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
# ccache keys on paths relative to the checkout, so a clone in another
# folder (CI's) reuses what an earlier build compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
JOBS=${SEQC_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SEQC_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$JOBS"

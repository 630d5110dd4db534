#!/usr/bin/env bash
# The main job: builds seqc, generates weights for the hybrid stack of
# examples/ (Jamba's layout at d_model 128: 7 Mamba-2 layers and 1 attention
# layer, MoE every other layer) stored as .safetensors plus a 512-token
# input, and runs it through the JIT with seqc-run: weights bound by name,
# outputs printed, and a per-layer profile over 10 timed calls.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
# Installs seqc (libseqc, the tools, headers and the Python package) into
# $SEQC_INSTALL_PREFIX (default /usr/local, where Debian's python3 finds
# `import seqc`), when this user may write there; SEQC_INSTALL=0 skips it.
PREFIX=${SEQC_INSTALL_PREFIX:-/usr/local}
if [ "${SEQC_INSTALL:-1}" != 0 ]; then
  if [ -w "$PREFIX" ] || [ "$(id -u)" = 0 ]; then
    cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null
    echo "run-example: installed seqc into $PREFIX (python3 -c 'import seqc')"
  else
    echo "run-example: $PREFIX is not writable: seqc not installed" \
         "(set SEQC_INSTALL_PREFIX, or use PYTHONPATH=$BUILD_DIR/python)"
  fi
fi
OUT="$BUILD_DIR/example"
mkdir -p "$OUT"
/usr/bin/python3 examples/blocks/weights.py hybrid --out "$OUT/hybrid.safetensors" \
  --input-out "$OUT/u.npy" --tokens 512
"$BUILD_DIR/bin/seqc-run" examples/hybrid_stack.mlir --weights "$OUT/hybrid.safetensors" \
  --input "$OUT/u.npy" --print --profile --bench 10 "$@"

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
OUT="$BUILD_DIR/example"
mkdir -p "$OUT"
/usr/bin/python3 examples/blocks/weights.py hybrid --out "$OUT/hybrid.safetensors" \
  --input-out "$OUT/u.npy" --tokens 512
"$BUILD_DIR/bin/seqc-run" examples/hybrid_stack.mlir --weights "$OUT/hybrid.safetensors" \
  --input "$OUT/u.npy" --print --profile --bench 10 "$@"

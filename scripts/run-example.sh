#!/usr/bin/env bash
# The main job: builds seqc and runs a Mamba-2 block (in-projection, causal
# conv with SiLU, seq.ssd, gated RMSNorm, out-projection) through the JIT with
# deterministic random weights, printing its outputs and a benchmark line.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
"$BUILD_DIR/bin/seqc-run" examples/mamba2_block.mlir --random-inputs --print --bench 10 "$@"

#!/usr/bin/env bash
# Builds seqc and runs the CPU benchmark: the machine's ceilings (triad
# bandwidth, FMA peak) and every op of the CPU targets against them, the
# reference lowering and one thread. Pass --quick for smaller shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
"${SEQC_BUILD_DIR:-build}/bin/seqc-bench" "$@"

#!/usr/bin/env bash
# Builds seqc and runs the CPU benchmark: the machine's ceilings (triad
# bandwidth, FMA peak) and every op of the CPU targets against them, the
# reference lowering and one thread; then the peers column (bench/peers.py:
# numpy/OpenBLAS and PyTorch on the same matmuls, in the same run). Pass
# --quick for smaller shapes, --only NAME for the cases whose names contain
# NAME. SEQC_BENCH_PEERS=0 skips the peers (and their install). Last, the
# Python package's benchmark (bench/python.py: per-call overhead, seqc.compat
# against pure-PyTorch loops); --only python runs that alone. Then sequence
# parallelism over MPI ranks (bench/distributed.py: strong scaling of a long
# ssd over 1 and 2 ranks, bytes exchanged); --only distributed runs that
# alone.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
BUILD_DIR=${SEQC_BUILD_DIR:-build}
PY=/usr/bin/python3
if [ "${SEQC_BENCH_PEERS:-1}" != 0 ]; then
  # The peers are the benchmark's, not seqc's: Debian's numpy (OpenBLAS)
  # and PyTorch, installed here only.
  # numpy and torch alone bring the reference BLAS (libblas3, 40x slower
  # than OpenBLAS): the OpenBLAS package is checked for itself.
  if ! $PY -c "import numpy, torch" 2>/dev/null ||
     ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null |
       grep -q 'install ok installed'; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends python3-numpy \
      python3-torch libopenblas0-pthread >/dev/null
  fi
fi
ONLY="" QUICK=""
prev=""
for a in "$@"; do
  [ "$prev" = --only ] && ONLY=$a
  [ "$a" = --quick ] && QUICK=--quick
  prev=$a
done
if [ "$ONLY" != python ] && [ "$ONLY" != distributed ]; then
  RESULTS=$(mktemp)
  trap 'rm -f "$RESULTS"' EXIT
  "$BUILD_DIR/bin/seqc-bench" --results "$RESULTS" "$@"
  if [ "${SEQC_BENCH_PEERS:-1}" != 0 ]; then
    SEQC_BUILD_DIR="$BUILD_DIR" $PY bench/peers.py "$RESULTS"
  fi
fi
if [ -z "$ONLY" ] || [ "$ONLY" = python ]; then
  PYTHONPATH="$BUILD_DIR/python" $PY bench/python.py $QUICK
fi
if { [ -z "$ONLY" ] || [ "$ONLY" = distributed ]; } && command -v mpirun >/dev/null; then
  $PY bench/distributed.py --seqc-run "$BUILD_DIR/bin/seqc-run" $([ -n "$QUICK" ] && echo --T 8192)
fi

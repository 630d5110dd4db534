#!/usr/bin/env bash
# The GPU check (an NVIDIA H200 is the reference machine):
#
#   bench/gpu.sh pack PACKDIR          here, with seqc built: AOT-compiles the
#                                      device tests and the benchmarks for
#                                      sm_90a (gpu_pack.py) with the runner
#   bench/gpu.sh run PACKDIR OUTDIR    on the GPU machine (no MLIR or LLVM
#                                      needed): device tests, ceilings
#                                      (copy bandwidth, bf16 matmul through
#                                      PyTorch), benchmarks at the issue's
#                                      shapes against them and against PyTorch
#                                      (gpu_run.py); results in OUTDIR
#   bench/gpu.sh OUTDIR                both on a GPU machine with seqc built,
#                                      after the lit suite (device tests
#                                      included)
#
# With the device tool: `bench/gpu.sh pack build/gpu-pack` here, then
#   run(command="bench/gpu.sh run build/gpu-pack $OUT", carry=["build/gpu-pack"])
# The pack is about 30 MB; the run takes a few minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
# One python with numpy for every step (/usr/bin/python3 on Debian; the
# GPU image's python3 has numpy and PyTorch).
PY=${PYTHON:-python3}
$PY -c "import numpy" 2>/dev/null || PY=/usr/bin/python3

case "${1:-}" in
pack)
  [ $# -eq 2 ] || { echo "usage: bench/gpu.sh pack PACKDIR" >&2; exit 1; }
  [ -x build/bin/seqc-compile ] || ./scripts/build.sh || exit 1
  exec $PY bench/gpu_pack.py "$2"
  ;;
run)
  [ $# -eq 3 ] || { echo "usage: bench/gpu.sh run PACKDIR OUTDIR" >&2; exit 1; }
  mkdir -p "$3"
  { echo "== seqc GPU check $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  } | tee "$3/summary.txt"
  PYTHONUNBUFFERED=1 exec timeout 580 $PY bench/gpu_run.py "$2" "$3"
  ;;
"" | -h | --help)
  sed -n '2,22p' "$0"
  exit 1
  ;;
*)
  OUT=$1
  mkdir -p "$OUT"
  [ -x build/bin/seqc-run ] || ./scripts/build.sh || exit 1
  (cd build && ninja) >"$OUT/build.txt" 2>&1 || { echo "build failed (see $OUT/build.txt)"; exit 1; }
  /usr/lib/llvm-22/bin/lit build/test -v >"$OUT/lit.txt" 2>&1
  status=$?
  echo "lit: $(grep -E '^  (Passed|Failed|Unsupported)' "$OUT/lit.txt" | tr -s ' ' | tr '\n' ';')"
  [ $status -eq 0 ] || { echo "the lit suite failed (see $OUT/lit.txt)"; exit 1; }
  $PY bench/gpu_pack.py "$OUT/pack" || exit 1
  PYTHONUNBUFFERED=1 exec $PY bench/gpu_run.py "$OUT/pack" "$OUT"
  ;;
esac

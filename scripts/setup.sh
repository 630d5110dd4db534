#!/usr/bin/env bash
# Installs every system package seqc needs on Debian 12, only when something is missing.
# Safe to run repeatedly; needs root (or sudo) only when it has to install.
set -euo pipefail

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools   # LLVM/MLIR 22, FileCheck, lit, not
  cmake ninja-build g++ ccache pkg-config zlib1g-dev        # build
  python3 python3-numpy                                     # test references (/usr/bin/python3)
  python3-dev pybind11-dev python3-pytest python3-torch     # the Python package and its tests
  python3-mpi4py                                            # (its communicators, tested)
  libgtest-dev                                              # unit tests
  clang-22 libclang-rt-22-dev                               # sanitizer build, fuzzers
  openmpi-bin libopenmpi-dev                                # distributed runs (mpirun, libmpi)
  mpich libmpich-dev                                        # and on MPICH's ABI (tests)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# build-examples.sh SRC OUT: builds examples/host-cpp, examples/host-c and
# examples/serving against the seqc installed in OUT/prefix, with CMake
# (find_package(Seqc)), and the AOT program once more with plain cc and
# pkg-config.
set -euo pipefail
src=$1 out=$2 prefix=$2/prefix
# build EXAMPLE NAME: examples/EXAMPLE into OUT/NAME, its log OUT/NAME.log.
build() {
  cmake -G Ninja -S "$src/examples/$1" -B "$out/$2" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$out/$2.log"
  cmake --build "$out/$2" >> "$out/$2.log"
}
build host-cpp cpp
build host-c c
build serving serving
mkdir -p "$out/pkg"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
"$prefix/bin/seqc-compile" "$src/examples/host-c/gla.mlir" -o "$out/pkg/gla_aot.o" \
  --header "$out/pkg/gla_aot.h" --prefix gla_
cc -std=c99 -O2 -I"$out/pkg" "$src/examples/host-c/aot.c" "$out/pkg/gla_aot.o" \
  -o "$out/pkg/gla-aot" $(pkg-config --cflags --libs seqc-runtime)

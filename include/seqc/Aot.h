//===- Aot.h - ahead-of-time compilation ------------------------*- C++ -*-===//
//
// Compiles MLIR into an object file (or a shared library) and a C header
// with an entry point per public function. The code needs no JIT and no
// MLIR or LLVM at run time: only libseqc_runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_AOT_H
#define SEQC_AOT_H

#include "seqc/Engine.h"

#include <string>

namespace seqc {

struct AotOptions {
  CompileOptions compile;
  /// Prefix of the C entry points: `<prefix><function>`.
  std::string prefix = "seqc_";
  /// The object (.o) or shared library (.so) to write.
  std::string output;
  /// The header to write (empty: none).
  std::string header;
  /// For shared libraries: the directory holding libseqc_runtime.a.
  std::string runtimeLibraryDir;
  /// The x86-64 CPU (or level: x86-64-v3, ...) the code may use the
  /// features of; empty: this machine's.
  std::string cpu;
  /// CPU objects also carry the same functions compiled for this CPU (bf16
  /// products widened), which each entry point calls on a CPU that lacks a
  /// feature of the main code; empty: no fallback (such a call fails with
  /// an error naming the feature). None is added when the main code needs
  /// no feature the fallback's CPU lacks.
  std::string fallbackCpu = "x86-64-v2";
};

/// Compiles `source` (named `bufferName` in messages) as `options` says.
Status compileAheadOfTime(std::string_view source,
                          const std::string &bufferName,
                          const AotOptions &options);

} // namespace seqc

#endif // SEQC_AOT_H

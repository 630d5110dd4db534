//===- PerfMap.h - JIT'd functions for Linux perf ---------------*- C++ -*-===//
//
// With SEQC_PERF_MAP=1, every function the JIT links (kernels included) is
// appended to /tmp/perf-<pid>.map, the file `perf report` reads to name
// addresses in JIT'd code.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_LIB_PERFMAP_H
#define SEQC_LIB_PERFMAP_H

namespace llvm {
class Module;
namespace orc {
class LLJIT;
}
} // namespace llvm

namespace seqc {

/// Whether SEQC_PERF_MAP asks for perf maps (it is part of the cache key:
/// it changes the object).
bool perfMapRequested();
/// Gives the module's internal functions (the kernels) hidden global
/// linkage, so their names reach the perf map. Run after optimization.
void exposeLocalFunctions(llvm::Module &module);

/// Installs the perf-map writer on `jit` when SEQC_PERF_MAP is set.
void addPerfMapSupport(llvm::orc::LLJIT &jit);

} // namespace seqc

#endif // SEQC_LIB_PERFMAP_H

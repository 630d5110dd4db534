//===- Compiler.h - MLIR text to a relocatable object -----------*- C++ -*-===//
//
// The one compilation path behind the JIT, the compile cache and ahead-of-
// time objects: parse and verify, run the CPU pipeline, translate to LLVM IR,
// optimize for the target machine and emit a position-independent object
// whose public functions have packed entry points (_seqc_packed_<name>).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_LIB_COMPILER_H
#define SEQC_LIB_COMPILER_H

#include "seqc/Engine.h"

#include "llvm/Target/TargetMachine.h"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llvm {
class Module;
class LLVMContext;
} // namespace llvm

namespace seqc {

/// A public function that cannot be called from the host, and why.
struct UnsupportedFunction {
  std::string name;
  std::string reason;
};

struct CompiledObject {
  /// The object file (ELF on Linux).
  std::string object;
  std::vector<FunctionSignature> functions;
  std::vector<UnsupportedFunction> unsupported;
};

/// The host CPU's target machine (features detected now), position-
/// independent code, at `optLevel`. `cpu` names another x86-64 CPU (or
/// level: x86-64-v2, x86-64-v3, ...) whose features to use instead.
Expected<std::unique_ptr<llvm::TargetMachine>>
hostTargetMachine(int optLevel, const std::string &cpu = "");

/// The products bf16 operands take in code for `tm`: options.bf16Products,
/// Auto resolved ($SEQC_CPU_BF16, else the CPU's AVX-512 BF16); "dot" or
/// "widen" (the CPU pipeline's bf16-products), or an error naming what the
/// CPU lacks or the unknown value.
Expected<std::string> resolveBf16Products(const CompileOptions &options,
                                          const llvm::TargetMachine &tm);

/// The features of knownCpuFeatures() code for `tm` may use.
std::vector<std::string> cpuFeaturesOf(const llvm::TargetMachine &tm);

/// Edits the LLVM module before it is optimized (ahead-of-time entry
/// points), given the signatures of the public functions.
using ModuleHook =
    std::function<void(llvm::Module &, const std::vector<FunctionSignature> &)>;

/// Compiles `source` to an object for `tm`. `hook`, when given, edits the
/// LLVM module before optimization. CUDA code loads its kernel modules in
/// constructors; with `gatherCudaStructors` (the JIT's objects) they become
/// the functions cudaInitSymbol() / cudaFiniSymbol() instead.
Expected<CompiledObject> compileToObject(std::string_view source,
                                         const std::string &bufferName,
                                         const CompileOptions &options,
                                         llvm::TargetMachine &tm,
                                         const ModuleHook &hook = nullptr,
                                         bool gatherCudaStructors = true);

/// The functions of CUDA objects that load their kernel modules (call after
/// linking) and unload them (call before unlinking).
const char *cudaInitSymbol();
const char *cudaFiniSymbol();

/// Reports the time of each stage of a compile through
/// CompileOptions::onEvent: done(name) ends the stage that began when the
/// clock was made or at the last done().
class StageClock {
public:
  explicit StageClock(const CompileOptions &options);
  void done(const std::string &stage);

private:
  std::function<void(const CompileEvent &)> onEvent;
  std::chrono::steady_clock::time_point start;
};

/// The version of seqc (part of cache keys and object metadata).
const char *seqcVersion();

/// An entry point of seqc's runtime that generated code calls.
struct RuntimeSymbol {
  const char *name;
  void *address;
};
/// Every runtime symbol compiled code may reference.
const std::vector<RuntimeSymbol> &runtimeSymbols();
bool isRuntimeSymbol(const std::string &name);

} // namespace seqc

#endif // SEQC_LIB_COMPILER_H

//===- Signature.h - function signatures and calls into compiled code -*- C++
//-*-===//
//
// What the JIT, the compile cache and ahead-of-time objects share: the type
// of each argument and result of a compiled function, and the call through
// its packed entry point (`_seqc_packed_<name>(void **args)`), which checks
// the arguments, passes them as memref descriptors and returns the results
// as tensors. No MLIR or LLVM here.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_SIGNATURE_H
#define SEQC_SIGNATURE_H

#include "seqc/Tensor.h"

#include <string>
#include <vector>

namespace seqc {

/// The type of one argument or result. Dynamic dimensions are -1.
struct TensorSpec {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// The argument's name (its `seq.name` attribute), or "argN" / "resultN".
  std::string name;
  /// "tensor<?x16xf32>".
  std::string typeString() const;
};

struct FunctionSignature {
  std::string name;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  /// Names of the timed regions of a profiled build (one per call the
  /// function makes, CompileOptions::profile), in region id order.
  std::vector<std::string> profileRegions;
  /// Compiled for the CUDA target: calls stage their inputs in managed
  /// memory and synchronize the device (invokePacked's `cudaMemory`).
  bool cuda = false;
  /// The x86-64 features of knownCpuFeatures() the code was generated for
  /// (the host's, or seqc-compile --cpu's): an ahead-of-time object called
  /// on a CPU without one of them fails with an error naming it instead of
  /// dying on an illegal instruction.
  std::vector<std::string> cpuFeatures;
};

/// The x86-64 features (LLVM's names, which GCC's and Clang's
/// __builtin_cpu_supports share) that seqc records and checks.
const std::vector<std::string> &knownCpuFeatures();
/// Those of `required` this CPU lacks, space-separated ("" when none; a
/// CPU other than x86-64 lacks every one). amx-tile counts as lacking,
/// with the reason after it in parentheses, when the kernel refuses this
/// process the tile data (requestAmxTileData).
std::string missingCpuFeatures(const std::vector<std::string> &required);
/// Asks Linux for AMX's tile data state for this process, once: "" when
/// granted, else why not.
std::string requestAmxTileData();

/// What one call measured: time per profile region (accumulated over the
/// region's executions in the call), and the bytes the call allocated.
struct CallStats {
  std::vector<double> regionSeconds;
  std::vector<int64_t> regionCalls;
  /// The sum of every buffer the call allocated (intermediates and
  /// results): the memory traffic a fused graph avoids shows up here.
  size_t allocatedBytes = 0;
  /// The most bytes held at once.
  size_t peakBytes = 0;
};

/// Text forms of signatures (compile cache metadata, AOT tables): one
/// `function NAME` line, then one `input|output DTYPE RANK DIMS... NAME`
/// line per tensor, one `region NAME` line per profile region and one
/// `cpu-features F...` line.
std::string serializeSignatures(const std::vector<FunctionSignature> &sigs);
Expected<std::vector<FunctionSignature>>
parseSignatures(const std::string &text);

/// The packed entry point of a compiled function: args[i] points at the i-th
/// word of the memref descriptors of the inputs, the last at room for the
/// results' descriptors.
using PackedFn = void (*)(void **);

/// `name` as a C identifier (other characters become `_`, a leading digit
/// gets one more): the C names of seqc-compile's entry points.
std::string cIdentifier(const std::string &name);

/// The symbol of the packed entry point of function `name`.
std::string packedSymbol(const std::string &name);

/// How invokePacked makes a call.
struct CallOptions {
  /// The most bytes the call may allocate (0: no limit).
  size_t memoryLimit = 0;
  /// Where to measure the call (profile regions, allocations); null: not
  /// measured.
  CallStats *stats = nullptr;
  /// Code compiled for the CUDA target: inputs not already in managed
  /// memory are copied there, the call's buffers are managed memory (every
  /// kernel launch is synchronous), and results stay in managed memory
  /// (their tensors free it).
  bool cudaMemory = false;
  /// A distributed module's communicator (an MPI_Comm as `void *`), null for
  /// one process. Its ranks first agree to make the call: a rank whose
  /// arguments the checks refuse, or that calls another module or function,
  /// then stops every rank with the same error instead of leaving them
  /// waiting in the call's first exchange.
  void *communicator = nullptr;
  /// The module's identity the ranks compare: equal where they compiled the
  /// same module.
  uint64_t moduleIdentity = 0;
  /// With a communicator: a call that has not returned after this many
  /// seconds ends every rank of the job with an error (0: never); see
  /// CompileOptions::callTimeout.
  double timeoutSeconds = 0;
};

/// Checks `args` against `sig` (count, element type, rank, static
/// dimensions), calls `fn` in a call scope (run-time checks, tracked
/// allocations, the options' memory limit) and returns the results.
/// Buffers the call allocated for one result alone become the result
/// tensors without a copy.
Expected<std::vector<Tensor>> invokePacked(PackedFn fn,
                                           const FunctionSignature &sig,
                                           const std::vector<TensorView> &args,
                                           const CallOptions &options);

/// The machine's physical memory in bytes (the default memory limit).
size_t physicalMemoryBytes();

} // namespace seqc

#endif // SEQC_SIGNATURE_H

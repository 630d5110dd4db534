//===- Engine.h - seqc's JIT: compile MLIR, call functions ------*- C++ -*-===//
//
// Compile MLIR text (a graph of seq and tensor-level ops in func.func) for the
// host CPU, look functions up by name and call them on host tensors:
//
//   seqc::Engine engine;
//   auto module = engine.compile(source, {});
//   if (!module) { report(module.message()); }
//   auto fn = (*module)->function("main");
//   auto results = fn->call({x.view(), w.view()});
//
// Errors are values (Status / Expected); the library writes nothing to
// stdout or stderr on its own.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_ENGINE_H
#define SEQC_ENGINE_H

#include "seqc/Signature.h"
#include "seqc/Tensor.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace seqc {

/// Where code runs. CUDAEmulated compiles the CUDA kernels but runs their
/// IR on the host (one thread-pool task per thread block): for testing the
/// GPU lowering on machines without a GPU.
enum class Target { CPU, CUDA, CUDAEmulated };

enum class Profile { None, Calls, Ops };

/// What a compile is doing, reported as it happens through
/// CompileOptions::onEvent (tools print progress and stage times with it).
struct CompileEvent {
  enum class Kind {
    CacheHit,  ///< `what`: "memory" or "disk"; nothing is compiled
    CacheMiss, ///< the module is compiled now (stages follow)
    Stage,     ///< the stage `what` took `seconds`
    Remark, ///< `what`: an op took no fast lowering, and why ("FILE:L:C: ...")
  };
  Kind kind;
  std::string what;
  double seconds = 0;
};

/// How the CPU kernels multiply bf16 operands.
enum class Bf16Products {
  /// $SEQC_CPU_BF16 when set ("amx", "amx-emulated", "dot" or "widen"),
  /// else AMX tiles where the CPU the code is generated for has AMX (and,
  /// for this machine, Linux grants this process the tile data; if it
  /// refuses, a warning says so once and dot products serve), else dot
  /// products where it has AVX-512 BF16, else widened.
  Auto,
  /// AVX-512 BF16 dot products of bf16 pairs (vdpbf16ps), f32 accumulation;
  /// an error where the CPU lacks them.
  Dot,
  /// f32 FMAs on operands widened to f32 (every CPU).
  Widen,
  /// AMX tiles (tdpbf16ps) in matmuls and experts, dot products in
  /// attention; an error where the CPU lacks amx-tile and amx-bf16, or
  /// (for this machine) where Linux refuses the tile data.
  Amx,
  /// The AMX kernels with the tiles emulated by vector code (every CPU;
  /// for testing them where there is no AMX, not for speed).
  AmxEmulated,
};

/// What a distributed compile (CompileOptions::ranks) splits over the ranks.
enum class Parallelism {
  /// Every seq op's steps (sequence parallelism; seqc-run --parallel
  /// sequence).
  Sequence,
  /// moe_ffn's experts, the routed tokens exchanged all-to-all (expert
  /// parallelism; seqc-run --parallel experts). Other ops run replicated.
  Experts,
  /// Both on the same ranks: moe_ffn by experts, every other seq op by
  /// steps (a hybrid stack's usual split; --parallel sequence+experts).
  SequenceAndExperts,
};

/// A weight bound when a module is compiled (CompileOptions::boundWeights).
struct BoundWeight {
  /// The seq.name of the arguments it binds.
  std::string name;
  /// Contiguous row-major data, read during the compile (copied into the
  /// module: it need not outlive the compile).
  TensorView value;
};

struct CompileOptions {
  Target target = Target::CPU;
  /// The GPU architecture for Target::CUDA (sm_80, sm_90a, ...); empty:
  /// the device's own.
  std::string cudaChip;
  /// Threads per block of the GPU kernels (a multiple of 32 up to 1024);
  /// 0: 256.
  int cudaBlockThreads = 0;
  /// Lower through the reference lowering (the test oracle) instead of the
  /// default pipeline.
  bool reference = false;
  /// LLVM optimization level for the generated code (0-3).
  int optLevel = 3;
  /// The most bytes one call may allocate at once; 0 means the machine's
  /// physical memory. A call that would exceed it fails with an error.
  size_t memoryLimit = 0;
  /// Threads of the runtime's pool (process-wide); 0 keeps the current
  /// count (SEQC_NUM_THREADS, else the hardware's).
  int numThreads = 0;
  /// Reuse compiled code: in memory within the engine, and on disk in
  /// `cacheDir` (empty: $SEQC_CACHE_DIR, else $XDG_CACHE_HOME/seqc, else
  /// ~/.cache/seqc). A cache that cannot be read or written is skipped (see
  /// CompiledModule::cacheNote); corrupt or stale entries are rebuilt.
  bool useCache = true;
  std::string cacheDir;
  /// What a profiled build times (Function::call with CallStats reports it):
  /// every call a public function makes (one region per layer of a model
  /// graph), or every compute op, each moved into a function of its own
  /// (nothing fuses: "the ops run separately"; layer calls nest around them).
  Profile profile = Profile::None;
  /// Fuse elementwise glue into the seq ops and matmuls (the default);
  /// false materializes every intermediate (for measuring what fusion saves).
  bool fuse = true;
  /// An op without the target's fast lowering (one that would run the
  /// reference loops, or on the host for CUDA) fails the compile with an
  /// error naming it and why; without `strict` each is a Remark event.
  bool strict = false;
  /// Distributed: the work (see `parallel`) is split over this many MPI
  /// processes, which must be MPI_COMM_WORLD's size; every process compiles
  /// the same module and calls it with the same (whole) arguments, and gets
  /// the whole results. 0: one process, no MPI. The engine opens and
  /// initializes MPI (OpenMPI's libmpi, or a library of MPICH's ABI: see
  /// docs/distributed.md, "Which MPI") when it is not. For Target::CUDA
  /// each process uses one GPU and the exchanges run on NCCL (libnccl.so.2,
  /// opened here); for Target::CUDAEmulated on MPI. compile() is then
  /// collective over the communicator: with `useCache`, the first process
  /// of each host compiles and the host's others wait for it and load its
  /// code from the disk cache, instead of all compiling at once.
  int ranks = 0;
  /// What the ranks split: see Parallelism.
  Parallelism parallel = Parallelism::Sequence;
  /// With Parallelism::Sequence (or SequenceAndExperts: the experts then
  /// split each process's own tokens): each process passes only its own steps
  /// of the arguments with steps and gets back its own steps of the results
  /// with steps (rank r's steps follow rank r - 1's in the whole; any
  /// number on each), instead of the whole on every process. Arguments and
  /// results without steps (weights, states) stay whole. The compile fails
  /// with an error naming the op where the graph does not keep steps apart
  /// (docs/distributed.md, "Rank-local steps"). Which arguments and results
  /// hold steps is found from the graph: those whose step dimension feeds
  /// or comes from a seq op's time axis (seqc-opt with
  /// --seq-distribute-steps=local=1 marks them seq.steps).
  bool localSteps = false;
  /// The communicator of a distributed module (the host's `MPI_Comm` as
  /// `(void *)(intptr_t)comm`, which holds OpenMPI's pointer and MPICH's
  /// int alike; the host has started MPI), whose size must be `ranks`; every
  /// process of it calls the module's functions collectively. Null:
  /// MPI_COMM_WORLD. The code is the same for every communicator (one
  /// cache entry on disk); each compiled module calls on its own.
  void *communicator = nullptr;
  /// Products of bf16 operands in the CPU kernels (matmuls and experts):
  /// see Bf16Products.
  Bf16Products bf16Products = Bf16Products::Auto;
  /// With ranks > 1: a call that has not returned after this many seconds
  /// prints an error naming the rank and the function and ends every rank
  /// of the job (MPI_Abort). A rank that stops inside a call, or leaves it
  /// early after a failure of its own, otherwise leaves the others waiting
  /// in an exchange for ever. 0 (default): no limit.
  double callTimeout = 0;
  /// Weights bound at compile time: every argument of a public function
  /// whose seq.name is a bound weight's name becomes that weight, a
  /// constant of the module, and the compiled function no longer takes it
  /// (its signature lists the other arguments). The CPU's matmuls then pack
  /// such a weight once, when compiling, not in every call. A weight whose
  /// name binds no argument, or whose element type or shape differs from
  /// the argument's, is an error. Part of the cache key (its bytes too).
  std::vector<BoundWeight> boundWeights;
  /// Called on the compiling thread as the compile proceeds (may be empty).
  std::function<void(const CompileEvent &)> onEvent;
};

/// Where a compiled module's code came from.
enum class CacheStatus {
  Compiled,  ///< compiled now
  MemoryHit, ///< the engine had compiled the same module
  DiskHit,   ///< loaded from the disk cache
};

class CompiledModule;

/// A function of a compiled module. Cheap to copy; keeps its module alive.
/// Calls may run concurrently from several threads.
class Function {
public:
  const FunctionSignature &signature() const;
  /// Checks `args` against the signature (count, element type, rank, static
  /// dimensions), runs the function and returns its results as new tensors.
  /// Run-time errors (dynamic dimensions that disagree, out-of-range expert
  /// indices, memory limit) come back as errors.
  Expected<std::vector<Tensor>> call(const std::vector<TensorView> &args) const;
  /// The same, also measuring the call: bytes allocated, and with a
  /// profiled build (CompileOptions::profile) the time of each region
  /// (signature().profileRegions).
  Expected<std::vector<Tensor>> call(const std::vector<TensorView> &args,
                                     CallStats &stats) const;
  /// For a host that cannot make a call the other ranks of a distributed
  /// function wait for (its own checks refused the arguments): takes part
  /// in the call's agreement with `reason` instead, so that every rank
  /// returns the same error, which this returns. Ok, doing nothing, for a
  /// function of one process (the host reports its own error).
  Status refuseCall(const std::string &reason) const;
  /// The packed entry point (for hosts that pass descriptors themselves).
  PackedFn packedEntry() const;

private:
  friend class CompiledModule;
  struct Impl;
  std::shared_ptr<const Impl> impl;
};

/// The result of compiling one MLIR module.
class CompiledModule {
public:
  ~CompiledModule();
  /// Public functions, in the order they appear in the source.
  std::vector<std::string> functionNames() const;
  Expected<Function> function(std::string_view name) const;
  CacheStatus cacheStatus() const;
  /// Why the cache was not used, when it was not (a read-only or full cache
  /// directory, a corrupt entry that was rebuilt); empty otherwise.
  const std::string &cacheNote() const;

  struct Impl;

private:
  friend class Engine;
  std::shared_ptr<Impl> impl;
  size_t memoryLimit = 0;
  /// The ranks its functions are called on (CompileOptions::ranks) and
  /// what they compare before each call (distributedModuleIdentity, in
  /// lib/CompileCache.h), and the call timeout.
  int ranks = 0;
  uint64_t identity = 0;
  double callTimeout = 0;
  CacheStatus status = CacheStatus::Compiled;
  std::string note;
};

/// Compiles MLIR. Thread-safe: each compilation uses its own MLIR context.
class Engine {
public:
  Engine();
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  Expected<std::shared_ptr<CompiledModule>>
  compile(std::string_view source, const CompileOptions &options,
          const std::string &bufferName = "<input>");
  Expected<std::shared_ptr<CompiledModule>>
  compileFile(const std::string &path, const CompileOptions &options);

private:
  /// compile() once the target's details (the CUDA chip) are known.
  Expected<std::shared_ptr<CompiledModule>>
  compileResolved(std::string_view source, const CompileOptions &options,
                  const std::string &bufferName);
  /// compileResolved() for a distributed module with the cache in use: the
  /// first process of each host compiles before the host's others.
  Expected<std::shared_ptr<CompiledModule>>
  compileFirstOnHost(std::string_view source, const CompileOptions &options,
                     const std::string &bufferName);

  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Whether a CUDA driver and at least one device are present.
bool cudaDeviceAvailable();

} // namespace seqc

#endif // SEQC_ENGINE_H

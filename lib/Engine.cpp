//===- Engine.cpp - seqc's JIT: objects on LLJIT, memory and disk caches --===//
//
// compile() turns MLIR into an object (Compiler.cpp) and links it into an
// LLJIT instance of its own, resolving seqc's runtime and the C library. The
// object is also what the caches keep: in memory per engine, and on disk
// keyed by a hash of everything that determines it, so a host's second start
// loads code instead of compiling it.
//
//===----------------------------------------------------------------------===//

#include "seqc/Engine.h"
#include "EntryPoints.h"

#include "BoundWeights.h"
#include "CallAgreement.h"
#include "CallDeadline.h"
#include "CompileCache.h"
#include "Compiler.h"

#include "CudaDriver.h"
#include "Mpi.h"
#include "NcclApi.h"
#include "PerfMap.h"
#include "Runtime.h"
#include "seqc/seqc_runtime.h"

#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unistd.h>
#include <vector>

using namespace seqc;

const std::vector<RuntimeSymbol> &seqc::runtimeSymbols() {
  static const std::vector<RuntimeSymbol> symbols = {
      {rt::entry::kCheckFailed,
       reinterpret_cast<void *>(&seqc_rt_check_failed)},
      {"__truncsfbf2", reinterpret_cast<void *>(&seqc_rt_truncsfbf2)},
      {"_mlir_memref_to_llvm_alloc",
       reinterpret_cast<void *>(&_mlir_memref_to_llvm_alloc)},
      {"_mlir_memref_to_llvm_aligned_alloc",
       reinterpret_cast<void *>(&_mlir_memref_to_llvm_aligned_alloc)},
      {"_mlir_memref_to_llvm_free",
       reinterpret_cast<void *>(&_mlir_memref_to_llvm_free)},
      {"memrefCopy", reinterpret_cast<void *>(&memrefCopy)},
      {rt::entry::kParallelFor,
       reinterpret_cast<void *>(&seqc_rt_parallel_for)},
      {rt::entry::kParallelWidth,
       reinterpret_cast<void *>(&seqc_rt_parallel_width)},
      {rt::entry::kInvokeC, reinterpret_cast<void *>(&seqc_rt_invoke_c)},
      {rt::entry::kCpuHas, reinterpret_cast<void *>(&seqc_rt_cpu_has)},
      {rt::entry::kProfileEnter,
       reinterpret_cast<void *>(&seqc_rt_profile_enter)},
      {rt::entry::kProfileExit,
       reinterpret_cast<void *>(&seqc_rt_profile_exit)},
      // Distributed code's all-gather on the CPU (Mpi.cpp).
      {rt::entry::kMpiAllGather,
       reinterpret_cast<void *>(&seqc_rt_mpi_all_gather)},
      // Distributed code's collectives on the CUDA target (Nccl.cpp).
      {rt::entry::kNcclAllReduce,
       reinterpret_cast<void *>(&seqc_rt_nccl_all_reduce)},
      {rt::entry::kNcclAllGather,
       reinterpret_cast<void *>(&seqc_rt_nccl_all_gather)},
      {rt::entry::kNcclSend, reinterpret_cast<void *>(&seqc_rt_nccl_send)},
      {rt::entry::kNcclRecv, reinterpret_cast<void *>(&seqc_rt_nccl_recv)},
      {rt::entry::kNcclEmulatedAllReduce,
       reinterpret_cast<void *>(&seqc_rt_nccl_emulated_all_reduce)},
      {rt::entry::kNcclEmulatedAllGather,
       reinterpret_cast<void *>(&seqc_rt_nccl_emulated_all_gather)},
      {rt::entry::kNcclEmulatedSend,
       reinterpret_cast<void *>(&seqc_rt_nccl_emulated_send)},
      {rt::entry::kNcclEmulatedRecv,
       reinterpret_cast<void *>(&seqc_rt_nccl_emulated_recv)},
      // The CUDA entry points of MLIR's GPU lowering (CudaRuntime.cpp).
      {"mgpuModuleLoad", reinterpret_cast<void *>(&mgpuModuleLoad)},
      {"mgpuModuleLoadJIT", reinterpret_cast<void *>(&mgpuModuleLoadJIT)},
      {"mgpuModuleUnload", reinterpret_cast<void *>(&mgpuModuleUnload)},
      {"mgpuModuleGetFunction",
       reinterpret_cast<void *>(&mgpuModuleGetFunction)},
      {"mgpuLaunchKernel", reinterpret_cast<void *>(&mgpuLaunchKernel)},
      {"mgpuStreamCreate", reinterpret_cast<void *>(&mgpuStreamCreate)},
      {"mgpuStreamDestroy", reinterpret_cast<void *>(&mgpuStreamDestroy)},
      {"mgpuStreamSynchronize",
       reinterpret_cast<void *>(&mgpuStreamSynchronize)},
      {"mgpuStreamWaitEvent", reinterpret_cast<void *>(&mgpuStreamWaitEvent)},
      {"mgpuEventCreate", reinterpret_cast<void *>(&mgpuEventCreate)},
      {"mgpuEventDestroy", reinterpret_cast<void *>(&mgpuEventDestroy)},
      {"mgpuEventSynchronize", reinterpret_cast<void *>(&mgpuEventSynchronize)},
      {"mgpuEventRecord", reinterpret_cast<void *>(&mgpuEventRecord)},
      {"mgpuMemAlloc", reinterpret_cast<void *>(&mgpuMemAlloc)},
      {"mgpuMemFree", reinterpret_cast<void *>(&mgpuMemFree)},
      {"mgpuMemcpy", reinterpret_cast<void *>(&mgpuMemcpy)},
      {"mgpuMemset32", reinterpret_cast<void *>(&mgpuMemset32)},
      {"mgpuMemset16", reinterpret_cast<void *>(&mgpuMemset16)},
      {"mgpuSetDefaultDevice", reinterpret_cast<void *>(&mgpuSetDefaultDevice)},
  };
  return symbols;
}

//===----------------------------------------------------------------------===//
// Compiled modules
//===----------------------------------------------------------------------===//

struct CompiledModule::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::vector<FunctionSignature> functions;
  std::vector<UnsupportedFunction> unsupported;
  std::map<std::string, PackedFn> entries;
  /// CUDA code: releases the kernel modules before the code goes.
  void (*unloadKernels)() = nullptr;
  /// Distributed code's MPI_Comm, read by the code through the module's
  /// own kMpiCommunicator symbol.
  void *communicator = nullptr;

  ~Impl() {
    if (unloadKernels)
      unloadKernels();
  }
};

struct Function::Impl {
  std::shared_ptr<const CompiledModule::Impl> module;
  const FunctionSignature *sig = nullptr;
  PackedFn packed = nullptr;
  /// How its calls are made (the communicator set for a module of several
  /// ranks).
  CallOptions call;
};

CompiledModule::~CompiledModule() = default;

std::vector<std::string> CompiledModule::functionNames() const {
  std::vector<std::string> names;
  for (const FunctionSignature &f : impl->functions)
    names.push_back(f.name);
  for (const UnsupportedFunction &f : impl->unsupported)
    names.push_back(f.name);
  return names;
}

Expected<Function> CompiledModule::function(std::string_view name) const {
  for (const UnsupportedFunction &f : impl->unsupported)
    if (f.name == name)
      return Status::error("function @" + f.name +
                           " cannot be called: " + f.reason);
  for (const FunctionSignature &f : impl->functions) {
    if (f.name != name)
      continue;
    auto fi = std::make_shared<Function::Impl>();
    fi->module = impl;
    fi->sig = &f;
    fi->packed = impl->entries.at(f.name);
    fi->call.memoryLimit = memoryLimit;
    fi->call.cudaMemory = f.cuda;
    if (ranks > 1) {
      fi->call.communicator = impl->communicator;
      fi->call.moduleIdentity = identity;
      fi->call.timeoutSeconds = callTimeout;
    }
    Function fn;
    fn.impl = fi;
    return fn;
  }
  std::string known;
  for (const std::string &n : functionNames())
    known += (known.empty() ? "@" : ", @") + n;
  return Status::error("no public function @" + std::string(name) +
                       " in the module" +
                       (known.empty() ? "" : " (it has " + known + ")"));
}

CacheStatus CompiledModule::cacheStatus() const { return status; }
const std::string &CompiledModule::cacheNote() const { return note; }

const FunctionSignature &Function::signature() const { return *impl->sig; }

Expected<std::vector<Tensor>>
Function::call(const std::vector<TensorView> &args) const {
  return invokePacked(impl->packed, *impl->sig, args, impl->call);
}

Expected<std::vector<Tensor>>
Function::call(const std::vector<TensorView> &args, CallStats &stats) const {
  CallOptions measured = impl->call;
  measured.stats = &stats;
  return invokePacked(impl->packed, *impl->sig, args, measured);
}

Status Function::refuseCall(const std::string &reason) const {
  if (!impl->call.communicator)
    return Status::ok();
  rt::CallDeadline deadline(impl->call.communicator, impl->call.timeoutSeconds,
                            impl->sig->name);
  return Status::error(rt::agreeOnCall(
      impl->call.communicator,
      {impl->call.moduleIdentity, impl->sig->name, true, reason}));
}

PackedFn Function::packedEntry() const { return impl->packed; }

//===----------------------------------------------------------------------===//
// Linking objects
//===----------------------------------------------------------------------===//

/// Links `object` into a new LLJIT and finds every function's entry point.
static Expected<std::shared_ptr<CompiledModule::Impl>>
loadObject(const std::string &object, std::vector<FunctionSignature> functions,
           std::vector<UnsupportedFunction> unsupported,
           void *communicator = nullptr) {
  auto impl = std::make_shared<CompiledModule::Impl>();
  impl->communicator = communicator;
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return Status::error("cannot target the host CPU: " +
                         llvm::toString(builder.takeError()));
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*builder))
                 .create();
  if (!jit)
    return Status::error("cannot start the JIT: " +
                         llvm::toString(jit.takeError()));
  addPerfMapSupport(**jit);
  // Failures come back through lookups; nothing is printed.
  (*jit)->getExecutionSession().setErrorReporter(
      [](llvm::Error err) { llvm::consumeError(std::move(err)); });

  llvm::orc::JITDylib &lib = (*jit)->getMainJITDylib();
  llvm::orc::SymbolMap runtime;
  for (const RuntimeSymbol &s : runtimeSymbols())
    runtime[(*jit)->mangleAndIntern(s.name)] = {
        llvm::orc::ExecutorAddr::fromPtr(s.address),
        llvm::JITSymbolFlags::Exported};
  runtime[(*jit)->mangleAndIntern(rt::entry::kMpiCommunicator)] = {
      llvm::orc::ExecutorAddr::fromPtr(&impl->communicator),
      llvm::JITSymbolFlags::Exported};
  if (llvm::Error err = lib.define(llvm::orc::absoluteSymbols(runtime)))
    return Status::error("cannot define runtime symbols: " +
                         llvm::toString(std::move(err)));
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process)
    return Status::error("cannot search the process for symbols: " +
                         llvm::toString(process.takeError()));
  lib.addGenerator(std::move(*process));

  if (llvm::Error err = (*jit)->addObjectFile(
          llvm::MemoryBuffer::getMemBufferCopy(object, "seqc-module.o")))
    return Status::error("cannot load compiled code: " +
                         llvm::toString(std::move(err)));

  for (const FunctionSignature &f : functions) {
    auto addr = (*jit)->lookup(packedSymbol(f.name));
    if (!addr)
      return Status::error("function @" + f.name +
                           " is missing from the compiled code: " +
                           llvm::toString(addr.takeError()));
    impl->entries[f.name] = addr->toPtr<PackedFn>();
  }
  // CUDA code loads its kernel modules now (the device is ready: the engine
  // checked before compiling).
  if (auto init = (*jit)->lookup(cudaInitSymbol())) {
    rt::cudaTakeLoadError(); // nothing of an earlier load on this thread
    init->toPtr<void (*)()>()();
    if (auto fini = (*jit)->lookup(cudaFiniSymbol()))
      impl->unloadKernels = fini->toPtr<void (*)()>();
    else
      llvm::consumeError(fini.takeError());
    std::string error = rt::cudaTakeLoadError();
    if (!error.empty()) {
      impl->jit = std::move(*jit);
      return Status::error(error);
    }
  } else {
    llvm::consumeError(init.takeError());
  }
  impl->jit = std::move(*jit);
  impl->functions = std::move(functions);
  impl->unsupported = std::move(unsupported);
  return impl;
}

//===----------------------------------------------------------------------===//
// Engine
//===----------------------------------------------------------------------===//

static void report(const CompileOptions &options, CompileEvent::Kind kind,
                   const std::string &what) {
  if (options.onEvent)
    options.onEvent({kind, what, 0});
}

struct Engine::Impl {
  std::mutex mutex;
  /// Modules by cache key, kept while someone holds them.
  std::map<std::string, std::weak_ptr<CompiledModule::Impl>> memory;
};

Engine::Engine() : impl(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

Expected<std::shared_ptr<CompiledModule>>
Engine::compile(std::string_view source, const CompileOptions &options,
                const std::string &bufferName) {
  CompileOptions resolved = options;
  if (options.target == Target::CUDA) {
    std::string why = rt::cudaReady();
    if (!why.empty())
      return Status::error(why);
    if (resolved.cudaChip.empty())
      resolved.cudaChip = rt::cudaDeviceChip();
  }
  if (options.ranks < 0)
    return Status::error("ranks must be >= 0");
  if (!(options.callTimeout >= 0 &&
        options.callTimeout <= rt::kLongestCallTimeout))
    return Status::error(
        "the call timeout must be a number of seconds from 0 (none) to " +
        std::to_string(static_cast<int64_t>(rt::kLongestCallTimeout)));
  if (options.localSteps && options.parallel == Parallelism::Experts)
    return Status::error("local steps go with sequence parallelism (alone or "
                         "with the experts' split: the rank's own steps split "
                         "every op with steps)");
  if (options.ranks > 0 && options.target == Target::CUDA) {
    // The exchanges run on NCCL, opened here so that its absence is the
    // compile's error rather than the first collective's.
    const rt::NcclApi &nccl = rt::ncclApi();
    if (!nccl.failure.empty())
      return Status::error(nccl.failure);
  }
  if (options.ranks > 0) {
    // The code's MPI calls resolve to the library opened here.
    rt::MpiWorld world;
    std::string why;
    if (!rt::mpiInit(world, why))
      return Status::error(why);
    int size = world.size;
    if (options.communicator) {
      size = rt::mpiCommunicatorSize(options.communicator, why);
      if (size < 0)
        return Status::error(why);
    }
    if (size != options.ranks)
      return Status::error(
          "the module is compiled for " + std::to_string(options.ranks) +
          " ranks, but " +
          (options.communicator ? "its communicator" : "MPI_COMM_WORLD") +
          " has " + std::to_string(size) + " processes");
  }
  Expected<std::shared_ptr<CompiledModule>> module =
      options.ranks > 0 && options.useCache
          ? compileFirstOnHost(source, resolved, bufferName)
          : compileResolved(source, resolved, bufferName);
  if (module && options.ranks > 1) {
    (*module)->ranks = options.ranks;
    (*module)->identity = distributedModuleIdentity(source, options);
    (*module)->callTimeout = options.callTimeout;
  }
  return module;
}

/// The communicator a module's code calls on: the options', or
/// MPI_COMM_WORLD for a distributed module; null for one process.
static void *communicatorOf(const CompileOptions &options) {
  if (options.ranks <= 0)
    return nullptr;
  return options.communicator ? options.communicator
                              : rt::mpiWorldCommunicator();
}

/// Whether this process is the lowest rank of `communicator` on its host
/// (by host name): collective over the communicator.
static Expected<bool> firstOnHost(void *communicator) {
  std::string error;
  int rank = rt::mpiCommunicatorRank(communicator, error);
  int size = rt::mpiCommunicatorSize(communicator, error);
  if (rank < 0 || size < 0)
    return Status::error(error);
  constexpr size_t NameBytes = 256;
  // A host name that cannot be read stays empty: such processes count as
  // one host and compile one after another, which is slower, not wrong.
  char name[NameBytes] = {};
  gethostname(name, NameBytes - 1);
  std::vector<char> names(NameBytes * size);
  if (!rt::mpiAllGather(communicator, name, names.data(), NameBytes, error))
    return Status::error(error);
  for (int r = 0; r < rank; ++r)
    if (std::memcmp(&names[r * NameBytes], name, NameBytes) == 0)
      return false;
  return true;
}

/// Waits until every process of `communicator` reaches it.
static Status barrier(void *communicator) {
  uint64_t mine = 0, all = 0;
  std::string error;
  if (!rt::mpiAllReduce(communicator, &mine, &all, 1,
                        rt::entry::ReduceElement::I64, rt::entry::ReduceOp::Max,
                        error))
    return Status::error(error);
  return Status::ok();
}

Expected<std::shared_ptr<CompiledModule>>
Engine::compileFirstOnHost(std::string_view source,
                           const CompileOptions &options,
                           const std::string &bufferName) {
  // Every process of a distributed run compiles the same module. Left to
  // themselves, the R processes of a host would compile it R times at once
  // on the host's cores; instead its first process compiles and stores the
  // code in the disk cache, and the others load it from there once it has.
  // A host whose processes find no shared cache (or another CPU) still
  // compiles in each, only later. Both sides reach the barrier whatever the
  // compile's outcome, so that a failing compile ends in its error, not a
  // hang.
  void *communicator = communicatorOf(options);
  Expected<bool> first = firstOnHost(communicator);
  if (!first)
    return first.status();
  if (!*first)
    if (Status waited = barrier(communicator); !waited)
      return waited;
  Expected<std::shared_ptr<CompiledModule>> module =
      compileResolved(source, options, bufferName);
  if (*first)
    if (Status waited = barrier(communicator); !waited && module)
      return waited;
  return module;
}

Expected<std::shared_ptr<CompiledModule>>
Engine::compileResolved(std::string_view source, const CompileOptions &options,
                        const std::string &bufferName) {
  if (options.numThreads < 0)
    return Status::error("numThreads must be >= 0");
  // The cache key reads the bound weights' bytes: checked first.
  if (Status bound = checkBoundWeights(options.boundWeights); !bound)
    return bound;
  if (options.numThreads > 0)
    seqc_rt_set_num_threads(options.numThreads);

  Expected<std::unique_ptr<llvm::TargetMachine>> tm =
      hostTargetMachine(options.optLevel);
  if (!tm)
    return tm.status();
  auto result = std::shared_ptr<CompiledModule>(new CompiledModule());
  result->memoryLimit =
      options.memoryLimit ? options.memoryLimit : physicalMemoryBytes();
  // The key hashes the source and seqc's own binary: only worth it when
  // the cache is in use.
  std::string key =
      options.useCache ? cacheKey(source, bufferName, options, **tm) : "";
  // Modules for other communicators share the code, not the loaded module
  // (which holds its communicator).
  std::string memoryKey = key;
  if (void *comm = communicatorOf(options))
    memoryKey +=
        "\ncommunicator " + std::to_string(reinterpret_cast<uintptr_t>(comm));

  if (options.useCache) {
    std::lock_guard<std::mutex> lock(impl->mutex);
    auto it = impl->memory.find(memoryKey);
    if (it != impl->memory.end())
      if (auto hit = it->second.lock()) {
        result->impl = hit;
        result->status = CacheStatus::MemoryHit;
        report(options, CompileEvent::Kind::CacheHit, "memory");
        return result;
      }
  }

  std::string note;
  if (options.useCache) {
    Expected<CacheEntry> entry = readCacheEntry(options.cacheDir, key);
    if (entry) {
      auto loaded = loadObject(entry->object, entry->functions,
                               entry->unsupported, communicatorOf(options));
      if (loaded) {
        result->impl = *loaded;
        result->status = CacheStatus::DiskHit;
        report(options, CompileEvent::Kind::CacheHit, "disk");
        std::lock_guard<std::mutex> lock(impl->mutex);
        impl->memory[memoryKey] = *loaded;
        return result;
      }
      note = "cache entry unusable (" + loaded.message() + "); recompiled";
    } else if (!entry.message().empty()) {
      note = entry.message(); // a corrupt or stale entry, rebuilt below
    }
  }

  report(options, CompileEvent::Kind::CacheMiss, "");
  Expected<CompiledObject> compiled =
      compileToObject(source, bufferName, options, **tm);
  if (!compiled)
    return compiled.status();
  StageClock clock(options);
  Expected<std::shared_ptr<CompiledModule::Impl>> loaded =
      loadObject(compiled->object, compiled->functions, compiled->unsupported,
                 communicatorOf(options));
  if (!loaded)
    return loaded.status();
  clock.done("JIT link");
  result->impl = *loaded;
  result->status = CacheStatus::Compiled;
  if (options.useCache) {
    CacheEntry entry{compiled->object, compiled->functions,
                     compiled->unsupported};
    Status stored = writeCacheEntry(options.cacheDir, key, entry);
    if (!stored)
      note = (note.empty() ? "" : note + "; ") +
             "not stored in the cache: " + stored.message();
    std::lock_guard<std::mutex> lock(impl->mutex);
    impl->memory[memoryKey] = *loaded;
  }
  result->note = note;
  return result;
}

Expected<std::shared_ptr<CompiledModule>>
Engine::compileFile(const std::string &path, const CompileOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return Status::error("cannot read '" + path +
                         "': " + buffer.getError().message());
  return compile((*buffer)->getBuffer().str(), options, path);
}

bool seqc::cudaDeviceAvailable() { return rt::cudaDeviceCount() > 0; }

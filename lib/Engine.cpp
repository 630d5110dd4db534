//===- Engine.cpp - seqc's JIT on mlir::ExecutionEngine -------------------===//

#include "seqc/Engine.h"

#include "seqc/InitSeqc.h"
#include "seqc/Passes.h"

#include "BlockCache.h"
#include "CallScope.h"
#include "CudaDriver.h"
#include "Runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <unistd.h>

using namespace seqc;

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

std::string TensorSpec::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return s + dtypeName(dtype) + ">";
}

static std::optional<DType> dtypeOf(mlir::Type t) {
  if (t.isF32())
    return DType::F32;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  if (t.isSignlessInteger(32))
    return DType::I32;
  if (t.isSignlessInteger(64))
    return DType::I64;
  return std::nullopt;
}

static std::string typeToString(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// The spec of a function-boundary type, or an explanation of why seqc cannot
/// pass it.
static Expected<TensorSpec> specOf(mlir::Type type, std::string name) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor)
    return Status::error(name + " has type " + typeToString(type) +
                         "; seqc passes ranked tensors only");
  std::optional<DType> dtype = dtypeOf(tensor.getElementType());
  if (!dtype)
    return Status::error(name + " has element type " +
                         typeToString(tensor.getElementType()) +
                         "; seqc passes f32, f16, bf16, i32 and i64");
  TensorSpec spec;
  spec.dtype = *dtype;
  spec.name = std::move(name);
  for (int64_t d : tensor.getShape())
    spec.shape.push_back(mlir::ShapedType::isDynamic(d) ? -1 : d);
  return spec;
}

/// One public function: its signature, or why it cannot be called.
struct FunctionEntry {
  FunctionSignature sig;
  std::string unsupported;
};

static FunctionEntry describeFunction(mlir::func::FuncOp fn) {
  FunctionEntry entry;
  entry.sig.name = fn.getSymName().str();
  mlir::FunctionType type = fn.getFunctionType();
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    std::string name = "arg" + std::to_string(i);
    if (auto attr = fn.getArgAttrOfType<mlir::StringAttr>(i, "seq.name"))
      name = attr.getValue().str();
    Expected<TensorSpec> spec = specOf(type.getInput(i), name);
    if (!spec) {
      entry.unsupported = "argument " + spec.message();
      return entry;
    }
    entry.sig.inputs.push_back(*spec);
  }
  for (unsigned i = 0; i < type.getNumResults(); ++i) {
    Expected<TensorSpec> spec =
        specOf(type.getResult(i), "result" + std::to_string(i));
    if (!spec) {
      entry.unsupported = spec.message();
      return entry;
    }
    entry.sig.outputs.push_back(*spec);
  }
  return entry;
}

//===----------------------------------------------------------------------===//
// Compiled modules
//===----------------------------------------------------------------------===//

struct CompiledModule::Impl {
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::vector<FunctionEntry> functions;
  size_t memoryLimit = 0;
};

struct Function::Impl {
  std::shared_ptr<CompiledModule::Impl> module;
  const FunctionEntry *entry = nullptr;
  void (*packed)(void **) = nullptr;
};

CompiledModule::~CompiledModule() = default;

std::vector<std::string> CompiledModule::functionNames() const {
  std::vector<std::string> names;
  for (const FunctionEntry &f : impl->functions)
    names.push_back(f.sig.name);
  return names;
}

Expected<Function> CompiledModule::function(std::string_view name) const {
  for (const FunctionEntry &f : impl->functions) {
    if (f.sig.name != name)
      continue;
    if (!f.unsupported.empty())
      return Status::error("function @" + f.sig.name + " cannot be called: " +
                           f.unsupported);
    llvm::Expected<void (*)(void **)> packed =
        impl->engine->lookupPacked(f.sig.name);
    if (!packed) {
      std::string msg = llvm::toString(packed.takeError());
      return Status::error("function @" + f.sig.name + " is missing from the "
                           "compiled code: " + msg);
    }
    auto fi = std::make_shared<Function::Impl>();
    fi->module = impl;
    fi->entry = &f;
    fi->packed = *packed;
    Function fn;
    fn.impl = fi;
    return fn;
  }
  std::string known;
  for (const FunctionEntry &f : impl->functions)
    known += (known.empty() ? "@" : ", @") + f.sig.name;
  return Status::error("no public function @" + std::string(name) +
                       " in the module" +
                       (known.empty() ? "" : " (it has " + known + ")"));
}

const FunctionSignature &Function::signature() const { return impl->entry->sig; }

/// An MLIR memref descriptor for rank `r`: allocated and aligned pointers,
/// offset, sizes[r], strides[r], all 8-byte words.
static size_t descriptorWords(size_t rank) { return 3 + 2 * rank; }

/// Copies a strided source into contiguous `dst` (elements of `elt` bytes).
static void stridedCopy(char *dst, const char *src, size_t elt,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides) {
  size_t rank = shape.size();
  if (rank == 0) {
    std::memcpy(dst, src, elt);
    return;
  }
  for (int64_t d : shape)
    if (d == 0)
      return;
  // Contiguous fast path.
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = rank; i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect)
      contiguous = false;
    expect *= shape[i];
  }
  if (contiguous) {
    std::memcpy(dst, src, static_cast<size_t>(expect) * elt);
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  for (;;) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i)
      off += idx[i] * strides[i];
    std::memcpy(dst, src + off * static_cast<int64_t>(elt), elt);
    dst += elt;
    size_t i = rank;
    while (i-- > 0) {
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
    if (i == static_cast<size_t>(-1))
      return;
  }
}

Expected<std::vector<Tensor>>
Function::call(const std::vector<TensorView> &args) const {
  const FunctionSignature &sig = impl->entry->sig;
  if (args.size() != sig.inputs.size())
    return Status::error("@" + sig.name + " takes " +
                         std::to_string(sig.inputs.size()) +
                         " arguments but was given " +
                         std::to_string(args.size()));

  // Descriptors of the arguments, then room for the results.
  std::vector<int64_t> words;
  std::vector<size_t> starts;
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorView &a = args[i];
    const TensorSpec &spec = sig.inputs[i];
    std::string what = "argument " + std::to_string(i) + " (" + spec.name + ")";
    if (a.dtype != spec.dtype)
      return Status::error(what + " must have element type " +
                           dtypeName(spec.dtype) + " but has " +
                           dtypeName(a.dtype));
    if (a.shape.size() != spec.shape.size())
      return Status::error(what + " must have rank " +
                           std::to_string(spec.shape.size()) + " (" +
                           spec.typeString() + ") but has rank " +
                           std::to_string(a.shape.size()));
    for (size_t d = 0; d < a.shape.size(); ++d) {
      if (a.shape[d] < 0)
        return Status::error(what + " has a negative dimension");
      if (spec.shape[d] >= 0 && spec.shape[d] != a.shape[d])
        return Status::error(what + " must be " + spec.typeString() +
                             " but dimension " + std::to_string(d) + " is " +
                             std::to_string(a.shape[d]));
    }
    if (!checkedNumel(a.shape))
      return Status::error(what + " has too many elements");
    if (!a.data && a.numel() > 0)
      return Status::error(what + " has no data");
    std::vector<int64_t> strides = a.effectiveStrides();
    if (strides.size() != a.shape.size())
      return Status::error(what + " has " + std::to_string(strides.size()) +
                           " strides for rank " +
                           std::to_string(a.shape.size()));
    starts.push_back(words.size());
    words.push_back(reinterpret_cast<intptr_t>(a.data));
    words.push_back(reinterpret_cast<intptr_t>(a.data));
    words.push_back(0);
    words.insert(words.end(), a.shape.begin(), a.shape.end());
    words.insert(words.end(), strides.begin(), strides.end());
  }
  size_t resultStart = words.size();
  for (const TensorSpec &out : sig.outputs)
    words.resize(words.size() + descriptorWords(out.shape.size()), 0);

  std::vector<void *> packedArgs;
  for (size_t w = 0; w < resultStart; ++w)
    packedArgs.push_back(&words[w]);
  if (!sig.outputs.empty())
    packedArgs.push_back(&words[resultStart]);

  rt::CallScope scope(impl->module->memoryLimit);
  if (!scope.run(impl->packed, packedArgs.data()))
    return Status::error(scope.error());

  std::vector<Tensor> results;
  size_t at = resultStart;
  std::vector<const void *> adopted;
  for (const TensorSpec &out : sig.outputs) {
    size_t rank = out.shape.size();
    const char *aligned = reinterpret_cast<const char *>(words[at + 1]);
    int64_t offset = words[at + 2];
    std::vector<int64_t> shape(words.begin() + at + 3,
                               words.begin() + at + 3 + rank);
    std::vector<int64_t> strides(words.begin() + at + 3 + rank,
                                 words.begin() + at + 3 + 2 * rank);
    void *allocated = reinterpret_cast<void *>(words[at]);
    at += descriptorWords(rank);
    size_t elt = dtypeSize(out.dtype);
    std::optional<int64_t> numel = checkedNumel(shape);
    if (!numel)
      return Status::error("result has an invalid shape");

    // A buffer the call allocated for this result alone becomes the result
    // tensor without a copy; anything else (an input, a constant, a view of
    // another result) is copied.
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t i = rank; i-- > 0;) {
      if (shape[i] != 1 && strides[i] != expect)
        contiguous = false;
      expect *= shape[i];
    }
    size_t blockSize = scope.sizeOf(allocated);
    const char *begin = aligned + offset * static_cast<int64_t>(elt);
    if (contiguous && blockSize &&
        std::find(adopted.begin(), adopted.end(), allocated) == adopted.end() &&
        begin >= static_cast<const char *>(allocated) &&
        begin + *numel * elt <=
            static_cast<const char *>(allocated) + blockSize) {
      adopted.push_back(allocated);
      scope.release(allocated);
      std::shared_ptr<void> owner(allocated, [blockSize](void *p) {
        rt::releaseBlock(p, blockSize);
      });
      results.push_back(Tensor::adopt(out.dtype, shape,
                                      const_cast<char *>(begin), owner));
      continue;
    }
    Expected<Tensor> t = Tensor::zeros(out.dtype, shape);
    if (!t)
      return Status::error(t.message());
    stridedCopy(static_cast<char *>(t->data()),
                aligned + offset * static_cast<int64_t>(elt), elt, shape,
                strides);
    results.push_back(t.take());
  }
  return results;
}

//===----------------------------------------------------------------------===//
// Engine
//===----------------------------------------------------------------------===//

Engine::Engine() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

Engine::~Engine() = default;

static size_t physicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0)
    return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

/// The entry points of seqc's runtime that generated code may call.
static const char *const kRuntimeSymbols[] = {
    "seqc_rt_check_failed", "_mlir_memref_to_llvm_alloc",
    "_mlir_memref_to_llvm_aligned_alloc", "_mlir_memref_to_llvm_free",
    "memrefCopy", "seqc_rt_parallel_for"};

static bool isRuntimeSymbol(const std::string &name) {
  for (const char *s : kRuntimeSymbols)
    if (name == s)
      return true;
  return false;
}

/// The symbols of seqc's runtime that generated code calls.
static llvm::orc::SymbolMap runtimeSymbols(llvm::orc::MangleAndInterner mangle) {
  llvm::orc::SymbolMap map;
  auto add = [&](const char *name, void *addr) {
    map[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                         llvm::JITSymbolFlags::Exported};
  };
  add("seqc_rt_check_failed", reinterpret_cast<void *>(&seqc_rt_check_failed));
  add("_mlir_memref_to_llvm_alloc",
      reinterpret_cast<void *>(&_mlir_memref_to_llvm_alloc));
  add("_mlir_memref_to_llvm_aligned_alloc",
      reinterpret_cast<void *>(&_mlir_memref_to_llvm_aligned_alloc));
  add("_mlir_memref_to_llvm_free",
      reinterpret_cast<void *>(&_mlir_memref_to_llvm_free));
  add("memrefCopy", reinterpret_cast<void *>(&memrefCopy));
  add("seqc_rt_parallel_for", reinterpret_cast<void *>(&seqc_rt_parallel_for));
  return map;
}

Expected<std::shared_ptr<CompiledModule>>
Engine::compile(std::string_view source, const CompileOptions &options,
                const std::string &bufferName) {
  if (options.target == Target::CUDA) {
    if (!cudaDeviceAvailable())
      return Status::error("no CUDA device");
    return Status::error("the CUDA target is not available in this build");
  }
  if (options.optLevel < 0 || options.optLevel > 3)
    return Status::error("optLevel must be 0 to 3");

  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.allowUnregisteredDialects(false);

  // The first error becomes the message, with its location.
  std::string firstError;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() != mlir::DiagnosticSeverity::Error ||
        !firstError.empty())
      return mlir::success();
    std::string loc;
    llvm::raw_string_ostream los(loc);
    if (auto fl = mlir::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
      los << fl.getFilename().getValue() << ":" << fl.getLine() << ":" << fl.getColumn()
          << ": ";
    firstError = loc + diag.str();
    return mlir::success();
  });
  auto fail = [&](const std::string &fallback) {
    return Status::error(firstError.empty() ? fallback : firstError);
  };

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(source.data(), source.size()), bufferName),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return fail("cannot parse " + bufferName);

  auto impl = std::make_shared<CompiledModule::Impl>();
  for (auto fn : module->getOps<mlir::func::FuncOp>())
    if (fn.isPublic() && !fn.isDeclaration())
      impl->functions.push_back(describeFunction(fn));

  mlir::PassManager pm(&ctx);
  CpuPipelineOptions cpu;
  cpu.reference = options.reference;
  buildCpuPipeline(pm, cpu);
  if (mlir::failed(pm.run(*module)))
    return fail("compilation of " + bufferName + " failed");

  // Every function the code calls must exist here: seqc's runtime or the
  // process (libm). Checked before the JIT, which would only print a
  // complaint and fail the lookup.
  std::string missing;
  for (auto fn : module->getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (!fn.isExternal())
      continue;
    std::string name = fn.getSymName().str();
    if (!isRuntimeSymbol(name) && !dlsym(RTLD_DEFAULT, name.c_str()))
      missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty())
    return Status::error("the compiled code calls functions this process "
                         "does not provide: " + missing);

  auto tmBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!tmBuilder)
    return Status::error("cannot target the host CPU: " +
                         llvm::toString(tmBuilder.takeError()));
  auto level = options.optLevel == 0   ? llvm::CodeGenOptLevel::None
               : options.optLevel == 1 ? llvm::CodeGenOptLevel::Less
               : options.optLevel == 2 ? llvm::CodeGenOptLevel::Default
                                       : llvm::CodeGenOptLevel::Aggressive;
  tmBuilder->setCodeGenOptLevel(level);
  auto tm = tmBuilder->createTargetMachine();
  if (!tm)
    return Status::error("cannot target the host CPU: " +
                         llvm::toString(tm.takeError()));

  // The transformer is a function_ref: it must outlive create().
  std::function<llvm::Error(llvm::Module *)> optimize =
      mlir::makeOptimizingTransformer(options.optLevel, 0, tm->get());
  mlir::ExecutionEngineOptions engineOptions;
  engineOptions.transformer = optimize;
  engineOptions.jitCodeGenOptLevel = level;
  engineOptions.enableGDBNotificationListener = false;
  // SEQC_PERF=1 emits perf's JIT dump (perf record -k 1, perf inject --jit)
  // so profiles name the generated kernels.
  const char *perf = std::getenv("SEQC_PERF");
  engineOptions.enablePerfNotificationListener = perf && perf[0] == '1';
  auto engine =
      mlir::ExecutionEngine::create(*module, engineOptions, std::move(*tm));
  if (!engine)
    return Status::error("cannot build machine code: " +
                         llvm::toString(engine.takeError()));
  (*engine)->registerSymbols(runtimeSymbols);
  (*engine)->initialize();
  impl->engine = std::move(*engine);

  size_t physical = physicalMemory();
  impl->memoryLimit = options.memoryLimit ? options.memoryLimit : physical;

  auto result = std::shared_ptr<CompiledModule>(new CompiledModule());
  result->impl = impl;
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

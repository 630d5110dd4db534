//===- Compiler.cpp - MLIR text to a relocatable object -------------------===//

#include "Compiler.h"
#include "BoundWeights.h"
#include "Mpi.h"
#include "PerfMap.h"

#include "seqc/InitSeqc.h"
#include "seqc/Passes.h"
#include "seqc/Signature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <unistd.h>

using namespace seqc;

const char *seqc::seqcVersion() { return "0.1.0"; }

bool seqc::isRuntimeSymbol(const std::string &name) {
  for (const RuntimeSymbol &s : runtimeSymbols())
    if (name == s.name)
      return true;
  return false;
}

/// What the ranks split, as the pipelines' `parallel` option.
static std::string splitName(Parallelism parallel) {
  switch (parallel) {
  case Parallelism::Experts:
    return "experts";
  case Parallelism::SequenceAndExperts:
    return "sequence+experts";
  case Parallelism::Sequence:
    break;
  }
  return "sequence";
}

static void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

Expected<std::unique_ptr<llvm::TargetMachine>>
seqc::hostTargetMachine(int optLevel, const std::string &cpu) {
  initializeLLVM();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return Status::error("cannot target the host CPU: " +
                         llvm::toString(builder.takeError()));
  if (!cpu.empty()) {
    // Code for machines other than this one (an AOT library carried to a
    // GPU machine): that CPU's features only.
    std::string why;
    const llvm::Target *target =
        llvm::TargetRegistry::lookupTarget(builder->getTargetTriple(), why);
    std::unique_ptr<llvm::MCSubtargetInfo> info(
        target
            ? target->createMCSubtargetInfo(builder->getTargetTriple(), "", "")
            : nullptr);
    if (!info || !info->isCPUStringValid(cpu))
      return Status::error("unknown CPU '" + cpu + "' for " +
                           builder->getTargetTriple().str());
    builder->setCPU(cpu);
    builder->getFeatures() = llvm::SubtargetFeatures();
  }
  builder->setCodeGenOptLevel(optLevel <= 0   ? llvm::CodeGenOptLevel::None
                              : optLevel == 1 ? llvm::CodeGenOptLevel::Less
                              : optLevel == 2
                                  ? llvm::CodeGenOptLevel::Default
                                  : llvm::CodeGenOptLevel::Aggressive);
  // One object serves the JIT, the cache and shared libraries.
  builder->setRelocationModel(llvm::Reloc::PIC_);
  auto tm = builder->createTargetMachine();
  if (!tm)
    return Status::error("cannot target the host CPU: " +
                         llvm::toString(tm.takeError()));
  return std::move(*tm);
}

std::vector<std::string> seqc::cpuFeaturesOf(const llvm::TargetMachine &tm) {
  std::vector<std::string> features;
  for (const std::string &f : knownCpuFeatures())
    if (tm.getMCSubtargetInfo()->checkFeatures("+" + f))
      features.push_back(f);
  return features;
}

/// Bf16Products from $SEQC_CPU_BF16, or a status naming a bad value.
static Expected<Bf16Products> bf16ProductsFromEnvironment() {
  const char *env = std::getenv("SEQC_CPU_BF16");
  if (!env || !*env)
    return Bf16Products::Auto;
  std::string value = env;
  if (value == "auto")
    return Bf16Products::Auto;
  if (value == "dot")
    return Bf16Products::Dot;
  if (value == "widen")
    return Bf16Products::Widen;
  if (value == "amx")
    return Bf16Products::Amx;
  if (value == "amx-emulated")
    return Bf16Products::AmxEmulated;
  return Status::error("SEQC_CPU_BF16='" + value +
                       "' is not one of amx, amx-emulated, dot, widen, auto");
}

/// Why code for `tm` cannot use AMX tiles here, or "" when it can: the CPU
/// must have amx-tile and amx-bf16, and when the code is for this machine
/// (the JIT's case), Linux must grant this process the tile data.
static std::string amxUnusableReason(const llvm::TargetMachine &tm) {
  const llvm::MCSubtargetInfo &info = *tm.getMCSubtargetInfo();
  bool forThisMachine = tm.getTargetCPU() == llvm::sys::getHostCPUName();
  if (!info.checkFeatures("+amx-tile") || !info.checkFeatures("+amx-bf16"))
    return forThisMachine
               ? "this machine (" + tm.getTargetCPU().str() +
                     ") does not report amx-tile and amx-bf16"
               : "the CPU the code is generated for (" +
                     tm.getTargetCPU().str() + ") lacks amx-tile and amx-bf16";
  return forThisMachine ? requestAmxTileData() : "";
}

/// Whether AVX-512 BF16's dot products outrun f32 FMAs on widened operands
/// on `tm`'s CPU, which is what auto takes them for. On AMD's Zen 4 and 5
/// vdpbf16ps issues where FMAs do and does twice their multiplies: bf16
/// matmuls ran at 1.4-1.6x the f32 FMA peak there. Intel's cores with it
/// (Cooper Lake to Granite Rapids) issue it on one port but FMAs on two, so
/// it multiplies no faster, and the pairs' packing costs more: on Emerald
/// Rapids a bf16 2048^3 matmul took 122-126 ms with dot products and 77-85
/// ms widened, attention 225-230 ms against 184-194 ms. Those CPUs have AMX
/// for bf16; where their AMX is unusable (hidden by a hypervisor, or its
/// tile data refused), auto widens.
static bool dotOutrunsFma(const llvm::TargetMachine &tm) {
  return tm.getTargetCPU().starts_with("znver");
}

Expected<std::string> seqc::resolveBf16Products(const CompileOptions &options,
                                                const llvm::TargetMachine &tm) {
  Bf16Products requested = options.bf16Products;
  const char *source = "bf16Products";
  if (requested == Bf16Products::Auto) {
    Expected<Bf16Products> fromEnv = bf16ProductsFromEnvironment();
    if (!fromEnv)
      return fromEnv.status();
    if (*fromEnv != Bf16Products::Auto)
      source = "SEQC_CPU_BF16";
    requested = *fromEnv;
  }
  bool hasDot = tm.getMCSubtargetInfo()->checkFeatures("+avx512bf16");
  switch (requested) {
  case Bf16Products::Auto: {
    const llvm::MCSubtargetInfo &info = *tm.getMCSubtargetInfo();
    bool hasAmx =
        info.checkFeatures("+amx-tile") && info.checkFeatures("+amx-bf16");
    std::string refusal = hasAmx ? amxUnusableReason(tm) : "";
    if (hasAmx && refusal.empty())
      return std::string("amx");
    bool dot = hasDot && dotOutrunsFma(tm);
    if (hasAmx) {
      // The CPU has AMX but this process may not use it: said once.
      static std::once_flag warned;
      std::call_once(warned, [&] {
        llvm::errs() << "seqc: warning: " << refusal << "; bf16 products take "
                     << (dot ? "AVX-512 BF16 dot products" : "f32 FMAs")
                     << " instead of AMX tiles\n";
      });
    }
    return std::string(dot ? "dot" : "widen");
  }
  case Bf16Products::Widen:
    return std::string("widen");
  case Bf16Products::AmxEmulated:
    return std::string("amx-emulated");
  case Bf16Products::Amx:
    if (std::string why = amxUnusableReason(tm); !why.empty())
      return Status::error(
          std::string(source) +
          " asks for AMX tiles, which this cannot use: " + why);
    return std::string("amx");
  case Bf16Products::Dot:
    if (!hasDot)
      return Status::error(
          std::string(source) +
          " asks for bf16 dot products, which need AVX-512 BF16: the CPU "
          "code is generated for (" +
          tm.getTargetCPU().str() + ") lacks avx512bf16");
    return std::string("dot");
  }
  return std::string("widen");
}

//===----------------------------------------------------------------------===//
// Signatures of the public functions
//===----------------------------------------------------------------------===//

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

/// The signature of `fn`, or why the host cannot call it.
static Expected<FunctionSignature> describe(mlir::func::FuncOp fn) {
  FunctionSignature sig;
  sig.name = fn.getSymName().str();
  mlir::FunctionType type = fn.getFunctionType();
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    std::string name = "arg" + std::to_string(i);
    if (auto attr = fn.getArgAttrOfType<mlir::StringAttr>(i, "seq.name"))
      name = attr.getValue().str();
    Expected<TensorSpec> spec = specOf(type.getInput(i), name);
    if (!spec)
      return Status::error("argument " + spec.message());
    sig.inputs.push_back(*spec);
  }
  for (unsigned i = 0; i < type.getNumResults(); ++i) {
    Expected<TensorSpec> spec =
        specOf(type.getResult(i), "result" + std::to_string(i));
    if (!spec)
      return Status::error(spec.message());
    sig.outputs.push_back(*spec);
  }
  if (auto regions = fn->getAttrOfType<mlir::ArrayAttr>("seq.profile_regions"))
    for (mlir::Attribute r : regions)
      sig.profileRegions.push_back(mlir::cast<mlir::StringAttr>(r).str());
  return sig;
}

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

const char *seqc::cudaInitSymbol() { return "__seqc_cuda_init"; }
const char *seqc::cudaFiniSymbol() { return "__seqc_cuda_fini"; }

/// Replaces the constructor (or destructor) list `array` by one public
/// function `name` that calls them in order of priority (reversed for
/// destructors).
static void gatherStructors(llvm::Module &m, llvm::StringRef array,
                            llvm::StringRef name, bool reversed) {
  llvm::LLVMContext &ctx = m.getContext();
  std::vector<std::pair<uint64_t, llvm::Function *>> calls;
  if (llvm::GlobalVariable *gv = m.getNamedGlobal(array)) {
    if (auto *list = llvm::dyn_cast<llvm::ConstantArray>(gv->getInitializer()))
      for (llvm::Value *entry : list->operands()) {
        auto *item = llvm::dyn_cast<llvm::ConstantStruct>(entry);
        if (!item)
          continue;
        auto *priority = llvm::dyn_cast<llvm::ConstantInt>(item->getOperand(0));
        auto *fn = llvm::dyn_cast<llvm::Function>(
            item->getOperand(1)->stripPointerCasts());
        if (priority && fn)
          calls.emplace_back(priority->getZExtValue(), fn);
      }
    gv->eraseFromParent();
  }
  std::stable_sort(
      calls.begin(), calls.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  if (reversed)
    std::reverse(calls.begin(), calls.end());
  auto *fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
      llvm::GlobalValue::ExternalLinkage, name, m);
  llvm::IRBuilder<> irb(llvm::BasicBlock::Create(ctx, "entry", fn));
  for (auto &[priority, callee] : calls)
    irb.CreateCall(callee);
  irb.CreateRetVoid();
}

StageClock::StageClock(const CompileOptions &options)
    : onEvent(options.onEvent), start(std::chrono::steady_clock::now()) {}

void StageClock::done(const std::string &stage) {
  auto now = std::chrono::steady_clock::now();
  if (onEvent)
    onEvent({CompileEvent::Kind::Stage, stage,
             std::chrono::duration<double>(now - start).count()});
  start = now;
}

namespace {
/// The compile's diagnostics: the first error, with its location, becomes
/// the message of a failed stage; remarks (fallbacks from the fast
/// lowerings) go to onEvent as they come.
class CompileDiagnostics {
public:
  CompileDiagnostics(mlir::MLIRContext &ctx, const CompileOptions &options)
      : handler(&ctx, [this, &options](mlir::Diagnostic &diag) {
          record(diag, options);
          return mlir::success();
        }) {}

  /// The first error reported, or `fallback` when there was none.
  Status failure(const std::string &fallback) const {
    return Status::error(firstError.empty() ? fallback : firstError);
  }

private:
  void record(mlir::Diagnostic &diag, const CompileOptions &options) {
    std::string loc;
    llvm::raw_string_ostream los(loc);
    if (auto fl = mlir::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
      los << fl.getFilename().getValue() << ":" << fl.getLine() << ":"
          << fl.getColumn() << ": ";
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Remark &&
        options.onEvent)
      options.onEvent({CompileEvent::Kind::Remark, loc + diag.str(), 0});
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error &&
        firstError.empty())
      firstError = loc + diag.str();
  }

  std::string firstError;
  mlir::ScopedDiagnosticHandler handler;
};
} // namespace

/// Outlines every op into a function of its own (Profile::Ops) and times
/// the calls, when a profile is asked for.
static mlir::LogicalResult instrumentForProfiling(mlir::ModuleOp module,
                                                  Profile profile) {
  mlir::PassManager pm(module.getContext());
  SeqProfileCallsOptions calls;
  if (profile == Profile::Ops) {
    pm.addPass(createSeqOutlineOps());
    calls.allFunctions = true;
  }
  pm.addPass(createSeqProfileCalls(calls));
  return pm.run(module);
}

/// The public functions' signatures (what the entry points take), and the
/// functions that cannot have entry points with why.
static void describeFunctions(mlir::ModuleOp module,
                              const CompileOptions &options,
                              llvm::TargetMachine &tm, CompiledObject &result) {
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    if (!fn.isPublic() || fn.isDeclaration())
      continue;
    Expected<FunctionSignature> sig = describe(fn);
    if (sig) {
      sig->cuda = options.target == Target::CUDA;
      sig->cpuFeatures = cpuFeaturesOf(tm);
      result.functions.push_back(*sig);
    } else
      result.unsupported.push_back({fn.getSymName().str(), sig.message()});
  }
}

/// The functions the pipeline left out (rank-local steps: those without a
/// rank-local form) cannot be called; a call says why.
static void markLeftOutFunctions(mlir::ModuleOp module,
                                 CompiledObject &result) {
  auto leftOut =
      module->getAttrOfType<mlir::DictionaryAttr>(kNotRankLocalAttrName);
  if (!leftOut)
    return;
  module->removeAttr(kNotRankLocalAttrName);
  for (mlir::NamedAttribute entry : leftOut) {
    std::string name = entry.getName().str();
    llvm::erase_if(result.functions,
                   [&](const FunctionSignature &f) { return f.name == name; });
    result.unsupported.push_back(
        {name, "it has no rank-local form: " +
                   llvm::cast<mlir::StringAttr>(entry.getValue()).str()});
  }
}

static Status addCpuPipeline(mlir::PassManager &pm,
                             const CompileOptions &options,
                             llvm::TargetMachine &tm) {
  CpuPipelineOptions cpu;
  cpu.reference = options.reference;
  cpu.fuse = options.fuse;
  cpu.strict = options.strict;
  cpu.ranks = options.ranks;
  cpu.parallel = splitName(options.parallel);
  cpu.localSteps = options.localSteps;
  // For the ABI of the MPI library the engine opened (its cache key too).
  if (options.ranks > 0)
    cpu.mpiImplementation = rt::mpiImplementation();
  Expected<std::string> products = resolveBf16Products(options, tm);
  if (!products)
    return products.status();
  cpu.bf16Products = *products;
  // The kernels' vectors are as wide as the registers of the CPU the code
  // is for, which need not be this one's (--cpu x86-64-v3, the x86-64-v2
  // fallback): 512-bit vectors on an AVX2 CPU would be split in two by
  // LLVM, and on SSE in four. The cache sizes stay this machine's, the
  // only ones known.
  cpu.vectorWidth = cpuVectorLanes([&](llvm::StringRef feature) {
    return tm.getMCSubtargetInfo()->checkFeatures(("+" + feature).str());
  });
  buildCpuPipeline(pm, cpu);
  return Status::ok();
}

static Status addCudaPipeline(mlir::PassManager &pm,
                              const CompileOptions &options) {
  if (options.reference)
    return Status::error("the reference lowering runs on the CPU only");
  CudaPipelineOptions cuda;
  cuda.emulate = options.target == Target::CUDAEmulated;
  cuda.fuse = options.fuse;
  cuda.strict = options.strict;
  if (!options.cudaChip.empty())
    cuda.chip = options.cudaChip;
  if (options.cudaBlockThreads)
    cuda.blockThreads = options.cudaBlockThreads;
  cuda.ranks = options.ranks;
  cuda.parallel = splitName(options.parallel);
  cuda.localSteps = options.localSteps;
  if (options.ranks > 0)
    cuda.mpiImplementation = rt::mpiImplementation();
  // Without the toolkit's ptxas, embed PTX: the driver compiles it when
  // the module loads.
  if (!cuda.emulate && !cudaHasPtxas(cuda))
    cuda.format = "isa";
  buildCudaPipeline(pm, cuda);
  return Status::ok();
}

/// Every function the code calls must exist at run time: seqc's runtime or
/// the C library (libm). (The hook's entry points call seqc's runtime and
/// the fallback code linked beside them.)
static Status checkCalleesExist(llvm::Module &module) {
  std::string missing;
  for (llvm::Function &f : module.functions()) {
    if (!f.isDeclaration() || f.isIntrinsic())
      continue;
    std::string name = f.getName().str();
    if (!isRuntimeSymbol(name) && !dlsym(RTLD_DEFAULT, name.c_str()))
      missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty())
    return Status::error("the compiled code calls functions seqc does not "
                         "provide: " +
                         missing);
  return Status::ok();
}

/// LLVM's optimizations at `optLevel`, then the machine code into `object`.
static Status optimizeAndEmit(llvm::Module &module, int optLevel,
                              llvm::TargetMachine &tm, StageClock &clock,
                              std::string &object) {
  auto optimize =
      mlir::makeOptimizingTransformer(optLevel, /*sizeLevel=*/0, &tm);
  if (llvm::Error err = optimize(&module))
    return Status::error("LLVM optimization failed: " +
                         llvm::toString(std::move(err)));
  clock.done("LLVM optimization");

  if (perfMapRequested())
    exposeLocalFunctions(module);

  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager codegen;
  if (tm.addPassesToEmitFile(codegen, os, nullptr,
                             llvm::CodeGenFileType::ObjectFile))
    return Status::error("the target cannot emit object files");
  codegen.run(module);
  object.assign(buffer.begin(), buffer.end());
  clock.done("code generation");
  return Status::ok();
}

Expected<CompiledObject>
seqc::compileToObject(std::string_view source, const std::string &bufferName,
                      const CompileOptions &options, llvm::TargetMachine &tm,
                      const ModuleHook &hook, bool gatherCudaStructors) {
  if (options.optLevel < 0 || options.optLevel > 3)
    return Status::error("optLevel must be 0 to 3");
  StageClock clock(options);

  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  CompileDiagnostics diagnostics(ctx, options);

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(source.data(), source.size()), bufferName),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return diagnostics.failure("cannot parse " + bufferName);
  clock.done("parse and verify");
  if (!options.boundWeights.empty()) {
    if (Status bound = bindWeights(*module, options.boundWeights); !bound)
      return bound;
    clock.done("bind weights");
  }
  if (options.profile != Profile::None) {
    if (mlir::failed(instrumentForProfiling(*module, options.profile)))
      return diagnostics.failure("cannot instrument " + bufferName +
                                 " for profiling");
    clock.done("profiling instrumentation");
  }

  CompiledObject result;
  describeFunctions(*module, options, tm, result);

  mlir::PassManager pm(&ctx);
  bool cpu = options.target == Target::CPU;
  if (Status built =
          cpu ? addCpuPipeline(pm, options, tm) : addCudaPipeline(pm, options);
      !built)
    return built;
  if (mlir::failed(pm.run(*module)))
    return diagnostics.failure("compilation of " + bufferName + " failed");
  markLeftOutFunctions(*module, result);
  clock.done(cpu ? "MLIR passes (CPU pipeline)"
                 : "MLIR passes (CUDA pipeline)");

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(*module, llvmContext, bufferName);
  if (!llvmModule)
    return diagnostics.failure("cannot translate " + bufferName +
                               " to LLVM IR");
  clock.done("translation to LLVM IR");
  llvmModule->setDataLayout(tm.createDataLayout());
  llvmModule->setTargetTriple(tm.getTargetTriple());
  if (options.target == Target::CUDA && gatherCudaStructors) {
    // Kernel modules are loaded and unloaded by constructors; the engine
    // calls them explicitly (objects linked into the JIT have no
    // .init_array run), after the device is ready. Ahead-of-time objects
    // keep them as constructors (run when the program or library loads).
    gatherStructors(*llvmModule, "llvm.global_ctors", cudaInitSymbol(), false);
    gatherStructors(*llvmModule, "llvm.global_dtors", cudaFiniSymbol(), true);
  }
  if (Status resolved = checkCalleesExist(*llvmModule); !resolved)
    return resolved;
  if (hook)
    hook(*llvmModule, result.functions);
  if (Status emitted = optimizeAndEmit(*llvmModule, options.optLevel, tm, clock,
                                       result.object);
      !emitted)
    return emitted;
  return result;
}

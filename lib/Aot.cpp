//===- Aot.cpp - ahead-of-time compilation --------------------------------===//

#include "seqc/Aot.h"
#include "EntryPoints.h"

#include "Compiler.h"
#include "FileIO.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace seqc;

/// The typed wrapper's parameter for input `i`: numbered, so that no two
/// inputs, no C keyword and no local of the wrapper share a name whatever
/// the argument names (`seq.name`) are.
static std::string paramName(const std::string &name, size_t i) {
  return "in" + std::to_string(i) +
         (name.empty() ? "" : "_" + cIdentifier(name));
}

/// The C names of the fallback code's entry points (`<prefix>fallback__`
/// + the function's C name).
static std::string fallbackPrefix(const std::string &prefix) {
  return prefix + "fallback__";
}

/// At the start of entry point `fn`: when this CPU lacks one of
/// `features`, return what `fallbackName` (same type, same arguments)
/// returns; `b` continues where it has them.
static void addFallbackDispatch(llvm::Module &m, llvm::IRBuilder<> &b,
                                llvm::Function *fn,
                                const std::string &fallbackName,
                                const std::vector<std::string> &features) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  std::string list;
  for (const std::string &f : features)
    list += (list.empty() ? "" : " ") + f;
  llvm::FunctionCallee cpuHas = m.getOrInsertFunction(
      seqc::rt::entry::kCpuHas, llvm::FunctionType::get(i32, {ptr}, false));
  llvm::FunctionCallee other =
      m.getOrInsertFunction(fallbackName, fn->getFunctionType());
  llvm::Value *has =
      b.CreateCall(cpuHas, {b.CreateGlobalString(list, "seqc_cpu_features")});
  auto *useFallback = llvm::BasicBlock::Create(ctx, "fallback", fn);
  auto *useMain = llvm::BasicBlock::Create(ctx, "main", fn);
  b.CreateCondBr(b.CreateICmpNE(has, b.getInt32(0)), useMain, useFallback);
  b.SetInsertPoint(useFallback);
  llvm::SmallVector<llvm::Value *> args;
  for (llvm::Argument &a : fn->args())
    args.push_back(&a);
  b.CreateRet(b.CreateCall(other, args));
  b.SetInsertPoint(useMain);
}

/// For every function, `int <prefix><name>(const seqc_view *, size_t,
/// seqc_tensor **, size_t)` calling seqc_rt_invoke_c with the packed entry
/// point and the signature text, both in the object. With `fallback` (the
/// prefix of the same functions compiled for a lesser CPU), each first
/// asks seqc_rt_cpu_has whether this CPU has its code's features and calls
/// the fallback's entry point when not.
static void addEntryPoints(llvm::Module &m, const std::string &prefix,
                           const std::vector<FunctionSignature> &sigs,
                           const std::string &fallback = "") {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::FunctionCallee invoke = m.getOrInsertFunction(
      seqc::rt::entry::kInvokeC,
      llvm::FunctionType::get(i32, {ptr, ptr, ptr, ptr, i64, ptr, i64}, false));
  std::string text = serializeSignatures(sigs);
  // The signatures, once, exported as `<prefix>signatures` (a C string):
  // generic hosts (seqc-aot-run) learn the functions' types from it.
  auto *textInit = llvm::ConstantDataArray::getString(ctx, text);
  auto *textGlobal = new llvm::GlobalVariable(
      m, textInit->getType(), /*isConstant=*/true,
      llvm::GlobalValue::ExternalLinkage, textInit, prefix + "signatures");
  // Only the C entry points are exported: the functions themselves (named
  // as in the MLIR, `main` say) and their packed wrappers stay internal.
  for (llvm::Function &f : m.functions())
    if (!f.isDeclaration())
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (const FunctionSignature &sig : sigs) {
    llvm::Function *packed = m.getFunction(packedSymbol(sig.name));
    if (!packed)
      continue;
    auto *fn = llvm::Function::Create(
        llvm::FunctionType::get(i32, {ptr, i64, ptr, i64}, false),
        llvm::GlobalValue::ExternalLinkage, prefix + cIdentifier(sig.name), m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
    if (!fallback.empty())
      addFallbackDispatch(m, b, fn, fallback + cIdentifier(sig.name),
                          sig.cpuFeatures);
    llvm::Value *sigText = textGlobal;
    llvm::Value *name = b.CreateGlobalString(sig.name, "seqc_name");
    auto args = fn->arg_begin();
    llvm::Value *status = b.CreateCall(invoke, {packed, sigText, name, &args[0],
                                                &args[1], &args[2], &args[3]});
    b.CreateRet(status);
  }
}

static const char *cType(DType d) {
  switch (d) {
  case DType::F32:
    return "float";
  case DType::F16:
  case DType::BF16:
    return "uint16_t";
  case DType::I32:
    return "int32_t";
  case DType::I64:
    return "int64_t";
  }
  return "void";
}

static const char *cDType(DType d) {
  switch (d) {
  case DType::F32:
    return "SEQC_F32";
  case DType::F16:
    return "SEQC_F16";
  case DType::BF16:
    return "SEQC_BF16";
  case DType::I32:
    return "SEQC_I32";
  case DType::I64:
    return "SEQC_I64";
  }
  return "SEQC_F32";
}

static std::string header(const std::string &source, const std::string &prefix,
                          const std::vector<FunctionSignature> &sigs,
                          const std::vector<UnsupportedFunction> &unsupported) {
  std::string guard = cIdentifier(prefix) + "GENERATED_H";
  for (char &c : guard)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::ostringstream h;
  h << "/* Generated by seqc-compile from " << source
    << ". Do not edit.\n"
       " * Link with libseqc_runtime (pkg-config --libs seqc-runtime). */\n"
    << "#ifndef " << guard << "\n#define " << guard << "\n\n"
    << "#include \"seqc/seqc_runtime.h\"\n\n#ifdef __cplusplus\nextern \"C\" "
       "{\n#endif\n";
  for (const FunctionSignature &sig : sigs) {
    std::string fn = prefix + cIdentifier(sig.name);
    std::string upper = fn;
    for (char &c : upper)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    h << "\n/* @" << sig.name << "(";
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      h << (i ? ", " : "") << sig.inputs[i].name << ": "
        << sig.inputs[i].typeString();
    h << ") -> (";
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      h << (i ? ", " : "") << sig.outputs[i].typeString();
    h << ")\n * Checks the inputs, runs, and stores a new tensor per result "
         "in\n"
         " * outputs (free each with seqc_tensor_destroy). */\n";
    h << "#define " << upper << "_NUM_INPUTS " << sig.inputs.size() << "\n";
    h << "#define " << upper << "_NUM_OUTPUTS " << sig.outputs.size() << "\n";
    h << "seqc_status " << fn
      << "(const seqc_view *inputs, size_t num_inputs, seqc_tensor **outputs, "
         "size_t num_outputs);\n";

    // Typed convenience entry point when every input shape is static.
    bool isStatic = true;
    for (const TensorSpec &t : sig.inputs)
      for (int64_t d : t.shape)
        isStatic &= d >= 0;
    if (!isStatic)
      continue;
    h << "/* The same with one typed pointer per input (contiguous data of "
         "the\n"
         " * shapes above) and one result pointer per output. */\n";
    h << "static inline seqc_status " << fn << "_typed(";
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      h << (i ? ", " : "") << "const " << cType(sig.inputs[i].dtype) << " *"
        << paramName(sig.inputs[i].name, i);
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      h << (i || !sig.inputs.empty() ? ", " : "") << "seqc_tensor **result"
        << i;
    h << ") {\n";
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      h << "  static const int64_t shape" << i << "[] = {";
      for (size_t d = 0; d < sig.inputs[i].shape.size(); ++d)
        h << (d ? ", " : "") << sig.inputs[i].shape[d];
      if (sig.inputs[i].shape.empty())
        h << "0";
      h << "};\n";
    }
    h << "  seqc_view inputs[" << std::max<size_t>(1, sig.inputs.size())
      << "];\n  seqc_tensor *outputs["
      << std::max<size_t>(1, sig.outputs.size())
      << "];\n  seqc_status status;\n";
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      h << "  inputs[" << i << "].dtype = " << cDType(sig.inputs[i].dtype)
        << "; inputs[" << i << "].data = (void *)"
        << paramName(sig.inputs[i].name, i) << "; inputs[" << i
        << "].rank = " << sig.inputs[i].shape.size() << "; inputs[" << i
        << "].shape = shape" << i << "; inputs[" << i << "].strides = 0;\n";
    h << "  status = " << fn << "(inputs, " << sig.inputs.size()
      << ", outputs, " << sig.outputs.size() << ");\n";
    h << "  if (status != SEQC_OK)\n    return status;\n";
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      h << "  *result" << i << " = outputs[" << i << "];\n";
    h << "  return SEQC_OK;\n}\n";
  }
  for (const UnsupportedFunction &u : unsupported)
    h << "\n/* @" << u.name << " has no entry point: " << u.reason << " */\n";
  h << "\n#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* "
    << guard << " */\n";
  return h.str();
}

/// Runs `argv` and waits; an error when it cannot run or fails.
static Status run(const std::vector<std::string> &argv) {
  pid_t pid = fork();
  if (pid < 0)
    return Status::error("cannot start " + argv[0]);
  if (pid == 0) {
    std::vector<char *> args;
    for (const std::string &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return Status::error("linking the shared library with " + argv[0] +
                         " failed");
  return Status::ok();
}

/// The fallback code of a CPU object: its functions compiled for
/// options.fallbackCpu with bf16 products widened, entry points named with
/// fallbackPrefix; none when the object is not for the CPU, no fallback CPU
/// is set, or the main code (for `tm`) needs no feature the fallback's CPU
/// lacks.
static Expected<std::optional<CompiledObject>>
compileFallback(std::string_view source, const std::string &bufferName,
                const AotOptions &options, const llvm::TargetMachine &tm) {
  using Result = std::optional<CompiledObject>;
  if (options.compile.target != Target::CPU || options.fallbackCpu.empty())
    return Result();
  Expected<std::unique_ptr<llvm::TargetMachine>> lesser =
      hostTargetMachine(options.compile.optLevel, options.fallbackCpu);
  if (!lesser)
    return lesser.status();
  std::vector<std::string> lesserFeatures = cpuFeaturesOf(**lesser);
  bool needsMore = false;
  for (const std::string &f : cpuFeaturesOf(tm))
    needsMore |= std::find(lesserFeatures.begin(), lesserFeatures.end(), f) ==
                 lesserFeatures.end();
  if (!needsMore)
    return Result();
  CompileOptions compile = options.compile;
  compile.bf16Products = Bf16Products::Widen;
  Expected<CompiledObject> object = compileToObject(
      source, bufferName, compile, **lesser,
      [&](llvm::Module &m, const std::vector<FunctionSignature> &sigs) {
        addEntryPoints(m, fallbackPrefix(options.prefix), sigs);
      },
      /*gatherCudaStructors=*/false);
  if (!object)
    return Status::error("the fallback code for " + options.fallbackCpu + ": " +
                         object.message());
  return Result(object.take());
}

/// Writes options.output: the main object (and the fallback's, when
/// given) as one object file, or linked with the runtime into a shared
/// library.
static Status writeObjects(const AotOptions &options, const std::string &main,
                           const std::string *fallback) {
  const std::string &out = options.output;
  bool shared = out.size() >= 3 && out.compare(out.size() - 3, 3, ".so") == 0;
  if (!shared && !fallback)
    return writeFileAtomically(out, main);
  std::vector<std::string> objects{out + ".o"};
  if (fallback)
    objects.push_back(out + ".fallback.o");
  auto removeObjects = [&] {
    for (const std::string &path : objects)
      std::remove(path.c_str());
  };
  Status written = writeFileAtomically(objects[0], main);
  if (written && fallback)
    written = writeFileAtomically(objects[1], *fallback);
  if (!written) {
    removeObjects();
    return written;
  }
  // A shared library with the runtime, or one relocatable object of both.
  std::vector<std::string> link{"c++"};
  if (shared)
    link.push_back("-shared");
  else
    link.insert(link.end(), {"-r", "-nostdlib"});
  link.insert(link.end(), {"-o", out});
  link.insert(link.end(), objects.begin(), objects.end());
  if (shared)
    link.insert(link.end(), {options.runtimeLibraryDir + "/libseqc_runtime.a",
                             "-lm", "-lpthread", "-ldl"});
  Status linked = run(link);
  removeObjects();
  return linked;
}

Status seqc::compileAheadOfTime(std::string_view source,
                                const std::string &bufferName,
                                const AotOptions &options) {
  if (options.output.empty())
    return Status::error("no output file");
  if (options.compile.target == Target::CUDAEmulated)
    return Status::error("ahead-of-time compilation targets the CPU or CUDA, "
                         "not the emulated GPU");
  // The prefix starts every C name of the header and the object.
  if (!options.prefix.empty() &&
      (std::isdigit(static_cast<unsigned char>(options.prefix[0])) ||
       cIdentifier(options.prefix) != options.prefix))
    return Status::error("the prefix '" + options.prefix +
                         "' is not a C identifier (letters, digits and _, "
                         "not starting with a digit)");
  Expected<std::unique_ptr<llvm::TargetMachine>> tm =
      hostTargetMachine(options.compile.optLevel, options.cpu);
  if (!tm)
    return tm.status();
  Expected<std::optional<CompiledObject>> fallback =
      compileFallback(source, bufferName, options, **tm);
  if (!fallback)
    return fallback.status();
  std::string dispatchTo = *fallback ? fallbackPrefix(options.prefix) : "";
  // No device to ask at compile time: the chip is named or the CUDA
  // pipeline's default (Hopper's).
  Expected<CompiledObject> object = compileToObject(
      source, bufferName, options.compile, **tm,
      [&](llvm::Module &m, const std::vector<FunctionSignature> &sigs) {
        addEntryPoints(m, options.prefix, sigs, dispatchTo);
      },
      /*gatherCudaStructors=*/false);
  if (!object)
    return object.status();
  // Two MLIR names that map to one C name (@"a.b" and @a_b), or a function
  // named like the signature table, would leave one symbol unreachable:
  // LLVM renames the second silently (and a host would call the table).
  std::string table = options.prefix + "signatures";
  std::map<std::string, std::string> cNames;
  for (const FunctionSignature &sig : object->functions) {
    std::string cName = options.prefix + cIdentifier(sig.name);
    if (cName == table)
      return Status::error("@" + sig.name + " would be the C function " +
                           cName +
                           ", the name of the signature table; rename it");
    auto [it, fresh] = cNames.emplace(cName, sig.name);
    if (!fresh)
      return Status::error("@" + it->second + " and @" + sig.name +
                           " would both be the C function " + it->first +
                           "; rename one");
  }
  if (*fallback)
    for (const FunctionSignature &sig : object->functions) {
      std::string cName =
          fallbackPrefix(options.prefix) + cIdentifier(sig.name);
      if (cNames.count(cName))
        return Status::error("@" + cNames[cName] + " would be the C function " +
                             cName + ", the fallback entry point of @" +
                             sig.name + "; rename it");
    }

  if (Status s = writeObjects(options, object->object,
                              *fallback ? &(*fallback)->object : nullptr);
      !s)
    return s;
  if (!options.header.empty())
    return writeFileAtomically(options.header,
                               header(bufferName, options.prefix,
                                      object->functions, object->unsupported));
  return Status::ok();
}

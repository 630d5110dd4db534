//===- CudaTest.cpp - the CUDA target without a GPU -----------------------===//
//
// What the JIT does for --target cuda up to the device: the object it links
// loads its kernels through __seqc_cuda_init (no .init_array the JIT would
// never run) and calls nothing the runtime does not provide; without a
// device, compiling for CUDA fails with "no CUDA device"; the emulated
// target runs the GPU kernels on the host and agrees with the CPU.
//
//===----------------------------------------------------------------------===//

#include "Compiler.h"
#include "seqc/Engine.h"
#include "seqc/Passes.h"

#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <set>
#include <sys/stat.h>

using namespace seqc;

namespace {

const char *kScan = R"mlir(
func.func @main(%a: tensor<2x300x5xf32>, %b: tensor<2x300x5xf32>)
    -> (tensor<2x300x5xf32>, tensor<2x5xf32>) {
  %h, %l = seq.linear_scan %a, %b
      : (tensor<2x300x5xf32>, tensor<2x300x5xf32>)
      -> (tensor<2x300x5xf32>, tensor<2x5xf32>)
  return %h, %l : tensor<2x300x5xf32>, tensor<2x5xf32>
}
)mlir";

bool haveToolkit() {
  std::string ptxas = cudaToolkitPath(CudaPipelineOptions()) + "/bin/ptxas";
  struct stat st;
  return stat(ptxas.c_str(), &st) == 0;
}

TEST(Cuda, JitObjectLoadsKernelsExplicitly) {
  if (!haveToolkit())
    GTEST_SKIP() << "no CUDA toolkit (ptxas)";
  auto tm = hostTargetMachine(2);
  ASSERT_TRUE(tm) << tm.message();
  CompileOptions opts;
  opts.target = Target::CUDA;
  opts.cudaChip = "sm_80";
  auto obj = compileToObject(kScan, "scan.mlir", opts, **tm);
  ASSERT_TRUE(obj) << obj.message();
  ASSERT_EQ(obj->functions.size(), 1u);
  EXPECT_TRUE(obj->functions[0].cuda);

  auto file = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(obj->object, "scan.o"));
  ASSERT_TRUE(static_cast<bool>(file));
  std::set<std::string> defined, undefined;
  for (const llvm::object::SymbolRef &sym : (*file)->symbols()) {
    auto name = sym.getName();
    auto flags = sym.getFlags();
    if (!name || !flags)
      continue;
    if (*flags & llvm::object::SymbolRef::SF_Undefined)
      undefined.insert(name->str());
    else
      defined.insert(name->str());
  }
  EXPECT_TRUE(defined.count(cudaInitSymbol()));
  EXPECT_TRUE(defined.count(cudaFiniSymbol()));
  EXPECT_TRUE(undefined.count("mgpuLaunchKernel"));
  EXPECT_TRUE(undefined.count("mgpuModuleLoad"));
  // The compiled code frees its scratch buffers (the scan's chunk summaries)
  // itself: the deallocation pipeline ran on the host code.
  EXPECT_TRUE(undefined.count("_mlir_memref_to_llvm_free"));
  // Every call resolves in the JIT: seqc's runtime or the C library (what
  // the compiler checks before emitting an object, so a failure there
  // would have failed compileToObject already; this names the symbols).
  undefined.erase("_GLOBAL_OFFSET_TABLE_"); // the linker's own
  for (const std::string &name : undefined)
    EXPECT_TRUE(isRuntimeSymbol(name) || dlsym(RTLD_DEFAULT, name.c_str()))
        << name;
  for (const llvm::object::SectionRef &sec : (*file)->sections()) {
    auto name = sec.getName();
    ASSERT_TRUE(static_cast<bool>(name));
    EXPECT_NE(name->str(), ".init_array");
    EXPECT_NE(name->str(), ".ctors");
  }
}

TEST(Cuda, NoDeviceIsAnError) {
  if (cudaDeviceAvailable())
    GTEST_SKIP() << "a CUDA device is present";
  Engine engine;
  CompileOptions opts;
  opts.target = Target::CUDA;
  opts.useCache = false;
  auto m = engine.compile(kScan, opts);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message().rfind("no CUDA device", 0), 0u) << m.message();
}

/// The names of the functions an object defines.
std::set<std::string> definedFunctions(const std::string &object) {
  std::set<std::string> names;
  auto file = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(object, "x.o"));
  if (!file) {
    llvm::consumeError(file.takeError());
    return names;
  }
  for (const llvm::object::SymbolRef &sym : (*file)->symbols()) {
    auto name = sym.getName();
    auto type = sym.getType();
    if (name && type && *type == llvm::object::SymbolRef::ST_Function)
      names.insert(name->str());
    if (!name)
      llvm::consumeError(name.takeError());
    if (!type)
      llvm::consumeError(type.takeError());
  }
  return names;
}

// --target cuda-emulated really runs the GPU lowering's kernels (every
// integration test's third pipeline relies on it): its object has the
// emulated thread-block tasks of the scan and none of the CPU kernels.
TEST(Cuda, EmulatedTargetCompilesTheGpuKernels) {
  auto tm = hostTargetMachine(2);
  ASSERT_TRUE(tm) << tm.message();
  std::map<Target, std::set<std::string>> fns;
  for (Target t : {Target::CPU, Target::CUDAEmulated}) {
    CompileOptions opts;
    opts.target = t;
    auto obj = compileToObject(kScan, "scan.mlir", opts, **tm);
    ASSERT_TRUE(obj) << obj.message();
    fns[t] = definedFunctions(obj->object);
  }
  auto gpuTasks = [](const std::set<std::string> &names) {
    return llvm::count_if(names, [](const std::string &n) {
      return llvm::StringRef(n).starts_with("__seqc_gpu_linear_scan");
    });
  };
  EXPECT_GE(gpuTasks(fns[Target::CUDAEmulated]), 3) // chunks, pass, apply
      << "emulated object lacks the GPU scan kernels";
  EXPECT_EQ(gpuTasks(fns[Target::CPU]), 0);
  // The CPU kernel's task (__seqc_linear_scan$task) is not in it.
  for (const std::string &n : fns[Target::CPU])
    if (llvm::StringRef(n).starts_with("__seqc_"))
      EXPECT_FALSE(fns[Target::CUDAEmulated].count(n)) << n;
}

TEST(Cuda, EmulatedKernelsAgreeWithTheCpu) {
  Engine engine;
  CompileOptions cpu, emulated;
  cpu.useCache = emulated.useCache = false;
  emulated.target = Target::CUDAEmulated;
  auto a = randomTensor(DType::F32, {2, 300, 5}, 1);
  auto b = randomTensor(DType::F32, {2, 300, 5}, 2);
  ASSERT_TRUE(a && b);
  std::vector<std::vector<Tensor>> results;
  for (const CompileOptions &o : {cpu, emulated}) {
    auto m = engine.compile(kScan, o);
    ASSERT_TRUE(m) << m.message();
    auto fn = (*m)->function("main");
    ASSERT_TRUE(fn) << fn.message();
    auto r = fn->call({a->view(), b->view()});
    ASSERT_TRUE(r) << r.message();
    EXPECT_FALSE(fn->signature().cuda);
    results.push_back(r.take());
  }
  ASSERT_EQ(results[0].size(), 2u);
  ASSERT_EQ(results[1].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(results[0][i].shape(), results[1][i].shape());
    const float *x = results[0][i].dataAs<float>();
    const float *y = results[1][i].dataAs<float>();
    for (int64_t j = 0; j < results[0][i].numel(); ++j)
      ASSERT_NEAR(x[j], y[j], 1e-4 * std::max(1.0f, std::fabs(x[j]))) << j;
  }
}

// The tensor-core tiles at other block sizes than the default 256 threads:
// fewer warps than warp tiles (a warp runs several of a block's tiles and
// keeps each one's accumulators), and more warps than tiles (some idle).
// bf16 matmul and attention through the emulated kernels against the CPU.
constexpr const char *kTensorCoreOps = R"mlir(
func.func @main(%a: tensor<100x70xf32>, %b: tensor<70x90xf32>,
                %q: tensor<1x50x2x32xf32>, %k: tensor<1x50x2x32xf32>,
                %v: tensor<1x50x2x40xf32>)
    -> (tensor<100x90xf32>, tensor<1x50x2x40xf32>) {
  %ab = arith.truncf %a : tensor<100x70xf32> to tensor<100x70xbf16>
  %bb = arith.truncf %b : tensor<70x90xf32> to tensor<70x90xbf16>
  %e = tensor.empty() : tensor<100x90xf32>
  %z = arith.constant 0.0 : f32
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<100x90xf32>) -> tensor<100x90xf32>
  %m = linalg.matmul ins(%ab, %bb : tensor<100x70xbf16>, tensor<70x90xbf16>)
                     outs(%c : tensor<100x90xf32>) -> tensor<100x90xf32>
  %qb = arith.truncf %q : tensor<1x50x2x32xf32> to tensor<1x50x2x32xbf16>
  %kb = arith.truncf %k : tensor<1x50x2x32xf32> to tensor<1x50x2x32xbf16>
  %vb = arith.truncf %v : tensor<1x50x2x40xf32> to tensor<1x50x2x40xbf16>
  %o = seq.attention %qb, %kb, %vb {causal = true}
    : (tensor<1x50x2x32xbf16>, tensor<1x50x2x32xbf16>, tensor<1x50x2x40xbf16>)
    -> tensor<1x50x2x40xbf16>
  %of = arith.extf %o : tensor<1x50x2x40xbf16> to tensor<1x50x2x40xf32>
  return %m, %of : tensor<100x90xf32>, tensor<1x50x2x40xf32>
}
)mlir";

TEST(Cuda, EmulatedTensorCoreTilesAtEveryBlockSize) {
  Engine engine;
  std::vector<Tensor> inputs;
  std::vector<std::vector<int64_t>> shapes = {
      {100, 70}, {70, 90}, {1, 50, 2, 32}, {1, 50, 2, 32}, {1, 50, 2, 40}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto t = randomTensor(DType::F32, shapes[i], 10 + i);
    ASSERT_TRUE(t);
    inputs.push_back(t.take());
  }
  auto run = [&](const CompileOptions &o) -> std::vector<Tensor> {
    auto m = engine.compile(kTensorCoreOps, o);
    EXPECT_TRUE(m) << m.message();
    if (!m)
      return {};
    auto fn = (*m)->function("main");
    EXPECT_TRUE(fn) << fn.message();
    std::vector<TensorView> views;
    for (const Tensor &t : inputs)
      views.push_back(t.view());
    auto r = fn->call(views);
    EXPECT_TRUE(r) << r.message();
    return r ? r.take() : std::vector<Tensor>{};
  };
  CompileOptions cpu;
  cpu.useCache = false;
  std::vector<Tensor> expected = run(cpu);
  ASSERT_EQ(expected.size(), 2u);
  for (int threads : {32, 512}) {
    CompileOptions emulated = cpu;
    emulated.target = Target::CUDAEmulated;
    emulated.cudaBlockThreads = threads;
    std::vector<Tensor> got = run(emulated);
    ASSERT_EQ(got.size(), 2u) << threads << " threads";
    // The matmul sums exact products in f32; attention also rounds P.
    for (size_t i = 0; i < 2; ++i) {
      const float *x = expected[i].dataAs<float>();
      const float *y = got[i].dataAs<float>();
      float tol = i == 0 ? 1e-4f : 2e-2f;
      for (int64_t j = 0; j < expected[i].numel(); ++j)
        ASSERT_NEAR(x[j], y[j], tol * std::max(1.0f, std::fabs(x[j])))
            << threads << " threads, result " << i << ", element " << j;
    }
  }
}

} // namespace

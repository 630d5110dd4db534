//===- seqc-bench.cpp - seqc's CPU kernels against the machine's ceilings -===//
//
// Measures, in one run:
//   - the machine's ceilings: STREAM-style triad bandwidth and fp32 FMA peak
//     over all threads (the FMA loop is itself compiled by seqc);
//   - each op of the CPU targets at its target shape through the default
//     (fast) pipeline on all threads and on one thread, and through the
//     reference lowering;
// and prints a table: median time, achieved GB/s or GFLOP/s, fraction of the
// ceiling, speedup over the reference, 1-thread vs all-threads scaling.
//
//   seqc-bench [--quick] [--runs N] [--only NAME] [--results FILE]
//   (--only packed: the packed-batch comparison alone; --only weights: a
//   weight as an argument against the same weight as a module constant)
//
// --results writes each case's name, median ms, GFLOP/s (or GB/s) and shape
// to FILE, tab-separated, for bench/peers.py to set beside its peers.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "seqc/Engine.h"
#include "seqc/Signature.h"

#include "FileIO.h"
#include "Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#ifdef __SSE__
#include <immintrin.h>
#endif

using namespace seqc;
using namespace seqc::bench;

namespace seqc {
// The strategy's chunk-size model on the host, 0 for the recurrence
// (passes/Transforms/Strategy.h,
// which pulls in MLIR headers this benchmark does not otherwise need).
// In the order of Strategy.h's ChunkedFamily.
enum class ChunkedFamily { Ssd, LinearAttention, DeltaRule };
int64_t hostModelChunkSize(ChunkedFamily family, int64_t stateDim,
                           int64_t valueDim);
} // namespace seqc

namespace {

/// STREAM triad a = b + s c over `threads` threads, 12 bytes per element.
/// The stores are non-temporal where the ISA has them (as STREAM builds
/// compile them), so the ceiling is not lowered by read-for-ownership traffic
/// that seqc's own streaming stores avoid.
double triadGBs(int threads) {
  const size_t n = size_t(64) << 20; // 256 MiB per array
  // 64-byte aligned so the streaming stores are aligned.
  auto alloc = [&](float v) {
    float *p = static_cast<float *>(std::aligned_alloc(64, n * sizeof(float)));
    if (!p)
      die("out of memory for the triad arrays");
    std::fill(p, p + n, v);
    return std::unique_ptr<float, decltype(&std::free)>(p, std::free);
  };
  auto pa = alloc(0.0f), pbv = alloc(1.0f), pcv = alloc(2.0f);
  struct {
    float *data() { return ptr; }
    float *ptr;
  } a{pa.get()}, b{pbv.get()}, c{pcv.get()};
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        float *pa = a.data();
        const float *pb = b.data(), *pc = c.data();
#ifdef __SSE__
        lo = (lo + 3) & ~size_t(3);
        hi = hi & ~size_t(3);
        const __m128 three = _mm_set1_ps(3.0f);
        for (size_t i = lo; i < hi; i += 4)
          _mm_stream_ps(pa + i,
                        _mm_add_ps(_mm_loadu_ps(pb + i),
                                   _mm_mul_ps(three, _mm_loadu_ps(pc + i))));
        _mm_sfence();
#else
        for (size_t i = lo; i < hi; ++i)
          pa[i] = pb[i] + 3.0f * pc[i];
#endif
      });
    for (auto &th : pool)
      th.join();
    best = std::min(best, now() - t0);
  }
  return 12.0 * static_cast<double>(n) / best / 1e9;
}

/// An MLIR function whose tasks each run `iters` steps of 12 independent
/// vector FMA chains: the FMA peak as seqc's own code reaches it.
std::string fmaKernel(int lanes, long iters) {
  std::string v = "vector<" + std::to_string(lanes) + "xf32>";
  std::string s;
  s += "func.func private @fma(%b: index, %e: index, %out: memref<?xf32>) {\n";
  s += "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n";
  s += "  %n = arith.constant " + std::to_string(iters) + " : index\n";
  s += "  %m = arith.constant dense<0.9999> : " + v + "\n";
  s += "  %a = arith.constant dense<0.0001> : " + v + "\n";
  s += "  scf.for %t = %b to %e step %c1 {\n";
  std::string inits, types, yields;
  for (int i = 0; i < 12; ++i) {
    s += "    %i" + std::to_string(i) + " = arith.constant dense<" +
         std::to_string(i) + ".0> : " + v + "\n";
    inits += (i ? ", " : "") + std::string("%x") + std::to_string(i) + " = %i" +
             std::to_string(i);
    types += (i ? ", " : "") + v;
    yields += (i ? ", " : "") + std::string("%y") + std::to_string(i);
  }
  s += "    %r:12 = scf.for %k = %c0 to %n step %c1 iter_args(" + inits +
       ") -> (" + types + ") {\n";
  for (int i = 0; i < 12; ++i)
    s += "      %y" + std::to_string(i) + " = vector.fma %x" +
         std::to_string(i) + ", %m, %a : " + v + "\n";
  s += "      scf.yield " + yields + " : " + types + "\n    }\n";
  s += "    %s0 = arith.addf %r#0, %r#1 : " + v + "\n";
  for (int i = 2; i < 12; ++i)
    s += "    %s" + std::to_string(i - 1) + " = arith.addf %s" +
         std::to_string(i - 2) + ", %r#" + std::to_string(i) + " : " + v + "\n";
  s += "    %sum = vector.reduction <add>, %s10 : " + v + " into f32\n";
  s += "    memref.store %sum, %out[%t] : memref<?xf32>\n  }\n  return\n}\n";
  s += "func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n";
  s += "  %c0 = arith.constant 0 : index\n";
  s += "  %n = tensor.dim %x, %c0 : tensor<?xf32>\n";
  s += "  %buf = memref.alloc(%n) : memref<?xf32>\n";
  s += "  seq_rt.parallel_for %n, @fma(%buf) : memref<?xf32>\n";
  s += "  %r = bufferization.to_tensor %buf restrict writable : memref<?xf32> "
       "to tensor<?xf32>\n  return %r : tensor<?xf32>\n}\n";
  return s;
}

int hostLanes() {
  // The same choice as the compiler's (CpuTarget::host()).
  return __builtin_cpu_supports("avx512f") ? 16
         : __builtin_cpu_supports("avx2")  ? 8
                                           : 4;
}

double fmaPeakGFLOPs(int threads) {
  const long iters = 20000000;
  int lanes = hostLanes();
  Engine engine;
  auto module = engine.compile(fmaKernel(lanes, iters), {}, "fma.mlir");
  if (!module)
    die("FMA kernel: " + module.message());
  Function fn = *(*module)->function("main");
  Expected<Tensor> x = Tensor::zeros(DType::F32, {threads});
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now();
    auto r = fn.call({x->view()});
    if (!r)
      die(r.message());
    best = std::min(best, now() - t0);
  }
  return 2.0 * 12 * lanes * static_cast<double>(iters) * threads / best / 1e9;
}

/// One benchmarked op: its graph, the work it does and how to fill inputs.
struct Case {
  std::string name, shape;
  std::string mlir;
  double flops = 0; // useful FLOPs, or 0 for memory-bound ops
  double bytes = 0; // bytes that must move, for memory-bound ops
  int64_t intRange = 4;
  bool reference = true;
  /// Maps f32 input `index`'s uniform [-1, 1) values into the range the op
  /// expects (a log decay <= 0, a beta in (0, 1)); null: as drawn.
  std::function<float(size_t index, float x)> shapeInput;
};

std::string tensorType(std::vector<int64_t> shape, const char *elt = "f32") {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elt + ">";
}

/// `func.func @main(args) -> (results) { op }` for one seq op.
std::string graph(const std::string &op, const std::vector<std::string> &args,
                  const std::vector<std::string> &results,
                  const std::string &optional, const std::string &attrs) {
  // Every argument is an operand, in order; the ones named in `optional`
  // (e.g. "skip(%a5)") are the last ones.
  std::string sig, types, names, rtypes;
  for (size_t i = 0; i < args.size(); ++i) {
    sig += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " +
           args[i];
    types += (i ? ", " : "") + args[i];
  }
  size_t nOptional = std::count(optional.begin(), optional.end(), '%');
  size_t required = args.size() - nOptional;
  for (size_t i = 0; i < required; ++i)
    names += (i ? ", " : "") + std::string("%a") + std::to_string(i);
  for (size_t i = 0; i < results.size(); ++i)
    rtypes += (i ? ", " : "") + results[i];
  std::string res = results.size() > 1 ? "%r:" + std::to_string(results.size())
                                       : std::string("%r");
  std::string rets;
  for (size_t i = 0; i < results.size(); ++i)
    rets += (i ? ", " : "") + (results.size() > 1 ? "%r#" + std::to_string(i)
                                                  : std::string("%r"));
  return "func.func @main(" + sig + ") -> (" + rtypes + ") {\n  " + res +
         " = seq." + op + " " + names +
         (optional.empty() ? "" : " " + optional) +
         (attrs.empty() ? "" : " {" + attrs + "}") + " : (" + types + ") -> (" +
         rtypes + ")\n  return " + rets + " : " + rtypes + "\n}\n";
}

struct Timing {
  double median = 0, min = 0;
};

Timing timeCalls(Function &fn, const std::vector<TensorView> &views, int runs) {
  auto warm = fn.call(views);
  if (!warm)
    die(warm.message());
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    double t0 = now();
    auto out = fn.call(views);
    double t = now() - t0;
    if (!out)
      die(out.message());
    times.push_back(t * 1e3);
  }
  if (times.empty())
    return {0.0, 0.0};
  return {median(times), *std::min_element(times.begin(), times.end())};
}

struct Inputs {
  std::vector<Tensor> tensors;
  std::vector<TensorView> views;
};

Inputs makeInputs(const FunctionSignature &sig, int64_t intRange,
                  const std::function<float(size_t, float)> &shape = {}) {
  Inputs in;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    Expected<Tensor> t = randomTensor(sig.inputs[i].dtype, sig.inputs[i].shape,
                                      1000 + i, intRange);
    if (!t)
      die(t.message());
    Tensor tensor = t.take();
    if (shape && tensor.dtype() == DType::F32) {
      float *x = tensor.dataAs<float>();
      for (int64_t e = 0; e < tensor.numel(); ++e)
        x[e] = shape(i, x[e]);
    }
    in.tensors.push_back(std::move(tensor));
  }
  for (Tensor &t : in.tensors)
    in.views.push_back(t.view());
  return in;
}

Function compile(Engine &engine, const std::string &mlir, bool reference,
                 const std::string &what) {
  CompileOptions opts;
  opts.reference = reference;
  auto m = engine.compile(mlir, opts, what + ".mlir");
  if (!m)
    die(what + ": " + m.message());
  auto fn = (*m)->function("main");
  if (!fn)
    die(what + ": " + fn.message());
  return *fn;
}

/// Which products bf16 and f16 operands take on this host: the compiler's
/// choice (resolveBf16Products: SEQC_CPU_BF16, else AMX where the host has
/// it and Linux grants the tile data, else AVX-512 BF16 where it has that).
/// f16 operands are always widened.
std::string lowPrecisionPath() {
  const char *env = std::getenv("SEQC_CPU_BF16");
  std::string forced = env && *env && std::string(env) != "auto" ? env : "";
  bool dot = false, amx = false;
#if defined(__x86_64__) && defined(__GNUC__)
  // Auto takes dot products on AMD's cores only (dotOutrunsFma).
  dot = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_is("amd");
  amx =
      __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("amx-tile");
#endif
  std::string amxRefused = amx ? seqc::requestAmxTileData() : "";
  std::string how = forced.empty() ? "" : " (SEQC_CPU_BF16=" + forced + ")";
  std::string products = forced;
  if (products.empty())
    products = amx && amxRefused.empty() ? "amx" : dot ? "dot" : "widen";
  bool hasDot = false;
#if defined(__x86_64__) && defined(__GNUC__)
  hasDot = __builtin_cpu_supports("avx512bf16");
#endif
  std::string text;
  if (products == "amx" || products == "amx-emulated")
    text = std::string("bf16: AMX tiles (tdpbf16ps") +
           (products == "amx" ? "" : ", emulated by vector code") +
           ") in matmuls and experts, " +
           (hasDot ? "AVX-512 BF16 dot products in attention"
                   : "f32 FMA in attention") +
           ", widened to f32 FMA elsewhere";
  else if (products == "dot")
    text = "bf16: AVX-512 BF16 dot products (vdpbf16ps) in matmuls, experts "
           "and attention, widened to f32 FMA elsewhere";
  else
    text = std::string("bf16: widened to f32 FMA") +
           (hasDot && forced.empty()
                ? " (this Intel CPU's AVX-512 BF16 multiplies no faster)"
                : "");
  text += how + "; f16: widened";
  if (!amx)
    text += "; the host has no AMX";
  else if (!amxRefused.empty())
    text += "; the host has AMX but " + amxRefused;
  return text;
}

/// Each case `x_bf16` against its f32 form `x` in interleaved rounds (one
/// call of each per round, so that the machine's drift lands on both): the
/// issue's "bf16 faster than its f32 form in the same run", robust to a
/// shared host whose speed wanders by 10-20 % within a sitting.
void compareLowPrecision(Engine &engine, const std::vector<Case> &cases,
                         int runs) {
  std::vector<std::pair<const Case *, const Case *>> pairs;
  for (const Case &low : cases) {
    const std::string suffix = "_bf16";
    if (low.name.size() <= suffix.size() ||
        low.name.compare(low.name.size() - suffix.size(), suffix.size(),
                         suffix) != 0)
      continue;
    std::string name = low.name.substr(0, low.name.size() - suffix.size());
    for (const Case &full : cases)
      if (full.name == name)
        pairs.push_back({&full, &low});
  }
  if (pairs.empty())
    return;
  int rounds = std::max(9, runs);
  std::printf("\nbf16 against f32, the same op (median ms of %d interleaved "
              "rounds; > 1: bf16 is faster):\n",
              rounds);
  for (auto [full, low] : pairs) {
    Function fns[2] = {compile(engine, full->mlir, false, full->name),
                       compile(engine, low->mlir, false, low->name)};
    Inputs ins[2] = {
        makeInputs(fns[0].signature(), full->intRange, full->shapeInput),
        makeInputs(fns[1].signature(), low->intRange, low->shapeInput)};
    std::vector<double> times[2];
    for (int i = 0; i < 2; ++i)
      if (auto warm = fns[i].call(ins[i].views); !warm)
        die(warm.message());
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 2; ++i) {
        double t0 = now();
        auto out = fns[i].call(ins[i].views);
        times[i].push_back((now() - t0) * 1e3);
        if (!out)
          die(out.message());
      }
    double f32Ms = median(times[0]), bf16Ms = median(times[1]);
    std::printf("  %-18s f32=%.2f bf16=%.2f  f32/bf16=%.2f\n",
                full->name.c_str(), f32Ms, bf16Ms, f32Ms / bf16Ms);
  }
}

/// The graph of one packed-batch family: steps `T`, and with `sequences`
/// > 0 a packed batch of that many sequences (`segments`, one state each).
std::string packedGraph(const std::string &family, int64_t T,
                        int64_t sequences) {
  const int64_t H = 16;
  int64_t states = sequences > 0 ? sequences : 1;
  std::string cu = tensorType({sequences + 1}, "i32");
  if (family == "ssd") {
    const int64_t P = 64, N = 128;
    std::vector<std::string> args{
        tensorType({1, T, H, P}), tensorType({1, T, H}), tensorType({H}),
        tensorType({1, T, 1, N}), tensorType({1, T, 1, N})};
    if (sequences > 0)
      args.push_back(cu);
    return graph("ssd", args,
                 {tensorType({1, T, H, P}), tensorType({states, H, P, N})},
                 sequences > 0 ? "segments(%a5)" : "", "dt_softplus = true");
  }
  const int64_t K = 64, V = 64;
  std::vector<std::string> args{
      tensorType({1, T, H, K}), tensorType({1, T, H, K}),
      tensorType({1, T, H, V}), tensorType({1, T, H}), tensorType({1, T, H})};
  if (sequences > 0)
    args.push_back(cu);
  return graph("delta_rule", args,
               {tensorType({1, T, H, V}), tensorType({states, H, K, V})},
               sequences > 0 ? "decay(%a4) segments(%a5)" : "decay(%a4)",
               "qk_l2norm = true, scale = 0.125 : f32");
}

/// Inputs in the ranges the families expect: ssd's A < 0, the delta rule's
/// beta in (0, 1) and log decays <= 0, so that states stay bounded over
/// thousands of steps.
float packedInputRange(const std::string &family, size_t index, float x) {
  if (family == "ssd")
    return index == 2 ? -0.5f * (x + 1.5f) : x;
  if (index == 3)
    return 0.5f + 0.45f * x;
  if (index == 4)
    return -0.5f * (x + 1.0f);
  return x;
}

/// `func.func @main(%a: M x K) -> M x N` multiplying by a weight W (K x
/// N, elements `elt`): an argument (%w) or, when `constant` holds, a
/// constant of the module written as hex bytes (random values in [-1, 1)).
std::string weightGraph(int64_t M, int64_t K, int64_t N, const char *elt,
                        bool constant) {
  std::string ta = tensorType({M, K}, elt), tw = tensorType({K, N}, elt),
              tc = tensorType({M, N});
  std::string sig = "%a: " + ta + (constant ? "" : ", %w: " + tw);
  std::string weight;
  if (constant) {
    bool bf16 = std::string(elt) == "bf16";
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    static const char digits[] = "0123456789ABCDEF";
    std::string hex;
    int bytes = bf16 ? 2 : 4;
    hex.reserve(K * N * bytes * 2);
    for (int64_t i = 0; i < K * N; ++i) {
      uint32_t bits;
      float x = dist(gen);
      std::memcpy(&bits, &x, 4);
      if (bf16)
        bits >>= 16;
      for (int byte = 0; byte < bytes; ++byte, bits >>= 8) {
        hex += digits[(bits >> 4) & 15];
        hex += digits[bits & 15];
      }
    }
    weight = "\n  %w = arith.constant dense<\"0x" + hex + "\"> : " + tw;
  }
  return "func.func @main(" + sig + ") -> " + tc + " {" + weight +
         "\n  %z = arith.constant 0.0 : f32\n  %e = tensor.empty() : " + tc +
         "\n  %f = linalg.fill ins(%z : f32) outs(%e : " + tc + ") -> " + tc +
         "\n  %r = linalg.matmul ins(%a, %w : " + ta + ", " + tw +
         ") outs(%f : " + tc + ") -> " + tc + "\n  return %r : " + tc + "\n}\n";
}

/// The L3 cache of CPU 0 as the kernel describes it (sysfs), e.g. "32 MiB",
/// or "of unknown size". glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) decodes
/// CPUID itself and on an AMD EPYC VM said 320 MiB where the kernel and
/// lscpu say 32.
std::string l3CacheSize() {
  std::string cache = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int index = 0;; ++index) {
    std::string dir = cache + std::to_string(index);
    Expected<std::string> level = readFile(dir + "/level");
    if (!level)
      break;
    if (std::atoi(level->c_str()) != 3)
      continue;
    Expected<std::string> size = readFile(dir + "/size"); // "32768K"
    if (long kib = size ? std::atol(size->c_str()) : 0; kib > 0)
      return std::to_string(kib / 1024) + " MiB";
    break;
  }
  return "of unknown size";
}

/// A projection whose weight is an argument (packed into panels in every
/// call) against the same weight as a constant of the module (packed once,
/// when compiled): decode-sized and larger batches of rows, f32 and bf16,
/// timed in interleaved rounds. The weight's bytes over the time is the
/// rate a call streams it at, against the triad bandwidth.
void constantWeights(Engine &engine, bool quick, int runs, double triad) {
  int rounds = std::max(9, runs);
  std::printf("\nweight as an argument vs a module constant (median ms of %d "
              "interleaved rounds; GB/s of the weight; the L3 cache is "
              "%s):\n",
              rounds, l3CacheSize().c_str());
  // K = N = 2048: an f32 weight of 16 MiB; 4096: 64 MiB, past the L3 of
  // the machines this runs on, so each call streams it from memory.
  for (auto [elt, K, M] :
       std::vector<std::tuple<const char *, int64_t, int64_t>>{
           {"f32", 2048, 1},
           {"f32", 2048, 16},
           {"f32", 2048, 256},
           {"f32", 4096, 1},
           {"bf16", 2048, 1},
           {"bf16", 2048, 16},
           {"bf16", 2048, 256},
           {"bf16", 4096, 1}}) {
    if (quick && K > 1024)
      K /= 2;
    int64_t N = K;
    {
      Function arg = compile(engine, weightGraph(M, K, N, elt, false), false,
                             "weight_arg");
      Function cst = compile(engine, weightGraph(M, K, N, elt, true), false,
                             "weight_const");
      Inputs argIn = makeInputs(arg.signature(), 4);
      Inputs cstIn = makeInputs(cst.signature(), 4);
      std::vector<double> argMs, cstMs;
      for (int r = 0; r <= rounds; ++r) {
        for (auto [fn, in, ms] : {std::tuple{&arg, &argIn, &argMs},
                                  std::tuple{&cst, &cstIn, &cstMs}}) {
          double t0 = now();
          auto out = fn->call(in->views);
          if (!out)
            die(out.message());
          if (r > 0) // round 0 warms up
            ms->push_back((now() - t0) * 1e3);
        }
      }
      double weightBytes =
          static_cast<double>(K) * N * (std::string(elt) == "bf16" ? 2 : 4);
      double a = median(argMs), c = median(cstMs);
      std::printf("  %-5s K=N=%-5lld M=%-4lld argument %8.3f ms (%5.1f GB/s)  "
                  "constant %8.3f ms (%5.1f GB/s)  argument/constant %.2fx  "
                  "(triad %.1f GB/s)\n",
                  elt, static_cast<long long>(K), static_cast<long long>(M), a,
                  weightBytes / a / 1e6, c, weightBytes / c / 1e6, a / c,
                  triad);
    }
  }
}

/// A packed batch of sequences of lengths 1 to 4096 (the serving case): one
/// packed call against one call per sequence (each compiled for its
/// length) and against one call on a single sequence of the same total
/// length, timed in interleaved rounds.
void packedBatch(Engine &engine, bool quick, int runs) {
  std::vector<int64_t> lengths{1, 4, 16, 64, 256, 1024, 2048, 4096};
  if (quick)
    lengths = {1, 4, 16, 64, 256, 1024};
  int64_t total = 0;
  for (int64_t n : lengths)
    total += n;
  int rounds = std::max(9, runs);
  std::printf("\npacked batch of %zu sequences, lengths 1..%lld, %lld steps "
              "(median ms of %d interleaved rounds):\n",
              lengths.size(), static_cast<long long>(lengths.back()),
              static_cast<long long>(total), rounds);
  for (std::string family : {"ssd", "delta_rule"}) {
    auto range = [family](size_t i, float x) {
      return packedInputRange(family, i, x);
    };
    auto sequences = static_cast<int64_t>(lengths.size());
    Function packed = compile(engine, packedGraph(family, total, sequences),
                              false, family + "_packed");
    Inputs packedIn = makeInputs(packed.signature(), 4, range);
    int32_t *cu = packedIn.tensors.back().dataAs<int32_t>();
    cu[0] = 0;
    for (size_t s = 0; s < lengths.size(); ++s)
      cu[s + 1] = cu[s] + static_cast<int32_t>(lengths[s]);
    std::vector<Function> alone;
    std::vector<Inputs> aloneIn;
    for (int64_t n : lengths) {
      alone.push_back(compile(engine, packedGraph(family, n, 0), false,
                              family + "_" + std::to_string(n)));
      aloneIn.push_back(makeInputs(alone.back().signature(), 4, range));
    }
    Function single = compile(engine, packedGraph(family, total, 0), false,
                              family + "_single");
    Inputs singleIn = makeInputs(single.signature(), 4, range);

    auto timed = [](Function &fn, const Inputs &in) {
      double t0 = now();
      auto out = fn.call(in.views);
      if (!out)
        die(out.message());
      return (now() - t0) * 1e3;
    };
    std::vector<double> packedMs, separateMs, singleMs;
    for (int r = 0; r <= rounds; ++r) { // round 0 warms up
      double p = timed(packed, packedIn), sep = 0;
      for (size_t i = 0; i < alone.size(); ++i)
        sep += timed(alone[i], aloneIn[i]);
      double one = timed(single, singleIn);
      if (r == 0)
        continue;
      packedMs.push_back(p);
      separateMs.push_back(sep);
      singleMs.push_back(one);
    }
    double p = median(packedMs), sep = median(separateMs),
           one = median(singleMs);
    std::printf("  %-12s packed=%.2f separate=%.2f single=%.2f  "
                "packed/separate=%.2f packed/single=%.2f\n",
                family.c_str(), p, sep, one, p / sep, p / one);
  }
}

//===----------------------------------------------------------------------===//
// The cases, one builder per op family
//===----------------------------------------------------------------------===//

Case linearScanCase(bool quick) {
  int64_t B = 4, T = quick ? 1024 : 4096, S = 2048;
  auto t = tensorType({B, T, S}), l = tensorType({B, S});
  return {"linear_scan", "B=4 T=" + std::to_string(T) + " S=2048",
          graph("linear_scan", {t, t}, {t, l}, "", ""), 0, 12.0 * B * T * S};
}

/// `elt` is the element type of the streamed operands (x, dt, B, C and y);
/// A and the state stay f32. chunk 0: the cost model's choice.
Case ssdCase(const std::string &name, int64_t chunk, int64_t T,
             const char *elt = "f32") {
  int64_t H = 16, P = 64, N = 128;
  std::string attrs = "dt_softplus = true";
  if (chunk > 0)
    attrs += ", chunk_size = " + std::to_string(chunk) + " : i64";
  return Case{name,
              "B=1 T=" + std::to_string(T) + " H=16 P=64 N=128 G=1 " + elt,
              graph("ssd",
                    {tensorType({1, T, H, P}, elt), tensorType({1, T, H}, elt),
                     tensorType({H}), tensorType({1, T, 1, N}, elt),
                     tensorType({1, T, 1, N}, elt)},
                    {tensorType({1, T, H, P}, elt), tensorType({1, H, P, N})},
                    "", attrs),
              4.0 * T * H * P * N,
              0,
              4,
              chunk == 0};
}

/// `elt` is the element type of q, k, v, the decay and o; the state stays
/// f32. chunk 0: the cost model's choice; < 0: the recurrent plan, forced.
Case linearAttentionCase(const std::string &name, int64_t chunk, int64_t T,
                         const char *elt = "f32") {
  int64_t H = 16, K = 64, V = 64;
  std::string attrs =
      chunk > 0 ? "chunk_size = " + std::to_string(chunk) + " : i64" : "";
  if (chunk < 0)
    attrs = "seq.plan = #seq.plan<recurrent>";
  return Case{
      name,
      "B=1 T=" + std::to_string(T) + " H=16 K=V=64 decay BxTxH " + elt +
          (chunk < 0 ? " recurrent" : ""),
      graph("linear_attention",
            {tensorType({1, T, H, K}, elt), tensorType({1, T, H, K}, elt),
             tensorType({1, T, H, V}, elt), tensorType({1, T, H}, elt)},
            {tensorType({1, T, H, V}, elt), tensorType({1, H, K, V})},
            "decay(%a3)", attrs),
      4.0 * T * H * K * V,
      0,
      4,
      chunk == 0};
}

/// The delta rules at the issue's shape (B1 H16 K=V=64), f32, counting the
/// 6 K V FLOPs per step and value head of the recurrence (S^T k, the rank-1
/// update, S^T q). q and k are L2-normed by the op; beta is in (0, 1) and
/// the log decays in (-1, 0), so the state stays bounded. `form` is "gdn"
/// (a decay per head) or "kda" (per key channel); chunk < 0: the recurrent
/// plan, forced.
Case deltaRuleCase(const std::string &name, const std::string &form, int64_t T,
                   int64_t chunk) {
  int64_t H = 16, K = 64, V = 64;
  std::string attrs = "qk_l2norm = true, scale = 0.125 : f32";
  if (chunk > 0)
    attrs += ", chunk_size = " + std::to_string(chunk) + " : i64";
  if (chunk < 0)
    attrs += ", seq.plan = #seq.plan<recurrent>";
  std::vector<std::string> args{
      tensorType({1, T, H, K}), tensorType({1, T, H, K}),
      tensorType({1, T, H, V}), tensorType({1, T, H})};
  args.push_back(form == "kda" ? tensorType({1, T, H, K})
                               : tensorType({1, T, H}));
  std::string shape =
      "B=1 T=" + std::to_string(T) + " H=16 K=V=64 " +
      (form == "kda" ? "KDA decay BxTxHxK" : "Gated DeltaNet decay BxTxH");
  if (chunk != 0)
    shape += chunk > 0 ? " chunk " + std::to_string(chunk) : " recurrent";
  Case c{name, shape,
         graph("delta_rule", args,
               {tensorType({1, T, H, V}), tensorType({1, H, K, V})},
               "decay(%a4)", attrs),
         6.0 * T * H * K * V};
  c.shapeInput = [](size_t index, float x) {
    if (index == 3)
      return 0.5f + 0.45f * x; // beta
    if (index == 4)
      return -0.5f * (x + 1.0f); // log decay
    return x;
  };
  return c;
}

Case rwkv7Case(int64_t T) {
  int64_t H = 16, K = 64, V = 64;
  std::string t = tensorType({1, T, H, K});
  Case c{"rwkv7", "B=1 T=" + std::to_string(T) + " H=16 K=V=64 DPLR",
         graph("generalized_delta_rule",
               {t, t, tensorType({1, T, H, V}), t, t, t},
               {tensorType({1, T, H, V}), tensorType({1, H, K, V})},
               "decay(%a5)", "scale = 0.125 : f32"),
         8.0 * T * H * K * V};
  // k, a, b small (|a| |b| K < 1 keeps the DPLR transition contracting),
  // log decays in (-1, 0).
  c.shapeInput = [](size_t index, float x) {
    if (index == 1 || index == 3 || index == 4)
      return 0.1f * x;
    if (index == 5)
      return -0.5f * (x + 1.0f);
    return x;
  };
  return c;
}

Case selectiveScanCase(bool quick) {
  int64_t T = quick ? 512 : 2048, D = 1536, N = 16;
  return {"selective_scan",
          "B=1 T=" + std::to_string(T) + " D=1536 N=16 (6 FLOPs per t,d,n)",
          graph("selective_scan",
                {tensorType({1, T, D}), tensorType({1, T, D}),
                 tensorType({D, N}), tensorType({1, T, 1, N}),
                 tensorType({1, T, 1, N}), tensorType({D})},
                {tensorType({1, T, D}), tensorType({1, D, N})}, "skip(%a5)",
                "delta_softplus = true"),
          6.0 * T * D * N, 0};
}

/// The experts in f32 or bf16 (the issue's target: bf16 at half the bf16
/// matmul's rate or better, in the same run).
Case moeCase(const std::string &elt, bool quick) {
  int64_t T = quick ? 256 : 1024, D = 1024, F = 2048, E = 8, k = 2;
  const char *e = elt.c_str();
  return Case{"moe_ffn" + (elt == "f32" ? "" : "_" + elt),
              "T=" + std::to_string(T) + " D=1024 F=2048 E=8 k=2 gated silu " +
                  elt,
              graph("moe_ffn",
                    {tensorType({T, D}, e), tensorType({T, k}, e),
                     tensorType({T, k}, "i32"), tensorType({E, D, F}, e),
                     tensorType({E, F, D}, e), tensorType({E, D, F}, e)},
                    {tensorType({T, D}, e), tensorType({E}, "i64")},
                    "gate_proj(%a5)", ""),
              2.0 * T * k * 3 * D * F,
              0,
              E};
}

Case attentionCase(const std::string &elt, bool quick) {
  int64_t T = quick ? 1024 : 4096, H = 8, K = 64;
  auto t = tensorType({1, T, H, K}, elt.c_str());
  return {"attention" + (elt == "f32" ? "" : "_" + elt),
          "B=1 T=" + std::to_string(T) + " H=8 K=V=64 causal " + elt,
          graph("attention", {t, t, t}, {t}, "", "causal = true"),
          2.0 * T * T * H * (K + K) / 2, 0};
}

Case ssdDecodeCase() {
  int64_t H = 16, P = 64, N = 128;
  return {"ssd_decode", "B=1 T=1 H=16 P=64 N=128, carried state",
          graph("ssd",
                {tensorType({1, 1, H, P}), tensorType({1, 1, H}),
                 tensorType({H}), tensorType({1, 1, 1, N}),
                 tensorType({1, 1, 1, N}), tensorType({1, H, P, N})},
                {tensorType({1, 1, H, P}), tensorType({1, H, P, N})},
                "init(%a5)", "dt_softplus = true"),
          0, 2.0 * 4 * H * P * N};
}

/// linalg.matmul into a zero-filled f32 result (the CPU's register-blocked
/// GEMM) of f32 or bf16 operands. Loops of the reference lowering would
/// take minutes: no reference.
Case matmulCase(const std::string &elt, bool quick) {
  int64_t n = quick ? 512 : 2048;
  std::string ta = tensorType({n, n}, elt.c_str()), tc = tensorType({n, n});
  std::string mlir =
      "func.func @main(%a: " + ta + ", %b: " + ta + ") -> " + tc +
      " {\n  %z = arith.constant 0.0 : f32\n  %e = tensor.empty() : " + tc +
      "\n  %f = linalg.fill ins(%z : f32) outs(%e : " + tc + ") -> " + tc +
      "\n  %r = linalg.matmul ins(%a, %b : " + ta + ", " + ta +
      ") outs(%f : " + tc + ") -> " + tc + "\n  return %r : " + tc + "\n}\n";
  return {"matmul_" + elt,
          "M=N=K=" + std::to_string(n) + " " + elt + " -> f32",
          mlir,
          2.0 * n * n * n,
          0,
          4,
          /*reference=*/false};
}

/// The item kernels (Common/ItemKernels.cpp): one body for both targets, on
/// the CPU a thread-pool task per item.
Case semiseparableMaskCase(bool quick) {
  int64_t H = 16, T = quick ? 512 : 1024;
  return {"semiseparable_mask",
          "B=1 H=16 T=" + std::to_string(T) + " (T x T mask written)",
          graph("semiseparable_mask", {tensorType({1, H, T})},
                {tensorType({1, H, T, T})}, "", ""),
          0, 4.0 * H * T * T};
}

Case routeCase(bool quick) {
  int64_t T = quick ? 4096 : 16384, E = 64;
  return {"route", "T=" + std::to_string(T) + " E=64 k=2 softmax_topk",
          graph("route", {tensorType({T, E})},
                {tensorType({T, 2}), tensorType({T, 2}, "i32"), tensorType({})},
                "", "k = 2 : i64"),
          0, 4.0 * T * E};
}

/// Every case of the table, those whose name contains `only` (all if it is
/// empty). bf16 operands take the same kernels as f32 with their products
/// as the host allows (lowPrecisionPath), against their f32 forms.
std::vector<Case> tableCases(bool quick, const std::string &only) {
  int64_t seqT = quick ? 1024 : 4096;
  std::vector<Case> all = {
      linearScanCase(quick),
      ssdCase("ssd", 0, seqT),
      linearAttentionCase("linear_attention", 0, seqT),
      linearAttentionCase("linear_attention_recurrent", -1, seqT),
      ssdCase("ssd_bf16", 0, seqT, "bf16"),
      linearAttentionCase("linear_attention_bf16", 0, seqT, "bf16"),
      deltaRuleCase("delta_rule", "gdn", seqT, 0),
      deltaRuleCase("delta_rule_recurrent", "gdn", seqT, -1),
      deltaRuleCase("delta_rule_kda", "kda", seqT, 0),
      rwkv7Case(seqT),
      selectiveScanCase(quick),
      moeCase("f32", quick),
      moeCase("bf16", quick),
      attentionCase("f32", quick),
      attentionCase("bf16", quick),
      ssdDecodeCase(),
      matmulCase("f32", quick),
      matmulCase("bf16", quick),
      semiseparableMaskCase(quick),
      routeCase(quick)};
  std::vector<Case> chosen;
  for (Case &c : all)
    if (only.empty() || c.name.find(only) != std::string::npos)
      chosen.push_back(std::move(c));
  return chosen;
}

//===----------------------------------------------------------------------===//
// The runs
//===----------------------------------------------------------------------===//

struct BenchOptions {
  bool quick = false;
  int runs = 7;
  std::string only, resultsPath;
};

BenchOptions parseBenchArgs(int argc, char **argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      o.quick = true;
    else if (a == "--runs" && i + 1 < argc)
      o.runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc)
      o.only = argv[++i];
    else if (a == "--results" && i + 1 < argc)
      o.resultsPath = argv[++i];
    else
      die("usage: seqc-bench [--quick] [--runs N] [--only NAME] "
          "[--results FILE]");
  }
  return o;
}

/// The machine's ceilings, measured in the same run as the cases.
struct Ceilings {
  double triadGBs = 0, fmaPeakGFLOPs = 0;
};

/// One row of the table: the case on all threads and on one, against its
/// reference lowering (not with --quick) and the ceiling of its kind; the
/// row also goes to `results` when there is one.
void runCase(Engine &engine, const Case &c, const BenchOptions &opts,
             const Ceilings &ceilings, int threads, FILE *results) {
  Function fast = compile(engine, c.mlir, false, c.name);
  Inputs in = makeInputs(fast.signature(), c.intRange, c.shapeInput);
  Timing all = timeCalls(fast, in.views, opts.runs);
  seqc_rt_set_num_threads(1);
  Timing one = timeCalls(fast, in.views, std::max(1, opts.runs / 2));
  seqc_rt_set_num_threads(threads);
  std::string vsRef = "-";
  if (c.reference && !opts.quick) {
    Function ref = compile(engine, c.mlir, true, c.name);
    Timing r = timeCalls(ref, in.views, 1);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fx", r.median / all.median);
    vsRef = buf;
  }
  bool computeBound = c.flops > 0;
  double rate = (computeBound ? c.flops : c.bytes) / (all.median * 1e-3) / 1e9;
  double ceiling = computeBound ? ceilings.fmaPeakGFLOPs : ceilings.triadGBs;
  char achieved[32], fraction[32];
  std::snprintf(achieved, sizeof achieved, "%.1f %s", rate,
                computeBound ? "GF/s" : "GB/s");
  std::snprintf(fraction, sizeof fraction, "%.2f", rate / ceiling);
  std::printf("%-18s %-46s %10.3f %12s %9s %10s %8.2fx\n", c.name.c_str(),
              c.shape.c_str(), all.median, achieved, fraction, vsRef.c_str(),
              one.median / all.median);
  if (results)
    std::fprintf(results, "%s\t%.4f\t%.2f\t%s\n", c.name.c_str(), all.median,
                 rate, c.shape.c_str());
  std::fflush(stdout);
}

/// Automatic chunk size against every fixed one (and the recurrence where
/// the family has it). The variants are timed in interleaved rounds (one
/// call of each per round) so that a burst of machine noise lands on all of
/// them rather than on one.
void compareChunkSizes(Engine &engine, bool quick, int runs) {
  int rounds = std::max(9, runs);
  int64_t seqT = quick ? 1024 : 4096;
  std::printf("\nautomatic chunk size vs fixed (median ms of %d interleaved "
              "rounds):\n",
              rounds);
  const std::pair<ChunkedFamily, const char *> families[] = {
      {ChunkedFamily::Ssd, "ssd"},
      {ChunkedFamily::LinearAttention, "linear_attention"},
      {ChunkedFamily::DeltaRule, "delta_rule"}};
  for (auto [family, familyName] : families) {
    std::string name = familyName;
    // 0: the cost model's choice; -1: the recurrence (linear attention and
    // the delta rule).
    std::vector<int64_t> chunks{0, 16, 32, 64, 128};
    if (family != ChunkedFamily::Ssd)
      chunks.push_back(-1);
    std::vector<Function> fns;
    std::vector<Inputs> ins;
    for (int64_t q : chunks) {
      Case c = family == ChunkedFamily::Ssd ? ssdCase(name, q, seqT)
               : family == ChunkedFamily::LinearAttention
                   ? linearAttentionCase(name, q, seqT)
                   : deltaRuleCase(name, "gdn", seqT, q);
      fns.push_back(compile(engine, c.mlir, false, c.name));
      ins.push_back(makeInputs(fns.back().signature(), 4, c.shapeInput));
      if (auto warm = fns.back().call(ins.back().views); !warm)
        die(warm.message());
    }
    std::vector<std::vector<double>> times(fns.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < fns.size(); ++i) {
        double t0 = now();
        auto out = fns[i].call(ins[i].views);
        times[i].push_back((now() - t0) * 1e3);
        if (!out)
          die(out.message());
      }
    // The state the cost model sees: N x P for ssd, K x V otherwise.
    int64_t chosen = family == ChunkedFamily::Ssd
                         ? hostModelChunkSize(family, 128, 64)
                         : hostModelChunkSize(family, 64, 64);
    std::printf("  %-18s", name.c_str());
    double autoMs = median(times[0]), best = 1e30;
    for (size_t i = 0; i < fns.size(); ++i) {
      double ms = median(times[i]);
      if (i > 0)
        best = std::min(best, ms);
      std::string label = i == 0          ? "auto"
                          : chunks[i] < 0 ? "recurrent"
                                          : std::to_string(chunks[i]);
      std::printf(" %s=%.2f", label.c_str(), ms);
    }
    std::string choice =
        chosen == 0 ? "the recurrence" : std::to_string(chosen);
    std::printf("  auto/best=%.2f (auto chose %s)\n", autoMs / best,
                choice.c_str());
  }
}

} // namespace

int main(int argc, char **argv) {
  BenchOptions opts = parseBenchArgs(argc, argv);
  int threads = static_cast<int>(seqc_rt_get_num_threads());
  std::printf("seqc CPU benchmark: %d threads, %d-lane f32 vectors\n", threads,
              hostLanes());
  Ceilings ceilings{triadGBs(threads), fmaPeakGFLOPs(threads)};
  std::printf("ceilings: triad %.1f GB/s, fp32 FMA peak %.1f GFLOP/s\n",
              ceilings.triadGBs, ceilings.fmaPeakGFLOPs);
  std::printf("bf16/f16 products: %s\n\n", lowPrecisionPath().c_str());
  std::unique_ptr<FILE, int (*)(FILE *)> results(nullptr, std::fclose);
  if (!opts.resultsPath.empty()) {
    results.reset(std::fopen(opts.resultsPath.c_str(), "w"));
    if (!results)
      die("cannot write " + opts.resultsPath);
  }

  std::vector<Case> cases = tableCases(opts.quick, opts.only);
  std::printf("%-18s %-46s %10s %12s %9s %10s %9s\n", "op", "shape",
              "median ms", "achieved", "of ceil", "vs ref", "1t/all");
  Engine engine;
  for (const Case &c : cases)
    runCase(engine, c, opts, ceilings, threads, results.get());
  if (opts.only.empty() || opts.only == "chunk")
    compareChunkSizes(engine, opts.quick, opts.runs);
  if (opts.only.empty() || opts.only == "packed")
    packedBatch(engine, opts.quick, opts.runs);
  if (opts.only.empty() || opts.only == "weights")
    constantWeights(engine, opts.quick, opts.runs, ceilings.triadGBs);
  compareLowPrecision(engine, cases, opts.runs);
  return 0;
}

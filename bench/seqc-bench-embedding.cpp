//===- seqc-bench-embedding.cpp - the costs a host application sees -------===//
//
// Measures, in one run:
//   - compile time of the Mamba-2 example block: cold (empty cache), from
//     the disk cache (a new engine, as on a host's second start) and from
//     the engine's memory cache;
//   - per-call overhead of a tiny function through the C++ API
//     (Function::call) and the C API (seqc_function_call), against the
//     compiled code's own time (its packed entry point called directly in a
//     call scope, as the API does after checking the arguments);
//   - throughput of the block (256 tokens) called from one host thread and
//     from two at once (each call also uses the runtime's thread pool).
//
//   seqc-bench-embedding [--runs N] [--block FILE.mlir]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "seqc/Engine.h"
#include "seqc/seqc.h"

#include "CallScope.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace seqc;
using namespace seqc::bench;
namespace fs = std::filesystem;

namespace {

template <typename T> T orDie(Expected<T> e, const char *what) {
  if (!e)
    die(std::string(what) + ": " + e.message());
  return e.take();
}

const char *kTiny = R"(
func.func @tiny(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
)";

/// Median seconds per call of `body`, over `reps` batches of `batch` calls.
template <typename F> double perCall(int reps, int batch, F body) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    for (int i = 0; i < batch; ++i)
      body();
    times.push_back((now() - t0) / batch);
  }
  return median(times);
}

void compileTimes(const std::string &block, int runs) {
  std::ifstream in(block);
  if (!in)
    die("cannot read '" + block + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string source = ss.str();
  fs::path dir = fs::temp_directory_path() /
                 ("seqc-bench-cache-" + std::to_string(getpid()));
  CompileOptions opts;
  opts.cacheDir = dir.string();

  std::vector<double> cold, disk, memory;
  for (int r = 0; r < runs; ++r) {
    fs::remove_all(dir);
    Engine engine;
    double t0 = now();
    auto m = orDie(engine.compile(source, opts), "cold compile");
    cold.push_back(now() - t0);
    if (m->cacheStatus() != CacheStatus::Compiled)
      die("expected a cold compile");
  }
  std::shared_ptr<CompiledModule> keep;
  for (int r = 0; r < runs * 3; ++r) {
    Engine engine;
    double t0 = now();
    auto m = orDie(engine.compile(source, opts), "cached compile");
    disk.push_back(now() - t0);
    if (m->cacheStatus() != CacheStatus::DiskHit)
      die("expected a disk-cache hit: " + m->cacheNote());
    keep = m;
  }
  Engine engine;
  auto held = orDie(engine.compile(source, opts), "compile");
  for (int r = 0; r < runs * 3; ++r) {
    double t0 = now();
    auto m = orDie(engine.compile(source, opts), "memory hit");
    memory.push_back(now() - t0);
    if (m->cacheStatus() != CacheStatus::MemoryHit)
      die("expected a memory-cache hit");
  }
  fs::remove_all(dir);
  double c = median(cold), d = median(disk), mem = median(memory);
  std::printf("compile %s (median of %d / %d / %d)\n", block.c_str(), runs,
              3 * runs, 3 * runs);
  std::printf("  cold                 %8.1f ms\n", c * 1e3);
  std::printf("  disk cache, new engine %6.2f ms   %.0fx faster than cold\n",
              d * 1e3, c / d);
  std::printf("  memory cache         %8.3f ms   %.0fx faster than cold\n\n",
              mem * 1e3, c / mem);
}

void callOverhead(int runs) {
  CompileOptions opts;
  opts.useCache = false;
  Engine engine;
  auto m = orDie(engine.compile(kTiny, opts), "compile");
  Function fn = orDie(m->function("tiny"), "lookup");
  Tensor x = orDie(Tensor::zeros(DType::F32, {4}), "tensor");
  TensorView xv = x.view();
  const int batch = 20000;

  // The compiled code alone: descriptors built once, the packed entry point
  // run in a call scope, the result buffer freed.
  PackedFn packed = fn.packedEntry();
  int64_t words[5 + 5] = {reinterpret_cast<intptr_t>(x.data()),
                          reinterpret_cast<intptr_t>(x.data()), 0, 4, 1};
  void *args[6] = {&words[0], &words[1], &words[2],
                   &words[3], &words[4], &words[5]};
  double kernel = perCall(runs, batch, [&] {
    rt::CallScope scope(size_t(1) << 30);
    if (!scope.run(packed, args))
      die(scope.error());
  });

  std::vector<TensorView> cppArgs = {xv};
  double cpp = perCall(runs, batch, [&] {
    auto r = fn.call(cppArgs);
    if (!r)
      die(r.message());
  });

  seqc_engine *ce;
  seqc_module *cm;
  seqc_function *cf;
  seqc_compile_options copts;
  seqc_compile_options_init(&copts);
  copts.use_cache = 0;
  if (seqc_engine_create(&ce) ||
      seqc_compile(ce, kTiny, std::strlen(kTiny), "tiny", &copts, &cm) ||
      seqc_module_function(cm, "tiny", &cf))
    die(seqc_last_error());
  int64_t shape[1] = {4};
  seqc_view cv = {SEQC_F32, x.data(), 1, shape, nullptr};
  double c = perCall(runs, batch, [&] {
    seqc_tensor *out;
    if (seqc_function_call(cf, &cv, 1, &out, 1))
      die(seqc_last_error());
    seqc_tensor_destroy(out);
  });
  seqc_function_destroy(cf);
  seqc_module_destroy(cm);
  seqc_engine_destroy(ce);

  std::printf("per call of @tiny (tensor<4xf32> + itself), median of %d x %d\n",
              runs, batch);
  std::printf("  compiled code alone  %6.2f us\n", kernel * 1e6);
  std::printf("  C++ Function::call   %6.2f us   overhead %.2f us\n", cpp * 1e6,
              (cpp - kernel) * 1e6);
  std::printf("  C seqc_function_call %6.2f us   overhead %.2f us\n\n", c * 1e6,
              (c - kernel) * 1e6);
}

void throughput(const std::string &block, int runs) {
  CompileOptions opts;
  opts.useCache = false;
  Engine engine;
  auto m = orDie(engine.compileFile(block, opts), "compile");
  Function fn = orDie(m->function("main"), "lookup");
  std::vector<Tensor> inputs;
  std::vector<TensorView> views;
  uint64_t seed = 1;
  for (const TensorSpec &spec : fn.signature().inputs) {
    std::vector<int64_t> shape = spec.shape;
    for (int64_t &d : shape)
      if (d < 0)
        d = 256; // the sequence length of dynamic inputs
    inputs.push_back(orDie(randomTensor(spec.dtype, shape, seed++), "input"));
    views.push_back(inputs.back().view());
  }
  auto rate = [&](int callers, int calls) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      std::atomic<int> failures{0};
      double t0 = now();
      std::vector<std::thread> threads;
      for (int t = 0; t < callers; ++t)
        threads.emplace_back([&] {
          for (int i = 0; i < calls; ++i)
            if (!fn.call(views))
              ++failures;
        });
      for (auto &th : threads)
        th.join();
      if (failures)
        die("a call failed");
      rates.push_back(callers * calls / (now() - t0));
    }
    return median(rates);
  };
  fn.call(views); // warm the block cache
  double one = rate(1, 40), two = rate(2, 40);
  std::printf("throughput of %s (pool of %lld threads)\n", block.c_str(),
              (long long)seqc_get_num_threads());
  std::printf("  1 host thread        %8.1f calls/s\n", one);
  std::printf("  2 host threads       %8.1f calls/s   %.2fx of one\n", two,
              two / one);
}

} // namespace

int main(int argc, char **argv) {
  int runs = 5;
  std::string block = SEQC_SOURCE_DIR "/examples/mamba2_block.mlir";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--block" && i + 1 < argc)
      block = argv[++i];
    else
      die("usage: seqc-bench-embedding [--runs N] [--block FILE.mlir]");
  }
  compileTimes(block, runs);
  callOverhead(runs);
  throughput(block, runs);
  return 0;
}

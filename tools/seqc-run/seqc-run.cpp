//===- seqc-run.cpp - compile a graph through the JIT and run it ----------===//
//
//   seqc-run FILE.mlir [-e NAME] [--target cpu|cuda] [--weights FILE]...
//            [--input A.npy]... [--random-inputs [--seed N]]
//            [--output-dir DIR] [--print] [--bench N] [--reference]
//
// Any bad input prints one `error: ...` line to stderr and exits 1, before
// any output file is written.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"
#include "seqc/Engine.h"
#include "seqc/Npy.h"
#include "seqc/Weights.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace seqc;

namespace {

struct Options {
  std::string file;
  std::string entry;
  Target target = Target::CPU;
  std::vector<std::string> inputs;
  std::vector<std::string> weights;
  bool randomInputs = false;
  uint64_t seed = 0;
  std::string outputDir;
  bool print = false;
  int bench = 0;
  bool reference = false;
  Profile profile = Profile::None;
  bool fuse = true;
};

const char *kUsage =
    "usage: seqc-run FILE.mlir [-e NAME] [--target cpu|cuda] "
    "[--weights FILE]... [--input A.npy]... [--random-inputs [--seed N]] "
    "[--output-dir DIR] [--print] [--bench N] [--profile[=ops]] [--no-fuse]\n"
    "                [--reference]\n"
    "\n"
    "Compiles FILE.mlir through seqc's JIT and runs one function.\n"
    "  -e NAME            the function to run (default: main, or the only\n"
    "                     public function)\n"
    "  --target cpu|cuda  where to run (default: cpu); cuda-emulated compiles\n"
    "                     the CUDA kernels but runs them on the host (tests)\n"
    "  --weights FILE     binds arguments by name (their seq.name) to the\n"
    "                     tensors of a .safetensors or .npz file (repeatable;\n"
    "                     every tensor must name an argument)\n"
    "  --input A.npy      binds the next argument not bound by --weights\n"
    "                     (repeat, in order)\n"
    "  --random-inputs    deterministic data for every argument not bound by\n"
    "                     --weights; --seed N\n"
    "  --output-dir DIR   writes result0.npy, result1.npy, ...\n"
    "  --print            prints the results\n"
    "  --bench N          one warm-up call, then N timed calls\n"
    "  --profile          times each call the function makes (each layer of a\n"
    "                     model graph) and the bytes it allocates; with\n"
    "                     --bench, medians over the timed calls\n"
    "  --profile=ops      times every op, each run as a function of its own\n"
    "                     (unfused, every result materialized)\n"
    "  --no-fuse          materializes every intermediate (no elementwise\n"
    "                     fusion into seq ops or matmuls), for comparison\n"
    "  --reference        lowers through the reference lowering (the oracle)\n";

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(1);
}

bool parseUnsigned(const std::string &s, uint64_t &out) {
  if (s.empty() || s.size() > 19)
    return false;
  for (char c : s)
    if (c < '0' || c > '9')
      return false;
  out = std::stoull(s);
  return true;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasInline = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasInline = true;
      }
    }
    auto takeValue = [&]() -> std::string {
      if (hasInline)
        return value;
      if (i + 1 >= argc)
        fail("option " + arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "-e" || arg == "--entry") {
      o.entry = takeValue();
    } else if (arg == "--target") {
      std::string t = takeValue();
      if (t == "cpu")
        o.target = Target::CPU;
      else if (t == "cuda")
        o.target = Target::CUDA;
      else if (t == "cuda-emulated")
        o.target = Target::CUDAEmulated;
      else
        fail("unknown target '" + t +
             "' (expected cpu, cuda or cuda-emulated)");
    } else if (arg == "--input") {
      o.inputs.push_back(takeValue());
    } else if (arg == "--weights") {
      o.weights.push_back(takeValue());
    } else if (arg == "--random-inputs") {
      o.randomInputs = true;
    } else if (arg == "--seed") {
      if (!parseUnsigned(takeValue(), o.seed))
        fail("--seed needs a non-negative integer");
    } else if (arg == "--output-dir") {
      o.outputDir = takeValue();
      if (o.outputDir.empty())
        fail("--output-dir needs a directory");
    } else if (arg == "--print") {
      o.print = true;
    } else if (arg == "--bench") {
      uint64_t n;
      if (!parseUnsigned(takeValue(), n) || n == 0 || n > 1000000)
        fail("--bench needs a positive number of runs");
      o.bench = static_cast<int>(n);
    } else if (arg == "--reference") {
      o.reference = true;
    } else if (arg == "--no-fuse") {
      o.fuse = false;
    } else if (arg == "--profile") {
      if (!hasInline)
        o.profile = Profile::Calls;
      else if (value == "ops")
        o.profile = Profile::Ops;
      else if (value == "calls")
        o.profile = Profile::Calls;
      else
        fail("--profile takes calls or ops, not '" + value + "'");
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      fail("unknown option '" + arg + "' (see --help)");
    } else if (o.file.empty()) {
      o.file = arg;
    } else {
      fail("more than one input file ('" + o.file + "' and '" + arg + "')");
    }
  }
  if (o.file.empty())
    fail("no input file (usage: seqc-run FILE.mlir [options], see --help)");
  if (o.randomInputs && !o.inputs.empty())
    fail("--random-inputs and --input cannot be combined");
  return o;
}

/// The function to run: -e, else `main`, else the only public function.
std::string pickEntry(const CompiledModule &module, const std::string &asked) {
  if (!asked.empty())
    return asked;
  std::vector<std::string> names = module.functionNames();
  if (std::find(names.begin(), names.end(), "main") != names.end())
    return "main";
  if (names.size() == 1)
    return names[0];
  if (names.empty())
    fail("the module has no public function to run");
  std::string list;
  for (const std::string &n : names)
    list += (list.empty() ? "@" : ", @") + n;
  fail("the module has several public functions (" + list +
       ") and none is @main: choose one with -e");
}

/// Tensors from --weights files, by name, with the file each came from.
struct WeightSet {
  struct Entry {
    Tensor tensor;
    std::string file;
    bool used = false;
  };
  std::map<std::string, Entry> byName;
  std::vector<std::string> order; // file order, for messages
};

WeightSet readWeights(const std::vector<std::string> &files) {
  WeightSet set;
  for (const std::string &file : files) {
    Expected<std::vector<weights::NamedTensor>> tensors = weights::read(file);
    if (!tensors)
      fail(tensors.message());
    for (weights::NamedTensor &t : *tensors) {
      auto [it, fresh] = set.byName.emplace(
          t.name, WeightSet::Entry{std::move(t.tensor), file});
      if (!fresh)
        fail("tensor '" + t.name + "' is in both '" + it->second.file +
             "' and '" + file + "'");
      set.order.push_back(t.name);
    }
  }
  return set;
}

/// Binds the arguments whose name is a tensor of `set`, checking element
/// type and shape; the others are left empty (nullptr) in the result.
std::vector<const Tensor *> bindWeights(const FunctionSignature &sig,
                                        WeightSet &set) {
  std::vector<const Tensor *> bound(sig.inputs.size(), nullptr);
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const TensorSpec &spec = sig.inputs[i];
    auto it = set.byName.find(spec.name);
    if (it == set.byName.end())
      continue;
    WeightSet::Entry &e = it->second;
    std::string what = "tensor '" + spec.name + "' of '" + e.file + "' is " +
                       e.tensor.typeString() + " but argument " +
                       std::to_string(i) + " of @" + sig.name + " is " +
                       spec.typeString();
    if (e.tensor.dtype() != spec.dtype ||
        e.tensor.rank() != (int64_t)spec.shape.size())
      fail(what);
    for (size_t d = 0; d < spec.shape.size(); ++d)
      if (spec.shape[d] >= 0 && spec.shape[d] != e.tensor.shape()[d])
        fail(what);
    e.used = true;
    bound[i] = &e.tensor;
  }
  for (const std::string &name : set.order)
    if (!set.byName[name].used)
      fail("tensor '" + name + "' of '" + set.byName[name].file +
           "' names no argument of @" + sig.name +
           " (arguments are named by their seq.name attribute)");
  return bound;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Whether a region is one op outlined by --profile=ops ("fn:3 op.name").
bool isOpRegion(const std::string &name) {
  size_t colon = name.find(':'), space = name.find(' ');
  return colon != std::string::npos && space != std::string::npos &&
         colon < space && colon + 1 < space &&
         std::all_of(name.begin() + colon + 1, name.begin() + space,
                     [](char c) { return c >= '0' && c <= '9'; });
}

/// The per-region table of --profile: medians over the calls. Regions of
/// --profile=ops nest inside the layer calls; the "outside" line then counts
/// what no op region covers.
void printProfile(const FunctionSignature &sig,
                  const std::vector<CallStats> &calls,
                  const std::vector<double> &totalsMs) {
  double total = median(totalsMs);
  std::printf("profile of @%s: median of %zu call%s\n", sig.name.c_str(),
              calls.size(), calls.size() == 1 ? "" : "s");
  size_t width = 16;
  for (const std::string &r : sig.profileRegions)
    width = std::max(width, r.size());
  bool ops = std::any_of(sig.profileRegions.begin(), sig.profileRegions.end(),
                         isOpRegion);
  double covered = 0;
  std::printf("  %-*s %10s    %6s %6s\n", (int)width, "region", "time", "share",
              "runs");
  for (size_t i = 0; i < sig.profileRegions.size(); ++i) {
    std::vector<double> ms;
    for (const CallStats &s : calls)
      ms.push_back(s.regionSeconds[i] * 1e3);
    double m = median(ms);
    int64_t runs = calls.empty() ? 0 : calls[0].regionCalls[i];
    if (runs == 0)
      continue; // not reached by this function
    if (!ops || isOpRegion(sig.profileRegions[i]))
      covered += m;
    std::printf("  %-*s %10.3f ms %5.1f%% %6lld\n", (int)width,
                sig.profileRegions[i].c_str(), m,
                total > 0 ? 100 * m / total : 0, (long long)runs);
  }
  if (!sig.profileRegions.empty()) {
    double outside = std::max(0.0, total - covered);
    std::printf("  %-*s %10.3f ms %5.1f%%\n", (int)width,
                ops ? "(sum of ops)" : "(sum of calls)", covered,
                total > 0 ? 100 * covered / total : 0);
    std::printf("  %-*s %10.3f ms %5.1f%%\n", (int)width,
                ops ? "(outside ops)" : "(outside calls)", outside,
                total > 0 ? 100 * outside / total : 0);
  }
  std::printf("  %-*s %10.3f ms\n", (int)width, "whole call", total);
  std::vector<double> bytes, peak;
  for (const CallStats &s : calls) {
    bytes.push_back(double(s.allocatedBytes));
    peak.push_back(double(s.peakBytes));
  }
  std::printf("  allocated per call: %.2f MB (at most %.2f MB at once)\n",
              median(bytes) / 1e6, median(peak) / 1e6);
}

/// Writes every result, or none: files written before a failure are removed.
void writeResults(const std::string &dir, const std::vector<Tensor> &results) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (mkdir(dir.c_str(), 0755) != 0)
      fail("cannot create output directory '" + dir +
           "': " + std::strerror(errno));
  } else if (!S_ISDIR(st.st_mode)) {
    fail("'" + dir + "' is not a directory");
  }
  std::vector<std::string> written;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string path = dir + "/result" + std::to_string(i) + ".npy";
    Status s = npy::write(path, results[i]);
    if (!s) {
      for (const std::string &w : written)
        std::remove(w.c_str());
      fail(s.message());
    }
    written.push_back(path);
  }
}

} // namespace

int main(int argc, char **argv) {
  Options opts = parseArgs(argc, argv);

  // Inputs are read before compiling: a bad file is reported at once.
  std::vector<Tensor> inputs;
  for (const std::string &path : opts.inputs) {
    Expected<Tensor> t = npy::read(path);
    if (!t)
      fail(t.message());
    inputs.push_back(t.take());
  }
  WeightSet weightSet = readWeights(opts.weights);

  if (opts.target == Target::CUDA && !cudaDeviceAvailable())
    fail("no CUDA device");

  Engine engine;
  CompileOptions copts;
  copts.target = opts.target;
  copts.reference = opts.reference;
  copts.profile = opts.profile;
  copts.fuse = opts.fuse;
  Expected<std::shared_ptr<CompiledModule>> module =
      engine.compileFile(opts.file, copts);
  if (!module)
    fail(module.message());

  std::string entry = pickEntry(**module, opts.entry);
  Expected<Function> fn = (*module)->function(entry);
  if (!fn)
    fail(fn.message());
  const FunctionSignature &sig = fn->signature();

  // Arguments named in --weights first, then --input files (or random
  // data) for the rest, in order.
  std::vector<const Tensor *> bound = bindWeights(sig, weightSet);
  std::vector<size_t> unbound;
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (!bound[i])
      unbound.push_back(i);
  if (opts.randomInputs) {
    for (size_t i : unbound) {
      const TensorSpec &spec = sig.inputs[i];
      for (int64_t d : spec.shape)
        if (d < 0)
          fail("--random-inputs needs static shapes, but argument " +
               std::to_string(i) + " (" + spec.name + ") has type " +
               spec.typeString());
      Expected<Tensor> t =
          randomTensor(spec.dtype, spec.shape, opts.seed * 1000003ULL + i);
      if (!t)
        fail(t.message());
      inputs.push_back(t.take());
    }
  } else if (inputs.size() != unbound.size()) {
    if (opts.weights.empty())
      fail("@" + entry + " takes " + std::to_string(sig.inputs.size()) +
           " arguments but " + std::to_string(inputs.size()) +
           " --input files were given");
    std::string names;
    for (size_t i : unbound)
      names += (names.empty() ? "" : ", ") + sig.inputs[i].name;
    fail("@" + entry + " has " + std::to_string(unbound.size()) +
         (unbound.size() == 1 ? " argument" : " arguments") +
         " not bound by --weights" +
         (unbound.empty() ? "" : " (" + names + ")") + " but " +
         std::to_string(inputs.size()) +
         (inputs.size() == 1 ? " --input file was" : " --input files were") +
         " given");
  }
  for (size_t j = 0; j < unbound.size(); ++j)
    bound[unbound[j]] = &inputs[j];

  std::vector<TensorView> views;
  for (const Tensor *t : bound)
    views.push_back(t->view());
  // On the GPU, the inputs are placed in managed memory once: calls then
  // use them in place (timed calls time the kernels, not the staging).
  std::vector<std::unique_ptr<void, void (*)(void *)>> managed;
  if (opts.target == Target::CUDA)
    for (size_t i = 0; i < views.size(); ++i) {
      size_t bytes = bound[i]->byteSize();
      if (bytes == 0)
        continue;
      std::string error;
      void *copy = rt::cudaManagedAlloc(bytes, error);
      if (!copy)
        fail(error);
      managed.emplace_back(copy, &rt::cudaManagedFree);
      std::memcpy(copy, views[i].data, bytes);
      views[i].data = copy;
    }

  std::vector<CallStats> profiles;
  std::vector<double> times;
  auto timedCall = [&]() {
    CallStats stats;
    auto start = std::chrono::steady_clock::now();
    Expected<std::vector<Tensor>> r = fn->call(views, stats);
    auto end = std::chrono::steady_clock::now();
    if (!r)
      fail(r.message());
    times.push_back(
        std::chrono::duration<double, std::milli>(end - start).count());
    profiles.push_back(std::move(stats));
    return r.take();
  };
  std::vector<Tensor> results = timedCall();
  if (opts.bench > 0) {
    // The first call was the warm-up.
    times.clear();
    profiles.clear();
  }
  for (int r = 0; r < opts.bench; ++r)
    timedCall();

  if (!opts.outputDir.empty())
    writeResults(opts.outputDir, results);
  if (opts.print) {
    for (size_t i = 0; i < results.size(); ++i) {
      const Tensor &t = results[i];
      std::printf("result%zu: %s\n%s\n", i, t.typeString().c_str(),
                  formatTensor(t).c_str());
    }
  }
  if (opts.profile != Profile::None)
    printProfile(sig, profiles, times);
  if (opts.bench > 0)
    std::printf("bench: median_ms=%.4f min_ms=%.4f runs=%d\n", median(times),
                *std::min_element(times.begin(), times.end()), opts.bench);
  return 0;
}

//===- seqc-aot-run.cpp - run a function of an ahead-of-time library -----===//
//
//   seqc-aot-run LIB.so [-e NAME] [--prefix P] [--weights FILE]...
//                [--input A.npy]... [--random-inputs [--seed N]
//                [--dynamic-size N]] [--output-dir DIR] [--bench N]
//
// seqc-run for shared libraries made by seqc-compile: it learns the
// functions' types from the library's `<prefix>signatures`, binds inputs
// (tensors of .safetensors / .npz files by argument name, .npy files in
// order, or deterministic random data of any element type, bf16 included;
// the same rules as seqc-run's), calls `<prefix><NAME>` and writes the results.
// It links only seqc's runtime (no MLIR or LLVM), so it runs on machines that
// have neither (a GPU machine running a --target cuda library). Inputs of CUDA
// functions are placed in managed memory once, so timed calls run the kernels
// only.
//
//===----------------------------------------------------------------------===//

#include "Arguments.h"
#include "ToolSupport.h"
#include "seqc/Signature.h"
#include "seqc/Tensor.h"
#include "seqc/seqc_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <string>
#include <vector>

using namespace seqc;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // Not std::exit: the library's static objects (its own copy of the
  // runtime) may be mid-use, and the caller's strings would be reported as
  // leaks by sanitizer builds.
  std::_Exit(1);
}

const char *kUsage =
    "usage: seqc-aot-run LIB.so [-e NAME] [--prefix P] [--weights FILE]...\n"
    "                    [--input A.npy]... [--random-inputs [--seed N]\n"
    "                    [--dynamic-size N]] [--output-dir DIR] [--bench N]\n"
    "\n"
    "Runs a function of a library made by seqc-compile.\n"
    "  -e NAME            the function (default: main, or the only one)\n"
    "  --prefix P         the library's symbol prefix (default: seqc_)\n"
    "  --weights FILE     binds arguments by name (their seq.name) to the\n"
    "                     tensors of a .safetensors or .npz file (repeatable)\n"
    "  --input A.npy      binds the next argument not bound by --weights\n"
    "  --random-inputs    deterministic data for the other arguments; --seed "
    "N;\n"
    "                     dynamic dimensions take --dynamic-size N (default "
    "32)\n"
    "  --output-dir DIR   writes result0.npy, result1.npy, ...\n"
    "  --bench N          N timed calls after the first; prints the median\n";

/// The library's C API (its own copy of the runtime made the tensors).
struct Library {
  void *handle = nullptr;
  using Entry = int (*)(const seqc_view *, size_t, seqc_tensor **, size_t);
  /// `<prefix>signatures`: the functions' signatures, as text.
  const char *signatures = nullptr;
  const char *(*lastError)() = nullptr;
  seqc_view (*view)(const seqc_tensor *) = nullptr;
  void (*destroy)(seqc_tensor *) = nullptr;

  template <typename T> T find(const std::string &name) {
    return reinterpret_cast<T>(dlsym(handle, name.c_str()));
  }
};

/// What the command line asks for.
struct Options {
  std::string library, entry, prefix = "seqc_", outputDir;
  ArgumentSources sources;
  uint64_t bench = 0;
};

Options parseArgs(int argc, char **argv) {
  Options o;
  tools::CommandLine cl(argc, argv, fail);
  auto count = [&](const char *message) {
    uint64_t n;
    if (!tools::parseUnsigned(cl.value(), n))
      fail(message);
    return n;
  };
  while (cl.next()) {
    const std::string &a = cl.arg();
    if (cl.flag("-h") || cl.flag("--help")) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "-e") {
      o.entry = cl.value();
    } else if (a == "--prefix") {
      o.prefix = cl.value();
    } else if (a == "--input") {
      o.sources.inputFiles.push_back(cl.value());
    } else if (a == "--weights") {
      o.sources.weightFiles.push_back(cl.value());
    } else if (cl.flag("--random-inputs")) {
      o.sources.random = true;
    } else if (a == "--seed") {
      o.sources.seed = count("--seed needs a non-negative integer");
    } else if (a == "--dynamic-size") {
      uint64_t n =
          count("--dynamic-size needs a non-negative size (at most 2^30)");
      if (n > (1u << 30))
        fail("--dynamic-size needs a non-negative size (at most 2^30)");
      o.sources.dynamicSize = static_cast<int64_t>(n);
    } else if (a == "--output-dir") {
      o.outputDir = cl.value();
    } else if (a == "--bench") {
      o.bench = count("--bench needs a positive integer");
      if (o.bench == 0)
        fail("--bench needs a positive integer");
    } else if (!a.empty() && a[0] == '-') {
      fail("unknown option '" + cl.given() + "'");
    } else if (o.library.empty()) {
      o.library = a;
    } else {
      fail("more than one library");
    }
  }
  if (o.library.empty())
    fail(std::string("no library\n") + kUsage);
  return o;
}

/// The library at `path` and its runtime's calls; fails naming what is
/// missing.
Library openLibrary(const std::string &path, const std::string &prefix) {
  Library lib;
  // A path without a slash would be searched for, not opened.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  lib.handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char *why = dlerror();
    fail("cannot load " + path + ": " + (why ? why : "unknown error"));
  }
  lib.signatures = lib.find<const char *>(prefix + "signatures");
  lib.lastError = lib.find<const char *(*)()>("seqc_last_error");
  lib.view = lib.find<seqc_view (*)(const seqc_tensor *)>("seqc_tensor_view");
  lib.destroy = lib.find<void (*)(seqc_tensor *)>("seqc_tensor_destroy");
  if (!lib.signatures || !lib.lastError || !lib.view || !lib.destroy)
    fail(path + " is not a library made by seqc-compile with prefix '" +
         prefix + "' (no " + prefix + "signatures)");
  return lib;
}

/// The signature of -e NAME, else of @main or the library's only function.
FunctionSignature pickFunction(const std::vector<FunctionSignature> &sigs,
                               const Options &o) {
  const FunctionSignature *sig = nullptr;
  std::string known;
  for (const FunctionSignature &s : sigs) {
    known += (known.empty() ? "@" : ", @") + s.name;
    if (o.entry.empty() ? (s.name == "main" || sigs.size() == 1)
                        : s.name == o.entry)
      sig = &s;
  }
  if (!sig)
    fail("no function @" + (o.entry.empty() ? std::string("main") : o.entry) +
         " in " + o.library + " (it has " + known + ")");
  return *sig;
}

/// The C API's views of the arguments; a CUDA function's inputs go to
/// managed memory once, here (`managed` owns the copies).
std::vector<seqc_view>
argumentViews(const FunctionSignature &sig, const std::vector<Tensor> &args,
              std::vector<tools::ManagedBuffer> &managed) {
  std::vector<seqc_view> views;
  for (const Tensor &t : args) {
    void *data = t.view().data;
    if (sig.cuda && t.byteSize() > 0) {
      Expected<tools::ManagedBuffer> copy = tools::copyToManagedMemory(t);
      if (!copy)
        fail(copy.message());
      data = copy->get();
      managed.push_back(copy.take());
    }
    views.push_back(seqc_view{static_cast<seqc_dtype>(t.dtype()), data,
                              static_cast<int32_t>(t.shape().size()),
                              t.shape().data(), nullptr});
  }
  return views;
}

/// Copies of the library's result tensors (its runtime owns them).
std::vector<Tensor> copyResults(const Library &lib,
                                const std::vector<seqc_tensor *> &outs) {
  std::vector<Tensor> results;
  for (seqc_tensor *out : outs) {
    seqc_view v = lib.view(out);
    std::vector<int64_t> shape(v.shape, v.shape + v.rank);
    Expected<Tensor> copy = Tensor::zeros(static_cast<DType>(v.dtype), shape);
    if (!copy)
      fail(copy.message());
    if (copy->byteSize())
      std::memcpy(copy->data(), v.data, copy->byteSize());
    results.push_back(copy.take());
  }
  return results;
}

} // namespace

int main(int argc, char **argv) {
  Options opts = parseArgs(argc, argv);
  Expected<LoadedArguments> loaded = loadArguments(opts.sources);
  if (!loaded)
    fail(loaded.message());
  Library lib = openLibrary(opts.library, opts.prefix);
  Expected<std::vector<FunctionSignature>> sigs =
      parseSignatures(lib.signatures);
  if (!sigs)
    fail(opts.library + ": " + sigs.message());
  FunctionSignature sig = pickFunction(*sigs, opts);
  std::string symbol = opts.prefix + cIdentifier(sig.name);
  auto fn = lib.find<Library::Entry>(symbol);
  if (!fn)
    fail(opts.library + " has no entry point " + symbol);
  Expected<std::vector<Tensor>> args = bindArguments(sig, *loaded);
  if (!args)
    fail(args.message());
  std::vector<tools::ManagedBuffer> managed;
  std::vector<seqc_view> views = argumentViews(sig, *args, managed);

  std::vector<seqc_tensor *> outs(sig.outputs.size(), nullptr);
  auto release = [&] {
    for (seqc_tensor *&t : outs) {
      lib.destroy(t);
      t = nullptr;
    }
  };
  auto call = [&] {
    if (fn(views.data(), views.size(), outs.data(), outs.size()) != SEQC_OK)
      fail(lib.lastError());
  };
  call();
  if (opts.bench) {
    std::vector<double> ms;
    for (uint64_t r = 0; r < opts.bench; ++r) {
      release();
      auto t0 = std::chrono::steady_clock::now();
      call();
      auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::printf("bench: median_ms=%g min_ms=%g runs=%llu\n", tools::median(ms),
                *std::min_element(ms.begin(), ms.end()),
                static_cast<unsigned long long>(opts.bench));
  }
  if (!opts.outputDir.empty())
    if (Status s =
            tools::writeResultFiles(opts.outputDir, copyResults(lib, outs));
        !s)
      fail(s.message());
  release();
  return 0;
}

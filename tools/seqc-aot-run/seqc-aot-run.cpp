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
#include "CudaDriver.h"
#include "seqc/Npy.h"
#include "seqc/Signature.h"
#include "seqc/Tensor.h"
#include "seqc/seqc_runtime.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <string>
#include <sys/stat.h>
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

bool parseCount(const std::string &s, uint64_t &out) {
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), ::isdigit))
    return false;
  out = std::stoull(s);
  return true;
}

/// The library's C API (its own copy of the runtime made the tensors).
struct Library {
  void *handle = nullptr;
  using Entry = int (*)(const seqc_view *, size_t, seqc_tensor **, size_t);
  const char *(*lastError)() = nullptr;
  seqc_view (*view)(const seqc_tensor *) = nullptr;
  void (*destroy)(seqc_tensor *) = nullptr;

  template <typename T> T find(const std::string &name) {
    return reinterpret_cast<T>(dlsym(handle, name.c_str()));
  }
};

} // namespace

int main(int argc, char **argv) {
  std::string lib, entry, prefix = "seqc_", outDir;
  ArgumentSources sources;
  uint64_t bench = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-e") {
      entry = value();
    } else if (a == "--prefix") {
      prefix = value();
    } else if (a == "--input") {
      sources.inputFiles.push_back(value());
    } else if (a == "--weights") {
      sources.weightFiles.push_back(value());
    } else if (a == "--random-inputs") {
      sources.random = true;
    } else if (a == "--seed") {
      if (!parseCount(value(), sources.seed))
        fail("--seed needs a non-negative integer");
    } else if (a == "--dynamic-size") {
      uint64_t n;
      if (!parseCount(value(), n) || n > (1u << 30))
        fail("--dynamic-size needs a non-negative size (at most 2^30)");
      sources.dynamicSize = static_cast<int64_t>(n);
    } else if (a == "--output-dir") {
      outDir = value();
    } else if (a == "--bench") {
      if (!parseCount(value(), bench) || bench == 0)
        fail("--bench needs a positive integer");
    } else if (!a.empty() && a[0] == '-') {
      fail("unknown option '" + a + "'");
    } else if (lib.empty()) {
      lib = a;
    } else {
      fail("more than one library");
    }
  }
  if (lib.empty())
    fail(std::string("no library\n") + kUsage);
  Expected<LoadedArguments> loaded = loadArguments(sources);
  if (!loaded)
    fail(loaded.message());

  Library L;
  // A path without a slash would be searched for, not opened.
  std::string path = lib.find('/') == std::string::npos ? "./" + lib : lib;
  L.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!L.handle) {
    const char *why = dlerror();
    fail("cannot load " + lib + ": " + (why ? why : "unknown error"));
  }
  auto text = L.find<const char *>(prefix + "signatures");
  L.lastError = L.find<const char *(*)()>("seqc_last_error");
  L.view = L.find<seqc_view (*)(const seqc_tensor *)>("seqc_tensor_view");
  L.destroy = L.find<void (*)(seqc_tensor *)>("seqc_tensor_destroy");
  if (!text || !L.lastError || !L.view || !L.destroy)
    fail(lib + " is not a library made by seqc-compile with prefix '" + prefix +
         "' (no " + prefix + "signatures)");
  Expected<std::vector<FunctionSignature>> sigs = parseSignatures(text);
  if (!sigs)
    fail(lib + ": " + sigs.message());
  const FunctionSignature *sig = nullptr;
  std::string known;
  for (const FunctionSignature &s : *sigs) {
    known += (known.empty() ? "@" : ", @") + s.name;
    if (entry.empty() ? (s.name == "main" || sigs->size() == 1)
                      : s.name == entry)
      sig = &s;
  }
  if (!sig)
    fail("no function @" + (entry.empty() ? std::string("main") : entry) +
         " in " + lib + " (it has " + known + ")");
  auto fn = L.find<Library::Entry>(prefix + cIdentifier(sig->name));
  if (!fn)
    fail(lib + " has no entry point " + prefix + cIdentifier(sig->name));

  Expected<std::vector<Tensor>> args = bindArguments(*sig, *loaded);
  if (!args)
    fail(args.message());

  // CUDA functions: the inputs go to managed memory once, here.
  std::vector<std::unique_ptr<void, void (*)(void *)>> managed;
  std::vector<seqc_view> views;
  for (const Tensor &t : *args) {
    TensorView v = t.view();
    void *data = v.data;
    if (sig->cuda && t.byteSize() > 0) {
      std::string error;
      data = rt::cudaManagedAlloc(t.byteSize(), error);
      if (!data)
        fail(error);
      managed.emplace_back(data, &rt::cudaManagedFree);
      std::memcpy(data, v.data, t.byteSize());
    }
    views.push_back(seqc_view{static_cast<seqc_dtype>(t.dtype()), data,
                              static_cast<int32_t>(t.shape().size()),
                              t.shape().data(), nullptr});
  }

  size_t numOut = sig->outputs.size();
  std::vector<seqc_tensor *> outs(numOut, nullptr);
  auto call = [&] {
    if (fn(views.data(), views.size(), outs.data(), numOut) != SEQC_OK)
      fail(L.lastError());
  };
  auto release = [&] {
    for (seqc_tensor *&t : outs) {
      L.destroy(t);
      t = nullptr;
    }
  };
  call();
  if (bench) {
    std::vector<double> ms;
    for (uint64_t r = 0; r < bench; ++r) {
      release();
      auto t0 = std::chrono::steady_clock::now();
      call();
      auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    std::printf("bench: median_ms=%g min_ms=%g runs=%llu\n",
                sorted[sorted.size() / 2], sorted.front(),
                static_cast<unsigned long long>(bench));
  }
  if (!outDir.empty()) {
    // mkdir -p: every missing folder of the path.
    for (size_t at = outDir.find('/', 1);; at = outDir.find('/', at + 1)) {
      mkdir(outDir.substr(0, at).c_str(), 0755);
      if (at == std::string::npos)
        break;
    }
    for (size_t i = 0; i < numOut; ++i) {
      seqc_view v = L.view(outs[i]);
      std::vector<int64_t> shape(v.shape, v.shape + v.rank);
      Expected<Tensor> copy = Tensor::zeros(static_cast<DType>(v.dtype), shape);
      if (!copy)
        fail(copy.message());
      if (copy->byteSize())
        std::memcpy(copy->data(), v.data, copy->byteSize());
      std::string file = outDir + "/result" + std::to_string(i) + ".npy";
      Status s = npy::write(file, *copy);
      if (!s)
        fail(s.message());
    }
  }
  release();
  return 0;
}

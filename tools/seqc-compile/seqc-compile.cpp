//===- seqc-compile.cpp - ahead-of-time compilation to objects ------------===//
//
//   seqc-compile FILE.mlir -o OUT.o|OUT.so [--header OUT.h] [--prefix P]
//                [--reference] [--strict] [-O N] [--target cpu|cuda] [--chip
//                SM]
//                [--cpu NAME] [--fallback-cpu NAME|none]
//                [--bind-weights FILE]...
//
// Writes an object file (or a shared library) with one C entry point per
// public function, `<prefix><name>`, the signatures as the C string
// `<prefix>signatures`, and a header declaring them. Linking needs only
// libseqc_runtime (no JIT, no MLIR or LLVM at run time). With --target cuda
// the kernels are embedded as a cubin for --chip (default sm_90a), loaded
// when the program or library loads; the driver is opened at run time.
// --bind-weights makes the tensors of a weights file constants of the
// object (CompileOptions::boundWeights): the entry points take the other
// arguments, and the matmuls' and experts' panels are packed here.
//
//===----------------------------------------------------------------------===//

#include "FileIO.h"
#include "ToolSupport.h"
#include "seqc/Aot.h"
#include "seqc/Weights.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace seqc;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(1);
}

/// The directory of this executable's sibling lib/ (where the build and an
/// installation put libseqc_runtime.a).
std::string runtimeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return "lib";
  buf[n] = 0;
  std::string exe(buf);
  std::string bin = exe.substr(0, exe.rfind('/'));
  return bin.substr(0, bin.rfind('/')) + "/lib";
}

constexpr char kUsage[] =
    "usage: seqc-compile FILE.mlir -o OUT.o|OUT.so [--header "
    "OUT.h] [--prefix P] [--reference] [-O N]\n"
    "                    [--target cpu|cuda] [--chip SM] "
    "[--cpu NAME] [--fallback-cpu NAME|none] [--strict]\n"
    "                    [--bind-weights FILE]...\n"
    "  --strict       an op without the target's fast lowering "
    "is an error (else a remark)\n"
    "  --target cuda  GPU kernels as an embedded cubin (the "
    "CUDA toolkit's ptxas; PTX without it)\n"
    "  --chip SM      the GPU architecture (default sm_90a)\n"
    "  --cpu NAME     the x86-64 CPU or level (x86-64-v3, ...) "
    "the host code may use\n"
    "                 (default: this machine's)\n"
    "  --fallback-cpu NAME|none  CPU objects also carry the "
    "functions compiled for\n"
    "                 NAME (default x86-64-v2, bf16 products "
    "widened), which the entry\n"
    "                 points call on a CPU without a feature "
    "of the main code; none:\n"
    "                 no fallback (such a call fails naming "
    "the feature)\n"
    "  --bind-weights FILE  the tensors of a .safetensors or "
    ".npz file become constants\n"
    "                 of the object, binding the arguments "
    "their names name (seq.name);\n"
    "                 the entry points no longer take them "
    "(repeatable)";

/// What the command line asks for.
struct Options {
  std::string input;
  AotOptions aot;
  /// --bind-weights: read as the options are, so that a bad file is the
  /// first error; the compile's options view them.
  std::vector<weights::NamedTensor> boundWeights;
};

Target parseTarget(const std::string &name) {
  if (name == "cpu")
    return Target::CPU;
  if (name == "cuda")
    return Target::CUDA;
  fail("unknown target '" + name + "' (expected cpu or cuda)");
}

Options parseArgs(int argc, char **argv) {
  Options o;
  AotOptions &aot = o.aot;
  tools::CommandLine cl(argc, argv, fail);
  while (cl.next()) {
    const std::string &a = cl.arg();
    if (cl.flag("-h") || cl.flag("--help")) {
      std::puts(kUsage);
      std::exit(0);
    } else if (a == "-o") {
      aot.output = cl.value();
    } else if (a == "--header") {
      aot.header = cl.value();
    } else if (a == "--prefix") {
      aot.prefix = cl.value();
    } else if (cl.flag("--reference")) {
      aot.compile.reference = true;
    } else if (cl.flag("--strict")) {
      aot.compile.strict = true;
    } else if (a == "--target") {
      aot.compile.target = parseTarget(cl.value());
    } else if (a == "--chip") {
      // Checked by the GPU lowering (seq-lower-to-gpu), which names it.
      aot.compile.cudaChip = cl.value();
    } else if (a == "--bind-weights") {
      Expected<std::vector<weights::NamedTensor>> file =
          weights::read(cl.value());
      if (!file)
        fail(file.message());
      o.boundWeights.insert(o.boundWeights.end(), file->begin(), file->end());
    } else if (a == "--cpu") {
      aot.cpu = cl.value();
    } else if (a == "--fallback-cpu") {
      std::string cpu = cl.value();
      aot.fallbackCpu = cpu == "none" ? "" : cpu;
    } else if (a == "-O") {
      std::string v = cl.value();
      if (v.size() != 1 || v[0] < '0' || v[0] > '3')
        fail("-O needs 0, 1, 2 or 3");
      aot.compile.optLevel = v[0] - '0';
    } else if (!a.empty() && a[0] == '-') {
      fail("unknown option '" + cl.given() + "'");
    } else if (o.input.empty()) {
      o.input = a;
    } else {
      fail("more than one input file");
    }
  }
  if (o.input.empty())
    fail("no input file (usage: seqc-compile FILE.mlir -o OUT.o)");
  if (aot.output.empty())
    fail("no output file (-o OUT.o or -o OUT.so)");
  return o;
}

} // namespace

int main(int argc, char **argv) {
  Options opts = parseArgs(argc, argv);
  Expected<std::string> source = readFile(opts.input);
  if (!source)
    fail(source.message());
  AotOptions &aot = opts.aot;
  aot.runtimeLibraryDir = runtimeDir();
  for (const weights::NamedTensor &w : opts.boundWeights)
    aot.compile.boundWeights.push_back({w.name, w.tensor.view()});
  aot.compile.onEvent = [](const CompileEvent &e) {
    if (e.kind == CompileEvent::Kind::Remark)
      std::fprintf(stderr, "remark: %s\n", e.what.c_str());
  };
  Status s = compileAheadOfTime(*source, opts.input, aot);
  if (!s)
    fail(s.message());
  return 0;
}

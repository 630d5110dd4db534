//===- seqc-compile.cpp - ahead-of-time compilation to objects ------------===//
//
//   seqc-compile FILE.mlir -o OUT.o|OUT.so [--header OUT.h] [--prefix P]
//                [--reference] [-O N]
//
// Writes an object file (or a shared library) with one C entry point per
// public function, `<prefix><name>`, and a header declaring them. Linking
// needs only libseqc_runtime (no JIT, no MLIR or LLVM at run time).
//
//===----------------------------------------------------------------------===//

#include "seqc/Aot.h"
#include "FileIO.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

using namespace seqc;

[[noreturn]] static void fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(1);
}

/// The directory of this executable's sibling lib/ (where the build and an
/// installation put libseqc_runtime.a).
static std::string runtimeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return "lib";
  buf[n] = 0;
  std::string exe(buf);
  std::string bin = exe.substr(0, exe.rfind('/'));
  return bin.substr(0, bin.rfind('/')) + "/lib";
}

int main(int argc, char **argv) {
  std::string input;
  AotOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::puts("usage: seqc-compile FILE.mlir -o OUT.o|OUT.so [--header "
                "OUT.h] [--prefix P] [--reference] [-O N]");
      return 0;
    } else if (a == "-o") {
      opts.output = value();
    } else if (a == "--header") {
      opts.header = value();
    } else if (a == "--prefix") {
      opts.prefix = value();
    } else if (a == "--reference") {
      opts.compile.reference = true;
    } else if (a == "-O") {
      std::string v = value();
      if (v.size() != 1 || v[0] < '0' || v[0] > '3')
        fail("-O needs 0, 1, 2 or 3");
      opts.compile.optLevel = v[0] - '0';
    } else if (!a.empty() && a[0] == '-') {
      fail("unknown option '" + a + "'");
    } else if (input.empty()) {
      input = a;
    } else {
      fail("more than one input file");
    }
  }
  if (input.empty())
    fail("no input file (usage: seqc-compile FILE.mlir -o OUT.o)");
  if (opts.output.empty())
    fail("no output file (-o OUT.o or -o OUT.so)");
  Expected<std::string> source = readFile(input);
  if (!source)
    fail(source.message());
  opts.runtimeLibraryDir = runtimeDir();
  Status s = compileAheadOfTime(*source, input, opts);
  if (!s)
    fail(s.message());
  return 0;
}

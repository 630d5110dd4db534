//===- seqc-run.cpp - compile a graph through the JIT and run it ----------===//
//
//   seqc-run FILE.mlir [-e NAME] [--target cpu|cuda] [--weights FILE]...
//            [--bind-weights FILE]... [--input A.npy]...
//            [--random-inputs [--seed N]]
//            [--dynamic-size N] [--output-dir DIR] [--print] [--bench N]
//            [--reference] [--strict] [--threads N] [--memory-limit SIZE]
//            [--parallel MODE [--timeout S]] [-v]
//
// Any bad input prints one `error: ...` line to stderr and exits 1, before
// any output file is written.
//
//===----------------------------------------------------------------------===//

#include "Arguments.h"
#include "Mpi.h"
#include "ToolSupport.h"
#include "seqc/Engine.h"
#include "seqc/Weights.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace seqc;

namespace {

struct Options {
  std::string file;
  std::string entry;
  Target target = Target::CPU;
  /// --weights, --input, --random-inputs, --seed, --dynamic-size: where the
  /// arguments come from (loadArguments).
  ArgumentSources sources;
  /// --bind-weights: files whose tensors become constants of the module.
  std::vector<std::string> boundWeights;
  std::string outputDir;
  bool print = false;
  int bench = 0;
  bool reference = false;
  Profile profile = Profile::None;
  bool fuse = true;
  bool strict = false;
  bool verbose = false;
  int threads = 0;
  size_t memoryLimit = 0;
  /// --parallel: the work split over the MPI processes, by `parallelism`.
  bool parallel = false;
  Parallelism parallelism = Parallelism::Sequence;
  /// --local-steps: each rank reads, passes, gets back and writes its own
  /// steps ("{rank}" in --input and --output-dir names its files).
  bool localSteps = false;
  /// Seconds a distributed run may take before its ranks give up.
  uint64_t timeoutSeconds = 600;
};

const char *kUsage =
    "usage: seqc-run FILE.mlir [-e NAME] [--target cpu|cuda] "
    "[--weights FILE]... [--bind-weights FILE]...\n"
    "                [--input A.npy]... [--random-inputs [--seed N]\n"
    "                [--dynamic-size N]] [--output-dir DIR] [--print] "
    "[--bench N] [--profile[=ops]]\n"
    "                [--no-fuse] [--reference] [--strict] [--threads N] "
    "[--memory-limit SIZE]\n"
    "                [--parallel MODE [--local-steps] [--timeout S]] [-v]\n"
    "\n"
    "Compiles FILE.mlir through seqc's JIT and runs one function.\n"
    "  -e NAME            the function to run (default: main, or the only\n"
    "                     public function)\n"
    "  --target cpu|cuda  where to run (default: cpu); cuda-emulated compiles\n"
    "                     the CUDA kernels but runs them on the host (tests)\n"
    "  --weights FILE     binds arguments by name (their seq.name) to the\n"
    "                     tensors of a .safetensors or .npz file (repeatable;\n"
    "                     every tensor must name an argument)\n"
    "  --bind-weights FILE  the same, but bound when compiling: each tensor\n"
    "                     becomes a constant of the module and the function\n"
    "                     no longer takes it (matmuls pack such a weight\n"
    "                     once, when compiling; repeatable)\n"
    "  --input A.npy      binds the next argument not bound by --weights\n"
    "                     (repeat, in order)\n"
    "  --random-inputs    deterministic data for every argument not bound by\n"
    "                     --weights; --seed N; dynamic dimensions take\n"
    "                     --dynamic-size N (default 32)\n"
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
    "  --reference        lowers through the reference lowering (the oracle)\n"
    "  --strict           an op without the target's fast lowering is an\n"
    "                     error (else a remark on stderr)\n"
    "  --threads N        threads of the runtime's pool (default: every core,\n"
    "                     or SEQC_NUM_THREADS)\n"
    "  --memory-limit SIZE  the most one call may allocate at once (bytes, or\n"
    "                     with K, M, G: 512M; default: physical memory)\n"
    "  --parallel sequence  under mpirun -np R: every seq op's steps are "
    "split\n"
    "                     over the R processes and the states exchanged over\n"
    "                     MPI; every rank reads the same inputs, rank 0\n"
    "                     writes and prints the results\n"
    "  --parallel experts   under mpirun -np R: every moe_ffn's experts are\n"
    "                     split over the R processes (E % R == 0), each\n"
    "                     routes its share of the tokens to their experts'\n"
    "                     ranks and back (all-to-all over MPI); other ops run\n"
    "                     on every rank\n"
    "  --parallel sequence+experts  both: moe_ffn by experts, every other\n"
    "                     seq op by steps\n"
    "                     (--target cuda: one GPU per rank, the exchanges on\n"
    "                     NCCL; cuda-emulated: on MPI)\n"
    "  --local-steps      with --parallel sequence (or sequence+experts:\n"
    "                     the experts split each rank's own tokens): every\n"
    "                     rank reads its own\n"
    "                     steps of the inputs with steps ({rank} in an\n"
    "                     --input path is the rank; with --random-inputs,\n"
    "                     --dynamic-size steps a rank), passes only those,\n"
    "                     and writes and prints its own steps of the results\n"
    "                     ({rank} in --output-dir, else DIR/rank<r>)\n"
    "  --timeout S        a distributed run that has not finished after S\n"
    "                     seconds (default 600) ends every rank with an error\n"
    "  -v, --verbose      prints each compile stage's time and whether the\n"
    "                     compile cache hit (to stderr)\n"
    "\n"
    "Environment:\n"
    "  SEQC_NUM_THREADS   threads of the runtime's pool (default: every core)\n"
    "  SEQC_CACHE_DIR     the compile cache (default: $XDG_CACHE_HOME/seqc,\n"
    "                     else ~/.cache/seqc)\n"
    "  SEQC_CACHE_MAX_MB  the cache's size bound in megabytes (default 512;\n"
    "                     least recently used entries go first)\n"
    "  SEQC_CPU_BF16      products of bf16 operands in CPU kernels: amx\n"
    "                     (AMX tiles), amx-emulated (the AMX code as vector\n"
    "                     code, for tests), dot (AVX-512 BF16 vdpbf16ps),\n"
    "                     widen (f32 FMAs), auto (default: AMX where usable,\n"
    "                     else dot products on AMD cores, else widen); a\n"
    "                     kind the CPU lacks is an error\n"
    "  SEQC_PERF_MAP      1: writes /tmp/perf-PID.map for perf to name JIT'd\n"
    "                     code\n"
    "  CUDA_HOME          the CUDA toolkit for --target cuda (default\n"
    "                     /usr/local/cuda)\n"
    "  SEQC_LIBCUDA       the CUDA driver library (default libcuda.so.1)\n"
    "  SEQC_CUDA_DEVICE   the CUDA device to run on (default: under mpirun\n"
    "                     the rank's place on its node, else 0)\n"
    "  SEQC_LIBMPI        the MPI library of --parallel, of OpenMPI's or\n"
    "                     MPICH's ABI (default: libmpich.so.12 under a PMI\n"
    "                     launcher such as MPICH's mpiexec, else\n"
    "                     libmpi.so.40; then the other)\n"
    "  SEQC_LIBNCCL       the NCCL library of --parallel --target cuda\n"
    "                     (default libnccl.so.2)\n"
    "  SEQC_MPI_MAX_COUNT the most elements one MPI call of the runtime is\n"
    "                     given (default and maximum 2^30; larger exchanges\n"
    "                     go in pieces)\n";

/// Set once MPI is up (--parallel): a failing rank then leaves at once,
/// without MPI_Finalize, which would wait for ranks that wait for it; mpirun
/// ends the others.
bool distributedRun = false;

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  if (distributedRun) {
    std::fflush(nullptr);
    _exit(1);
  }
  std::exit(1);
}

/// `text` as a number in [lo, hi], else fails with `message`.
uint64_t unsignedIn(const std::string &text, uint64_t lo, uint64_t hi,
                    const char *message) {
  uint64_t n;
  if (!tools::parseUnsigned(text, n) || n < lo || n > hi)
    fail(message);
  return n;
}

Target parseTarget(const std::string &name) {
  if (name == "cpu")
    return Target::CPU;
  if (name == "cuda")
    return Target::CUDA;
  if (name == "cuda-emulated")
    return Target::CUDAEmulated;
  fail("unknown target '" + name + "' (expected cpu, cuda or cuda-emulated)");
}

Parallelism parseParallelism(const std::string &mode) {
  if (mode == "sequence")
    return Parallelism::Sequence;
  if (mode == "experts")
    return Parallelism::Experts;
  if (mode == "sequence+experts")
    return Parallelism::SequenceAndExperts;
  fail("--parallel takes sequence, experts or sequence+experts, not '" + mode +
       "'");
}

/// The options that say where the arguments come from; false if `cl`'s
/// argument is not one of them.
bool parseArgumentOption(tools::CommandLine &cl, Options &o) {
  const std::string &arg = cl.arg();
  if (arg == "--input")
    o.sources.inputFiles.push_back(cl.value());
  else if (arg == "--weights")
    o.sources.weightFiles.push_back(cl.value());
  else if (arg == "--bind-weights")
    o.boundWeights.push_back(cl.value());
  else if (cl.flag("--random-inputs"))
    o.sources.random = true;
  else if (arg == "--seed")
    o.sources.seed = unsignedIn(cl.value(), 0, UINT64_MAX,
                                "--seed needs a non-negative integer");
  else if (arg == "--dynamic-size")
    o.sources.dynamicSize =
        unsignedIn(cl.value(), 0, 1u << 30,
                   "--dynamic-size needs a non-negative size (at most 2^30)");
  else
    return false;
  return true;
}

/// The options of the compile: target, lowering, threads, memory.
bool parseCompileOption(tools::CommandLine &cl, Options &o) {
  const std::string &arg = cl.arg();
  if (arg == "--target") {
    o.target = parseTarget(cl.value());
  } else if (cl.flag("--reference")) {
    o.reference = true;
  } else if (cl.flag("--no-fuse")) {
    o.fuse = false;
  } else if (cl.flag("--strict")) {
    o.strict = true;
  } else if (arg == "--threads") {
    o.threads = static_cast<int>(
        unsignedIn(cl.value(), 1, 4096,
                   "--threads needs a number of threads from 1 to 4096"));
  } else if (arg == "--memory-limit") {
    std::string v = cl.value();
    if (!tools::parseSize(v, o.memoryLimit) || o.memoryLimit == 0)
      fail("--memory-limit needs a positive size in bytes, or with K, M or G "
           "(512M, 4G), not '" +
           v + "'");
  } else if (arg == "--profile") {
    if (!cl.hasInlineValue() || cl.value() == "calls")
      o.profile = Profile::Calls;
    else if (cl.value() == "ops")
      o.profile = Profile::Ops;
    else
      fail("--profile takes calls or ops, not '" + cl.value() + "'");
  } else {
    return false;
  }
  return true;
}

/// The options of the run: which function, what to do with its results,
/// how often, over how many processes.
bool parseRunOption(tools::CommandLine &cl, Options &o) {
  const std::string &arg = cl.arg();
  if (arg == "-e" || arg == "--entry") {
    o.entry = cl.value();
  } else if (arg == "--output-dir") {
    o.outputDir = cl.value();
    if (o.outputDir.empty())
      fail("--output-dir needs a directory");
  } else if (cl.flag("--print")) {
    o.print = true;
  } else if (arg == "--bench") {
    o.bench = static_cast<int>(unsignedIn(
        cl.value(), 1, 1000000, "--bench needs a positive number of runs"));
  } else if (cl.flag("-v") || cl.flag("--verbose")) {
    o.verbose = true;
  } else if (arg == "--parallel") {
    o.parallelism = parseParallelism(cl.value());
    o.parallel = true;
  } else if (cl.flag("--local-steps")) {
    o.localSteps = true;
  } else if (arg == "--timeout") {
    o.timeoutSeconds =
        unsignedIn(cl.value(), 1, 86400,
                   "--timeout needs a number of seconds from 1 to 86400");
  } else {
    return false;
  }
  return true;
}

/// What the options say together.
void checkOptions(const Options &o) {
  if (o.file.empty())
    fail("no input file (usage: seqc-run FILE.mlir [options], see --help)");
  if (o.localSteps && (!o.parallel || o.parallelism == Parallelism::Experts))
    fail("--local-steps goes with --parallel sequence or sequence+experts "
         "(the rank's own steps split every op with steps)");
  // Every rank reading the same file would pass the same steps as its own.
  const std::vector<std::string> &inputs = o.sources.inputFiles;
  if (o.localSteps && !o.sources.random &&
      std::none_of(inputs.begin(), inputs.end(), [](const std::string &in) {
        return in.find("{rank}") != std::string::npos;
      }))
    fail("--local-steps needs {rank} in the path of the inputs with steps "
         "(--input 'u.{rank}.npy'), or --random-inputs: each rank reads its "
         "own steps");
}

Options parseArgs(int argc, char **argv) {
  Options o;
  tools::CommandLine cl(argc, argv, fail);
  while (cl.next()) {
    const std::string &arg = cl.arg();
    if (cl.flag("-h") || cl.flag("--help")) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (parseArgumentOption(cl, o) || parseCompileOption(cl, o) ||
        parseRunOption(cl, o))
      continue;
    if (!arg.empty() && arg[0] == '-' && arg != "-")
      fail("unknown option '" + cl.given() + "' (see --help)");
    if (!o.file.empty())
      fail("more than one input file ('" + o.file + "' and '" + arg + "')");
    o.file = arg;
  }
  checkOptions(o);
  return o;
}

/// `path` with every "{rank}" replaced by `rank`.
std::string withRank(std::string path, int rank) {
  const std::string mark = "{rank}";
  for (size_t at = path.find(mark); at != std::string::npos;
       at = path.find(mark, at))
    path.replace(at, mark.size(), std::to_string(rank));
  return path;
}

/// Under --local-steps each rank's own files: its inputs, and its results'
/// directory ({rank} in it, else a rank<r> directory below it).
void useRankFiles(Options &o, int rank) {
  for (std::string &input : o.sources.inputFiles)
    input = withRank(input, rank);
  if (o.outputDir.empty())
    return;
  if (o.outputDir.find("{rank}") != std::string::npos)
    o.outputDir = withRank(o.outputDir, rank);
  else
    o.outputDir += "/rank" + std::to_string(rank);
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
  double total = tools::median(totalsMs);
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
    double m = tools::median(ms);
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
              tools::median(bytes) / 1e6, tools::median(peak) / 1e6);
}

/// What the user sees while a compile runs: after a second of compiling,
/// one line saying so (a cold compile of a model takes several seconds);
/// with -v, whether the cache hit and each stage's time.
class CompileProgress {
public:
  CompileProgress(std::string file, bool verbose)
      : file(std::move(file)), verbose(verbose) {}
  ~CompileProgress() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished = true;
    }
    wake.notify_all();
    if (announcer.joinable())
      announcer.join();
  }

  void event(const CompileEvent &e) {
    switch (e.kind) {
    case CompileEvent::Kind::CacheHit:
      if (verbose)
        std::fprintf(stderr, "seqc-run: %s: %s cache hit\n", file.c_str(),
                     e.what.c_str());
      break;
    case CompileEvent::Kind::CacheMiss:
      if (verbose)
        std::fprintf(stderr, "seqc-run: %s: not in the cache, compiling\n",
                     file.c_str());
      else
        announcer = std::thread([this] { announceIfSlow(); });
      break;
    case CompileEvent::Kind::Remark:
      std::fprintf(stderr, "remark: %s\n", e.what.c_str());
      break;
    case CompileEvent::Kind::Stage:
      if (verbose)
        std::fprintf(stderr, "seqc-run:   %-28s %8.3f s\n", e.what.c_str(),
                     e.seconds);
      break;
    }
  }

private:
  void announceIfSlow() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!wake.wait_for(lock, std::chrono::seconds(1), [&] { return finished; }))
      std::fprintf(stderr, "seqc-run: compiling %s (not in cache)...\n",
                   file.c_str());
  }

  std::string file;
  bool verbose;
  std::mutex mutex;
  std::condition_variable wake;
  bool finished = false;
  std::thread announcer;
};

/// Every rank of a distributed run must compile the same module and call it
/// with the same arguments: a digest of the file, the function and every
/// argument's type and bytes.
uint64_t runDigest(const std::string &file, const std::string &entry,
                   const std::vector<Tensor> &args) {
  std::string source;
  if (FILE *f = std::fopen(file.c_str(), "rb")) {
    char chunk[65536];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0)
      source.append(chunk, n);
    std::fclose(f);
  }
  std::hash<std::string_view> hash;
  uint64_t digest = hash(source) ^ (hash(entry) * 0x9e3779b97f4a7c15ull);
  for (const Tensor &t : args) {
    std::string type = t.typeString();
    digest = digest * 0x100000001b3ull ^ hash(type);
    digest = digest * 0x100000001b3ull ^
             hash(std::string_view(static_cast<const char *>(t.data()),
                                   t.byteSize()));
  }
  return digest;
}

/// One error on every rank, exit 1 everywhere, when the ranks' digests
/// differ (MPI_Allreduce of the digest and its complement, maximum).
void checkRanksAgree(const rt::MpiWorld &world, uint64_t digest) {
  uint64_t both[2] = {digest, ~digest};
  std::string error;
  if (!rt::mpiMaxAll(both, 2, error))
    fail(error);
  if (both[0] != digest || both[1] != ~digest) {
    std::fprintf(stderr,
                 "error: rank %d of %d: the ranks disagree on the module, "
                 "the function or its inputs (every rank must run the same "
                 "file on the same inputs)\n",
                 world.rank, world.size);
    rt::mpiFinalize();
    std::exit(1);
  }
}

/// This process's place once MPI is up (`up` set after `world`), for the
/// watchdog's thread.
struct StartedWorld {
  rt::MpiWorld world;
  std::atomic<bool> up{false};
};

/// Ends every rank when a distributed run outlives `seconds` (a rank that
/// died or never reached a collective would leave the others waiting).
/// Started before MPI: MPICH's MPI_Init waits for every process of the
/// job, and its launcher does not end the others when one exits first.
void startWatchdog(const StartedWorld &started, uint64_t seconds) {
  std::thread([&started, seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    auto within = static_cast<unsigned long long>(seconds);
    if (!started.up.load(std::memory_order_acquire)) {
      std::fprintf(stderr,
                   "error: MPI did not start within %llu s (--timeout): a "
                   "rank stopped or is stuck\n",
                   within);
      std::fflush(nullptr);
      _exit(1);
    }
    std::fprintf(stderr,
                 "error: rank %d of %d: the distributed run did not finish "
                 "within %llu s (--timeout): a rank stopped or is stuck\n",
                 started.world.rank, started.world.size, within);
    std::fflush(stderr);
    rt::mpiAbort(1);
  }).detach();
}

/// Starts MPI for --parallel (the watchdog first), or returns a world of
/// one.
rt::MpiWorld startRanks(const Options &opts) {
  rt::MpiWorld world;
  if (!opts.parallel)
    return world;
  static StartedWorld started;
  startWatchdog(started, opts.timeoutSeconds);
  std::string error;
  if (!rt::mpiInit(world, error))
    fail(error);
  started.world = world;
  started.up.store(true, std::memory_order_release);
  distributedRun = true;
  return world;
}

/// The tensors of the --bind-weights files.
std::vector<weights::NamedTensor>
readBoundWeights(const std::vector<std::string> &paths) {
  std::vector<weights::NamedTensor> bound;
  for (const std::string &path : paths) {
    Expected<std::vector<weights::NamedTensor>> file = weights::read(path);
    if (!file)
      fail(file.message());
    bound.insert(bound.end(), file->begin(), file->end());
  }
  return bound;
}

/// The module of --target and the options, with the compile's progress
/// shown.
std::shared_ptr<CompiledModule>
compileModule(Engine &engine, const Options &opts, const rt::MpiWorld &world,
              const std::vector<weights::NamedTensor> &bound) {
  CompileOptions copts;
  copts.target = opts.target;
  copts.reference = opts.reference;
  copts.profile = opts.profile;
  copts.fuse = opts.fuse;
  copts.strict = opts.strict;
  copts.numThreads = opts.threads;
  copts.memoryLimit = opts.memoryLimit;
  for (const weights::NamedTensor &w : bound)
    copts.boundWeights.push_back({w.name, w.tensor.view()});
  if (opts.parallel) {
    copts.ranks = world.size;
    copts.parallel = opts.parallelism;
    copts.localSteps = opts.localSteps;
  }
  Expected<std::shared_ptr<CompiledModule>> module = [&] {
    // Gone before an error is reported: no "compiling..." line after it.
    CompileProgress progress(opts.file, opts.verbose);
    copts.onEvent = [&](const CompileEvent &e) { progress.event(e); };
    return engine.compileFile(opts.file, copts);
  }();
  if (!module)
    fail(module.message());
  if (opts.verbose && !(*module)->cacheNote().empty())
    std::fprintf(stderr, "seqc-run: cache: %s\n",
                 (*module)->cacheNote().c_str());
  return *module;
}

/// Under --parallel, checks that the ranks run the same module on the same
/// whole arguments. The bound weights are part of the module. With local
/// steps each rank's own steps differ (the arguments with a dynamic
/// dimension); the whole ones must agree.
void checkRanksRunAlike(const Options &opts, const rt::MpiWorld &world,
                        const FunctionSignature &sig,
                        const std::vector<Tensor> &args,
                        const std::vector<weights::NamedTensor> &bound) {
  std::vector<Tensor> digested;
  for (size_t i = 0; i < args.size(); ++i)
    if (!opts.localSteps || std::count(sig.inputs[i].shape.begin(),
                                       sig.inputs[i].shape.end(), -1) == 0)
      digested.push_back(args[i]);
  for (const weights::NamedTensor &w : bound)
    digested.push_back(w.tensor);
  checkRanksAgree(world, runDigest(opts.file, sig.name, digested));
}

/// The calls' views of the arguments. On the GPU the inputs are placed in
/// managed memory once (`managed` owns the copies): calls then use them in
/// place, and timed calls time the kernels, not the staging.
std::vector<TensorView>
argumentViews(const Options &opts, const std::vector<Tensor> &args,
              std::vector<tools::ManagedBuffer> &managed) {
  std::vector<TensorView> views;
  for (const Tensor &t : args) {
    views.push_back(t.view());
    if (opts.target != Target::CUDA || t.byteSize() == 0)
      continue;
    Expected<tools::ManagedBuffer> copy = tools::copyToManagedMemory(t);
    if (!copy)
      fail(copy.message());
    views.back().data = copy->get();
    managed.push_back(copy.take());
  }
  return views;
}

/// The calls of a run: the first (a warm-up under --bench), then --bench
/// timed ones.
struct CallRecord {
  std::vector<Tensor> results;
  std::vector<double> timesMs;
  std::vector<CallStats> profiles;
};

CallRecord runCalls(Function &fn, const std::vector<TensorView> &views,
                    int bench) {
  CallRecord record;
  auto timedCall = [&] {
    CallStats stats;
    auto start = std::chrono::steady_clock::now();
    Expected<std::vector<Tensor>> r = fn.call(views, stats);
    auto end = std::chrono::steady_clock::now();
    if (!r)
      fail(r.message());
    record.timesMs.push_back(
        std::chrono::duration<double, std::milli>(end - start).count());
    record.profiles.push_back(std::move(stats));
    return r.take();
  };
  record.results = timedCall();
  if (bench > 0) {
    record.timesMs.clear();
    record.profiles.clear();
  }
  for (int r = 0; r < bench; ++r)
    timedCall();
  return record;
}

/// --print: every result, one write per rank so that ranks' lines do not
/// interleave.
void printResults(const Options &opts, const rt::MpiWorld &world,
                  const std::vector<Tensor> &results) {
  std::string text;
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor &t = results[i];
    if (opts.localSteps)
      text += "rank " + std::to_string(world.rank) + " ";
    text += "result" + std::to_string(i) + ": " + t.typeString() + "\n" +
            formatTensor(t) + "\n";
  }
  std::fflush(stdout);
  if (::write(STDOUT_FILENO, text.data(), text.size()) < 0)
    fail(std::string("cannot print the results: ") + std::strerror(errno));
}

/// What the run reports: its result files and printout (rank 0's, or with
/// local steps every rank's own), and rank 0's timings (every rank waits
/// for the others' exchanges).
void report(const Options &opts, const rt::MpiWorld &world,
            const FunctionSignature &sig, const CallRecord &calls) {
  if (world.rank != 0 && !opts.localSteps)
    return;
  if (!opts.outputDir.empty())
    if (Status s = tools::writeResultFiles(opts.outputDir, calls.results); !s)
      fail(s.message());
  if (opts.print)
    printResults(opts, world, calls.results);
  if (world.rank != 0)
    return;
  if (opts.profile != Profile::None)
    printProfile(sig, calls.profiles, calls.timesMs);
  if (opts.bench > 0)
    std::printf("bench: median_ms=%.4f min_ms=%.4f runs=%d\n",
                tools::median(calls.timesMs),
                *std::min_element(calls.timesMs.begin(), calls.timesMs.end()),
                opts.bench);
}

} // namespace

int main(int argc, char **argv) {
  Options opts = parseArgs(argc, argv);
  rt::MpiWorld world = startRanks(opts);
  if (opts.localSteps)
    useRankFiles(opts, world.rank);

  // Files are read before compiling: a bad one is reported at once.
  Expected<LoadedArguments> loaded = loadArguments(opts.sources);
  if (!loaded)
    fail(loaded.message());
  std::vector<weights::NamedTensor> bound = readBoundWeights(opts.boundWeights);
  if (opts.target == Target::CUDA && !cudaDeviceAvailable())
    fail("no CUDA device");

  Engine engine;
  std::shared_ptr<CompiledModule> module =
      compileModule(engine, opts, world, bound);
  Expected<Function> fn = module->function(pickEntry(*module, opts.entry));
  if (!fn)
    fail(fn.message());
  const FunctionSignature &sig = fn->signature();
  // Arguments named in --weights first, then --input files (or random
  // data) for the rest, in order.
  Expected<std::vector<Tensor>> args = bindArguments(sig, *loaded);
  if (!args)
    fail(args.message());
  if (opts.parallel)
    checkRanksRunAlike(opts, world, sig, *args, bound);

  std::vector<tools::ManagedBuffer> managed;
  std::vector<TensorView> views = argumentViews(opts, *args, managed);
  CallRecord calls = runCalls(*fn, views, opts.bench);
  report(opts, world, sig, calls);
  if (opts.parallel)
    rt::mpiFinalize();
  return 0;
}

//===- Invoke.cpp - calls into compiled code through packed entry points --===//

#include "seqc/Signature.h"

#include "BlockCache.h"
#include "CallAgreement.h"
#include "CallDeadline.h"
#include "CallScope.h"
#include "CudaDriver.h"
#include "StridedCopy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <sys/syscall.h>
#include <unistd.h>

using namespace seqc;

std::string TensorSpec::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return s + dtypeName(dtype) + ">";
}

std::string seqc::cIdentifier(const std::string &name) {
  std::string s;
  for (char c : name)
    s.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    s = "_" + s;
  return s;
}

std::string seqc::packedSymbol(const std::string &name) {
  return "_seqc_packed_" + name;
}

size_t seqc::physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0)
    return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

//===----------------------------------------------------------------------===//
// CPU features
//===----------------------------------------------------------------------===//

namespace {
/// A feature and whether this CPU has it (__builtin_cpu_supports takes
/// only literals, hence the table).
struct CpuFeature {
  const char *name;
  bool present;
};
} // namespace

static const std::vector<CpuFeature> &cpuFeatureTable() {
#if defined(__x86_64__) && defined(__GNUC__)
#define SEQC_FEATURE(name)                                                     \
  { name, __builtin_cpu_supports(name) != 0 }
#else
#define SEQC_FEATURE(name)                                                     \
  { name, false }
#endif
  static const std::vector<CpuFeature> table = {
      SEQC_FEATURE("sse4.2"),
      SEQC_FEATURE("avx"),
      SEQC_FEATURE("avx2"),
      SEQC_FEATURE("fma"),
      SEQC_FEATURE("f16c"),
      SEQC_FEATURE("bmi2"),
      SEQC_FEATURE("avx512f"),
      SEQC_FEATURE("avx512dq"),
      SEQC_FEATURE("avx512bw"),
      SEQC_FEATURE("avx512vl"),
      SEQC_FEATURE("avx512bf16"),
      SEQC_FEATURE("avx512fp16"),
      SEQC_FEATURE("amx-tile"),
      SEQC_FEATURE("amx-bf16"),
      SEQC_FEATURE("avx512vp2intersect"),
  };
#undef SEQC_FEATURE
  return table;
}

const std::vector<std::string> &seqc::knownCpuFeatures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const CpuFeature &f : cpuFeatureTable())
      v.push_back(f.name);
    return v;
  }();
  return names;
}

std::string seqc::requestAmxTileData() {
  // Linux gives a process AMX's tile data state (8 KiB per thread, saved
  // on context switches) only when asked (arch_prctl ARCH_REQ_XCOMP_PERM,
  // kernel 5.16 on); a tile instruction without it dies on SIGILL. The
  // permission is the process's, so threads started later have it too.
  static const std::string refusal = []() -> std::string {
#if defined(__x86_64__) && defined(__linux__)
    constexpr long archReqXcompPerm = 0x1023, xfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, archReqXcompPerm, xfeatureXtiledata) == 0)
      return "";
    return std::string("the kernel refused AMX tile data (arch_prctl "
                       "ARCH_REQ_XCOMP_PERM: ") +
           std::strerror(errno) + ")";
#else
    return "AMX tile data is requested from Linux on x86-64 only";
#endif
  }();
  return refusal;
}

std::string seqc::missingCpuFeatures(const std::vector<std::string> &required) {
  std::string missing;
  for (const std::string &name : required) {
    bool present = false;
    for (const CpuFeature &f : cpuFeatureTable())
      present |= name == f.name && f.present;
    // A CPU with AMX whose kernel does not let this process use the tiles
    // cannot run the code either: the reason follows the name.
    std::string refusal;
    if (present && name == "amx-tile" &&
        !(refusal = requestAmxTileData()).empty())
      present = false;
    if (!present)
      missing += (missing.empty() ? "" : " ") + name +
                 (refusal.empty() ? "" : " (" + refusal + ")");
  }
  return missing;
}

//===----------------------------------------------------------------------===//
// Text form of signatures
//===----------------------------------------------------------------------===//

std::string
seqc::serializeSignatures(const std::vector<FunctionSignature> &sigs) {
  std::ostringstream os;
  auto tensor = [&](const char *kind, const TensorSpec &t) {
    os << kind << ' ' << dtypeName(t.dtype) << ' ' << t.shape.size();
    for (int64_t d : t.shape)
      os << ' ' << d;
    std::string name = t.name;
    for (char &c : name)
      if (c == ' ' || c == '\n' || c == '\t')
        c = '_';
    os << ' ' << (name.empty() ? "_" : name) << '\n';
  };
  for (const FunctionSignature &s : sigs) {
    os << "function " << s.name << '\n';
    if (s.cuda)
      os << "cuda\n";
    for (const TensorSpec &t : s.inputs)
      tensor("input", t);
    for (const TensorSpec &t : s.outputs)
      tensor("output", t);
    if (!s.cpuFeatures.empty()) {
      os << "cpu-features";
      for (const std::string &f : s.cpuFeatures)
        os << ' ' << f;
      os << '\n';
    }
    for (std::string r : s.profileRegions) {
      for (char &c : r)
        if (c == '\n')
          c = ' ';
      os << "region " << r << '\n';
    }
  }
  return os.str();
}

Expected<std::vector<FunctionSignature>>
seqc::parseSignatures(const std::string &text) {
  std::vector<FunctionSignature> sigs;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  auto bad = [&](const std::string &why) {
    return Status::error("signature line " + std::to_string(lineNo) + ": " +
                         why);
  };
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty())
      continue;
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "function") {
      FunctionSignature s;
      if (!(ls >> s.name))
        return bad("missing function name");
      sigs.push_back(std::move(s));
      continue;
    }
    if (kind == "cuda" && !sigs.empty()) {
      sigs.back().cuda = true;
      continue;
    }
    if (kind == "cpu-features" && !sigs.empty()) {
      std::string f;
      while (ls >> f)
        sigs.back().cpuFeatures.push_back(f);
      continue;
    }
    if (kind == "region" && !sigs.empty()) {
      std::string name;
      std::getline(ls >> std::ws, name);
      sigs.back().profileRegions.push_back(name);
      continue;
    }
    if ((kind != "input" && kind != "output") || sigs.empty())
      return bad("unexpected '" + kind + "'");
    TensorSpec t;
    std::string dtype;
    int64_t rank;
    if (!(ls >> dtype >> rank) || rank < 0 || rank > 64)
      return bad("malformed tensor");
    std::optional<DType> d = dtypeFromName(dtype);
    if (!d)
      return bad("unknown element type '" + dtype + "'");
    t.dtype = *d;
    for (int64_t i = 0; i < rank; ++i) {
      int64_t dim;
      if (!(ls >> dim) || dim < -1)
        return bad("malformed dimension");
      t.shape.push_back(dim);
    }
    if (!(ls >> t.name))
      return bad("missing tensor name");
    (kind == "input" ? sigs.back().inputs : sigs.back().outputs).push_back(t);
  }
  return sigs;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

/// An MLIR memref descriptor for rank `r`: allocated and aligned pointers,
/// offset, sizes[r], strides[r], all 8-byte words.
static size_t descriptorWords(size_t rank) { return 3 + 2 * rank; }

/// Copies a rows x cols matrix with element strides (rowStride, colStride)
/// into contiguous `dst`, in 32 x 32 tiles so that both sides stay in cache
/// when neither stride is 1 on the destination's inner axis (a transpose).
template <typename Element>
static void copyMatrix(Element *dst, const Element *src, int64_t rows,
                       int64_t cols, int64_t rowStride, int64_t colStride) {
  if (colStride == 1) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * cols, src + r * rowStride, cols * sizeof(Element));
    return;
  }
  constexpr int64_t tile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += tile)
    for (int64_t c0 = 0; c0 < cols; c0 += tile) {
      int64_t r1 = std::min(rows, r0 + tile), c1 = std::min(cols, c0 + tile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          dst[r * cols + c] = src[r * rowStride + c * colStride];
    }
}

template <typename Element>
static void copyStrided(Element *dst, const Element *src,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides) {
  size_t rank = shape.size();
  int64_t rows = rank >= 2 ? shape[rank - 2] : 1;
  int64_t rowStride = rank >= 2 ? strides[rank - 2] : 0;
  int64_t cols = shape[rank - 1], colStride = strides[rank - 1];
  // The outer dimensions, odometer style; each step one matrix.
  size_t outer = rank >= 2 ? rank - 2 : 0;
  std::vector<int64_t> idx(outer, 0);
  for (;;) {
    int64_t off = 0;
    for (size_t i = 0; i < outer; ++i)
      off += idx[i] * strides[i];
    copyMatrix(dst, src + off, rows, cols, rowStride, colStride);
    dst += rows * cols;
    size_t i = outer;
    while (i-- > 0) {
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
    if (i == static_cast<size_t>(-1))
      return;
  }
}

void seqc::stridedCopy(char *dst, const char *src, size_t elt,
                       const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &strides) {
  if (shape.empty()) {
    std::memcpy(dst, src, elt);
    return;
  }
  for (int64_t d : shape)
    if (d == 0)
      return;
  switch (elt) {
  case 2:
    return copyStrided(reinterpret_cast<uint16_t *>(dst),
                       reinterpret_cast<const uint16_t *>(src), shape, strides);
  case 4:
    return copyStrided(reinterpret_cast<uint32_t *>(dst),
                       reinterpret_cast<const uint32_t *>(src), shape, strides);
  case 8:
    return copyStrided(reinterpret_cast<uint64_t *>(dst),
                       reinterpret_cast<const uint64_t *>(src), shape, strides);
  default:
    break;
  }
  // Any other element size: its bytes are one more, unit-stride dimension.
  std::vector<int64_t> byteShape(shape), byteStrides;
  byteShape.push_back(static_cast<int64_t>(elt));
  for (int64_t stride : strides)
    byteStrides.push_back(stride * static_cast<int64_t>(elt));
  byteStrides.push_back(1);
  copyStrided(reinterpret_cast<uint8_t *>(dst),
              reinterpret_cast<const uint8_t *>(src), byteShape, byteStrides);
}

static std::vector<int64_t>
contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

static bool isContiguous(const std::vector<int64_t> &shape,
                         const std::vector<int64_t> &strides) {
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect)
      return false;
    expect *= shape[i];
  }
  return true;
}

namespace {
/// Copies of arguments a call cannot read in place, freed after the call.
using InputCopies = std::vector<std::unique_ptr<void, void (*)(void *)>>;

/// One result's memref descriptor, as the call wrote it.
struct ResultDescriptor {
  void *allocated;
  const char *aligned;
  int64_t offset;
  std::vector<int64_t> shape, strides;

  /// Reads the descriptor at `words[at]` of a result of rank `rank`.
  static ResultDescriptor read(const std::vector<int64_t> &words, size_t at,
                               size_t rank) {
    auto shapeStart = words.begin() + at + 3;
    return {reinterpret_cast<void *>(words[at]),
            reinterpret_cast<const char *>(words[at + 1]), words[at + 2],
            std::vector<int64_t>(shapeStart, shapeStart + rank),
            std::vector<int64_t>(shapeStart + rank, shapeStart + 2 * rank)};
  }
};
} // namespace

/// Checks argument `a` (`what`) against its declared type; gives its element
/// count and strides.
static Status checkArgument(const TensorView &a, const TensorSpec &spec,
                            const std::string &what, int64_t &numel,
                            std::vector<int64_t> &strides) {
  if (a.dtype != spec.dtype)
    return Status::error(what + " must have element type " +
                         dtypeName(spec.dtype) + " but has " +
                         dtypeName(a.dtype));
  if (a.shape.size() != spec.shape.size())
    return Status::error(
        what + " must have rank " + std::to_string(spec.shape.size()) + " (" +
        spec.typeString() + ") but has rank " + std::to_string(a.shape.size()));
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (a.shape[d] < 0)
      return Status::error(what + " has negative size " +
                           std::to_string(a.shape[d]) + " in dimension " +
                           std::to_string(d));
    if (spec.shape[d] >= 0 && spec.shape[d] != a.shape[d])
      return Status::error(what + " must be " + spec.typeString() +
                           " but dimension " + std::to_string(d) + " is " +
                           std::to_string(a.shape[d]));
  }
  std::optional<int64_t> n = checkedNumel(a.shape);
  if (!n)
    return Status::error(what + " has too many elements");
  if (!a.data && *n > 0)
    return Status::error(what + " has no data");
  strides = a.effectiveStrides();
  if (strides.size() != a.shape.size())
    return Status::error(what + " has " + std::to_string(strides.size()) +
                         " strides for rank " + std::to_string(a.shape.size()));
  numel = *n;
  return Status::ok();
}

/// The buffer the call reads argument `a` from. Compiled functions take
/// identity-layout buffers (their code derives strides from sizes), so a
/// strided view is copied in C order (and `strides` become contiguous ones);
/// and the GPU's kernels read inputs from managed memory (the caller's may
/// be pageable host memory a GPU cannot reach). A contiguous host input
/// (contiguous and managed, for the GPU) is used in place.
static Expected<const void *>
callableInput(const TensorView &a, const std::string &what, int64_t numel,
              std::vector<int64_t> &strides, bool cudaMemory,
              InputCopies &copies) {
  bool contiguous = isContiguous(a.shape, strides);
  if (cudaMemory ? contiguous && rt::cudaIsManaged(a.data) : contiguous)
    return a.data;
  size_t bytes = static_cast<size_t>(numel) * dtypeSize(a.dtype);
  void *copy = nullptr;
  if (cudaMemory) {
    std::string error;
    copy = rt::cudaManagedAlloc(bytes, error);
    if (!copy)
      return Status::error(error);
    copies.emplace_back(copy, &rt::cudaManagedFree);
  } else {
    copy = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (!copy)
      return Status::error(what + ": out of memory copying a strided view (" +
                           std::to_string(bytes) + " bytes)");
    copies.emplace_back(copy, &std::free);
  }
  if (contiguous)
    std::memcpy(copy, a.data, bytes);
  else
    stridedCopy(static_cast<char *>(copy), static_cast<const char *>(a.data),
                dtypeSize(a.dtype), a.shape, strides);
  strides = contiguousStrides(a.shape);
  return static_cast<const void *>(copy);
}

/// A memref descriptor (allocated and aligned pointers, offset 0, sizes,
/// strides) appended to `words`.
static void appendDescriptor(std::vector<int64_t> &words, const void *data,
                             const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &strides) {
  words.push_back(reinterpret_cast<intptr_t>(data));
  words.push_back(reinterpret_cast<intptr_t>(data));
  words.push_back(0);
  words.insert(words.end(), shape.begin(), shape.end());
  words.insert(words.end(), strides.begin(), strides.end());
}

static void recordStats(const rt::CallScope &scope, CallStats &stats) {
  stats.regionSeconds.clear();
  for (uint64_t ns : scope.regionNanos())
    stats.regionSeconds.push_back(ns * 1e-9);
  stats.regionCalls = scope.regionCalls();
  stats.allocatedBytes = scope.allocatedBytes();
  stats.peakBytes = scope.peakBytes();
}

/// Result `out` of a finished call. A buffer the call allocated for this
/// result alone becomes the result tensor without a copy (`adopted` lists
/// those taken); anything else (an input, a constant, a view of another
/// result) is copied.
static Expected<Tensor> takeResult(const TensorSpec &out,
                                   const ResultDescriptor &d,
                                   rt::CallScope &scope,
                                   std::vector<const void *> &adopted,
                                   bool cudaMemory) {
  size_t elt = dtypeSize(out.dtype);
  std::optional<int64_t> numel = checkedNumel(d.shape);
  if (!numel)
    return Status::error("result has an invalid shape");
  size_t bytes = static_cast<size_t>(*numel) * elt;
  bool contiguous = isContiguous(d.shape, d.strides);
  size_t blockSize = scope.sizeOf(d.allocated);
  const char *begin = d.aligned + d.offset * static_cast<int64_t>(elt);
  const char *block = static_cast<const char *>(d.allocated);
  bool ownBlock = blockSize && std::find(adopted.begin(), adopted.end(),
                                         d.allocated) == adopted.end();
  if (contiguous && ownBlock && begin >= block &&
      begin + bytes <= block + blockSize) {
    adopted.push_back(d.allocated);
    scope.release(d.allocated);
    std::shared_ptr<void> owner(d.allocated, [blockSize, cudaMemory](void *p) {
      if (cudaMemory)
        rt::cudaManagedFree(p); // managed memory stays the result's
      else
        rt::releaseBlock(p, blockSize);
    });
    return Tensor::adopt(out.dtype, d.shape, const_cast<char *>(begin), owner);
  }
  Expected<Tensor> t = Tensor::zeros(out.dtype, d.shape);
  if (!t)
    return Status::error(t.message());
  if (contiguous)
    std::memcpy(t->data(), begin, bytes);
  else
    stridedCopy(static_cast<char *>(t->data()), begin, elt, d.shape, d.strides);
  return t.take();
}

/// The words of a call's memref descriptors: the arguments', then room for
/// the results'.
struct CallDescriptors {
  std::vector<int64_t> words;
  size_t resultStart = 0;
  /// Copies of arguments the call cannot read in place.
  InputCopies copies;
};

/// Checks `args` against `sig` and lays out their descriptors.
static Status describeArguments(PackedFn fn, const FunctionSignature &sig,
                                const std::vector<TensorView> &args,
                                bool cudaMemory, CallDescriptors &call) {
  if (!fn)
    return Status::error("@" + sig.name + " has no compiled code");
  if (args.size() != sig.inputs.size())
    return Status::error(
        "@" + sig.name + " takes " + std::to_string(sig.inputs.size()) +
        " arguments but was given " + std::to_string(args.size()));
  size_t total = 0;
  for (const TensorSpec &in : sig.inputs)
    total += descriptorWords(in.shape.size());
  for (const TensorSpec &out : sig.outputs)
    total += descriptorWords(out.shape.size());
  call.words.reserve(total);
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorSpec &spec = sig.inputs[i];
    std::string what = "argument " + std::to_string(i) + " (" + spec.name + ")";
    int64_t numel = 0;
    std::vector<int64_t> strides;
    if (Status ok = checkArgument(args[i], spec, what, numel, strides); !ok)
      return ok;
    Expected<const void *> data =
        callableInput(args[i], what, numel, strides, cudaMemory, call.copies);
    if (!data)
      return data.status();
    appendDescriptor(call.words, *data, args[i].shape, strides);
  }
  call.resultStart = call.words.size();
  call.words.resize(total, 0);
  return Status::ok();
}

Expected<std::vector<Tensor>>
seqc::invokePacked(PackedFn fn, const FunctionSignature &sig,
                   const std::vector<TensorView> &args,
                   const CallOptions &options) {
  // Armed first: agreeing to call is an exchange too.
  rt::CallDeadline deadline(options.communicator,
                            options.communicator ? options.timeoutSeconds : 0,
                            sig.name);
  CallDescriptors call;
  Status described = describeArguments(fn, sig, args, options.cudaMemory, call);
  if (options.communicator) {
    std::string refused = rt::agreeOnCall(
        options.communicator,
        {options.moduleIdentity, sig.name, !described, described.message()});
    if (!refused.empty())
      return Status::error(refused);
  }
  if (!described) // (with ranks, its failure made them disagree above)
    return described;

  std::vector<int64_t> &words = call.words;
  std::vector<void *> packed;
  packed.reserve(call.resultStart + 1);
  for (size_t w = 0; w < call.resultStart; ++w)
    packed.push_back(&words[w]);
  if (!sig.outputs.empty())
    packed.push_back(&words[call.resultStart]);

  rt::CallScope scope(options.memoryLimit, options.cudaMemory);
  if (options.stats)
    scope.enableProfile(sig.profileRegions.size());
  if (!scope.run(fn, packed.data()))
    return Status::error(scope.error());
  if (options.stats)
    recordStats(scope, *options.stats);

  std::vector<Tensor> results;
  results.reserve(sig.outputs.size());
  size_t at = call.resultStart;
  std::vector<const void *> adopted;
  for (const TensorSpec &out : sig.outputs) {
    size_t rank = out.shape.size();
    Expected<Tensor> result =
        takeResult(out, ResultDescriptor::read(words, at, rank), scope, adopted,
                   options.cudaMemory);
    if (!result)
      return result.status();
    results.push_back(result.take());
    at += descriptorWords(rank);
  }
  return results;
}

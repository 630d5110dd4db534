//===- Strategy.cpp - one plan per op, chosen once for every target -------===//
//
// The cost model. Per step and head, the chunked form of a state of N x D
// (SSD: N x P; linear attention: K x V) costs about
//
//   2 Q D        the intra-chunk masked product (Q x Q scores times D values)
//   c N D / Q    the state work of the chunk (decaying and writing the
//                state, the chunk-state product) shared by its Q steps
//
// which is least at Q = sqrt(c N / 2). `c` is the target's stateCost: on a
// CPU (c ~ 16, measured with AVX-512) that gives sqrt(8 N); on a GPU the
// tensor cores make the intra-chunk product cheap next to the serial pass
// over chunks, so c is larger and Q is as large as the kernels' shared
// memory allows. Q is a power of two (whole vectors, whole tiles) within the
// target's chunk limits and, on a CPU, small enough that a task's chunk
// working set stays in half the L2 cache.
//
// The recurrence itself does a step's useful work and no more (linear
// attention 2 N D per step with its decay deferred, CPU/CpuLinearAttention
// .cpp; the delta rule 3 N D), where the chunked form adds the Q x Q
// products. What it lacks is parallelism over the steps, which a GPU needs
// and a CPU, with a task per (batch, head), does not, and it wants its
// state close: on a CPU the recurrence is the plan for those families
// (linear attention with a scalar decay or none, no normalizer or bonus;
// the delta rule) when the state fits in half of L1 and no chunk_size asks
// for chunks.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Strategy.h"
#include "seqc/Passes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/TargetParser/Host.h"

#include <unistd.h>

#include <cmath>
#include <limits>

using namespace mlir;
using namespace seqc;

namespace {

/// What the cost model needs of one op.
struct PlanInputs {
  ChunkedFamily family;
  /// Static sequence length, or dynamic.
  int64_t steps;
  /// The state's rows (SSD: N, linear attention: K) and columns (P, V).
  int64_t stateDim, valueDim;
  int64_t hint;
  bool causal = true;
  bool perKeyDecay = false;
  /// Linear attention's RWKV-6 bonus (recurrent plans only).
  bool bonus = false;
  /// Linear attention's normalizer (q' . sum k').
  bool normalize = false;
  /// Whether anything reads the op's output (not in the state-only runs
  /// of seq-distribute-steps).
  bool outputUsed = true;
};

/// A chunk_size hint as a signed size (hints past 2^63 are as large).
int64_t hintOf(uint64_t hint) {
  return static_cast<int64_t>(
      std::min<uint64_t>(hint, std::numeric_limits<int64_t>::max()));
}

std::optional<PlanInputs> inputsOf(Operation *op) {
  if (auto ssd = dyn_cast<seq::SsdOp>(op)) {
    auto x = cast<RankedTensorType>(ssd.getX().getType());
    auto bm = cast<RankedTensorType>(ssd.getB().getType());
    return PlanInputs{ChunkedFamily::Ssd, x.getDimSize(1), bm.getDimSize(3),
                      x.getDimSize(3), hintOf(ssd.getChunkSize())};
  }
  if (auto la = dyn_cast<seq::LinearAttentionOp>(op)) {
    auto q = cast<RankedTensorType>(la.getQ().getType());
    auto v = cast<RankedTensorType>(la.getV().getType());
    PlanInputs in{ChunkedFamily::LinearAttention, q.getDimSize(1),
                  q.getDimSize(3), v.getDimSize(3), hintOf(la.getChunkSize())};
    in.causal = la.getCausal();
    in.perKeyDecay =
        la.getDecay() &&
        cast<RankedTensorType>(la.getDecay().getType()).getRank() == 4;
    in.bonus = static_cast<bool>(la.getBonus());
    in.normalize = la.getNormalize();
    in.outputUsed = !la.getO().use_empty();
    return in;
  }
  if (auto delta = dyn_cast<seq::DeltaRuleOp>(op)) {
    auto q = cast<RankedTensorType>(delta.getQ().getType());
    auto v = cast<RankedTensorType>(delta.getV().getType());
    PlanInputs in{ChunkedFamily::DeltaRule, q.getDimSize(1), q.getDimSize(3),
                  v.getDimSize(3), hintOf(delta.getChunkSize())};
    in.perKeyDecay =
        delta.getDecay() &&
        cast<RankedTensorType>(delta.getDecay().getType()).getRank() == 4;
    return in;
  }
  return std::nullopt;
}

/// Why `target` has no chunked kernel for the op `in` describes ("" when
/// it has one): the recurrence is then its plan.
std::string missingChunkedKernel(const PlanInputs &in,
                                 const TargetDescription &target) {
  if (in.bonus)
    return "the chunked kernels do not cover bonus (plan recurrent does)";
  if (in.family == ChunkedFamily::DeltaRule) {
    if (!target.chunkedDeltaRule)
      return llvm::formatv("the {0} has no chunked delta-rule kernel (plan "
                           "recurrent does)",
                           target.name());
    if (in.perKeyDecay)
      return llvm::formatv("the {0}'s chunked delta-rule kernel does not "
                           "cover per-key decay (plan recurrent does)",
                           target.name());
    return "";
  }
  if (in.perKeyDecay && !target.chunkedPerKeyDecay)
    return llvm::formatv("the {0}'s chunked kernel does not cover per-key "
                         "decay (plan recurrent does)",
                         target.name());
  return "";
}

/// Whether `target`'s recurrence outruns its chunked form for the op `in`
/// describes: a state small enough for the target's recurrent kernels to
/// keep where they run at their best (recurrentStateBytes), for the
/// families whose recurrence does a step's useful work and no more (linear
/// attention with a scalar decay or none and no normalizer or bonus; the
/// delta rule with a scalar decay). A chunk_size hint asks for chunks.
/// Linear attention's state alone (a state-only run) is one product per
/// chunk, k'^T V, where the recurrence still makes a pass over the state
/// per step: chunks then (T 4096 H 16 K = V = 64 on a 2-core Zen 5, 2.4 ms
/// against 3.6). The delta rule's chunks still solve their steps'
/// corrections (7.7 ms against the recurrence's 5.3).
bool recurrenceOutrunsChunks(const PlanInputs &in,
                             const TargetDescription &target) {
  if (in.hint > 0 || in.perKeyDecay || ShapedType::isDynamic(in.stateDim) ||
      ShapedType::isDynamic(in.valueDim))
    return false;
  bool lean = in.family == ChunkedFamily::DeltaRule ||
              (in.family == ChunkedFamily::LinearAttention && !in.normalize &&
               !in.bonus && in.outputUsed);
  return lean && 4 * in.stateDim * in.valueDim <= target.recurrentStateBytes();
}

int64_t orOne(int64_t dim) {
  return ShapedType::isDynamic(dim) ? 1 : std::max<int64_t>(dim, 1);
}

/// Bytes a CPU task touches per chunk: the Q x Q mask, the chunk's Q x (N +
/// D) operand tiles and the N x D state, in f32.
int64_t chunkWorkingSet(int64_t q, const PlanInputs &in) {
  int64_t n = orOne(in.stateDim), d = orOne(in.valueDim);
  return 4 * (q * q + q * (n + d) + n * d);
}

/// The intra-chunk work per step and value channel, in units of Q: 2 for
/// the masked product (scores, then times the values); the delta rule
/// adds k'k'^T, the forward substitution over [W | U0] (Q (K + V) / 2)
/// and its product with the values, about 5 in all.
double intraChunkCost(ChunkedFamily family) {
  return family == ChunkedFamily::DeltaRule ? 5.0 : 2.0;
}

/// The cost model's chunk size (no hint).
int64_t modelChunk(const PlanInputs &in, const TargetDescription &target,
                   const ChunkLimits &limits) {
  double best = std::sqrt(target.stateCost * orOne(in.stateDim) /
                          intraChunkCost(in.family));
  // The delta rule's costlier chunks make 16-step ones pay on a CPU; the
  // others start at 32 (measured: bench/seqc-bench --only chunk).
  int64_t q = in.family == ChunkedFamily::DeltaRule ? 16 : 32;
  while (q < 128 && 2 * q <= limits.max && q * 1.41 < best)
    q *= 2;
  if (target.kind == TargetDescription::Kind::CPU)
    while (q > 32 && chunkWorkingSet(q, in) > target.l2Bytes / 2)
      q /= 2;
  return std::clamp(q, limits.min, limits.max);
}

/// The allowed chunk size nearest to `hint` (from below, at least min).
int64_t nearestAllowed(int64_t hint, const ChunkLimits &limits) {
  int64_t q = std::clamp(hint, limits.min, limits.max);
  q -= q % limits.multiple;
  return std::max(q, limits.min);
}

std::string describeLimits(const ChunkLimits &limits) {
  if (limits.multiple > 1)
    return llvm::formatv("{0} to {1} steps, multiples of {2}", limits.min,
                         limits.max, limits.multiple);
  return llvm::formatv("{0} to {1} steps", limits.min, limits.max);
}

} // namespace

TargetDescription TargetDescription::cpu(int64_t vectorWidth, int64_t l1Bytes,
                                         int64_t l2Bytes) {
  TargetDescription t;
  t.kind = Kind::CPU;
  t.vectorWidth = vectorWidth;
  t.l1Bytes = l1Bytes;
  t.l2Bytes = l2Bytes;
  t.stateCost = 16;
  // The CPU kernels pad a chunk to whole vectors themselves; the Q x Q mask
  // and the operand tiles live on the task's stack, which bounds Q (a
  // 2048-step chunk would need over 16 MB).
  t.ssdChunks = t.linearAttentionChunks = t.deltaRuleChunks =
      ChunkLimits{1, 256, 1};
  t.chunkedPerKeyDecay = false;
  t.chunkedDeltaRule = true;
  return t;
}

int64_t seqc::cpuVectorLanes(llvm::function_ref<bool(StringRef)> has) {
  if (has("avx512f"))
    return 16;
  return has("avx") ? 8 : 4;
}

LogicalResult seqc::checkCpuVectorWidth(Operation *root, StringRef pass,
                                        int64_t lanes) {
  if (lanes == 0 || lanes == 4 || lanes == 8 || lanes == 16)
    return success();
  return root->emitError() << pass << ": vector-width " << lanes
                           << " is not 4, 8 or 16 (the f32 lanes of SSE, AVX "
                              "or AVX-512 vectors; 0: the host's)";
}

TargetDescription TargetDescription::host() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto has = [&](StringRef f) { return features.lookup(f); };
  int64_t lanes = cpuVectorLanes(has);
  int64_t l1 = 32 * 1024, l2 = 1024 * 1024;
#ifdef _SC_LEVEL1_DCACHE_SIZE
  if (long v = sysconf(_SC_LEVEL1_DCACHE_SIZE); v > 0)
    l1 = v;
  if (long v = sysconf(_SC_LEVEL2_CACHE_SIZE); v > 0)
    l2 = v;
#endif
  TargetDescription t = cpu(lanes, l1, l2);
  t.avx512bf16 = has("avx512bf16");
  t.amx = has("amx-tile") && has("amx-bf16");
  return t;
}

TargetDescription TargetDescription::gpu(int64_t smVersion) {
  TargetDescription t;
  t.kind = Kind::GPU;
  t.smVersion = smVersion;
  t.tensorCores = smVersion >= 80;
  // Tiles are staged in static shared memory (workgroup attributions),
  // 48 KB per block on every sm_80+ chip.
  t.sharedBytes = 48 * 1024;
  t.stateCost = 256;
  // Chunks are whole tensor-core tiles (16 rows). The largest chunk is the
  // largest whose tiles fit in shared memory: the chunked form's output
  // kernel (GPU/GpuChunked.cpp) holds Q^2 + Q (K_decay + 98) + 1024 floats,
  // K_decay = 1 for a scalar decay (Q = 64: 44.8 KiB) and up to 128 for
  // linear attention's per-key decays (Q = 32: 36.3 KiB; Q = 64 would need
  // 76.5 KiB), so linear attention, which may have them, stops at 32.
  t.ssdChunks = ChunkLimits{16, 64, 16};
  t.linearAttentionChunks = ChunkLimits{16, 32, 16};
  // The delta rule's scalar decay keeps linear attention's output kernel
  // at SSD's 44.8 KiB (Q = 64), plus the rows' norms; its W / U0 solve
  // holds 33.8 KiB at Q = 64.
  t.deltaRuleChunks = ChunkLimits{16, 64, 16};
  t.chunkedDeltaRule = true;
  return t;
}

std::optional<int64_t> seqc::parseChip(StringRef chip) {
  if (!chip.consume_front("sm_"))
    return std::nullopt;
  chip.consume_back("a");
  int64_t version;
  if (chip.empty() || chip.getAsInteger(10, version) || version < 10 ||
      version > 1000)
    return std::nullopt;
  return version;
}

FailureOr<int64_t> seqc::chipVersion(Location loc, StringRef chip) {
  if (std::optional<int64_t> sm = parseChip(chip))
    return *sm;
  return emitError(loc) << "unknown chip '" << chip
                        << "' (expected sm_<version>, such as sm_80 or sm_90a)";
}

std::optional<seq::PlanAttr> seqc::choosePlan(Operation *op,
                                              const TargetDescription &target) {
  std::optional<PlanInputs> in = inputsOf(op);
  if (!in)
    return std::nullopt;
  MLIRContext *ctx = op->getContext();
  if (!in->causal)
    return seq::PlanAttr::get(ctx, seq::PlanKind::global, 0);
  bool shortSequence =
      !ShapedType::isDynamic(in->steps) && in->steps < kRecurrentBelowSteps;
  bool noChunkedKernel = !missingChunkedKernel(*in, target).empty();
  if (shortSequence || noChunkedKernel || recurrenceOutrunsChunks(*in, target))
    return seq::PlanAttr::get(ctx, seq::PlanKind::recurrent, 0);

  const ChunkLimits &limits = target.chunkLimits(in->family);
  int64_t q = modelChunk(*in, target, limits);
  if (in->hint > 0) {
    q = nearestAllowed(in->hint, limits);
    // The chunk size never changes the result, only the speed: a hint the
    // kernels cannot take is adjusted, and said.
    if (q != in->hint)
      op->emitRemark() << "chunk_size " << in->hint << " taken as " << q
                       << ": the " << target.name() << " kernels' chunks are "
                       << describeLimits(limits);
  }
  return seq::PlanAttr::get(ctx, seq::PlanKind::chunked, q);
}

int64_t seqc::hostModelChunkSize(ChunkedFamily family, int64_t stateDim,
                                 int64_t valueDim) {
  PlanInputs in{family, ShapedType::kDynamic, stateDim, valueDim, 0};
  TargetDescription host = TargetDescription::host();
  if (recurrenceOutrunsChunks(in, host))
    return 0;
  return modelChunk(in, host, host.chunkLimits(family));
}

/// Why `target`'s kernels cannot run `plan` for `op`, or "" when they can.
static std::string planUnsupportedReason(Operation *op, seq::PlanAttr plan,
                                         const TargetDescription &target) {
  std::optional<PlanInputs> in = inputsOf(op);
  if (!in || plan.getKind() != seq::PlanKind::chunked)
    return "";
  const ChunkLimits &limits = target.chunkLimits(in->family);
  if (!limits.allows(plan.getChunk()))
    return llvm::formatv("plan chunked {0} is outside the {1} kernels' "
                         "chunk sizes ({2})",
                         plan.getChunk(), target.name(),
                         describeLimits(limits));
  return missingChunkedKernel(*in, target);
}

FailureOr<seq::PlanAttr> seqc::followPlan(Operation *op,
                                          const TargetDescription &target,
                                          PatternRewriter &rewriter) {
  auto plan = op->getAttrOfType<seq::PlanAttr>(seq::kPlanAttrName);
  if (!plan) {
    std::optional<seq::PlanAttr> chosen = choosePlan(op, target);
    if (!chosen)
      return rewriter.notifyMatchFailure(op, "has no choice of plans");
    plan = *chosen;
  }
  if (std::string why = planUnsupportedReason(op, plan, target); !why.empty())
    return rewriter.notifyMatchFailure(op, why);
  return plan;
}

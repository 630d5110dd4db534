//===- SeqOps.cpp - shape signatures and verifiers of the seq ops ---------===//
//
// Each op declares its shapes once (buildShapeSignature); the generic
// signature verifier checks ranks, element types and every shared dimension,
// and each op's verify() adds the rules that are not about shapes.
//
//===----------------------------------------------------------------------===//

#include "Seq/SeqDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace seqc::seq;

static int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

/// `prefix0, prefix1, ...` named dimensions.
static SmallVector<DimExpr> numberedDims(StringRef prefix, int64_t count) {
  SmallVector<DimExpr> dims;
  for (int64_t i = 0; i < count; ++i)
    dims.push_back(DimExpr((prefix + Twine(i)).str()));
  return dims;
}

static SmallVector<DimExpr> concat(ArrayRef<DimExpr> a, ArrayRef<DimExpr> b) {
  SmallVector<DimExpr> r(a.begin(), a.end());
  r.append(b.begin(), b.end());
  return r;
}

//===----------------------------------------------------------------------===//
// Packed sequences and state checkpoints (SPEC section 1), shared by every op
// with a state
//===----------------------------------------------------------------------===//

/// The leading dimension of `init` and `last`: the batch, or with
/// `segments` the number of sequences.
static DimExpr stateLead(Value segments) {
  return segments ? DimExpr("S") : DimExpr("B");
}

/// `segments`: S + 1 offsets into the time axis.
static void addSegments(ShapeSignature &sig, Value segments,
                        StringRef count = "S") {
  sig.add("segments", segments, {DimExpr(count.str(), 1, 1)},
          ElementKind::Int32);
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += "x";
    s += ShapedType::isDynamic(d) ? "?" : std::to_string(d);
  }
  return s;
}

/// A packed batch is one batch row: `steps` is the op's first operand
/// (`B x T x ...`).
static LogicalResult verifyPackedBatch(Operation *op, Value segments,
                                       Value steps) {
  if (!segments)
    return success();
  int64_t batch = cast<RankedTensorType>(steps.getType()).getDimSize(0);
  if (!ShapedType::isDynamic(batch) && batch != 1)
    return op->emitOpError()
           << "segments requires B = 1 (the sequences are packed along T), "
           << "but B = " << batch;
  return success();
}

/// `checkpoints` is present exactly when `checkpoint_every` > 0 and is
/// `last`'s shape with the checkpoint count after its leading dimension:
/// `B x ceil(T/n) x ...`, or `S x ceil(maxlen/n) x ...` with segments (the
/// longest sequence is known only at run time).
static LogicalResult verifyCheckpoints(Operation *op) {
  auto stateful = cast<StatefulOpInterface>(op);
  auto every = static_cast<int64_t>(stateful.getCheckpointEvery());
  Value checkpoints = stateful.getCheckpoints();
  if (every < 0)
    return op->emitOpError() << "checkpoint_every must be >= 0 (0: no "
                             << "checkpoints), but is " << every;
  if (every == 0 && checkpoints)
    return op->emitOpError() << "has a checkpoints result but "
                             << "checkpoint_every is 0";
  if (every > 0 && !checkpoints)
    return op->emitOpError() << "checkpoint_every = " << every
                             << " needs a checkpoints result after last";
  if (!checkpoints)
    return success();
  auto type = cast<RankedTensorType>(checkpoints.getType());
  auto lastType = cast<RankedTensorType>(stateful.getLast().getType());
  if (!type.getElementType().isF32())
    return op->emitOpError()
           << "checkpoints must have element type f32 "
           << "(states stay f32), but has " << type.getElementType();
  auto steps = cast<RankedTensorType>(op->getOperand(0).getType());
  bool packed = cast<PackedSequencesOpInterface>(op).getSegments() != nullptr;
  int64_t count = ShapedType::kDynamic;
  if (!packed && !ShapedType::isDynamic(steps.getDimSize(1)))
    count =
        steps.getDimSize(1) == 0 ? 0 : (steps.getDimSize(1) - 1) / every + 1;
  SmallVector<int64_t> expected(lastType.getShape());
  expected.insert(expected.begin() + 1, count);
  bool matches = type.getRank() == static_cast<int64_t>(expected.size());
  for (int64_t i = 0; matches && i < type.getRank(); ++i)
    matches = ShapedType::isDynamic(expected[i]) ||
              ShapedType::isDynamic(type.getDimSize(i)) ||
              expected[i] == type.getDimSize(i);
  if (matches)
    return success();
  auto diag = op->emitOpError()
              << "checkpoints must have shape " << shapeString(expected)
              << " (last's shape with ";
  if (packed)
    diag << "ceil(longest sequence / " << every << ")";
  else
    diag << "ceil(T / checkpoint_every) = ceil(" << steps.getDimSize(1) << " / "
         << every << ")";
  return diag << " checkpoints after its first dimension), but has shape "
              << shapeString(type.getShape());
}

/// The rules of SPEC section 1 every op with a state follows.
static LogicalResult verifySequences(Operation *op) {
  Value segments = cast<PackedSequencesOpInterface>(op).getSegments();
  if (failed(verifyPackedBatch(op, segments, op->getOperand(0))))
    return failure();
  if (isa<StatefulOpInterface>(op))
    return verifyCheckpoints(op);
  return success();
}

//===----------------------------------------------------------------------===//
// linear_scan
//===----------------------------------------------------------------------===//

void LinearScanOp::buildShapeSignature(ShapeSignature &sig) {
  SmallVector<DimExpr> stateDims =
      numberedDims("S", std::max<int64_t>(rankOf(getA()) - 2, 0));
  SmallVector<DimExpr> full = concat({"B", "T"}, stateDims);
  SmallVector<DimExpr> state = concat({stateLead(getSegments())}, stateDims);
  sig.add("a", getA(), full);
  sig.add("b", getB(), full);
  sig.add("init", getInit(), state, ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("h", getH(), full);
  sig.add("last", getLast(), state, ElementKind::State);
}

LogicalResult LinearScanOp::verify() {
  if (rankOf(getA()) < 2)
    return emitOpError() << "a must have rank >= 2 (B x T x S...), but has "
                         << "rank " << rankOf(getA());
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// associative_scan
//===----------------------------------------------------------------------===//

void AssociativeScanOp::buildShapeSignature(ShapeSignature &sig) {
  if (getInputs().empty())
    return;
  SmallVector<DimExpr> dims = numberedDims("d", rankOf(getInputs()[0]));
  // A packed batch scans along T = dimension 1 of a 1 x T x ... batch.
  if (getSegments() && dims.size() >= 2) {
    dims[0] = DimExpr("B");
    dims[1] = DimExpr("T");
  }
  addSegments(sig, getSegments());
  for (auto [i, v] : llvm::enumerate(getInputs()))
    sig.add(("input #" + Twine(i)).str(), v, dims, ElementKind::Any);
  for (auto [i, v] : llvm::enumerate(getOutputs()))
    sig.add(("result #" + Twine(i)).str(), v, dims, ElementKind::Any);
}

LogicalResult AssociativeScanOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  if (getInputs().size() != getOutputs().size())
    return emitOpError() << "has " << getInputs().size() << " inputs but "
                         << getOutputs().size() << " results";
  int64_t rank = rankOf(getInputs()[0]);
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= rank)
    return emitOpError() << "dim = " << dim
                         << " is out of range for inputs of rank " << rank;
  if (getSegments() && (rank < 2 || dim != 1))
    return emitOpError() << "segments requires dim = 1 of inputs of rank >= 2 "
                         << "(1 x T x ...), but dim = " << dim
                         << " and rank = " << rank;
  if (failed(verifySequences(*this)))
    return failure();
  for (auto [i, in, out] : llvm::enumerate(getInputs(), getOutputs())) {
    Type elt = cast<RankedTensorType>(in.getType()).getElementType();
    if (!elt.isIntOrFloat())
      return emitOpError() << "input #" << i
                           << " must have an integer or float element type, "
                           << "but has " << elt;
    Type outElt = cast<RankedTensorType>(out.getType()).getElementType();
    if (outElt != elt)
      return emitOpError() << "result #" << i << " has element type " << outElt
                           << " but input #" << i << " has " << elt;
  }
  return verifyShapeSignature(*this);
}

LogicalResult AssociativeScanOp::verifyRegions() {
  Block &body = getCombiner().front();
  size_t n = getInputs().size();
  if (body.getNumArguments() != 2 * n)
    return emitOpError() << "combiner must take " << 2 * n
                         << " scalars (the prefix, then the next element), "
                         << "but takes " << body.getNumArguments();
  for (auto [i, in] : llvm::enumerate(getInputs())) {
    Type elt = cast<RankedTensorType>(in.getType()).getElementType();
    for (size_t which : {i, i + n}) {
      Type argType = body.getArgument(which).getType();
      if (argType != elt)
        return emitOpError()
               << "combiner argument #" << which << " has type " << argType
               << " but input #" << i << " has element type " << elt;
    }
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "combiner must end with seq.yield";
  if (yield.getValues().size() != n)
    return yield.emitOpError() << "yields " << yield.getValues().size()
                               << " values but the scan has " << n << " inputs";
  for (auto [i, in] : llvm::enumerate(getInputs())) {
    Type elt = cast<RankedTensorType>(in.getType()).getElementType();
    Type yielded = yield.getValues()[i].getType();
    if (yielded != elt)
      return yield.emitOpError()
             << "value #" << i << " has type " << yielded << " but input #" << i
             << " has element type " << elt;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// selective_scan
//===----------------------------------------------------------------------===//

void SelectiveScanOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("u", getU(), {"B", "T", "D"});
  sig.add("delta", getDelta(), {"B", "T", "D"});
  sig.add("A", getA(), {"D", "N"}, ElementKind::Param);
  sig.add("B", getB(), {"B", "T", "G", "N"});
  sig.add("C", getC(), {"B", "T", "G", "N"});
  sig.add("skip", getSkip(), {"D"}, ElementKind::Param);
  sig.add("gate", getGate(), {"B", "T", "D"});
  sig.add("delta_bias", getDeltaBias(), {"D"}, ElementKind::Param);
  DimExpr lead = stateLead(getSegments());
  sig.add("init", getInit(), {lead, "D", "N"}, ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("y", getY(), {"B", "T", "D"});
  sig.add("last", getLast(), {lead, "D", "N"}, ElementKind::State);
  sig.requireDivisible("D", "G");
}

LogicalResult SelectiveScanOp::verify() {
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

/// A `chunk_size` hint: 0 (the compiler chooses) or a chunk length.
static LogicalResult verifyChunkSize(Operation *op, int64_t chunk) {
  if (chunk >= 0)
    return success();
  return op->emitOpError() << "chunk_size must be >= 0 (0: the compiler "
                           << "chooses), but is " << chunk;
}

//===----------------------------------------------------------------------===//
// ssd
//===----------------------------------------------------------------------===//

void SsdOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("x", getX(), {"B", "T", "H", "P"});
  sig.add("dt", getDt(), {"B", "T", "H"});
  sig.add("A", getA(), {"H"}, ElementKind::Param);
  sig.add("B", getB(), {"B", "T", "G", "N"});
  sig.add("C", getC(), {"B", "T", "G", "N"});
  // One D per head, or per head and channel (mamba_ssm's D_has_hdim).
  if (getSkip() && rankOf(getSkip()) == 2)
    sig.add("skip", getSkip(), {"H", "P"}, ElementKind::Param);
  else
    sig.add("skip", getSkip(), {"H"}, ElementKind::Param);
  sig.add("gate", getGate(), {"B", "T", "H", "P"});
  sig.add("dt_bias", getDtBias(), {"H"}, ElementKind::Param);
  DimExpr lead = stateLead(getSegments());
  sig.add("init", getInit(), {lead, "H", "P", "N"}, ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("y", getY(), {"B", "T", "H", "P"});
  sig.add("last", getLast(), {lead, "H", "P", "N"}, ElementKind::State);
  sig.requireDivisible("H", "G");
}

LogicalResult SsdOp::verify() {
  if (failed(verifyChunkSize(*this, getChunkSizeAttr().getInt())))
    return failure();
  float dtMin = getDtMin().convertToFloat(),
        dtMax = getDtMax().convertToFloat();
  if (std::isnan(dtMin) || std::isnan(dtMax) || dtMin > dtMax)
    return emitOpError() << "dt_min = " << dtMin << " and dt_max = " << dtMax
                         << " are not a range (dt_min <= dt_max)";
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

bool SsdOp::clampsDt() {
  return getDtMin().convertToFloat() != 0.0f ||
         getDtMax().convertToFloat() != std::numeric_limits<float>::infinity();
}

//===----------------------------------------------------------------------===//
// semiseparable_mask
//===----------------------------------------------------------------------===//

void SemiseparableMaskOp::buildShapeSignature(ShapeSignature &sig) {
  SmallVector<DimExpr> lead =
      numberedDims("d", std::max<int64_t>(rankOf(getLogA()) - 1, 0));
  sig.add("log_a", getLogA(), concat(lead, {"T"}));
  sig.add("mask", getMask(), concat(lead, {"T", "T"}));
}

LogicalResult SemiseparableMaskOp::verify() {
  if (rankOf(getLogA()) < 1)
    return emitOpError() << "log_a must have rank >= 1 (... x T), but has "
                         << "rank 0";
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// linear_attention
//===----------------------------------------------------------------------===//

/// A log decay of linear attention or the delta rule, per head of `heads`
/// (rank 1), per step (rank 3) or per key channel (rank 4).
static void addLogDecay(ShapeSignature &sig, Value decay, StringRef heads) {
  if (!decay)
    return;
  std::string h = heads.str();
  switch (rankOf(decay)) {
  case 1:
    sig.add("decay", decay, {h});
    break;
  case 3:
    sig.add("decay", decay, {"B", "T", h});
    break;
  default:
    sig.add("decay", decay, {"B", "T", h, "K"});
    break;
  }
}

static LogicalResult verifyLogDecayRank(Operation *op, Value decay,
                                        StringRef heads) {
  if (!decay)
    return success();
  int64_t r = rankOf(decay);
  if (r == 1 || r == 3 || r == 4)
    return success();
  return op->emitOpError() << "decay must have rank 1 (" << heads
                           << "), 3 (B x T x " << heads << ") or 4 (B x T x "
                           << heads << " x K), but has rank " << r;
}

void LinearAttentionOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("q", getQ(), {"B", "T", "H", "K"});
  sig.add("k", getK(), {"B", "T", "H", "K"});
  sig.add("v", getV(), {"B", "T", "H", "V"});
  addLogDecay(sig, getDecay(), "H");
  sig.add("bonus", getBonus(), {"H", "K"}, ElementKind::Param);
  DimExpr lead = stateLead(getSegments());
  sig.add("init", getInit(), {lead, "H", "K", "V"}, ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("o", getO(), {"B", "T", "H", "V"});
  sig.add("last", getLast(), {lead, "H", "K", "V"}, ElementKind::State);
}

LogicalResult LinearAttentionOp::verify() {
  if (getBonus() && !getCausal())
    return emitOpError() << "bonus requires causal = true (it weights the "
                         << "current step against the earlier ones)";
  if (getBonus() && getNormalize())
    return emitOpError() << "bonus cannot be combined with normalize";
  if (failed(verifyLogDecayRank(*this, getDecay(), "H")))
    return failure();
  if (getDecay()) {
    if (!getCausal())
      return emitOpError() << "decay requires causal = true (a non-causal "
                           << "sum has no order to decay along)";
  }
  if (getNormalize() && getInit())
    return emitOpError() << "normalize cannot be combined with init: the "
                         << "normalizer state is not carried";
  if (failed(verifyChunkSize(*this, getChunkSizeAttr().getInt())))
    return failure();
  if (!(getEps().convertToFloat() >= 0.0f))
    return emitOpError() << "eps must be >= 0";
  // A piece of the sequence carries S only: the normalizer and the
  // non-causal sum need the whole sequence.
  if (getCheckpointEvery() != 0 && (getNormalize() || !getCausal()))
    return emitOpError() << "checkpoint_every needs causal = true without "
                         << "normalize (only the state S is carried)";
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// delta_rule
//===----------------------------------------------------------------------===//

void DeltaRuleOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("q", getQ(), {"B", "T", "H", "K"});
  sig.add("k", getK(), {"B", "T", "H", "K"});
  sig.add("v", getV(), {"B", "T", "HV", "V"});
  sig.add("beta", getBeta(), {"B", "T", "HV"});
  addLogDecay(sig, getDecay(), "HV");
  DimExpr lead = stateLead(getSegments());
  sig.add("init", getInit(), {lead, "HV", "K", "V"}, ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("o", getO(), {"B", "T", "HV", "V"});
  sig.add("last", getLast(), {lead, "HV", "K", "V"}, ElementKind::State);
  sig.requireDivisible("HV", "H");
}

LogicalResult DeltaRuleOp::verify() {
  if (failed(verifyLogDecayRank(*this, getDecay(), "HV")))
    return failure();
  if (failed(verifyChunkSize(*this, getChunkSizeAttr().getInt())))
    return failure();
  if (!(getEps().convertToFloat() >= 0.0f))
    return emitOpError() << "eps must be >= 0";
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// generalized_delta_rule
//===----------------------------------------------------------------------===//

void GeneralizedDeltaRuleOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("q", getQ(), {"B", "T", "H", "K"});
  sig.add("k", getK(), {"B", "T", "H", "K"});
  sig.add("v", getV(), {"B", "T", "H", "V"});
  sig.add("a", getA(), {"B", "T", "H", "K"});
  sig.add("b", getB(), {"B", "T", "H", "K"});
  sig.add("decay", getDecay(), {"B", "T", "H", "K"});
  DimExpr lead = stateLead(getSegments());
  sig.add("init", getInit(), {lead, "H", "K", "V"}, ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("o", getO(), {"B", "T", "H", "V"});
  sig.add("last", getLast(), {lead, "H", "K", "V"}, ElementKind::State);
}

LogicalResult GeneralizedDeltaRuleOp::verify() {
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// random_features
//===----------------------------------------------------------------------===//

void RandomFeaturesOp::buildShapeSignature(ShapeSignature &sig) {
  SmallVector<DimExpr> lead =
      numberedDims("d", std::max<int64_t>(rankOf(getX()) - 1, 0));
  sig.add("x", getX(), concat(lead, {"K"}));
  sig.add("omega", getOmega(), {"K", "M"});
  DimExpr features = getKind() == RandomFeatures::trigonometric
                         ? DimExpr("M", 2, 0)
                         : DimExpr("M");
  sig.add("features", getFeatures(), concat(lead, {features}));
}

LogicalResult RandomFeaturesOp::verify() {
  if (rankOf(getX()) < 1)
    return emitOpError() << "x must have rank >= 1 (... x K), but has rank 0";
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

void AttentionOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("q", getQ(), {"B", "T", "H", "K"});
  sig.add("k", getK(), {"B", "S", "Hkv", "K"});
  sig.add("v", getV(), {"B", "S", "Hkv", "V"});
  // The packed sequences' count is `Nseq` here: `S` is the keys' length.
  addSegments(sig, getSegments(), "Nseq");
  if (Value kvSegments = getKvSegments())
    sig.add("kv_segments", kvSegments, {DimExpr("Nseq", 1, 1)},
            ElementKind::Int32);
  sig.add("o", getO(), {"B", "T", "H", "V"});
  sig.requireDivisible("H", "Hkv");
}

LogicalResult AttentionOp::verify() {
  if (getWindowAttr().getInt() < 0)
    return emitOpError() << "window must be >= 0 (0: unlimited), but is "
                         << getWindowAttr().getInt();
  if (auto scale = getScale(); scale && !std::isfinite(scale->convertToFloat()))
    return emitOpError() << "scale must be finite";
  if (getKvSegments() && !getSegments())
    return emitOpError() << "kv_segments needs segments (the queries' "
                         << "offsets)";
  // Without their own offsets the keys are packed like the queries.
  int64_t queries = cast<RankedTensorType>(getQ().getType()).getDimSize(1);
  int64_t keys = cast<RankedTensorType>(getK().getType()).getDimSize(1);
  if (getSegments() && !getKvSegments() && !ShapedType::isDynamic(queries) &&
      !ShapedType::isDynamic(keys) && queries != keys)
    return emitOpError() << "segments without kv_segments packs the keys "
                         << "like the queries, but the keys have " << keys
                         << " steps and the queries " << queries;
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// causal_conv1d
//===----------------------------------------------------------------------===//

void CausalConv1dOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("x", getX(), {"B", "T", "D"});
  sig.add("w", getW(), {"D", "W"}, ElementKind::Param);
  sig.add("bias", getBias(), {"D"}, ElementKind::Param);
  DimExpr lead = stateLead(getSegments());
  sig.add("init", getInit(), {lead, "D", DimExpr("W", 1, -1)},
          ElementKind::State);
  addSegments(sig, getSegments());
  sig.add("y", getY(), {"B", "T", "D"});
  sig.add("last", getLast(), {lead, "D", DimExpr("W", 1, -1)},
          ElementKind::State);
  sig.requirePositive("W");
}

LogicalResult CausalConv1dOp::verify() {
  Activation act = getActivation();
  if (act != Activation::none && act != Activation::silu)
    return emitOpError() << "activation must be none or silu, but is "
                         << stringifyActivation(act);
  if (failed(verifySequences(*this)))
    return failure();
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// route
//===----------------------------------------------------------------------===//

void RouteOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("logits", getLogits(), {"T", "E"});
  sig.add("bias", getBias(), {"E"}, ElementKind::Param);
  sig.add("noise_eps", getNoiseEps(), {"T", "E"});
  sig.add("noise_logits", getNoiseLogits(), {"T", "E"});
  sig.bind("k", getKAttr().getInt(), "k");
  sig.add("weights", getWeights(), {"T", "k"});
  sig.add("indices", getIndices(), {"T", "k"}, ElementKind::Int32);
  sig.add("aux", getAux(), {}, ElementKind::State);
}

LogicalResult RouteOp::verify() {
  int64_t k = getKAttr().getInt();
  if (k < 1)
    return emitOpError() << "k must be >= 1, but is " << k;
  if (static_cast<bool>(getNoiseEps()) != static_cast<bool>(getNoiseLogits()))
    return emitOpError() << "noise needs both eps and noise_logits";
  int64_t experts =
      cast<RankedTensorType>(getLogits().getType()).getRank() == 2
          ? cast<RankedTensorType>(getLogits().getType()).getDimSize(1)
          : ShapedType::kDynamic;
  if (!ShapedType::isDynamic(experts) && k > experts)
    return emitOpError() << "k = " << k
                         << " exceeds the number of experts E = " << experts;
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// moe_ffn
//===----------------------------------------------------------------------===//

void MoeFfnOp::buildShapeSignature(ShapeSignature &sig) {
  sig.add("x", getX(), {"T", "D"});
  sig.add("weights", getWeights(), {"T", "k"});
  sig.add("indices", getIndices(), {"T", "k"}, ElementKind::Int32);
  sig.add("w_up", getWUp(), {"E", "D", "F"});
  sig.add("w_down", getWDown(), {"E", "F", "D"});
  sig.add("w_gate", getWGate(), {"E", "D", "F"});
  sig.add("y", getY(), {"T", "D"});
  sig.add("load", getLoad(), {"E"}, ElementKind::Int64);
}

LogicalResult MoeFfnOp::verify() {
  float cf = getCapacityFactor().convertToFloat();
  if (!(cf >= 0.0f) || std::isinf(cf))
    return emitOpError() << "capacity_factor must be a finite value >= 0 "
                         << "(0: no capacity limit), but is " << cf;
  Activation act = getActivation();
  if (act == Activation::none)
    return emitOpError() << "activation must be silu, gelu or relu";
  return verifyShapeSignature(*this);
}

//===----------------------------------------------------------------------===//
// Syntax shared by the ops
//===----------------------------------------------------------------------===//

static const char *ordinal(size_t n) {
  static const char *names[] = {"1st", "2nd", "3rd", "4th", "5th",
                                "6th", "7th", "8th", "9th"};
  return n < 9 ? names[n] : "next";
}

/// `%a, %b, ...`: the op's required operands, named by `names` ("a, b") in
/// the message when one is missing.
template <typename... Operands>
static ParseResult parseRequiredOperands(OpAsmParser &parser, StringRef names,
                                         Operands &...operands) {
  SmallVector<StringRef> nameList;
  names.split(nameList, ", ");
  SmallVector<OpAsmParser::UnresolvedOperand *> slots{&operands...};
  assert(nameList.size() == slots.size() && "one name per operand");
  for (auto [i, slot] : llvm::enumerate(slots)) {
    SMLoc loc = parser.getCurrentLocation();
    auto missing = [&] {
      return parser.emitError(loc)
             << "takes " << slots.size() << " operands (" << names
             << ") before its optional groups, but its " << ordinal(i)
             << " operand, '" << nameList[i] << "', is missing";
    };
    if (i > 0 && parser.parseOptionalComma())
      return missing();
    OptionalParseResult parsed = parser.parseOptionalOperand(*slot);
    if (!parsed.has_value())
      return missing();
    if (failed(*parsed))
      return failure();
  }
  return success();
}

template <typename... Values>
static void printRequiredOperands(OpAsmPrinter &printer, Operation *, StringRef,
                                  Values... values) {
  SmallVector<Value> list{values...};
  llvm::interleaveComma(list, printer, [&](Value v) { printer << v; });
}

#define GET_OP_CLASSES
#include "Seq/SeqOps.cpp.inc"

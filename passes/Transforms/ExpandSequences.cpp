//===- ExpandSequences.cpp - packed batches and checkpoints as plain ops --===//
//
// SPEC section 1 gives every op with a state (and causal_conv1d, attention)
// a packed variable-length form, `segments(%cu)`, and state checkpoints,
// `checkpoint_every = n`. Both are defined by running the op's plain form:
// a packed batch is each sequence alone, a checkpoint the state of a run
// stopped there. This pass builds exactly that, once for every op and both
// targets:
//
//   - segments: a loop over the sequences, each the plain op on its slice of
//     the packed tensors with its own `init` row, its results inserted back;
//   - checkpoint_every = n: the sequence in pieces of n steps (from the end
//     with `reverse`), the state carried, each piece's `last` a checkpoint.
//
// Which operand is sliced how comes from the op's shape signature: `B x T`
// tensors are steps, attention's `B x S` keys are key steps, `init` and
// `last` are per sequence, everything else is shared. So no chunk straddles
// a boundary: each sequence gets its own chunk grid from the same kernels
// (as fla's cu_seqlens kernels do), nothing is padded, and a chunk-size
// multiple n makes the pieces whole chunks. The offsets are checked at run
// time before any slice is taken.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "Common/KernelBuilder.h"
#include "Seq/SeqDialect.h"
#include "Transforms/RankGrid.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQEXPANDSEQUENCES
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc;
using namespace seqc::seq;

namespace {

/// How an operand or result of the op follows a sequence.
enum class Role {
  Steps,       ///< B x T x ...: sliced along T
  KeySteps,    ///< attention's keys and values, B x S x ...
  PerSequence, ///< init and last: one row per sequence
  Offsets,     ///< segments, kv_segments: consumed here
  Shared,      ///< parameters: the same for every sequence
};

Role roleOf(const TensorDecl &decl) {
  if (decl.name == "segments" || decl.name == "kv_segments")
    return Role::Offsets;
  if (decl.name == "init" || decl.name == "last")
    return Role::PerSequence;
  if (decl.dims.size() >= 2 && decl.dims[0].symbol == "B") {
    if (decl.dims[1].symbol == "T")
      return Role::Steps;
    if (decl.dims[1].symbol == "S")
      return Role::KeySteps;
  }
  return Role::Shared;
}

/// Steps `[start, start + length)` of batch rows `[0, rows)`, whose states
/// are rows `[stateRow, stateRow + rows)` of init and last.
struct Window {
  OpFoldResult rows;
  Value stateRow;
  Value start, length;
  /// The keys' steps (attention); the same as the queries' when absent.
  Value keyStart, keyLength;
  /// A length known at compile time, for the plain op's types.
  std::optional<int64_t> staticLength;
};

/// The results being assembled: the step results, last, the checkpoints.
struct Assembly {
  SmallVector<Value> steps;
  Value last;
  Value checkpoints;

  SmallVector<Value> values() const {
    SmallVector<Value> all(steps);
    if (last)
      all.push_back(last);
    if (checkpoints)
      all.push_back(checkpoints);
    return all;
  }
  void assign(ValueRange all) {
    size_t i = 0;
    for (Value &v : steps)
      v = all[i++];
    if (last)
      last = all[i++];
    if (checkpoints)
      checkpoints = all[i++];
  }
};

class SequenceExpansion {
public:
  SequenceExpansion(Operation *op, ImplicitLocOpBuilder &b, KernelBuilder &kb,
                    const DimSizes &dims)
      : op(op), b(b), kb(kb), dims(dims) {
    cast<ShapeSignatureOpInterface>(op).buildShapeSignature(sig);
    segments = cast<PackedSequencesOpInterface>(op).getSegments();
    if (auto attention = dyn_cast<AttentionOp>(op))
      kvSegments = attention.getKvSegments();
    if (auto stateful = dyn_cast<StatefulOpInterface>(op)) {
      init = stateful.getInit();
      checkpointEvery = stateful.getCheckpointEvery();
    }
    if (auto reverseAttr = op->getAttrOfType<BoolAttr>("reverse"))
      reverse = reverseAttr.getValue();
    for (const TensorDecl &decl : sig.tensors())
      roles[decl.value] = roleOf(decl);
  }

  SmallVector<Value> expand();

private:
  /// An unpacked batch: all rows at once (in pieces with checkpoints).
  Assembly expandBatch();
  /// Packed sequences: one window each, in a loop over them.
  Assembly expandPacked();
  /// The op's results, cast to their declared types.
  SmallVector<Value> declaredResults(const Assembly &acc);

  // Run-time checks of the offsets and the longest sequence.
  Value checkOffsets(Value cu, Value total, StringRef name);
  /// Checks the packed offsets (and the keys', or that they are packed like
  /// the queries); gives the longest sequence.
  Value checkPacking();
  Value offset(Value cu, Value s) { return kb.i32ToIndex(kb.load(cu, {s})); }

  // The results' first values.
  Assembly startAssembly(Value checkpointSlots, bool perSequence);
  /// A sequence of no steps: its row of last is its init (or zeros).
  Assembly keepInitialState(Assembly acc, const Window &w);
  SmallVector<int64_t> checkpointShape() const;

  // One sequence (or the whole unpacked batch), whole or in pieces.
  Assembly runWindow(const Window &w, Value state, Assembly acc);
  Assembly runPieces(const Window &w, Value state, Assembly acc);
  /// The plain op on `w`: its step results and its last state.
  std::pair<SmallVector<Value>, Value> runPlain(const Window &w, Value state);
  Value slice(Value tensor, Role role, const Window &w);
  RankedTensorType plainType(Value result, Role role, const Window &w) const;

  Value insertSteps(Value piece, Value into, const Window &w);
  Value insertState(Value state, Value into, const Window &w,
                    Value slot = nullptr);

  Operation *op;
  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const DimSizes &dims;
  ShapeSignature sig;
  /// Every declared operand's and result's role, from the signature.
  llvm::DenseMap<Value, Role> roles;
  Value segments, kvSegments, init;
  uint64_t checkpointEvery = 0;
  bool reverse = false;
};

} // namespace

//===----------------------------------------------------------------------===//
// Offsets
//===----------------------------------------------------------------------===//

/// Checks SPEC section 1's rules on `cu` (`cu[0] = 0`, non-decreasing,
/// `cu[S] = total`) in the order that keeps every read in bounds, and
/// returns the longest sequence.
Value SequenceExpansion::checkOffsets(Value cu, Value total, StringRef name) {
  Value count = kb.dim(cu, 0);
  kb.check(kb.cmp(arith::CmpIPredicate::sge, count, kb.idx(1)),
           (name + " needs at least one offset (cu[0] = 0), but has {0}").str(),
           {count});
  Value first = offset(cu, kb.idx(0));
  kb.check(kb.cmp(arith::CmpIPredicate::eq, first, kb.idx(0)),
           (name + " must start at 0, but " + name + "[0] = {0}").str(),
           {first});
  Value sequences = kb.sub(count, kb.idx(1));
  Value longest = kb.loop(sequences, {kb.idx(0)}, [&](Value s, ValueRange it) {
    Value next = kb.add(s, kb.idx(1));
    Value from = offset(cu, s), to = offset(cu, next);
    kb.check(kb.cmp(arith::CmpIPredicate::sge, to, from),
             (name + " must not decrease, but " + name + "[{0}] = {1} < " +
              name + "[{2}] = {3}")
                 .str(),
             {next, to, s, from});
    Value length = kb.sub(to, from);
    return SmallVector<Value>{arith::MaxSIOp::create(b, it[0], length)};
  })[0];
  Value end = offset(cu, sequences);
  kb.check(
      kb.cmp(arith::CmpIPredicate::eq, end, total),
      (name + " must end at the packed length {0}, but " + name + "[{1}] = {2}")
          .str(),
      {total, sequences, end});
  return longest;
}

//===----------------------------------------------------------------------===//
// Slicing and inserting
//===----------------------------------------------------------------------===//

/// ceil(a / d) for a >= 0, d >= 1, as (a - 1) / d + 1: a + d - 1 would
/// overflow for a checkpoint_every near the index range.
static Value ceilDiv(KernelBuilder &kb, Value a, int64_t d) {
  Value some = kb.cmp(arith::CmpIPredicate::sgt, a, kb.idx(0));
  Value count = kb.add(kb.divs(kb.sub(a, kb.idx(1)), kb.idx(d)), kb.idx(1));
  return kb.select(some, count, kb.idx(0));
}

Value SequenceExpansion::slice(Value tensor, Role role, const Window &w) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  for (int64_t i = 0; i < type.getRank(); ++i)
    sizes.push_back(type.isDynamicDim(i)
                        ? OpFoldResult(kb.dim(tensor, i))
                        : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
  sizes[0] = w.rows;
  if (role == Role::PerSequence) {
    offsets[0] = w.stateRow;
  } else {
    bool keys = role == Role::KeySteps && w.keyStart;
    offsets[1] = keys ? w.keyStart : w.start;
    sizes[1] = keys             ? OpFoldResult(w.keyLength)
               : w.staticLength ? OpFoldResult(b.getIndexAttr(*w.staticLength))
                                : OpFoldResult(w.length);
  }
  return tensor::ExtractSliceOp::create(b, tensor, offsets, sizes, strides);
}

static SmallVector<OpFoldResult> sizesOf(ImplicitLocOpBuilder &b,
                                         KernelBuilder &kb, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<OpFoldResult> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    sizes.push_back(type.isDynamicDim(i)
                        ? OpFoldResult(kb.dim(tensor, i))
                        : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
  return sizes;
}

Value SequenceExpansion::insertSteps(Value piece, Value into, const Window &w) {
  auto type = cast<RankedTensorType>(piece.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  offsets[1] = w.start;
  return tensor::InsertSliceOp::create(b, piece, into, offsets,
                                       sizesOf(b, kb, piece), strides);
}

/// Inserts a state (rows x ...) at its rows of `into`; with `slot`, into
/// that checkpoint slot (dimension 1) of the checkpoints.
Value SequenceExpansion::insertState(Value state, Value into, const Window &w,
                                     Value slot) {
  auto type = cast<RankedTensorType>(into.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes = sizesOf(b, kb, state);
  offsets[0] = w.stateRow;
  if (slot) {
    offsets[1] = slot;
    sizes.insert(sizes.begin() + 1, b.getIndexAttr(1));
  }
  return tensor::InsertSliceOp::create(b, state, into, offsets, sizes, strides);
}

//===----------------------------------------------------------------------===//
// The plain op
//===----------------------------------------------------------------------===//

RankedTensorType SequenceExpansion::plainType(Value result, Role role,
                                              const Window &w) const {
  auto type = cast<RankedTensorType>(result.getType());
  SmallVector<int64_t> shape(type.getShape());
  auto rows = getConstantIntValue(w.rows);
  shape[0] = rows ? *rows : ShapedType::kDynamic;
  if (role == Role::Steps)
    shape[1] = w.staticLength ? *w.staticLength : ShapedType::kDynamic;
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

/// Clones the op onto the window's slices, without segments or
/// checkpoints and with `state` (or nothing) as its init.
std::pair<SmallVector<Value>, Value>
SequenceExpansion::runPlain(const Window &w, Value state) {
  IRMapping mapping;
  for (Value operand : op->getOperands()) {
    Role role = roles.lookup(operand);
    if (operand == init || !roles.count(operand))
      continue;
    if (role == Role::Steps || role == Role::KeySteps)
      mapping.map(operand, slice(operand, role, w));
  }
  Operation *clone = b.clone(*op, mapping);
  cast<PackedSequencesOpInterface>(clone).getSegmentsMutable().clear();
  if (auto attention = dyn_cast<AttentionOp>(clone))
    attention.getKvSegmentsMutable().clear();
  if (auto stateful = dyn_cast<StatefulOpInterface>(clone)) {
    MutableOperandRange initOperand = stateful.getInitMutable();
    if (state)
      initOperand.assign(state);
    else
      initOperand.clear();
    clone->setAttr("checkpoint_every", b.getI64IntegerAttr(0));
  }

  // The same op with the window's result types and no checkpoints.
  Value checkpoints;
  if (auto stateful = dyn_cast<StatefulOpInterface>(op))
    checkpoints = stateful.getCheckpoints();
  OperationState plain(op->getLoc(), op->getName());
  plain.addOperands(clone->getOperands());
  plain.propertiesAttr = clone->getPropertiesAsAttribute();
  plain.addAttributes(clone->getDiscardableAttrDictionary().getValue());
  for (Value result : op->getResults()) {
    if (result == checkpoints)
      continue;
    plain.addTypes(plainType(result, roles.lookup(result), w));
  }
  for (unsigned i = 0; i < clone->getNumRegions(); ++i)
    plain.addRegion();
  Operation *created = b.create(plain);
  for (unsigned i = 0; i < clone->getNumRegions(); ++i)
    created->getRegion(i).takeBody(clone->getRegion(i));
  clone->erase();

  SmallVector<Value> steps;
  Value last;
  for (auto [original, result] :
       llvm::zip(op->getResults(), created->getResults())) {
    if (roles.lookup(original) == Role::PerSequence)
      last = result;
    else
      steps.push_back(result);
  }
  return {steps, last};
}

//===----------------------------------------------------------------------===//
// Sequences and pieces
//===----------------------------------------------------------------------===//

Assembly SequenceExpansion::runWindow(const Window &w, Value state,
                                      Assembly acc) {
  if (checkpointEvery > 0)
    return runPieces(w, state, acc);
  auto [steps, last] = runPlain(w, state);
  for (auto [into, piece] : llvm::zip(acc.steps, steps))
    into = insertSteps(piece, into, w);
  if (last)
    acc.last = insertState(last, acc.last, w);
  return acc;
}

/// The window in pieces of n steps, processing order (from the end with
/// reverse): piece p's last state is checkpoint p and the next one's init.
Assembly SequenceExpansion::runPieces(const Window &w, Value state,
                                      Assembly acc) {
  auto n = static_cast<int64_t>(checkpointEvery);
  Value pieces = ceilDiv(kb, w.length, n);
  // Every piece starts from a state: the first from init or zeros.
  if (!state) {
    auto lastType = cast<RankedTensorType>(acc.last.getType());
    SmallVector<int64_t> shape(lastType.getShape());
    auto rows = getConstantIntValue(w.rows);
    shape[0] = rows ? *rows : ShapedType::kDynamic;
    SmallVector<Value> sizes;
    for (OpFoldResult s : sizesOf(b, kb, acc.last))
      sizes.push_back(getValueOrCreateConstantIndexOp(b, b.getLoc(), s));
    sizes[0] = getValueOrCreateConstantIndexOp(b, b.getLoc(), w.rows);
    state = kb.zeros(RankedTensorType::get(shape, b.getF32Type()), sizes);
  }
  SmallVector<Value> inits = acc.values();
  inits.push_back(state);
  SmallVector<Value> out = kb.loop(pieces, inits, [&](Value p, ValueRange it) {
    Assembly cur = acc;
    cur.assign(it);
    Value done = kb.mul(p, kb.idx(n));
    Window piece = w;
    piece.length = kb.mins(kb.idx(n), kb.sub(w.length, done));
    piece.start =
        reverse ? kb.sub(kb.add(w.start, kb.sub(w.length, done)), piece.length)
                : kb.add(w.start, done);
    if (!w.staticLength || *w.staticLength % n != 0)
      piece.staticLength.reset();
    else
      piece.staticLength = n;
    auto [steps, last] = runPlain(piece, it.back());
    for (auto [into, result] : llvm::zip(cur.steps, steps))
      into = insertSteps(result, into, piece);
    cur.checkpoints = insertState(last, cur.checkpoints, piece, p);
    SmallVector<Value> next = cur.values();
    next.push_back(last);
    return next;
  });
  Value final = out.back();
  out.pop_back();
  acc.assign(out);
  acc.last = insertState(final, acc.last, w);
  return acc;
}

Assembly SequenceExpansion::keepInitialState(Assembly acc, const Window &w) {
  if (!acc.last)
    return acc;
  Value row;
  if (init) {
    row = slice(init, Role::PerSequence, w);
  } else {
    auto type = cast<RankedTensorType>(acc.last.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = 1;
    SmallVector<Value> sizes{kb.idx(1)};
    for (int64_t i = 1; i < type.getRank(); ++i)
      sizes.push_back(kb.dim(acc.last, i));
    row = kb.zeros(RankedTensorType::get(shape, type.getElementType()), sizes);
  }
  acc.last = insertState(row, acc.last, w);
  return acc;
}

SmallVector<int64_t> SequenceExpansion::checkpointShape() const {
  auto lastType =
      cast<RankedTensorType>(cast<StatefulOpInterface>(op).getLast().getType());
  SmallVector<int64_t> shape(lastType.getShape());
  shape.insert(shape.begin() + 1, ShapedType::kDynamic);
  return shape;
}

Assembly SequenceExpansion::startAssembly(Value checkpointSlots,
                                          bool perSequence) {
  Assembly acc;
  Value checkpoints;
  if (auto stateful = dyn_cast<StatefulOpInterface>(op))
    checkpoints = stateful.getCheckpoints();
  for (const TensorDecl &decl : sig.tensors()) {
    auto result = dyn_cast<OpResult>(decl.value);
    if (!result || result.getOwner() != op)
      continue;
    auto type = cast<RankedTensorType>(decl.value.getType());
    SmallVector<Value> sizes = dims.of(decl.name);
    if (roleOf(decl) == Role::Steps) {
      // Every step belongs to one sequence (the offsets are checked).
      acc.steps.push_back(kb.empty(type, sizes));
      continue;
    }
    // Per sequence, every row is written: by the sequence's run or, for a
    // sequence of no steps, by keepInitialState.
    if (perSequence) {
      acc.last = kb.empty(type, sizes);
      continue;
    }
    // An unpacked batch of no steps keeps its init (or zeros) as last.
    // (init has last's shape, the signature checked it: at most a cast.)
    acc.last = init ? kb.castTensor(init, type, sizes) : kb.zeros(type, sizes);
  }
  if (checkpoints) {
    SmallVector<Value> sizes = dims.of("last");
    sizes.insert(sizes.begin() + 1, checkpointSlots);
    SmallVector<int64_t> shape = checkpointShape();
    acc.checkpoints =
        kb.zeros(RankedTensorType::get(shape, b.getF32Type()), sizes);
  }
  return acc;
}

SmallVector<Value> SequenceExpansion::expand() {
  return declaredResults(segments ? expandPacked() : expandBatch());
}

Assembly SequenceExpansion::expandBatch() {
  Value total = dims["T"];
  Window whole{getAsOpFoldResult(dims["B"]),
               kb.idx(0),
               kb.idx(0),
               total,
               Value(),
               Value(),
               std::nullopt};
  auto stepsType = cast<RankedTensorType>(op->getOperand(0).getType());
  if (!stepsType.isDynamicDim(1))
    whole.staticLength = stepsType.getDimSize(1);
  auto n = static_cast<int64_t>(checkpointEvery);
  Assembly acc = startAssembly(ceilDiv(kb, total, n), /*perSequence=*/false);
  return runWindow(whole, init, acc);
}

Value SequenceExpansion::checkPacking() {
  Value total = dims["T"];
  Value batch = dims["B"];
  kb.check(kb.cmp(arith::CmpIPredicate::eq, batch, kb.idx(1)),
           "segments requires B = 1 (the sequences are packed along T), "
           "but B = {0}",
           {batch});
  Value longest = checkOffsets(segments, total, "segments");
  if (kvSegments) {
    checkOffsets(kvSegments, dims["S"], "kv_segments");
  } else if (isa<AttentionOp>(op)) {
    // Without their own offsets the keys are packed like the queries.
    Value keys = dims["S"];
    kb.check(kb.cmp(arith::CmpIPredicate::eq, keys, total),
             "segments without kv_segments packs the keys like the "
             "queries, but the keys have {0} steps and the queries {1}",
             {keys, total});
  }
  return longest;
}

Assembly SequenceExpansion::expandPacked() {
  Value longest = checkPacking();
  auto n = static_cast<int64_t>(checkpointEvery);
  Value sequences = kb.sub(kb.dim(segments, 0), kb.idx(1));
  Assembly acc = startAssembly(n > 0 ? ceilDiv(kb, longest, n) : Value(),
                               /*perSequence=*/true);
  SmallVector<Value> out =
      kb.loop(sequences, acc.values(), [&](Value s, ValueRange it) {
        Assembly cur = acc;
        cur.assign(it);
        Value next = kb.add(s, kb.idx(1));
        Window w{b.getIndexAttr(1), s,       offset(segments, s), Value(),
                 Value(),           Value(), std::nullopt};
        w.length = kb.sub(offset(segments, next), w.start);
        if (kvSegments) {
          w.keyStart = offset(kvSegments, s);
          w.keyLength = kb.sub(offset(kvSegments, next), w.keyStart);
        }
        // A sequence of no steps keeps its init (or zeros) as last; its
        // keys, if any, are seen by no query.
        Value nonEmpty = kb.cmp(arith::CmpIPredicate::sgt, w.length, kb.idx(0));
        return kb.ifElse(
            nonEmpty, TypeRange(ValueRange(it)),
            [&] {
              Value state = init ? slice(init, Role::PerSequence, w) : Value();
              return runWindow(w, state, cur).values();
            },
            [&] { return keepInitialState(cur, w).values(); });
      });
  acc.assign(out);
  return acc;
}

SmallVector<Value> SequenceExpansion::declaredResults(const Assembly &acc) {
  // The declared result types (the assembly's may be less static).
  SmallVector<Value> results;
  for (auto [declared, value] : llvm::zip(op->getResults(), acc.values())) {
    auto type = cast<RankedTensorType>(declared.getType());
    results.push_back(value.getType() == type
                          ? value
                          : tensor::CastOp::create(b, type, value).getResult());
  }
  // A static checkpoint count must be what the sequences need.
  if (acc.checkpoints) {
    auto declared = cast<RankedTensorType>(results.back().getType());
    if (!declared.isDynamicDim(1)) {
      Value have = kb.idx(declared.getDimSize(1));
      Value need = kb.dim(acc.checkpoints, 1);
      kb.check(kb.cmp(arith::CmpIPredicate::eq, have, need),
               "checkpoints has {0} slots in dimension 1 but the longest "
               "sequence needs {1}",
               {have, need});
    }
  }
  return results;
}

//===----------------------------------------------------------------------===//
// The pattern and the pass
//===----------------------------------------------------------------------===//

namespace {

bool needsExpansion(Operation *op) {
  auto packed = dyn_cast<PackedSequencesOpInterface>(op);
  if (!packed)
    return false;
  if (packed.getSegments())
    return true;
  auto stateful = dyn_cast<StatefulOpInterface>(op);
  return stateful && stateful.getCheckpointEvery() > 0;
}

struct ExpandSequencesPattern
    : OpInterfaceRewritePattern<PackedSequencesOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(PackedSequencesOpInterface packed,
                                PatternRewriter &rewriter) const override {
    Operation *op = packed.getOperation();
    if (!needsExpansion(op))
      return rewriter.notifyMatchFailure(op, "a plain op");
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    SequenceExpansion expansion(op, b, kb, dims);
    rewriter.replaceOp(op, expansion.expand());
    return success();
  }
};

struct SeqExpandSequences
    : seqc::impl::SeqExpandSequencesBase<SeqExpandSequences> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandSequencesPattern>(&getContext());
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace

LogicalResult seqc::rejectUnexpandedSequences(Operation *root, StringRef pass) {
  WalkResult walk = root->walk([&](Operation *op) {
    if (!needsExpansion(op))
      return WalkResult::advance();
    op->emitError() << op->getName()
                    << " with segments or checkpoint_every reaches " << pass
                    << " unexpanded: run seq-expand-sequences first";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult seqc::checkLoweringInput(Operation *root, StringRef pass) {
  if (failed(rejectUnexpandedSequences(root, pass)))
    return failure();
  WalkResult walk = root->walk([&](MoeFfnOp op) {
    if (!op->hasAttr(kLocalTokensAttrName))
      return WalkResult::advance();
    op.emitError() << "this moe_ffn's tokens are each rank's own "
                      "(seq-distribute-steps local=1 leave-experts=1) and it "
                      "reaches "
                   << pass
                   << " unsplit: run seq-distribute-experts local=1 first";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

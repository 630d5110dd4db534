//===- StepAxes.cpp - which dimension of each value holds the steps -------===//
//
// A fixpoint over the function: each op relates its tensors' step axes
// (a linalg op through the loop that walks the steps, a reshape through its
// groups, a seq op through its shape signature), until nothing changes.
// Then every op that touches a tensor with steps is checked: it must treat
// the steps independently, so that running it on a rank's own steps gives
// that rank's steps of the whole run's result.
//
//===----------------------------------------------------------------------===//

#include "Transforms/StepAxes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Index/IR/IndexOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace seqc;
using namespace seqc::seq;

namespace {
constexpr StringLiteral kPrefix = "rank-local steps: ";
constexpr int64_t kNoSteps = -1;

bool isTensor(Value v) { return isa<RankedTensorType>(v.getType()); }

/// The product of the static sizes of `dims` of `type` but `skip`, or
/// nullopt where one of them is dynamic.
std::optional<int64_t> staticProduct(RankedTensorType type,
                                     ArrayRef<int64_t> dims, int64_t skip) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d == skip)
      continue;
    if (type.isDynamicDim(d))
      return std::nullopt;
    product *= type.getDimSize(d);
  }
  return product;
}

/// Whether the dimensions of `group` before `axis` are all 1 (the steps are
/// the group's outermost run, so a rank's steps stay contiguous).
bool outerDimsAreOne(RankedTensorType type, ArrayRef<int64_t> group,
                     int64_t axis) {
  for (int64_t d : group) {
    if (d == axis)
      return true;
    if (type.getDimSize(d) != 1)
      return false;
  }
  return true;
}

/// The only dynamic dimension of `dims` in `type`, or -1.
int64_t onlyDynamic(RankedTensorType type, ArrayRef<int64_t> dims) {
  int64_t found = -1;
  for (int64_t d : dims) {
    if (!type.isDynamicDim(d))
      continue;
    if (found >= 0)
      return -1;
    found = d;
  }
  return found;
}

/// The rows per step of the steps `value` counts (`tensor.dim` of a
/// tensor's step axis), or nullopt where it is not such a count.
std::optional<int64_t>
stepCountRows(const llvm::DenseMap<Value, StepAxis> &axes, Value value) {
  auto dim = value.getDefiningOp<tensor::DimOp>();
  if (!dim)
    return std::nullopt;
  auto it = axes.find(dim.getSource());
  std::optional<int64_t> index = dim.getConstantIndex();
  if (it == axes.end() || it->second.axis < 0 || index != it->second.axis)
    return std::nullopt;
  return it->second.rows;
}

/// The time axis a seq op declares for `decl` (T, or attention's S, at
/// `stepDim`), else -1.
int64_t declaredStepAxis(const TensorDecl &decl, int64_t stepDim) {
  if (int64_t(decl.dims.size()) <= stepDim)
    return kNoSteps;
  const DimExpr &d = decl.dims[stepDim];
  if (d.scale != 1 || d.offset != 0)
    return kNoSteps;
  return d.symbol == "T" || d.symbol == "S" ? stepDim : kNoSteps;
}

/// Where an op with a time axis declares it: dimension 1 of a sequence op's
/// tensors ([B, T, ...]), dimension 0 of the router's and the experts'
/// tokens ([T, ...]).
std::optional<int64_t> stepDimOf(Operation *op) {
  if (isa<PackedSequencesOpInterface>(op))
    return 1;
  if (isa<RouteOp, MoeFfnOp>(op))
    return 0;
  return std::nullopt;
}
} // namespace

//===----------------------------------------------------------------------===//
// The solver
//===----------------------------------------------------------------------===//

class StepAxes::Solver {
public:
  Solver(func::FuncOp func, llvm::DenseMap<Value, StepAxis> &axes)
      : func(func), axes(axes) {}

  LogicalResult run() {
    if (failed(findCacheAppends()))
      return failure();
    do {
      changed = false;
      WalkResult walk = func.walk([&](Operation *op) {
        return failed(relate(op)) ? WalkResult::interrupt()
                                  : WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    } while (changed);
    joinFullSlices();
    // A concatenation that mixes steps explains the slices of it that the
    // checks would name otherwise.
    if (!mixingConcats.empty())
      return explainMixingConcat(mixingConcats.front());
    WalkResult walk = func.walk([&](Operation *op) {
      return failed(check(op)) ? WalkResult::interrupt()
                               : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    for (BlockArgument arg : func.getArguments())
      if (failed(checkStaticSteps(arg, func)))
        return failure();
    return success();
  }

private:
  std::optional<StepAxis> get(Value v) const {
    auto it = axes.find(v);
    return it == axes.end() ? std::nullopt : std::optional(it->second);
  }
  bool stepped(Value v) const {
    std::optional<StepAxis> a = get(v);
    return a && a->axis >= 0;
  }
  LogicalResult set(Value v, StepAxis a, Operation *at);
  LogicalResult setNone(Value v, Operation *at) {
    return set(v, {kNoSteps, 1}, at);
  }
  LogicalResult same(Value x, Value y, Operation *at);
  /// x and y count the same steps (where they hold steps): `extents`.
  void sameExtent(Value x, Value y) { extents.unionSets(x, y); }
  /// Whether `count` (tensor.dim of some tensor's step axis) counts the
  /// steps of `tensor`.
  bool countsStepsOf(Value count, Value tensor) const;
  /// A slice whose size is its whole's own number of steps keeps every
  /// step: its part counts the same steps (to a fixpoint, slices of slices).
  void joinFullSlices();
  /// The shift `v` is the result of, or null.
  tensor::ConcatOp shiftOf(Value v) const {
    auto concat = v.getDefiningOp<tensor::ConcatOp>();
    return concat && shifts.contains(concat) ? concat : tensor::ConcatOp();
  }
  /// The KV caches attention reads its keys or values from, concat(cache,
  /// x) along the steps with a cache of dynamic length: whole (see
  /// StepAxes::cacheAppends).
  LogicalResult findCacheAppends();
  bool isCacheAppend(Value v) const {
    auto concat = v.getDefiningOp<tensor::ConcatOp>();
    return concat && cacheAppends.contains(concat);
  }
  /// Whether `slice` takes a concatenation of steps at an offset along
  /// them: a shift's state after (or an error the checks name).
  bool takesConcatTail(tensor::ExtractSliceOp slice) const;

  // Relations, one kind of op each.
  LogicalResult relate(Operation *op);
  LogicalResult relateLinalg(linalg::LinalgOp op);
  LogicalResult relateSeq(Operation *op);
  LogicalResult relateConcat(tensor::ConcatOp concat);
  LogicalResult relateCacheAppend(tensor::ConcatOp append);
  LogicalResult relateSlice(Value whole, Value part,
                            const llvm::SmallBitVector &dropped, Operation *at);
  LogicalResult relateReshape(Value flat, Value split,
                              ArrayRef<ReassociationIndices> groups,
                              Operation *at);

  // Checks, one kind of op each.
  LogicalResult check(Operation *op);
  LogicalResult checkLinalg(linalg::LinalgOp op);
  LogicalResult checkStaticSteps(Value v, Operation *at);
  /// `size` must be `tensor`'s own number of steps (at `axis`).
  LogicalResult checkStepSize(OpFoldResult size, Value tensor, StepAxis axis,
                              Operation *at, StringRef what);
  /// A slice of `whole` (the tensor it takes from or inserts into).
  LogicalResult checkSlice(OffsetSizeAndStrideOpInterface slice, Value whole);
  LogicalResult checkShiftSlice(tensor::ExtractSliceOp slice,
                                tensor::ConcatOp shift);
  LogicalResult checkShiftUses(tensor::ConcatOp shift);
  LogicalResult checkCacheAppend(tensor::ConcatOp append);
  LogicalResult checkCacheSteps(AttentionOp attention);
  LogicalResult explainMixingConcat(tensor::ConcatOp concat);
  LogicalResult checkCountUses(Value count, bool derived);
  LogicalResult checkDecisionUses(Value decision);
  bool isCountSize(Operation *user, Value count);

  InFlightDiagnostic error(Operation *at) {
    InFlightDiagnostic diag = at->emitError();
    diag << kPrefix;
    return diag;
  }

  func::FuncOp func;
  llvm::DenseMap<Value, StepAxis> &axes;
  /// Tensors whose step dimensions count the same steps (related through
  /// a linalg loop, a cast, a reshape, an elementwise op, a seq op's T or
  /// S, a slice that keeps every step). A slice or a new tensor sized by
  /// the number of steps must take it from its own class: a table sliced
  /// to the sequence's length is not a rank's own steps.
  llvm::EquivalenceClasses<Value> extents;
  /// The token shifts found (see StepAxes::shifts).
  llvm::SetVector<tensor::ConcatOp> shifts;
  /// The KV caches appended to (see StepAxes::cacheAppends).
  llvm::SetVector<tensor::ConcatOp> cacheAppends;
  /// Concatenations along the steps that are no token shift.
  llvm::SetVector<tensor::ConcatOp> mixingConcats;
  bool changed = false;

  friend class StepAxes;
};

LogicalResult StepAxes::Solver::set(Value v, StepAxis a, Operation *at) {
  if (!isTensor(v))
    return success();
  auto [it, inserted] = axes.try_emplace(v, a);
  if (inserted) {
    changed = true;
    return success();
  }
  if (it->second == a)
    return success();
  InFlightDiagnostic diag = error(at);
  auto describe = [](StepAxis s) {
    return s.axis < 0
               ? std::string("no steps")
               : "steps in dimension " + std::to_string(s.axis) +
                     (s.rows > 1
                          ? " (" + std::to_string(s.rows) + " rows a step)"
                          : "");
  };
  diag << "a tensor would hold " << describe(it->second) << " and "
       << describe(a) << "; each rank must hold its own steps of a tensor "
       << "or the whole of it";
  return failure();
}

LogicalResult StepAxes::Solver::same(Value x, Value y, Operation *at) {
  sameExtent(x, y);
  if (std::optional<StepAxis> a = get(x))
    if (failed(set(y, *a, at)))
      return failure();
  if (std::optional<StepAxis> a = get(y))
    return set(x, *a, at);
  return success();
}

LogicalResult StepAxes::Solver::relate(Operation *op) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return relateLinalg(linalgOp);
  if (stepDimOf(op))
    return relateSeq(op);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tensor::CastOp cast) {
        return same(cast.getSource(), cast.getResult(), op);
      })
      .Case([&](tensor::ConcatOp concat) { return relateConcat(concat); })
      .Case([&](tensor::ExtractSliceOp slice) {
        if (takesConcatTail(slice))
          return setNone(slice.getResult(), op);
        return relateSlice(slice.getSource(), slice.getResult(),
                           slice.getDroppedDims(), op);
      })
      .Case([&](tensor::InsertSliceOp slice) {
        if (failed(same(slice.getDest(), slice.getResult(), op)))
          return failure();
        return relateSlice(slice.getDest(), slice.getSource(),
                           slice.getDroppedDims(), op);
      })
      .Case([&](tensor::CollapseShapeOp collapse) {
        return relateReshape(collapse.getResult(), collapse.getSrc(),
                             collapse.getReassociationIndices(), op);
      })
      .Case([&](tensor::ExpandShapeOp expand) {
        return relateReshape(expand.getSrc(), expand.getResult(),
                             expand.getReassociationIndices(), op);
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (!OpTrait::hasElementwiseMappableTraits(other))
          return success();
        // Every tensor operand and result alike.
        SmallVector<Value> tensors;
        for (Value v : other->getOperands())
          if (isTensor(v))
            tensors.push_back(v);
        for (Value v : other->getResults())
          if (isTensor(v))
            tensors.push_back(v);
        for (size_t i = 1; i < tensors.size(); ++i)
          if (failed(same(tensors[0], tensors[i], other)))
            return failure();
        return success();
      });
}

/// The loop that walks the steps is the one an operand's step axis is
/// indexed by; every other operand holds the steps where its map has that
/// loop, and none where it does not (a weight, broadcast over the steps).
LogicalResult StepAxes::Solver::relateLinalg(linalg::LinalgOp op) {
  for (auto [init, result] :
       llvm::zip(op.getDpsInitsMutable(), op->getResults()))
    if (failed(same(init.get(), result, op)))
      return failure();
  std::optional<unsigned> loop;
  int64_t rows = 1;
  Value stepOperand;
  for (OpOperand &operand : op->getOpOperands()) {
    std::optional<StepAxis> a = get(operand.get());
    if (!a || a->axis < 0)
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(a->axis));
    if (!dim) {
      std::string expr;
      llvm::raw_string_ostream os(expr);
      map.getResult(a->axis).print(os);
      error(op) << "operand #" << operand.getOperandNumber()
                << " indexes the steps by " << expr << ", not by one loop";
      return failure();
    }
    if (loop && *loop != dim.getPosition()) {
      error(op) << "two loops (" << *loop << " and " << dim.getPosition()
                << ") walk the steps of its operands";
      return failure();
    }
    loop = dim.getPosition();
    rows = a->rows;
    stepOperand = operand.get();
  }
  if (!loop)
    return success();
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isTensor(operand.get()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    std::optional<unsigned> position =
        map.getResultPosition(getAffineDimExpr(*loop, op->getContext()));
    if (position) {
      sameExtent(operand.get(), stepOperand);
      if (failed(set(operand.get(), {int64_t(*position), rows}, op)))
        return failure();
      continue;
    }
    if (map.isFunctionOfDim(*loop)) {
      error(op) << "operand #" << operand.getOperandNumber()
                << " indexes the steps by an expression";
      return failure();
    }
    if (failed(setNone(operand.get(), op)))
      return failure();
  }
  for (auto [init, result] :
       llvm::zip(op.getDpsInitsMutable(), op->getResults()))
    if (failed(same(init.get(), result, op)))
      return failure();
  return success();
}

/// A seq op's tensors hold the steps where its shape signature puts T (or
/// attention's S) at dimension 1 (the router's and the experts' tokens at 0);
/// its states and weights hold none.
LogicalResult StepAxes::Solver::relateSeq(Operation *op) {
  auto packed = dyn_cast<PackedSequencesOpInterface>(op);
  if (packed && packed.getSegments()) {
    error(op) << op->getName()
              << " takes packed sequences (segments), which do not run "
                 "rank-local";
    return failure();
  }
  if (auto every = op->getAttrOfType<IntegerAttr>("checkpoint_every");
      every && every.getInt() > 0) {
    error(op) << op->getName()
              << " with checkpoint_every: checkpoints do not run rank-local";
    return failure();
  }
  ShapeSignature sig;
  cast<ShapeSignatureOpInterface>(op).buildShapeSignature(sig);
  // The tensors that count T alike, and those that count S (attention's
  // keys, which may be another sequence).
  Value firstT, firstS;
  for (const TensorDecl &decl : sig.tensors()) {
    if (!decl.value)
      continue;
    // Keys and values after a KV cache are whole (the cache and every
    // rank's new steps).
    if (isa<AttentionOp>(op) && (decl.name == "k" || decl.name == "v") &&
        isCacheAppend(decl.value)) {
      if (failed(setNone(decl.value, op)))
        return failure();
      continue;
    }
    int64_t axis = declaredStepAxis(decl, *stepDimOf(op));
    // The distribution splits the declared dimension only: steps anywhere
    // else (or counted otherwise) would pass for a whole tensor.
    for (auto [d, dim] : llvm::enumerate(decl.dims))
      if ((dim.symbol == "T" || dim.symbol == "S") && int64_t(d) != axis) {
        error(op) << op->getName() << "'s " << decl.name
                  << " counts steps in its dimension " << d
                  << ", which does not split over ranks";
        return failure();
      }
    if (failed(set(decl.value, {axis, 1}, op)))
      return failure();
    if (axis >= 0) {
      Value &first = decl.dims[axis].symbol == "T" ? firstT : firstS;
      if (first)
        sameExtent(first, decl.value);
      first = decl.value;
    }
  }
  return success();
}

/// A cache of dynamic length before the steps, concat(cache, x), read by
/// attention as its keys or values: a decode or chunked prefill's KV cache.
/// Keys and values follow a cache both or neither: the attention takes
/// them whole or gathers them alike.
LogicalResult StepAxes::Solver::findCacheAppends() {
  auto appendOf = [](Value keysOrValues) {
    auto concat = keysOrValues.getDefiningOp<tensor::ConcatOp>();
    bool append = concat && concat.getDim() == 1 &&
                  concat.getInputs().size() == 2 &&
                  !staticLengthAlong(concat.getInputs()[0], 1);
    return append ? concat : tensor::ConcatOp();
  };
  WalkResult walk = func.walk([&](AttentionOp attention) {
    tensor::ConcatOp keys = appendOf(attention.getK());
    tensor::ConcatOp values = appendOf(attention.getV());
    if (bool(keys) != bool(values)) {
      error(attention) << "the keys and values follow a KV cache both or "
                          "neither (one would be whole, the other a rank's "
                          "own steps)";
      return WalkResult::interrupt();
    }
    if (keys) {
      cacheAppends.insert(keys);
      cacheAppends.insert(values);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // Queries are a rank's own steps: a cache of them would be whole.
  walk = func.walk([&](AttentionOp attention) {
    if (!isCacheAppend(attention.getQ()))
      return WalkResult::advance();
    error(attention) << "reads a KV cache as its queries, which are each "
                        "rank's own steps";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

/// The cache and the concatenation are whole, the same on every rank; x
/// may hold the rank's own steps, which the distribution gathers before it.
LogicalResult StepAxes::Solver::relateCacheAppend(tensor::ConcatOp append) {
  if (failed(setNone(append.getResult(), append)))
    return failure();
  return setNone(append.getInputs()[0], append);
}

/// A concatenation along another dimension than the steps' keeps them
/// (every operand holds the same steps). Along the steps it must be a
/// token shift, `concat(state, x)`: the state holds a static number k of
/// steps and none of a rank's own, x the steps; the result counts k more
/// steps than x (another extent).
LogicalResult StepAxes::Solver::relateConcat(tensor::ConcatOp concat) {
  if (cacheAppends.contains(concat))
    return relateCacheAppend(concat);
  std::optional<StepAxis> a;
  for (Value v : concat->getOperands())
    if (stepped(v))
      a = get(v);
  if (stepped(concat.getResult()))
    a = get(concat.getResult());
  if (!a)
    return success();
  int64_t dim = concat.getDim();
  if (a->axis != int64_t(dim)) {
    for (Value input : concat.getInputs())
      if (failed(same(input, concat.getResult(), concat)))
        return failure();
    return success();
  }
  // Empty inputs (a KV cache on a first call) add no steps.
  SmallVector<Value> filled;
  for (Value input : concat.getInputs()) {
    if (staticLengthAlong(input, dim) != 0)
      filled.push_back(input);
    else if (failed(setNone(input, concat)))
      return failure();
  }
  if (filled.size() == 1)
    return same(filled.front(), concat.getResult(), concat);
  bool shift = concat.getInputs().size() == 2 && a->rows == 1 &&
               staticLengthAlong(filled[0], dim) && !stepped(filled[0]);
  if (!shift) {
    // Which rule it breaks is named once the fixpoint knows its inputs.
    mixingConcats.insert(concat);
    return success();
  }
  if (failed(setNone(filled[0], concat)) ||
      failed(set(filled[1], *a, concat)) ||
      failed(set(concat.getResult(), *a, concat)))
    return failure();
  shifts.insert(concat);
  return success();
}

LogicalResult StepAxes::Solver::explainMixingConcat(tensor::ConcatOp concat) {
  Value first = concat.getInputs().front();
  if (concat.getInputs().size() == 2 && !stepped(first) &&
      !staticLengthAlong(first, concat.getDim())) {
    error(concat) << "concatenates steps after a tensor of dynamic length "
                     "without steps (a KV cache): every rank would see it "
                     "before its own steps; an empty one, a token shift's "
                     "state of static length, or a KV cache that attention "
                     "reads as its keys and values, runs rank-local";
    return failure();
  }
  error(concat) << "concatenates along the steps, which is not a token "
                   "shift (concat(state, steps): a state of static length "
                   "without steps, then the steps, one row a step): each "
                   "rank holds only its own steps";
  return failure();
}

bool StepAxes::Solver::takesConcatTail(tensor::ExtractSliceOp slice) const {
  if (!slice.getSource().getDefiningOp<tensor::ConcatOp>())
    return false;
  std::optional<StepAxis> a = get(slice.getSource());
  return a && a->axis >= 0 &&
         !isConstantIntValue(slice.getMixedOffsets()[a->axis], 0);
}

/// A slice keeps the steps where it keeps their dimension (the check makes
/// sure it keeps all of them).
LogicalResult StepAxes::Solver::relateSlice(Value whole, Value part,
                                            const llvm::SmallBitVector &dropped,
                                            Operation *at) {
  auto wholeType = cast<RankedTensorType>(whole.getType());
  SmallVector<int64_t> partDimOf(wholeType.getRank(), -1);
  int64_t next = 0;
  for (int64_t d = 0; d < wholeType.getRank(); ++d)
    if (!dropped.test(d))
      partDimOf[d] = next++;
  if (std::optional<StepAxis> a = get(whole)) {
    if (a->axis < 0)
      return set(part, *a, at);
    if (partDimOf[a->axis] < 0) {
      error(at) << "drops the steps' dimension " << a->axis;
      return failure();
    }
    if (failed(set(part, {partDimOf[a->axis], a->rows}, at)))
      return failure();
  }
  if (std::optional<StepAxis> a = get(part)) {
    if (a->axis < 0)
      return set(whole, *a, at);
    for (int64_t d = 0; d < wholeType.getRank(); ++d)
      if (partDimOf[d] == a->axis)
        return set(whole, {d, a->rows}, at);
  }
  return success();
}

/// `flat` (the collapsed side) holds the steps in the group that holds
/// them on the `split` side; a step spans the group's other (static)
/// dimensions, its rows.
LogicalResult
StepAxes::Solver::relateReshape(Value flat, Value split,
                                ArrayRef<ReassociationIndices> groups,
                                Operation *at) {
  auto splitType = cast<RankedTensorType>(split.getType());
  sameExtent(flat, split);
  if (std::optional<StepAxis> a = get(split)) {
    if (a->axis < 0)
      return set(flat, *a, at);
    for (auto [g, group] : llvm::enumerate(groups)) {
      if (!llvm::is_contained(group, a->axis))
        continue;
      std::optional<int64_t> others = staticProduct(splitType, group, a->axis);
      if (!others || *others == 0 ||
          !outerDimsAreOne(splitType, group, a->axis)) {
        error(at) << "merges the steps with a dimension that is dynamic, "
                     "empty or outside them (a rank's steps must stay one "
                     "run: [1, T, C] -> [T C] does, [B, T] -> [B T] does "
                     "not)";
        return failure();
      }
      if (failed(set(flat, {int64_t(g), a->rows * *others}, at)))
        return failure();
    }
  }
  if (std::optional<StepAxis> a = get(flat)) {
    if (a->axis < 0)
      return set(split, *a, at);
    const ReassociationIndices &group = groups[a->axis];
    int64_t axis = onlyDynamic(splitType, group);
    std::optional<int64_t> others = staticProduct(splitType, group, axis);
    if (axis < 0 || !others || *others == 0 || a->rows % *others != 0 ||
        !outerDimsAreOne(splitType, group, axis)) {
      error(at) << "splits the steps' dimension into dimensions other than "
                   "the steps and static ones";
      return failure();
    }
    return set(split, {axis, a->rows / *others}, at);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The checks
//===----------------------------------------------------------------------===//

LogicalResult StepAxes::Solver::check(Operation *op) {
  for (Value result : op->getResults())
    if (failed(checkStaticSteps(result, op)))
      return failure();
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return checkLinalg(linalgOp);
  if (auto attention = dyn_cast<AttentionOp>(op))
    return checkCacheSteps(attention);
  if (stepDimOf(op))
    return success();
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tensor::DimOp dim) {
        std::optional<StepAxis> a = get(dim.getSource());
        std::optional<int64_t> index = dim.getConstantIndex();
        if (a && a->axis >= 0 && (!index || *index == a->axis))
          return checkCountUses(dim.getResult(), /*derived=*/false);
        return success();
      })
      .Case([&](tensor::EmptyOp empty) {
        std::optional<StepAxis> a = get(empty.getResult());
        if (!a || a->axis < 0)
          return success();
        return checkStepSize(empty.getMixedSizes()[a->axis], empty.getResult(),
                             *a, op, "a new tensor's steps");
      })
      .Case([&](tensor::ConcatOp concat) -> LogicalResult {
        if (shifts.contains(concat))
          return checkShiftUses(concat);
        if (cacheAppends.contains(concat))
          return checkCacheAppend(concat);
        return success();
      })
      .Case([&](tensor::ExtractSliceOp slice) {
        if (tensor::ConcatOp shift = shiftOf(slice.getSource()))
          return checkShiftSlice(slice, shift);
        return checkSlice(slice, slice.getSource());
      })
      .Case([&](tensor::InsertSliceOp slice) {
        return checkSlice(slice, slice.getDest());
      })
      .Case([&](tensor::ExpandShapeOp expand) {
        std::optional<StepAxis> a = get(expand.getResult());
        if (!a || a->axis < 0)
          return success();
        return checkStepSize(expand.getMixedOutputShape()[a->axis],
                             expand.getSrc(), *a, op, "the steps' dimension");
      })
      .Case([&](tensor::CastOp cast) -> LogicalResult {
        bool unranked =
            !isTensor(cast.getSource()) || !isTensor(cast.getResult());
        if (unranked &&
            (stepped(cast.getSource()) || stepped(cast.getResult()))) {
          error(op) << "casts a tensor with steps to or from an unranked one";
          return failure();
        }
        return success();
      })
      .Case<tensor::CollapseShapeOp, func::ReturnOp>(
          [](Operation *) { return success(); })
      .Default([&](Operation *other) -> LogicalResult {
        if (OpTrait::hasElementwiseMappableTraits(other))
          return success();
        auto touched = llvm::concat<const Value>(other->getOperands(),
                                                 other->getResults());
        if (llvm::none_of(touched, [&](Value v) { return stepped(v); }))
          return success();
        InFlightDiagnostic diag = error(other);
        diag << other->getName() << " does not run on each rank's own steps";
        if (isa<func::CallOp>(other))
          diag << " (calls are inlined by seqc's pipelines before this pass)";
        return failure();
      });
}

LogicalResult StepAxes::Solver::checkLinalg(linalg::LinalgOp op) {
  std::optional<unsigned> loop;
  for (OpOperand &operand : op->getOpOperands()) {
    std::optional<StepAxis> a = get(operand.get());
    if (a && a->axis >= 0)
      loop = cast<AffineDimExpr>(
                 op.getMatchingIndexingMap(&operand).getResult(a->axis))
                 .getPosition();
  }
  if (!loop)
    return success();
  if (op.getIteratorTypesArray()[*loop] != utils::IteratorType::parallel) {
    error(op) << "reduces over the steps (loop " << *loop
              << "): a sum or scan along them needs every rank's steps";
    return failure();
  }
  for (OpOperand &init : op.getDpsInitsMutable())
    if (!op.getMatchingIndexingMap(&init).isFunctionOfDim(*loop)) {
      error(op) << "writes its result #"
                << init.getOperandNumber() - op.getNumDpsInputs()
                << " once for every step (the last step wins)";
      return failure();
    }
  WalkResult walk = op->walk([&](linalg::IndexOp index) {
    if (index.getDim() != *loop)
      return WalkResult::advance();
    error(op) << "reads the step's position (linalg.index " << *loop
              << "), which differs on each rank";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult StepAxes::Solver::checkStaticSteps(Value v, Operation *at) {
  std::optional<StepAxis> a = get(v);
  if (!a || a->axis < 0)
    return success();
  auto type = cast<RankedTensorType>(v.getType());
  if (type.isDynamicDim(a->axis))
    return success();
  error(at) << "a tensor of type " << type << " holds the steps in dimension "
            << a->axis << " with a static size; each rank holds its own number "
            << "of steps, so that dimension must be dynamic (?)";
  return failure();
}

LogicalResult StepAxes::Solver::checkStepSize(OpFoldResult size, Value tensor,
                                              StepAxis axis, Operation *at,
                                              StringRef what) {
  auto value = dyn_cast<Value>(size);
  if (value && stepCountRows(axes, value) == axis.rows) {
    if (countsStepsOf(value, tensor))
      return success();
    error(at) << "sizes " << what << " by the number of steps of a tensor "
              << "that counts other steps (a table cut to the sequence's "
              << "length is not a rank's own steps)";
    return failure();
  }
  error(at) << "sizes " << what << " by something other than the number of "
            << "steps (tensor.dim of a tensor with steps)";
  return failure();
}

bool StepAxes::Solver::countsStepsOf(Value count, Value tensor) const {
  auto dim = count.getDefiningOp<tensor::DimOp>();
  return dim && extents.isEquivalent(dim.getSource(), tensor);
}

void StepAxes::Solver::joinFullSlices() {
  bool joined = true;
  auto join = [&](Value whole, Value part, ArrayRef<OpFoldResult> sizes) {
    std::optional<StepAxis> a = get(whole);
    if (!a || a->axis < 0 || extents.isEquivalent(whole, part))
      return;
    auto size = dyn_cast<Value>(sizes[a->axis]);
    if (size && countsStepsOf(size, whole)) {
      sameExtent(whole, part);
      joined = true;
    }
  };
  while (joined) {
    joined = false;
    func.walk([&](Operation *op) {
      auto shiftPrefix = dyn_cast<tensor::ExtractSliceOp>(op);
      if (shiftPrefix && shiftOf(shiftPrefix.getSource()) &&
          !takesConcatTail(shiftPrefix)) {
        // x shifted counts x's steps.
        join(shiftOf(shiftPrefix.getSource()).getInputs()[1],
             shiftPrefix.getResult(), shiftPrefix.getMixedSizes());
        return;
      }
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
        join(slice.getSource(), slice.getResult(), slice.getMixedSizes());
      else if (auto slice = dyn_cast<tensor::InsertSliceOp>(op))
        join(slice.getDest(), slice.getSource(), slice.getMixedSizes());
    });
  }
}

LogicalResult StepAxes::Solver::checkSlice(OffsetSizeAndStrideOpInterface slice,
                                           Value whole) {
  std::optional<StepAxis> a = get(whole);
  if (!a || a->axis < 0)
    return success();
  Operation *at = slice;
  if (!isConstantIntValue(slice.getMixedOffsets()[a->axis], 0) ||
      !isConstantIntValue(slice.getMixedStrides()[a->axis], 1)) {
    error(at) << "takes the steps at an offset or stride; each rank holds "
                 "only its own steps (a packed batch's sequences and a "
                 "checkpointed op's pieces are such slices: neither runs "
                 "rank-local)";
    return failure();
  }
  return checkStepSize(slice.getMixedSizes()[a->axis], whole, *a, at,
                       "a slice's steps");
}

/// The steps after a KV cache are a rank's own along the concatenation's
/// dimension, one row a step, or whole.
LogicalResult StepAxes::Solver::checkCacheAppend(tensor::ConcatOp append) {
  std::optional<StepAxis> a = get(append.getInputs()[1]);
  if (!a || a->axis < 0 || (a->axis == append.getDim() && a->rows == 1))
    return success();
  error(append) << "appends to a KV cache steps that are not along its "
                   "dimension "
                << append.getDim() << ", one row a step";
  return failure();
}

/// The keys and values after a KV cache are gathered alike: both a rank's
/// own steps, or both whole.
LogicalResult StepAxes::Solver::checkCacheSteps(AttentionOp attention) {
  if (!isCacheAppend(attention.getK()))
    return success();
  auto newSteps = [&](Value append) {
    return stepped(append.getDefiningOp<tensor::ConcatOp>().getInputs()[1]);
  };
  if (newSteps(attention.getK()) == newSteps(attention.getV()))
    return success();
  error(attention) << "appends to its KV cache keys and values of which one "
                      "holds each rank's own steps and the other is whole";
  return failure();
}

/// A token shift's uses: slices of it (the checks of each follow), and its
/// size (the run-time checks of the slices' bounds, whose uses the checks
/// of tensor.dim follow).
LogicalResult StepAxes::Solver::checkShiftUses(tensor::ConcatOp shift) {
  for (Operation *user : shift->getUsers()) {
    auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
    if ((slice && slice.getSource() == shift.getResult()) ||
        isa<tensor::DimOp>(user))
      continue;
    error(user) << user->getName()
                << " takes a token shift's concatenation whole; only its "
                   "slices [0, T) (the steps shifted) and [T, T + s), s <= "
                   "k (the state after them) run rank-local";
    return failure();
  }
  return success();
}

/// [0, T): x shifted, T x's own steps; [T, T + s) with s <= k: the state
/// after x, T again x's own steps.
LogicalResult StepAxes::Solver::checkShiftSlice(tensor::ExtractSliceOp slice,
                                                tensor::ConcatOp shift) {
  int64_t dim = shift.getDim();
  Value x = shift.getInputs()[1];
  int64_t k = *staticLengthAlong(shift.getInputs()[0], dim);
  OpFoldResult offset = slice.getMixedOffsets()[dim];
  OpFoldResult size = slice.getMixedSizes()[dim];
  if (!isConstantIntValue(slice.getMixedStrides()[dim], 1)) {
    error(slice) << "takes a token shift's steps with a stride";
    return failure();
  }
  if (isConstantIntValue(offset, 0))
    return checkStepSize(size, x, {dim, 1}, slice, "a token shift's steps");
  auto offsetValue = dyn_cast<Value>(offset);
  std::optional<int64_t> tail = getConstantIntValue(size);
  // T: x's own number of steps (its step dimension's size, a row a step).
  if (offsetValue && stepCountRows(axes, offsetValue) == 1 &&
      countsStepsOf(offsetValue, x) && tail && *tail <= k)
    return success();
  error(slice) << "takes a token shift at neither [0, T) (the steps shifted) "
               << "nor [T, T + s) with s <= " << k
               << " (the state after them), T the number of its steps";
  return failure();
}

/// Whether `user` takes `count` as the size of the steps' dimension, and
/// nowhere else.
bool StepAxes::Solver::isCountSize(Operation *user, Value count) {
  if (llvm::count(user->getOperands(), count) != 1)
    return false;
  auto isStepPosition = [&](ArrayRef<OpFoldResult> sizes, Value shaped) {
    std::optional<StepAxis> a = get(shaped);
    return a && a->axis >= 0 && dyn_cast<Value>(sizes[a->axis]) == count;
  };
  return TypeSwitch<Operation *, bool>(user)
      .Case([&](tensor::EmptyOp empty) {
        return isStepPosition(empty.getMixedSizes(), empty.getResult());
      })
      .Case([&](tensor::ExtractSliceOp slice) {
        // A shift's state after: at the number of steps.
        if (tensor::ConcatOp shift = shiftOf(slice.getSource()))
          if (dyn_cast<Value>(slice.getMixedOffsets()[shift.getDim()]) == count)
            return true;
        return isStepPosition(slice.getMixedSizes(), slice.getSource());
      })
      .Case([&](tensor::InsertSliceOp slice) {
        return isStepPosition(slice.getMixedSizes(), slice.getDest());
      })
      .Case([&](tensor::ExpandShapeOp expand) {
        return isStepPosition(expand.getMixedOutputShape(), expand.getResult());
      })
      .Default([](Operation *) { return false; });
}

/// The number of steps differs on each rank: it may size the steps'
/// dimension, and be compared (the run-time checks of sizes), but not
/// enter arithmetic whose result is a value of the computation.
LogicalResult StepAxes::Solver::checkCountUses(Value count, bool derived) {
  for (Operation *user : count.getUsers()) {
    if (isa<arith::CmpIOp, index::CmpOp>(user)) {
      if (failed(checkDecisionUses(user->getResult(0))))
        return failure();
      continue;
    }
    if (!derived && isCountSize(user, count))
      continue;
    // Index arithmetic on sizes (the run-time checks' bounds) may go on to
    // a comparison.
    if (isa<arith::ArithDialect, index::IndexDialect>(user->getDialect()) &&
        user->getNumResults() == 1 && user->getResult(0).getType().isIndex()) {
      if (failed(checkCountUses(user->getResult(0), /*derived=*/true)))
        return failure();
      continue;
    }
    if (isa<OffsetSizeAndStrideOpInterface>(user)) {
      error(user) << user->getName()
                  << " takes steps at a position counted from the number of "
                     "steps (the last step, say): each rank holds only its "
                     "own steps (a token shift runs rank-local written as "
                     "tensor.concat of its state and the steps, sliced)";
      return failure();
    }
    error(user) << user->getName()
                << " uses the number of steps as a value; each rank sees "
                   "only its own";
    return failure();
  }
  return success();
}

/// A comparison of the number of steps may only be asserted (the run-time
/// checks, which skip some when a dimension is empty: an scf.if without
/// results): a branch or selection on it would differ on each rank.
LogicalResult StepAxes::Solver::checkDecisionUses(Value decision) {
  for (Operation *user : decision.getUsers()) {
    if (isa<cf::AssertOp>(user))
      continue;
    // Combined, yielded by an scf.if or deciding one whose results are such
    // conditions too (as the run-time checks build them).
    SmallVector<Value> onward;
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(user)) {
      onward.push_back(user->getResult(0));
    } else if (isa<scf::YieldOp>(user) && isa<scf::IfOp>(user->getParentOp())) {
      for (OpOperand &use : decision.getUses())
        if (use.getOwner() == user)
          onward.push_back(
              user->getParentOp()->getResult(use.getOperandNumber()));
    } else if (auto guard = dyn_cast<scf::IfOp>(user)) {
      llvm::append_range(onward, guard->getResults());
    } else {
      error(user) << user->getName()
                  << " decides on the number of steps; each rank sees only "
                     "its own";
      return failure();
    }
    for (Value next : onward)
      if (failed(checkDecisionUses(next)))
        return failure();
    continue;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// StepAxes
//===----------------------------------------------------------------------===//

std::optional<int64_t> seqc::staticLengthAlong(Value tensor, int64_t dim) {
  while (true) {
    auto type = cast<RankedTensorType>(tensor.getType());
    if (!type.isDynamicDim(dim))
      return type.getDimSize(dim);
    auto cast = tensor.getDefiningOp<tensor::CastOp>();
    if (!cast || !isa<RankedTensorType>(cast.getSource().getType()))
      return std::nullopt;
    tensor = cast.getSource();
  }
}

FailureOr<StepAxes> StepAxes::analyze(func::FuncOp func) {
  StepAxes result;
  Solver solver(func, result.axes);
  if (failed(solver.run()))
    return failure();
  result.shiftOps.assign(solver.shifts.begin(), solver.shifts.end());
  result.cacheAppendOps.assign(solver.cacheAppends.begin(),
                               solver.cacheAppends.end());
  for (BlockArgument arg : func.getArguments()) {
    std::optional<StepAxis> axis = result.of(arg);
    if (!axis || axis->rows != 1)
      continue;
    result.argumentClasses[arg] =
        solver.extents.contains(arg) ? solver.extents.getLeaderValue(arg) : arg;
  }
  return result;
}

std::optional<StepAxis> StepAxes::of(Value value) const {
  auto it = axes.find(value);
  if (it == axes.end() || it->second.axis < 0)
    return std::nullopt;
  return it->second;
}

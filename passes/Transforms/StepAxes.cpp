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
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Index/IR/IndexOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
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
/// dimension 1), else -1.
int64_t declaredStepAxis(const TensorDecl &decl) {
  if (decl.dims.size() < 2)
    return kNoSteps;
  const DimExpr &d = decl.dims[1];
  if (d.scale != 1 || d.offset != 0)
    return kNoSteps;
  return d.symbol == "T" || d.symbol == "S" ? 1 : kNoSteps;
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
    do {
      changed = false;
      WalkResult walk = func.walk([&](Operation *op) {
        return failed(relate(op)) ? WalkResult::interrupt()
                                  : WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    } while (changed);
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

  // Relations, one kind of op each.
  LogicalResult relate(Operation *op);
  LogicalResult relateLinalg(linalg::LinalgOp op);
  LogicalResult relateSeq(Operation *op);
  LogicalResult relateSlice(Value whole, Value part,
                            const llvm::SmallBitVector &dropped, Operation *at);
  LogicalResult relateReshape(Value flat, Value split,
                              ArrayRef<ReassociationIndices> groups,
                              Operation *at);

  // Checks, one kind of op each.
  LogicalResult check(Operation *op);
  LogicalResult checkLinalg(linalg::LinalgOp op);
  LogicalResult checkStaticSteps(Value v, Operation *at);
  LogicalResult checkStepSize(OpFoldResult size, StepAxis axis, Operation *at,
                              StringRef what);
  /// A slice of `whole` (the tensor it takes from or inserts into).
  LogicalResult checkSlice(OffsetSizeAndStrideOpInterface slice, Value whole);
  LogicalResult checkCountUses(Value count, bool derived);
  bool isCountSize(Operation *user, Value count);

  InFlightDiagnostic error(Operation *at) {
    InFlightDiagnostic diag = at->emitError();
    diag << kPrefix;
    return diag;
  }

  func::FuncOp func;
  llvm::DenseMap<Value, StepAxis> &axes;
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
  if (isa<PackedSequencesOpInterface>(op))
    return relateSeq(op);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tensor::CastOp cast) {
        return same(cast.getSource(), cast.getResult(), op);
      })
      .Case([&](tensor::ExtractSliceOp slice) {
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
  }
  if (!loop)
    return success();
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isTensor(operand.get()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    std::optional<unsigned> position =
        map.getResultPosition(getAffineDimExpr(*loop, op->getContext()));
    LogicalResult related =
        position
            ? set(operand.get(), {int64_t(*position), rows}, op)
            : (map.isFunctionOfDim(*loop)
                   ? (error(op) << "operand #" << operand.getOperandNumber()
                                << " indexes the steps by an expression",
                      failure())
                   : setNone(operand.get(), op));
    if (failed(related))
      return failure();
  }
  for (auto [init, result] :
       llvm::zip(op.getDpsInitsMutable(), op->getResults()))
    if (failed(same(init.get(), result, op)))
      return failure();
  return success();
}

/// A seq op's tensors hold the steps where its shape signature puts T (or
/// attention's S) at dimension 1; its states and weights hold none.
LogicalResult StepAxes::Solver::relateSeq(Operation *op) {
  if (cast<PackedSequencesOpInterface>(op).getSegments()) {
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
  for (const TensorDecl &decl : sig.tensors()) {
    if (!decl.value)
      continue;
    int64_t axis = declaredStepAxis(decl);
    // The distribution splits dimension 1 only: steps anywhere else (or
    // counted otherwise) would pass for a whole tensor.
    for (auto [d, dim] : llvm::enumerate(decl.dims))
      if ((dim.symbol == "T" || dim.symbol == "S") && int64_t(d) != axis) {
        error(op) << op->getName() << "'s " << decl.name
                  << " counts steps in its dimension " << d
                  << ", which does not split over ranks";
        return failure();
      }
    if (failed(set(decl.value, {axis, 1}, op)))
      return failure();
  }
  return success();
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
  if (std::optional<StepAxis> a = get(split)) {
    if (a->axis < 0)
      return set(flat, *a, at);
    for (auto [g, group] : llvm::enumerate(groups)) {
      if (!llvm::is_contained(group, a->axis))
        continue;
      std::optional<int64_t> others = staticProduct(splitType, group, a->axis);
      if (!others) {
        error(at) << "merges the steps with a dimension of dynamic size";
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
    if (axis < 0 || !others || a->rows % *others != 0) {
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
  if (isa<PackedSequencesOpInterface>(op))
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
        return checkStepSize(empty.getMixedSizes()[a->axis], *a, op,
                             "a new tensor's steps");
      })
      .Case([&](tensor::ExtractSliceOp slice) {
        return checkSlice(slice, slice.getSource());
      })
      .Case([&](tensor::InsertSliceOp slice) {
        return checkSlice(slice, slice.getDest());
      })
      .Case([&](tensor::ExpandShapeOp expand) {
        std::optional<StepAxis> a = get(expand.getResult());
        if (!a || a->axis < 0)
          return success();
        return checkStepSize(expand.getMixedOutputShape()[a->axis], *a, op,
                             "the steps' dimension");
      })
      .Case<tensor::CastOp, tensor::CollapseShapeOp, func::ReturnOp>(
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

LogicalResult StepAxes::Solver::checkStepSize(OpFoldResult size, StepAxis axis,
                                              Operation *at, StringRef what) {
  if (auto value = dyn_cast<Value>(size))
    if (stepCountRows(axes, value) == axis.rows)
      return success();
  error(at) << "sizes " << what << " by something other than the number of "
            << "steps (tensor.dim of a tensor with steps)";
  return failure();
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
  return checkStepSize(slice.getMixedSizes()[a->axis], *a, at,
                       "a slice's steps");
}

/// Whether `user` takes `count` as the size of the steps' dimension.
bool StepAxes::Solver::isCountSize(Operation *user, Value count) {
  auto isStepPosition = [&](ArrayRef<OpFoldResult> sizes, Value shaped) {
    std::optional<StepAxis> a = get(shaped);
    return a && a->axis >= 0 && dyn_cast<Value>(sizes[a->axis]) == count;
  };
  return TypeSwitch<Operation *, bool>(user)
      .Case([&](tensor::EmptyOp empty) {
        return isStepPosition(empty.getMixedSizes(), empty.getResult());
      })
      .Case([&](tensor::ExtractSliceOp slice) {
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
    if (isa<arith::CmpIOp, index::CmpOp>(user) ||
        (!derived && isCountSize(user, count)))
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
                     "steps (a token shift, the last step): each rank holds "
                     "only its own steps";
      return failure();
    }
    error(user) << user->getName()
                << " uses the number of steps as a value; each rank sees "
                   "only its own";
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// StepAxes
//===----------------------------------------------------------------------===//

FailureOr<StepAxes> StepAxes::analyze(func::FuncOp func) {
  StepAxes result;
  Solver solver(func, result.axes);
  if (failed(solver.run()))
    return failure();
  return result;
}

std::optional<StepAxis> StepAxes::of(Value value) const {
  auto it = axes.find(value);
  if (it == axes.end() || it->second.axis < 0)
    return std::nullopt;
  return it->second;
}

bool StepAxes::isStepCount(Value value, int64_t &rows) const {
  std::optional<int64_t> found = stepCountRows(axes, value);
  if (found)
    rows = *found;
  return found.has_value();
}

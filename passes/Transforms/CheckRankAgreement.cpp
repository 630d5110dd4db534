//===- CheckRankAgreement.cpp - ranks check their shapes agree ------------===//
//
// A distributed function's exchanges pair each rank's data with the others'
// by position: ranks that pass arguments of different shapes would exchange
// mismatched data, or one rank would stop at a shape check while the others
// wait in a collective. Each call therefore starts with one all-gather of
// the arguments' dynamic sizes (but a rank's own number of steps), a row per
// rank, and every rank compares every row with rank 0's: all ranks see the
// same rows, so all stop alike, with the same message. Under rank-local
// steps the row also holds the steps of the arguments whose steps the graph
// relates (seq.step_group), and every rank checks that each rank's counts
// are alike. (The host checks before the call that the ranks call the same
// function of the same module with arguments it accepts: CallAgreement.)
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "Common/KernelBuilder.h"
#include "SeqRt/SeqRtDialect.h"
#include "Transforms/RankExchange.h"
#include "Transforms/RankGrid.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace seqc {
#define GEN_PASS_DEF_SEQCHECKRANKAGREEMENT
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc;

namespace {

/// One compared size: dimension `dim` of argument `arg`.
struct ComparedDim {
  BlockArgument arg;
  int64_t dim;
};

/// The sizes the ranks must agree on: every dynamic dimension of every
/// argument but its step dimension under rank-local steps (`seq.steps`),
/// which is the rank's own. Static sizes are the module's (the host checks
/// them before the call).
SmallVector<ComparedDim> comparedDims(func::FuncOp fn) {
  SmallVector<ComparedDim> dims;
  for (BlockArgument arg : fn.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    auto steps =
        fn.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kStepsAttrName);
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d) && !(steps && steps.getInt() == d))
        dims.push_back({arg, d});
  }
  return dims;
}

/// The arguments whose steps the graph relates (`seq.step_group`): a rank
/// passes as many steps in each of a group. One column of the row each, in
/// argument order; every argument after its group's first is checked
/// against that first one.
struct GroupedSteps {
  SmallVector<ComparedDim> columns;
  struct Pair {
    int64_t column, firstOfGroup; // indices into `columns`
  };
  SmallVector<Pair> pairs;
};

GroupedSteps groupedSteps(func::FuncOp fn) {
  GroupedSteps grouped;
  llvm::DenseMap<int64_t, int64_t> columnOfArgument;
  for (BlockArgument arg : fn.getArguments()) {
    unsigned number = arg.getArgNumber();
    auto group = fn.getArgAttrOfType<IntegerAttr>(number, kStepGroupAttrName);
    auto steps = fn.getArgAttrOfType<IntegerAttr>(number, kStepsAttrName);
    if (!group || !steps)
      continue;
    int64_t column = grouped.columns.size();
    grouped.columns.push_back({arg, steps.getInt()});
    columnOfArgument[number] = column;
    auto first = columnOfArgument.find(group.getInt());
    if (group.getInt() < number && first != columnOfArgument.end())
      grouped.pairs.push_back({column, first->second});
  }
  return grouped;
}

/// The lowest rank for which `differs(rank)` holds, or R when none does.
Value firstRankWhere(
    ImplicitLocOpBuilder &b, int64_t ranks,
    function_ref<Value(ImplicitLocOpBuilder &, Value)> differs) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value all = arith::ConstantIndexOp::create(b, ranks);
  // Downwards, so that the lowest rank found is the one left.
  auto loop = scf::ForOp::create(
      b, zero, all, one, ValueRange{all},
      [&](OpBuilder &nested, Location loc, Value i, ValueRange found) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value rank = arith::SubIOp::create(
            ib, arith::ConstantIndexOp::create(ib, ranks - 1), i);
        scf::YieldOp::create(
            ib, arith::SelectOp::create(ib, differs(ib, rank), rank, found[0])
                    .getResult());
      });
  return loop.getResult(0);
}

/// `column` of rank `rank`'s row of `rows`.
Value sizeOn(ImplicitLocOpBuilder &b, Value rows, Value rank, int64_t column) {
  return tensor::ExtractOp::create(
      b, rows,
      ValueRange{rank, arith::ConstantIndexOp::create(b, column).getResult()});
}

/// How an argument is named in messages: its position and seq.name.
std::string argumentName(func::FuncOp fn, BlockArgument arg) {
  std::string name = "argument " + std::to_string(arg.getArgNumber());
  if (auto given =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "seq.name"))
    name += " (" + given.str() + ")";
  return name;
}

/// What firstRankWhere found, for a check and its message.
struct FoundRank {
  Value rank;    // R where none
  Value none;    // i1: whether it found none (the check passes)
  Value clamped; // `rank` within the rows, to read where it found none
};

FoundRank found(ImplicitLocOpBuilder &b, Value rank, int64_t ranks) {
  Value all = arith::ConstantIndexOp::create(b, ranks);
  Value last = arith::ConstantIndexOp::create(b, ranks - 1);
  return {rank, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, rank, all),
          arith::MinSIOp::create(b, rank, last)};
}

/// "dimension D of argument I (name)", for messages.
std::string describe(func::FuncOp fn, const ComparedDim &d) {
  return "dimension " + std::to_string(d.dim) + " of " +
         argumentName(fn, d.arg);
}

/// Every rank checks that every other has the sizes rank 0 has in the
/// columns `dims` of `rows`.
void checkSameSizes(KernelBuilder &kb, func::FuncOp fn, Value rows,
                    ArrayRef<ComparedDim> dims, int64_t ranks) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value zero = arith::ConstantIndexOp::create(b, 0);
  for (auto [column, d] : llvm::enumerate(dims)) {
    Value rank =
        firstRankWhere(b, ranks, [&](ImplicitLocOpBuilder &ib, Value r) {
          Value ours = sizeOn(ib, rows, r, column);
          Value first = sizeOn(ib, rows, zero, column);
          return arith::CmpIOp::create(ib, arith::CmpIPredicate::ne, ours,
                                       first);
        });
    FoundRank differing = found(b, rank, ranks);
    bool steps = fn.getArgAttr(d.arg.getArgNumber(), kStepsAttrName) != nullptr;
    kb.check(differing.none,
             "the ranks disagree on " + describe(fn, d) +
                 ": {1} on rank {0}, {2} on rank 0 (every rank passes the " +
                 "same shapes" +
                 (steps ? ", but for its own number of steps)" : ")"),
             ValueRange{differing.rank,
                        sizeOn(b, rows, differing.clamped, column),
                        sizeOn(b, rows, zero, column)});
  }
}

/// Every rank checks that each rank's arguments of a group (columns from
/// `firstColumn` on) count as many steps.
void checkSameSteps(KernelBuilder &kb, func::FuncOp fn, Value rows,
                    const GroupedSteps &grouped, int64_t firstColumn,
                    int64_t ranks) {
  ImplicitLocOpBuilder &b = kb.builder();
  for (const GroupedSteps::Pair &pair : grouped.pairs) {
    int64_t steps = firstColumn + pair.column;
    int64_t first = firstColumn + pair.firstOfGroup;
    Value rank =
        firstRankWhere(b, ranks, [&](ImplicitLocOpBuilder &ib, Value r) {
          return arith::CmpIOp::create(ib, arith::CmpIPredicate::ne,
                                       sizeOn(ib, rows, r, steps),
                                       sizeOn(ib, rows, r, first));
        });
    FoundRank uneven = found(b, rank, ranks);
    kb.check(uneven.none,
             "rank {0}'s arguments count different numbers of steps: {1} in " +
                 describe(fn, grouped.columns[pair.column]) + ", {2} in " +
                 describe(fn, grouped.columns[pair.firstOfGroup]) +
                 " (the graph relates them: each rank passes as many of its " +
                 "own steps in both)",
             ValueRange{uneven.rank, sizeOn(b, rows, uneven.clamped, steps),
                        sizeOn(b, rows, uneven.clamped, first)});
  }
}

/// Inserts the agreement check at the start of `fn`.
void checkAgreement(func::FuncOp fn, int64_t ranks) {
  SmallVector<ComparedDim> dims = comparedDims(fn);
  GroupedSteps grouped = groupedSteps(fn);
  if (dims.empty() && grouped.pairs.empty())
    return; // every size is the module's or a rank's own
  OpBuilder builder = OpBuilder::atBlockBegin(&fn.getBody().front());
  ImplicitLocOpBuilder b(fn.getLoc(), builder);
  auto sizeOf = [&](const ComparedDim &d) -> Value {
    return arith::IndexCastOp::create(b, b.getI64Type(),
                                      tensor::DimOp::create(b, d.arg, d.dim));
  };
  SmallVector<Value> row;
  for (const ComparedDim &d : dims)
    row.push_back(sizeOf(d));
  if (!grouped.pairs.empty())
    for (const ComparedDim &d : grouped.columns)
      row.push_back(sizeOf(d));
  auto rowType =
      RankedTensorType::get({static_cast<int64_t>(row.size())}, b.getI64Type());
  Value rows =
      gatherRows(b, tensor::FromElementsOp::create(b, rowType, row), ranks);
  KernelBuilder kb(b);
  checkSameSizes(kb, fn, rows, dims, ranks);
  checkSameSteps(kb, fn, rows, grouped, dims.size(), ranks);
}

struct SeqCheckRankAgreement
    : seqc::impl::SeqCheckRankAgreementBase<SeqCheckRankAgreement> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grid = module.lookupSymbol<shard::GridOp>(kRankGridName);
    if (!grid)
      return; // nothing is exchanged
    int64_t ranks = grid.getShape()[0];
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal())
        checkAgreement(fn, ranks);
  }
};

} // namespace

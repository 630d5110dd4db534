//===- CheckRankAgreement.cpp - ranks check their shapes agree ------------===//
//
// A distributed function's exchanges pair each rank's data with the others'
// by position: ranks that pass arguments of different shapes would exchange
// mismatched data, or one rank would stop at a shape check while the others
// wait in a collective. Each call therefore starts with one all-gather of
// the arguments' dynamic sizes (but a rank's own number of steps), a row per
// rank, and every rank compares every row with rank 0's: all ranks see the
// same rows, so all stop alike, with the same message.
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

/// The first rank whose `column` of `rows` [R, columns] differs from rank
/// 0's, or R when none does.
Value firstDifferingRank(ImplicitLocOpBuilder &b, Value rows, Value column,
                         int64_t ranks) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value all = arith::ConstantIndexOp::create(b, ranks);
  Value first = tensor::ExtractOp::create(b, rows, ValueRange{zero, column});
  // Downwards, so that the lowest differing rank is the one left.
  auto loop = scf::ForOp::create(
      b, one, all, one, ValueRange{all},
      [&](OpBuilder &nested, Location loc, Value i, ValueRange found) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value rank = arith::SubIOp::create(
            ib, arith::ConstantIndexOp::create(ib, ranks), i);
        Value theirs =
            tensor::ExtractOp::create(ib, rows, ValueRange{rank, column});
        Value differs =
            arith::CmpIOp::create(ib, arith::CmpIPredicate::ne, theirs, first);
        scf::YieldOp::create(
            ib,
            arith::SelectOp::create(ib, differs, rank, found[0]).getResult());
      });
  return loop.getResult(0);
}

/// How an argument is named in messages: its position and seq.name.
std::string argumentName(func::FuncOp fn, BlockArgument arg) {
  std::string name = "argument " + std::to_string(arg.getArgNumber());
  if (auto given =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "seq.name"))
    name += " (" + given.str() + ")";
  return name;
}

/// Inserts the agreement check at the start of `fn`.
void checkAgreement(func::FuncOp fn, int64_t ranks) {
  SmallVector<ComparedDim> dims = comparedDims(fn);
  if (dims.empty())
    return; // every size is the module's or a rank's own
  OpBuilder builder = OpBuilder::atBlockBegin(&fn.getBody().front());
  ImplicitLocOpBuilder b(fn.getLoc(), builder);
  SmallVector<Value> row;
  for (const ComparedDim &d : dims)
    row.push_back(arith::IndexCastOp::create(
        b, b.getI64Type(), tensor::DimOp::create(b, d.arg, d.dim)));
  auto rowType =
      RankedTensorType::get({static_cast<int64_t>(row.size())}, b.getI64Type());
  Value rows =
      gatherRows(b, tensor::FromElementsOp::create(b, rowType, row), ranks);
  KernelBuilder kb(b);
  Value zero = arith::ConstantIndexOp::create(b, 0);
  for (auto [column, d] : llvm::enumerate(dims)) {
    Value col = arith::ConstantIndexOp::create(b, column);
    Value rank = firstDifferingRank(b, rows, col, ranks);
    Value agree =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, rank,
                              arith::ConstantIndexOp::create(b, ranks));
    // Read where they exist: rank `rank` is R when all agree.
    Value clamped = arith::MinSIOp::create(
        b, rank, arith::ConstantIndexOp::create(b, ranks - 1));
    Value theirs = tensor::ExtractOp::create(b, rows, ValueRange{clamped, col});
    Value ours = tensor::ExtractOp::create(b, rows, ValueRange{zero, col});
    kb.check(agree,
             "the ranks disagree on dimension " + std::to_string(d.dim) +
                 " of " + argumentName(fn, d.arg) +
                 ": {1} on rank {0}, {2} on rank 0 (every rank passes the " +
                 "same shapes" +
                 (fn.getArgAttr(d.arg.getArgNumber(), kStepsAttrName)
                      ? ", but for its own number of steps)"
                      : ")"),
             ValueRange{rank, theirs, ours});
  }
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

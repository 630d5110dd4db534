//===- CheckRankAgreement.cpp - ranks check their calls agree -------------===//
//
// A distributed function's exchanges pair each rank's data with the others'
// by position: ranks that run different modules, or pass arguments of
// different shapes, would exchange mismatched data, or one rank would stop
// at a shape check while the others wait in a collective. Each call
// therefore starts with one all-gather of a row of digests per rank (the
// module's, then one per argument's shape), and every rank compares every
// row with rank 0's: all ranks see the same rows, so all stop alike.
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
#include "llvm/ADT/Hashing.h"

namespace seqc {
#define GEN_PASS_DEF_SEQCHECKRANKAGREEMENT
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc;

namespace {

/// The module as text, without locations and with large constants (bound
/// weights) elided: what every rank must have compiled alike.
int64_t moduleDigest(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(16).enableDebugInfo(false);
  module->print(os, flags);
  return static_cast<int64_t>(llvm::hash_value(text));
}

/// The digests' arithmetic: `digest` mixed with `value` (FNV-1a's step,
/// on i64).
Value mix(ImplicitLocOpBuilder &b, Value digest, Value value) {
  Value prime = arith::ConstantIntOp::create(b, 0x100000001b3LL, 64);
  return arith::MulIOp::create(b, arith::XOrIOp::create(b, digest, value),
                               prime);
}

Value asI64(ImplicitLocOpBuilder &b, Value index) {
  return arith::IndexCastOp::create(b, b.getI64Type(), index);
}

/// One digest per argument of `fn`'s shape: each dimension's size, but for
/// a step dimension (`seq.steps`) the position of the first step-holding
/// argument whose steps are as many (its own where none is), so that what
/// the ranks compare is which arguments' steps agree, not how many a rank
/// holds.
SmallVector<Value> shapeDigests(ImplicitLocOpBuilder &b, func::FuncOp fn) {
  SmallVector<Value> digests;
  SmallVector<std::pair<Value, int64_t>> stepCounts; // (count, argument)
  for (BlockArgument arg : fn.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    Value digest = arith::ConstantIntOp::create(
        b, static_cast<int64_t>(0xcbf29ce484222325ULL), 64);
    if (!type) {
      digests.push_back(digest);
      continue;
    }
    auto steps =
        fn.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kStepsAttrName);
    for (int64_t d = 0; d < type.getRank(); ++d) {
      Value size = tensor::DimOp::create(b, arg, d);
      if (!steps || steps.getInt() != d) {
        digest = mix(b, digest, asI64(b, size));
        continue;
      }
      // The first earlier argument with as many steps, else this one.
      Value same = arith::ConstantIntOp::create(b, arg.getArgNumber(), 64);
      for (auto [count, index] : llvm::reverse(stepCounts)) {
        Value equal =
            arith::CmpIOp::create(b, arith::CmpIPredicate::eq, count, size);
        same = arith::SelectOp::create(
            b, equal, arith::ConstantIntOp::create(b, index, 64), same);
      }
      stepCounts.push_back({size, arg.getArgNumber()});
      digest = mix(b, digest, same);
    }
    digests.push_back(digest);
  }
  return digests;
}

/// The first rank whose `column` of `rows` [R, columns] differs from rank
/// 0's, or R when none does.
Value firstDifferingRank(ImplicitLocOpBuilder &b, Value rows, int64_t column,
                         int64_t ranks) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value col = arith::ConstantIndexOp::create(b, column);
  Value all = arith::ConstantIndexOp::create(b, ranks);
  Value first = tensor::ExtractOp::create(b, rows, ValueRange{zero, col});
  // Downwards, so that the lowest differing rank is the one left.
  auto loop = scf::ForOp::create(
      b, one, all, one, ValueRange{all},
      [&](OpBuilder &nested, Location loc, Value i, ValueRange found) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value p = arith::SubIOp::create(
            ib, arith::ConstantIndexOp::create(ib, ranks), i);
        Value theirs = tensor::ExtractOp::create(ib, rows, ValueRange{p, col});
        Value differs =
            arith::CmpIOp::create(ib, arith::CmpIPredicate::ne, theirs, first);
        Value next = arith::SelectOp::create(ib, differs, p, found[0]);
        scf::YieldOp::create(ib, next);
      });
  return loop.getResult(0);
}

/// Inserts the agreement check at the start of `fn`.
void checkAgreement(func::FuncOp fn, int64_t moduleHash, int64_t ranks) {
  Block &entry = fn.getBody().front();
  OpBuilder builder = OpBuilder::atBlockBegin(&entry);
  ImplicitLocOpBuilder b(fn.getLoc(), builder);
  SmallVector<Value> row{arith::ConstantIntOp::create(b, moduleHash, 64)};
  llvm::append_range(row, shapeDigests(b, fn));
  Value local = tensor::FromElementsOp::create(
      b,
      RankedTensorType::get({static_cast<int64_t>(row.size())}, b.getI64Type()),
      row);
  Value rows = gatherRows(b, local, ranks);
  KernelBuilder kb(b);
  auto checkColumn = [&](int64_t column, const std::string &what) {
    Value rank = firstDifferingRank(b, rows, column, ranks);
    Value agree =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, rank,
                              arith::ConstantIndexOp::create(b, ranks));
    kb.check(agree, what, ValueRange{rank});
  };
  checkColumn(0, "the ranks run different modules: rank {0}'s differs from "
                 "rank 0's (every rank must compile the same source with the "
                 "same options)");
  for (BlockArgument arg : fn.getArguments()) {
    std::string name = "argument " + std::to_string(arg.getArgNumber());
    if (auto given =
            fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "seq.name"))
      name += " (" + given.str() + ")";
    bool ownSteps =
        fn.getArgAttr(arg.getArgNumber(), kStepsAttrName) != nullptr;
    checkColumn(1 + arg.getArgNumber(),
                "the ranks disagree on the shape of " + name + ": rank {0}'s " +
                    (ownSteps ? "(but for its own number of steps) " : "") +
                    "differs from rank 0's");
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
    int64_t digest = moduleDigest(module);
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal())
        checkAgreement(fn, digest, ranks);
  }
};

} // namespace

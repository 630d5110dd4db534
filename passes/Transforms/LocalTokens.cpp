//===- LocalTokens.cpp - the router and the experts on a rank's tokens ----===//

#include "Transforms/LocalTokens.h"

#include "Common/KernelBuilder.h"
#include "Reference/ReferencePatterns.h"
#include "Transforms/RankExchange.h"
#include "Transforms/RankGrid.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace seqc;
using namespace seqc::seq;
using arith::CmpIPredicate;

namespace {

/// A 1-d tensor of `size` elements (static where `size` is a constant).
RankedTensorType vectorType(Value size, Type element) {
  std::optional<int64_t> known = getConstantIntValue(size);
  return RankedTensorType::get({known ? *known : ShapedType::kDynamic},
                               element);
}

/// `tensor` summed elementwise over the ranks, on every rank.
Value sumOverRanks(ImplicitLocOpBuilder &b, Value tensor) {
  return shard::AllReduceOp::create(b, tensor, kRankGridName,
                                    ArrayRef<shard::GridAxis>{0},
                                    shard::ReductionKind::Sum)
      .getResult();
}

/// Integer tables (i64) read and written as indices.
Value at(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value table,
         ValueRange ivs) {
  return arith::IndexCastOp::create(b, b.getIndexType(), kb.load(table, ivs));
}
Value put(KernelBuilder &kb, Value index, Value table, ValueRange ivs) {
  return kb.store(kb.indexToI64(index), table, ivs);
}

/// Elements [from, from + size) of a 1-d tensor.
Value part(ImplicitLocOpBuilder &b, Value tensor, Value from, Value size) {
  return sliceAlong(b, tensor, 0, getAsOpFoldResult(from),
                    getAsOpFoldResult(size));
}

//===----------------------------------------------------------------------===//
// The router's aux loss
//===----------------------------------------------------------------------===//

/// aux over every rank's tokens: the first-choice counts, probability sums
/// and token counts of the ranks, added up.
Value wholeAux(ImplicitLocOpBuilder &b, KernelBuilder &kb, RouteOp op,
               int64_t ranks) {
  Value logits = op.getLogits();
  Value T = kb.dim(logits, 0), E = kb.dim(logits, 1);
  RankedTensorType perExpert = vectorType(E, kb.f32Type());
  SmallVector<Value> sums = kb.loop(
      T, {kb.zeros(perExpert, {E}), kb.zeros(perExpert, {E})},
      [&](Value t, ValueRange it) {
        Value first = kb.i32ToIndex(kb.load(op.getIndices(), {t, kb.idx(0)}));
        Value counted = kb.fadd(kb.load(it[0], {first}), kb.f32(1.0));
        return SmallVector<Value>{
            kb.store(counted, it[0], {first}),
            addTokenProbabilities(kb, logits, t, E, it[1])};
      });
  // One exchange of [first-choice counts, probability sums], and one of
  // the token counts (exact as integers).
  Value size = affineIndex(kb, E, 2, 0);
  Value stats = kb.empty(vectorType(size, kb.f32Type()), {size});
  auto place = [&](Value piece, Value at) {
    return tensor::InsertSliceOp::create(
        b, piece, stats, ArrayRef<OpFoldResult>{getAsOpFoldResult(at)},
        ArrayRef<OpFoldResult>{getAsOpFoldResult(E)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  };
  stats = place(sums[0], kb.idx(0));
  stats = place(sums[1], E);
  stats = sumOverRanks(b, stats);
  Value tokens = sumOfCounts(b, kb, gatherCounts(b, kb, T, ranks), kb.idx(0),
                             kb.idx(ranks));
  return routeAuxLoss(kb, op.getAuxLossCoef().convertToDouble(), E, tokens,
                      part(b, stats, kb.idx(0), E), part(b, stats, E, E),
                      cast<RankedTensorType>(op.getAux().getType()));
}

//===----------------------------------------------------------------------===//
// The experts' capacity and load
//===----------------------------------------------------------------------===//

/// The routing weights with the choices capacity drops set to 0: a choice
/// of expert e is kept while e's count, over every choice before it in
/// token order (the ranks' before this one first), is below `capacity`.
Value dropOverCapacity(ImplicitLocOpBuilder &b, KernelBuilder &kb, MoeFfnOp op,
                       Value table, Value capacity, Value T, Value K, Value E) {
  Value rank =
      shard::ProcessLinearIndexOp::create(b, b.getIndexType(), kRankGridName);
  Value taken = kb.zeros(vectorType(E, b.getI64Type()), {E});
  taken = kb.loop(E, {taken}, [&](Value e, ValueRange it) {
    return SmallVector<Value>{
        put(kb, sumColumnToRank(b, kb, table, e, rank), it[0], {e})};
  })[0];
  Value weights = op.getWeights();
  return kb.nest({T, K}, {weights, taken}, [&](ValueRange tj, ValueRange it) {
    Value e = kb.i32ToIndex(kb.load(op.getIndices(), tj));
    Value before = at(b, kb, it[1], {e});
    Value kept = kb.cmp(CmpIPredicate::slt, before, capacity);
    Value w = kb.select(kept, kb.load(weights, tj), kb.f32(0.0));
    return SmallVector<Value>{kb.store(w, it[0], tj),
                              put(kb, kb.add(before, kb.idx(1)), it[1], {e})};
  })[0];
}

} // namespace

void seqc::distributeLocalRoute(RouteOp op, int64_t ranks) {
  // Without an aux loss (or a use of it) routing is per token.
  if (ranks == 1 || op.getAuxLossCoef().isZero() || op.getAux().use_empty())
    return;
  IRRewriter rewriter(op->getContext());
  rewriter.setInsertionPointAfter(op);
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  KernelBuilder kb(b);
  kb.checksFor(op);
  Value aux = wholeAux(b, kb, op, ranks);
  rewriter.replaceAllUsesWith(op.getAux(), aux);
}

void seqc::distributeLocalExperts(MoeFfnOp op, int64_t ranks) {
  if (ranks == 1)
    return;
  IRRewriter rewriter(op->getContext());
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  KernelBuilder kb(b);
  kb.checksFor(op);
  DimSizes dims = DimSizes::checkAndCollect(kb, op);
  Value T = dims["T"], K = dims["k"], E = dims["E"];
  Value table = gatherExpertCounts(b, kb, op.getIndices(), T, K, E, ranks);
  // Every rank sees every rank's bad indices, so that all fail alike
  // before the next exchange.
  Value all = kb.idx(ranks);
  Value bad = sumColumnToRank(b, kb, table, E, all);
  kb.check(kb.cmp(CmpIPredicate::eq, bad, kb.idx(0)),
           "{0} expert indices of the ranks' tokens are outside [0, {1})",
           {bad, E});
  Value tokens = sumColumnToRank(b, kb, table, affineIndex(kb, E, 1, 1), all);
  Value capacity = expertCapacity(kb, op.getCapacityFactor().convertToDouble(),
                                  tokens, K, E);
  // load[e]: e's choices over every rank, up to the capacity.
  auto loadType = cast<RankedTensorType>(op.getLoad().getType());
  Value load =
      kb.loop(E, {kb.zeros(loadType, {E})}, [&](Value e, ValueRange it) {
        Value choices = sumColumnToRank(b, kb, table, e, all);
        return SmallVector<Value>{
            put(kb, kb.mins(choices, capacity), it[0], {e})};
      })[0];
  if (op.getCapacityFactor().isZero()) {
    rewriter.replaceAllUsesWith(op.getLoad(), load);
    return;
  }
  Value weights = dropOverCapacity(b, kb, op, table, capacity, T, K, E);
  auto mine =
      MoeFfnOp::create(b, op.getY().getType(), loadType, op.getX(), weights,
                       op.getIndices(), op.getWUp(), op.getWDown(),
                       op.getWGate(), op.getActivation(), APFloat(0.0f));
  rewriter.replaceOp(op, {mine.getY(), load});
}

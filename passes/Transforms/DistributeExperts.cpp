//===- DistributeExperts.cpp - moe_ffn's experts split over ranks ---------===//
//
// Expert parallelism (SPEC section 3, `--parallel experts`): under R ranks,
// rank r holds experts [r E / R, (r + 1) E / R) of every seq.moe_ffn and
// routes tokens [r T / R, (r + 1) T / R). The function's arguments and
// results stay whole on every rank (as under sequence parallelism), and
// the results equal the single-process op's to float rounding:
//
//   1. Every rank checks every expert index, so a bad one fails all ranks
//      alike before any exchange.
//   2. Each rank counts its tokens' choices per expert (and its tokens,
//      and its indices outside [0, E)); one all-gather of the R x (E + 2)
//      counts tells every rank all of them.
//   3. Capacity in token order across ranks: rank p's choices of expert e
//      come after those of the ranks before it, so p keeps
//      accepted[p][e] = clamp(cap - sum_{p' < p} count[p'][e], 0,
//      count[p][e]) of them: its first ones.
//   4. Dispatch: a rank's accepted choices are laid out by expert (hence by
//      destination rank), in token order within an expert.
//   5. All-to-all of those rows, pairwise (at step s rank r pairs with
//      r xor s, the lower one sends first, so blocking sends and receives
//      never wait on each other in a cycle). A rank receives from each p
//      the rows for its experts, ordered by expert, with counts it knows
//      from `accepted`: no index travels.
//   6. The rank's experts: seq.moe_ffn over the received rows (k = 1, each
//      row's routing weight, no capacity), on its slice of the weights.
//   7. The results return along the same blocks; each token sums its
//      choices' rows in choice order.
//   8. The tokens' results are all-gathered; `load` is the column sums of
//      `accepted`, the same on every rank.
//
// With `local` (rank-local steps) the op's tokens are the rank's own, any
// number of them: stage 1 becomes the check that no rank counted a bad
// index (after stage 2, before any other exchange), capacity counts every
// rank's tokens, and stage 8 keeps the rank's results instead of gathering.
//
// Rows of 16-bit floats travel as their bits (i16: MPI has no 16-bit float
// datatype), routing weights as f32, the tokens' results gathered in f32.
// The exchanges are `shard` ops on the grid @seq_ranks: all_gather, and
// send / recv with a dynamic peer, which each target lowers to its engine
// (CPU: MPI_Send / MPI_Recv; NCCL's grouped send / recv is the same shape).
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "Common/KernelBuilder.h"
#include "Reference/ReferencePatterns.h"
#include "Seq/SeqDialect.h"
#include "Transforms/RankExchange.h"
#include "Transforms/RankGrid.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/MathExtras.h"

namespace seqc {
#define GEN_PASS_DEF_SEQDISTRIBUTEEXPERTS
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc;
using namespace seqc::seq;
using arith::CmpIPredicate;

namespace {

/// Rows [offset, offset + count) of a dispatch or receive layout.
struct RowBlock {
  Value offset, count;
};

class ExpertDistribution {
public:
  ExpertDistribution(MoeFfnOp op, ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     const DimSizes &dims, int64_t ranks, bool local)
      : op(op), b(b), kb(kb), ranks(ranks), local(local), T(dims["T"]),
        D(dims["D"]), K(dims["k"]), E(dims["E"]) {
    rank =
        shard::ProcessLinearIndexOp::create(b, b.getIndexType(), kRankGridName);
    if (local) {
      // The op's tokens are the rank's.
      tokenStart = kb.idx(0);
      tokenCount = T;
    } else {
      RankSlice mine = rankSlice(kb, rank, T, ranks);
      tokenStart = mine.start;
      tokenCount = mine.length;
    }
    std::optional<int64_t> experts = getConstantIntValue(E);
    localExperts =
        experts ? kb.idx(*experts / ranks) : kb.divs(E, kb.idx(ranks));
  }

  /// {y, load}, whole and equal on every rank.
  SmallVector<Value> distribute();

private:
  // Small integer tensors of counts (i64), read and written as indices.
  Value at(Value tensor, ValueRange ivs) {
    return arith::IndexCastOp::create(b, b.getIndexType(),
                                      kb.load(tensor, ivs));
  }
  Value put(Value index, Value tensor, ValueRange ivs) {
    return kb.store(kb.indexToI64(index), tensor, ivs);
  }
  Value counters(ArrayRef<Value> sizes);
  Value firstExpertOf(Value p) { return kb.mul(p, localExperts); }
  /// sum of table[row][e] over experts e in [from, to).
  Value sumRow(Value table, Value row, Value from, Value to);
  Value sumColumn(Value counts, Value column);

  // Routing (stages 2-4).
  Value sliceTokens(Value tensor, int64_t dim = 0);
  Value countChoices(Value localIndices);
  Value acceptChoices(Value counts, Value capacity);
  void dispatchChoices(Value localIndices, Value accepted);

  // The exchange (stage 5 and 7).
  RowBlock dispatchedTo(Value p);
  RowBlock receivedFrom(Value p);
  using Layout = std::function<RowBlock(Value p)>;
  Value exchange(Value rows, Value total, const Layout &outgoing,
                 const Layout &incoming);
  Value copyRows(Value from, RowBlock source, Value into, Value at);

  // The rank's experts (stage 6) and the results (stages 7-8).
  Type wireType();
  Value toWire(Value element);
  Value wireToF32(Value bits);
  Value reinterpretRows(Value rows, Type element, Value count);
  Value gatherTokenRows(Value localX);
  Value gatherChoiceWeights(Value localWeights);
  Value receivedExperts(Value total);
  Value expertSlice(Value weights);
  Value runLocalExperts(Value rows, Value rowWeights, Value rowExperts,
                        Value total);
  Value combineChoices(Value returned);
  Value wholeTokens(Value local);
  Value expertLoad();

  MoeFfnOp op;
  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  int64_t ranks;
  /// The op's tokens are the rank's own (rank-local steps), not the whole.
  bool local;
  Value T, D, K, E;
  Value rank, tokenStart, tokenCount, localExperts;
  /// R x E accepted choices per rank and expert.
  Value accepted;
  /// The rank's tokens: choice (t, j) -> dispatch row or -1 (dropped), and
  /// dispatch row -> t k + j.
  Value rowOfChoice, choiceOfRow;
  Value dispatchedRows;
};

} // namespace

//===----------------------------------------------------------------------===//
// Counts
//===----------------------------------------------------------------------===//

Value ExpertDistribution::counters(ArrayRef<Value> sizes) {
  SmallVector<int64_t> shape;
  for (Value size : sizes) {
    std::optional<int64_t> known = getConstantIntValue(size);
    shape.push_back(known ? *known : ShapedType::kDynamic);
  }
  return kb.zeros(RankedTensorType::get(shape, b.getI64Type()), sizes);
}

Value ExpertDistribution::sumRow(Value table, Value row, Value from, Value to) {
  return kb.loop(from, to, {kb.idx(0)}, [&](Value e, ValueRange sum) {
    return SmallVector<Value>{kb.add(sum[0], at(table, {row, e}))};
  })[0];
}

Value ExpertDistribution::sliceTokens(Value tensor, int64_t dim) {
  return sliceAlong(b, tensor, dim, tokenStart, tokenCount);
}

/// R x (E + 2) counts on every rank: choices per rank and expert, then
/// each rank's indices outside [0, E) and its tokens.
Value ExpertDistribution::countChoices(Value localIndices) {
  return gatherExpertCounts(b, kb, localIndices, tokenCount, K, E, ranks);
}

/// Capacity in token order: the ranks' choices of an expert come in rank
/// order, and each keeps what the ones before it left.
Value ExpertDistribution::acceptChoices(Value counts, Value capacity) {
  Value table = counters({kb.idx(ranks), E});
  return kb.loop(E, {table}, [&](Value e, ValueRange t) {
    return SmallVector<Value>{
        kb.loop(kb.idx(ranks), {t[0], kb.idx(0)}, [&](Value p, ValueRange it) {
          Value count = at(counts, {p, e});
          Value left =
              arith::MaxSIOp::create(b, kb.sub(capacity, it[1]), kb.idx(0));
          Value kept = kb.mins(count, left);
          return SmallVector<Value>{put(kept, it[0], {p, e}),
                                    kb.add(it[1], count)};
        })[0]};
  })[0];
}

/// The rank's accepted choices laid out by expert, in token order: an
/// expert's first accepted[rank][e] choices are the accepted ones.
void ExpertDistribution::dispatchChoices(Value localIndices, Value accepted) {
  // The first row of each expert's block.
  Value firstRow = counters({E});
  Value total;
  {
    SmallVector<Value> scan =
        kb.loop(E, {firstRow, kb.idx(0)}, [&](Value e, ValueRange it) {
          return SmallVector<Value>{put(it[1], it[0], {e}),
                                    kb.add(it[1], at(accepted, {rank, e}))};
        });
    firstRow = scan[0];
    total = scan[1];
  }
  dispatchedRows = total;
  Value rows = counters({tokenCount, K});
  Value choices = counters({total});
  Value taken = counters({E});
  SmallVector<Value> result = kb.nest(
      {tokenCount, K}, {rows, choices, taken},
      [&](ValueRange tj, ValueRange it) {
        Value e = kb.i32ToIndex(kb.load(localIndices, tj));
        Value before = at(it[2], {e});
        Value kept =
            kb.cmp(CmpIPredicate::slt, before, at(accepted, {rank, e}));
        Value row = kb.add(at(firstRow, {e}), before);
        Value dropped = arith::ConstantIndexOp::create(b, -1);
        Value rowsNext = put(kb.select(kept, row, dropped), it[0], tj);
        Value choice = kb.add(kb.mul(tj[0], K), tj[1]);
        Value choicesNext = kb.ifElse(
            kept, {it[1].getType()},
            [&] { return SmallVector<Value>{put(choice, it[1], {row})}; },
            [&] { return SmallVector<Value>{it[1]}; })[0];
        Value takenNext = put(kb.add(before, kb.idx(1)), it[2], {e});
        return SmallVector<Value>{rowsNext, choicesNext, takenNext};
      });
  rowOfChoice = result[0];
  choiceOfRow = result[1];
}

//===----------------------------------------------------------------------===//
// The exchange
//===----------------------------------------------------------------------===//

/// The rows this rank dispatches to rank p's experts.
RowBlock ExpertDistribution::dispatchedTo(Value p) {
  Value first = firstExpertOf(p);
  Value end = kb.add(first, localExperts);
  return {sumRow(accepted, rank, kb.idx(0), first),
          sumRow(accepted, rank, first, end)};
}

/// The rows this rank's experts receive from rank p (after those of the
/// ranks before p).
RowBlock ExpertDistribution::receivedFrom(Value p) {
  Value first = firstExpertOf(rank);
  Value end = kb.add(first, localExperts);
  Value offset = kb.loop(p, {kb.idx(0)}, [&](Value q, ValueRange sum) {
    return SmallVector<Value>{kb.add(sum[0], sumRow(accepted, q, first, end))};
  })[0];
  return {offset, sumRow(accepted, p, first, end)};
}

/// Rows `source` of `from` placed at row `at` of `into`.
Value ExpertDistribution::copyRows(Value from, RowBlock source, Value into,
                                   Value at) {
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes{source.count,
                                  tensor::getMixedSize(b, b.getLoc(), from, 1)};
  Value block = tensor::ExtractSliceOp::create(
      b, from, ArrayRef<OpFoldResult>{source.offset, b.getIndexAttr(0)}, sizes,
      strides);
  return tensor::InsertSliceOp::create(
      b, block, into, ArrayRef<OpFoldResult>{at, b.getIndexAttr(0)}, sizes,
      strides);
}

/// `rows` (laid out by `outgoing`) sent to every rank and the rows every
/// rank sends back laid out by `incoming` into `total` rows: the rank's own
/// block copied, the others exchanged pairwise.
Value ExpertDistribution::exchange(Value rows, Value total,
                                   const Layout &outgoing,
                                   const Layout &incoming) {
  auto type = cast<RankedTensorType>(rows.getType());
  Value width = kb.dim(rows, 1);
  Value into = kb.empty(type, {total, width});
  into = copyRows(rows, outgoing(rank), into, incoming(rank).offset);

  auto rowsOf = [&](Value count) { return kb.empty(type, {count, width}); };
  auto send = [&](RowBlock block, Value peer) {
    Value out = copyRows(rows, block, rowsOf(block.count), kb.idx(0));
    shard::SendOp::create(b, out.getType(), kRankGridName, ArrayRef<int16_t>{0},
                          out, ArrayRef<int64_t>{ShapedType::kDynamic},
                          ValueRange{peer});
  };
  auto receive = [&](RowBlock block, Value peer, Value current) {
    Value in = shard::RecvOp::create(
        b, type, kRankGridName, ArrayRef<int16_t>{0}, rowsOf(block.count),
        b.getDenseI64ArrayAttr({ShapedType::kDynamic}), ValueRange{peer});
    return copyRows(in, {kb.idx(0), block.count}, current, block.offset);
  };
  int64_t steps = static_cast<int64_t>(llvm::PowerOf2Ceil(ranks));
  return kb.loop(kb.idx(1), kb.idx(steps), {into}, [&](Value s, ValueRange it) {
    Value peer = arith::XOrIOp::create(b, rank, s);
    Value exists = kb.cmp(CmpIPredicate::slt, peer, kb.idx(ranks));
    return kb.ifElse(
        exists, {it[0].getType()},
        [&] {
          RowBlock out = outgoing(peer), in = incoming(peer);
          Value sendsFirst = kb.cmp(CmpIPredicate::slt, rank, peer);
          return kb.ifElse(
              sendsFirst, {it[0].getType()},
              [&] {
                send(out, peer);
                return SmallVector<Value>{receive(in, peer, it[0])};
              },
              [&] {
                Value received = receive(in, peer, it[0]);
                send(out, peer);
                return SmallVector<Value>{received};
              });
        },
        [&] { return SmallVector<Value>{it[0]}; });
  })[0];
}

//===----------------------------------------------------------------------===//
// The rank's experts and the results
//===----------------------------------------------------------------------===//

/// x's element type as its rows travel: 16-bit floats as their bits (MPI
/// has no 16-bit float datatype; exact, and half the bytes of f32).
Type ExpertDistribution::wireType() {
  Type element = getElementTypeOrSelf(op.getX().getType());
  return element.isF32() ? element : b.getI16Type();
}

Value ExpertDistribution::toWire(Value element) {
  Type wire = wireType();
  return element.getType() == wire
             ? element
             : arith::BitcastOp::create(b, wire, element).getResult();
}

Value ExpertDistribution::wireToF32(Value bits) {
  if (bits.getType().isF32())
    return bits;
  Type element = getElementTypeOrSelf(op.getX().getType());
  Value v = arith::BitcastOp::create(b, element, bits);
  return arith::ExtFOp::create(b, b.getF32Type(), v);
}

/// `rows` (count x D) with each element's bits read as `element`.
Value ExpertDistribution::reinterpretRows(Value rows, Type element,
                                          Value count) {
  auto type = cast<RankedTensorType>(rows.getType());
  if (type.getElementType() == element)
    return rows;
  Value out =
      kb.empty(RankedTensorType::get(type.getShape(), element), {count, D});
  return kb.nest({count, D}, {out}, [&](ValueRange nd, ValueRange it) {
    Value bits = tensor::ExtractOp::create(b, rows, nd);
    Value v = arith::BitcastOp::create(b, element, bits);
    return SmallVector<Value>{tensor::InsertOp::create(b, v, it[0], nd)};
  })[0];
}

/// Dispatch row n: x[t] of its choice (t, j), on the wire.
Value ExpertDistribution::gatherTokenRows(Value localX) {
  auto type = RankedTensorType::get(
      {ShapedType::kDynamic,
       cast<RankedTensorType>(op.getX().getType()).getDimSize(1)},
      wireType());
  Value rows = kb.empty(type, {dispatchedRows, D});
  return kb.nest(
      {dispatchedRows, D}, {rows}, [&](ValueRange nd, ValueRange it) {
        Value t = kb.divs(at(choiceOfRow, {nd[0]}), K);
        Value v =
            toWire(tensor::ExtractOp::create(b, localX, ValueRange{t, nd[1]}));
        return SmallVector<Value>{tensor::InsertOp::create(b, v, it[0], nd)};
      })[0];
}

/// Dispatch row n: the routing weight of its choice (t, j), in f32.
Value ExpertDistribution::gatherChoiceWeights(Value localWeights) {
  auto type = RankedTensorType::get({ShapedType::kDynamic, 1}, b.getF32Type());
  Value rows = kb.empty(type, {dispatchedRows, kb.idx(1)});
  return kb.loop(dispatchedRows, {rows}, [&](Value n, ValueRange it) {
    Value choice = at(choiceOfRow, {n});
    Value w = kb.load(localWeights, {kb.divs(choice, K), kb.rems(choice, K)});
    return SmallVector<Value>{kb.store(w, it[0], {n, kb.idx(0)})};
  })[0];
}

/// The local expert (0 ..) of each received row: blocks by source rank,
/// within a block by expert, accepted[p][e] rows each.
Value ExpertDistribution::receivedExperts(Value total) {
  auto type = RankedTensorType::get({ShapedType::kDynamic, 1}, b.getI32Type());
  Value experts = kb.empty(type, {total, kb.idx(1)});
  Value first = firstExpertOf(rank);
  auto perSource = [&](Value p, ValueRange it) {
    return kb.loop(localExperts, it, [&](Value local, ValueRange jt) {
      Value count = at(accepted, {p, kb.add(first, local)});
      Value id = arith::IndexCastOp::create(b, b.getI32Type(), local);
      return kb.loop(count, jt, [&](Value, ValueRange rt) {
        Value next = tensor::InsertOp::create(b, id, rt[0],
                                              ValueRange{rt[1], kb.idx(0)});
        return SmallVector<Value>{next, kb.add(rt[1], kb.idx(1))};
      });
    });
  };
  return kb.loop(kb.idx(ranks), {experts, kb.idx(0)}, perSource)[0];
}

/// The rank's experts of an E x .. x .. weight.
Value ExpertDistribution::expertSlice(Value weights) {
  auto type = cast<RankedTensorType>(weights.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(b, b.getLoc(), weights);
  offsets[0] = firstExpertOf(rank);
  std::optional<int64_t> known = getConstantIntValue(localExperts);
  sizes[0] =
      known ? OpFoldResult(b.getIndexAttr(*known)) : OpFoldResult(localExperts);
  return tensor::ExtractSliceOp::create(b, weights, offsets, sizes, strides);
}

/// seq.moe_ffn over the received rows (on the wire) with one choice each:
/// the rank's experts applied, each row scaled by its routing weight; the
/// results on the wire.
Value ExpertDistribution::runLocalExperts(Value rows, Value rowWeights,
                                          Value rowExperts, Value total) {
  auto xType = cast<RankedTensorType>(op.getX().getType());
  auto wType = cast<RankedTensorType>(op.getWeights().getType());
  int64_t dyn = ShapedType::kDynamic;
  Value x = reinterpretRows(rows, xType.getElementType(), total);
  Value w = kb.castTensor(
      rowWeights, RankedTensorType::get({dyn, 1}, wType.getElementType()),
      {total, kb.idx(1)});
  Value wUp = expertSlice(op.getWUp()), wDown = expertSlice(op.getWDown());
  Value wGate = op.getWGate() ? expertSlice(op.getWGate()) : Value();
  auto yType =
      RankedTensorType::get({dyn, xType.getDimSize(1)}, xType.getElementType());
  auto upType = cast<RankedTensorType>(wUp.getType());
  auto loadType = RankedTensorType::get({upType.getDimSize(0)}, b.getI64Type());
  auto mine = MoeFfnOp::create(b, yType, loadType, x, w, rowExperts, wUp, wDown,
                               wGate, op.getActivation(), APFloat(0.0f));
  return reinterpretRows(mine.getY(), wireType(), total);
}

/// y[t] = the sum of its accepted choices' returned rows (on the wire), in
/// choice order, in f32.
Value ExpertDistribution::combineChoices(Value returned) {
  auto type = RankedTensorType::get(
      {ShapedType::kDynamic,
       cast<RankedTensorType>(op.getX().getType()).getDimSize(1)},
      b.getF32Type());
  Value y = kb.zeros(type, {tokenCount, D});
  return kb.nest({tokenCount, D}, {y}, [&](ValueRange td, ValueRange it) {
    Value sum = kb.sumOver(K, [&](Value j) {
      Value row = at(rowOfChoice, {td[0], j});
      Value kept = kb.cmp(CmpIPredicate::sge, row, kb.idx(0));
      Value none = arith::ConstantOp::create(b, b.getZeroAttr(wireType()));
      return wireToF32(kb.loadIf(kept, returned, {row, td[1]}, none));
    });
    return SmallVector<Value>{kb.store(sum, it[0], td)};
  })[0];
}

/// The whole result on every rank: each rank's tokens (f32, rounded to
/// y's type first), all-gathered.
Value ExpertDistribution::wholeTokens(Value mine) {
  auto yType = cast<RankedTensorType>(op.getY().getType());
  auto mineType = cast<RankedTensorType>(mine.getType());
  Value rounded = kb.castTensor(
      mine, RankedTensorType::get(mineType.getShape(), yType.getElementType()),
      {tokenCount, D});
  // Rank-local tokens: the rank's own results are its y.
  if (local)
    return rounded.getType() == yType
               ? rounded
               : tensor::CastOp::create(b, yType, rounded).getResult();
  return gatherSlices(b, kb, rounded, /*axis=*/0, T, ranks, yType, {T, D});
}

Value ExpertDistribution::expertLoad() {
  auto loadType = cast<RankedTensorType>(op.getLoad().getType());
  Value load = kb.zeros(loadType, {E});
  return kb.loop(E, {load}, [&](Value e, ValueRange it) {
    Value sum = kb.loop(kb.idx(ranks), {kb.idx(0)}, [&](Value p, ValueRange s) {
      return SmallVector<Value>{kb.add(s[0], at(accepted, {p, e}))};
    })[0];
    return SmallVector<Value>{put(sum, it[0], {e})};
  })[0];
}

/// Column `column` of the counts, summed over the ranks.
Value ExpertDistribution::sumColumn(Value counts, Value column) {
  return sumColumnToRank(b, kb, counts, column, kb.idx(ranks));
}

SmallVector<Value> ExpertDistribution::distribute() {
  // Every rank checks every index, so that all fail alike (rank-local
  // tokens: every rank's count of bad ones, below).
  if (!local)
    emitExpertIndexChecks(kb, op.getIndices(), T, K, E);
  // A static E that does not split is a compile-time error (the pass).
  if (!getConstantIntValue(E))
    kb.check(kb.cmp(CmpIPredicate::eq, kb.rems(E, kb.idx(ranks)), kb.idx(0)),
             "E = {0} experts do not split over {1} ranks (expert "
             "parallelism needs E % R == 0)",
             {E, kb.idx(ranks)});

  Value localIndices = sliceTokens(op.getIndices());
  Value counts = countChoices(localIndices);
  if (local) {
    Value bad = sumColumn(counts, E);
    kb.check(kb.cmp(CmpIPredicate::eq, bad, kb.idx(0)),
             "{0} expert indices of the ranks' tokens are outside [0, {1})",
             {bad, E});
  }
  // Capacity counts every rank's tokens.
  Value tokens = sumColumn(counts, affineIndex(kb, E, 1, 1));
  Value capacity = expertCapacity(kb, op.getCapacityFactor().convertToDouble(),
                                  tokens, K, E);
  accepted = acceptChoices(counts, capacity);
  dispatchChoices(localIndices, accepted);

  Value x = sliceTokens(op.getX());
  Value w = sliceTokens(op.getWeights());
  Layout outgoing = [&](Value p) { return dispatchedTo(p); };
  Layout incoming = [&](Value p) { return receivedFrom(p); };
  Value received =
      kb.loop(kb.idx(ranks), {kb.idx(0)}, [&](Value p, ValueRange sum) {
        return SmallVector<Value>{kb.add(sum[0], receivedFrom(p).count)};
      })[0];
  Value rows = exchange(gatherTokenRows(x), received, outgoing, incoming);
  Value rowWeights =
      exchange(gatherChoiceWeights(w), received, outgoing, incoming);
  Value results =
      runLocalExperts(rows, rowWeights, receivedExperts(received), received);
  Value returned = exchange(results, dispatchedRows, incoming, outgoing);
  return {wholeTokens(combineChoices(returned)), expertLoad()};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// "R = 1, 2 or 4 split it": the rank counts that divide `experts`.
std::string splittingRanks(int64_t experts) {
  SmallVector<std::string> divisors;
  for (int64_t r = 1; r <= experts; ++r)
    if (experts % r == 0)
      divisors.push_back(std::to_string(r));
  std::string text;
  for (auto [i, d] : llvm::enumerate(divisors)) {
    if (i > 0)
      text += i + 1 == divisors.size() ? " or " : ", ";
    text += d;
  }
  return text;
}

struct SeqDistributeExperts
    : seqc::impl::SeqDistributeExpertsBase<SeqDistributeExperts> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MoeFfnOp> ops;
    module.walk([&](MoeFfnOp op) { ops.push_back(op); });
    FailureOr<bool> split =
        prepareRankGrid(module, getArgument(), ranks.getValue(), !ops.empty());
    if (failed(split))
      return signalPassFailure();
    if (!*split)
      return;
    bool failedAny = false;
    for (MoeFfnOp op : ops)
      failedAny |= failed(distribute(op));
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult distribute(MoeFfnOp op) {
    // Rank-local tokens are the steps' pass's to find: split as the whole
    // they would be wrong, and the whole split as a rank's own too.
    if (local != op->hasAttr(kLocalTokensAttrName))
      return op.emitError()
             << (local ? "seq-distribute-experts local=1 splits the moe_ffn "
                         "whose tokens seq-distribute-steps local=1 "
                         "leave-experts=1 found to be each rank's own; run it "
                         "first"
                       : "this moe_ffn's tokens are each rank's own "
                         "(seq-distribute-steps local=1 leave-experts=1): "
                         "seq-distribute-experts needs local=1");
    auto up = cast<RankedTensorType>(op.getWUp().getType());
    int64_t count = ranks;
    if (!up.isDynamicDim(0) && up.getDimSize(0) % count != 0)
      return op.emitError()
             << op->getName() << ": E = " << up.getDimSize(0)
             << " experts do not split over " << count
             << " ranks under expert parallelism: E must be a "
             << "multiple of the rank count ("
             << splittingRanks(up.getDimSize(0)) << " ranks split it)";
    IRRewriter rewriter(op->getContext());
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    KernelBuilder kb(b);
    kb.checksFor(op);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    ExpertDistribution split(op, b, kb, dims, ranks, local);
    rewriter.replaceOp(op, split.distribute());
    return success();
  }
};

} // namespace

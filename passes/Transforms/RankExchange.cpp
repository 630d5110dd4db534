//===- RankExchange.cpp - gathers the distribution passes share -----------===//

#include "Transforms/RankExchange.h"

#include "Transforms/RankGrid.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace seqc;

Value seqc::sliceAlong(ImplicitLocOpBuilder &b, Value tensor, int64_t axis,
                       OpFoldResult from, OpFoldResult size) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> ones(type.getRank(), b.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(b, b.getLoc(), tensor);
  offsets[axis] = from;
  sizes[axis] = size;
  return tensor::ExtractSliceOp::create(b, tensor, offsets, sizes, ones);
}

Value seqc::affineIndex(KernelBuilder &kb, Value v, int64_t scale,
                        int64_t extra) {
  if (std::optional<int64_t> known = getConstantIntValue(v))
    return kb.idx(*known * scale + extra);
  return kb.add(kb.mul(v, kb.idx(scale)), kb.idx(extra));
}

RankSlice seqc::rankSlice(KernelBuilder &kb, Value r, Value total,
                          int64_t ranks) {
  Value start = kb.divs(kb.mul(r, total), kb.idx(ranks));
  Value end = kb.divs(kb.mul(kb.add(r, kb.idx(1)), total), kb.idx(ranks));
  return {start, kb.sub(end, start)};
}

Value seqc::gatherRows(ImplicitLocOpBuilder &b, Value local, int64_t ranks) {
  auto type = cast<RankedTensorType>(local.getType());
  assert(type.getRank() >= 1 && "ranks gather tensors");
  // [1, local...]: the row this rank contributes.
  SmallVector<int64_t> rowShape{1};
  llvm::append_range(rowShape, type.getShape());
  SmallVector<ReassociationIndices> rowDims{{0, 1}};
  for (int64_t i = 1; i < type.getRank(); ++i)
    rowDims.push_back({i + 1});
  SmallVector<OpFoldResult> rowSizes{b.getIndexAttr(1)};
  llvm::append_range(rowSizes, tensor::getMixedSizes(b, b.getLoc(), local));
  Value row = tensor::ExpandShapeOp::create(
      b, RankedTensorType::get(rowShape, type.getElementType()), local, rowDims,
      rowSizes);
  SmallVector<int64_t> gatheredShape{ranks};
  llvm::append_range(gatheredShape, type.getShape());
  return shard::AllGatherOp::create(
      b, RankedTensorType::get(gatheredShape, type.getElementType()),
      kRankGridName, ArrayRef<int16_t>{0}, row, APInt(64, 0));
}

namespace {

/// `tensor` in the first steps of a new tensor whose dimension `axis` has
/// size `size` (`staticSize` when known); the steps past it undefined.
Value padAxis(ImplicitLocOpBuilder &b, Value tensor, int64_t axis, Value size,
              std::optional<int64_t> staticSize) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(b, b.getLoc(), tensor);
  sizes[axis] = staticSize ? OpFoldResult(b.getIndexAttr(*staticSize))
                           : OpFoldResult(size);
  Value padded =
      tensor::EmptyOp::create(b, sizes, type.getElementType()).getResult();
  SmallVector<OpFoldResult> zeros(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> ones(type.getRank(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(
      b, tensor, padded, zeros, tensor::getMixedSizes(b, b.getLoc(), tensor),
      ones);
}

/// The gathered rows [R, 1..., L, ...] as the whole [1..., R L, ...] (the
/// dimensions before `axis` are 1, so both are the same bytes).
Value rowsAsWhole(ImplicitLocOpBuilder &b, Value gathered, int64_t axis,
                  RankedTensorType wholeType) {
  auto type = cast<RankedTensorType>(gathered.getType());
  // Collapse [R, 1..., L] into one dimension, keep the rest.
  SmallVector<ReassociationIndices> merge(1);
  for (int64_t i = 0; i <= axis + 1; ++i)
    merge[0].push_back(i);
  for (int64_t i = axis + 2; i < type.getRank(); ++i)
    merge.push_back({i});
  Value whole = tensor::CollapseShapeOp::create(b, gathered, merge);
  if (axis > 0) {
    // Then the whole's leading 1s back in front of the steps.
    auto flatType = cast<RankedTensorType>(whole.getType());
    SmallVector<ReassociationIndices> split(1);
    SmallVector<int64_t> shape(axis, 1);
    for (int64_t i = 0; i <= axis; ++i)
      split[0].push_back(i);
    for (int64_t i = axis + 1; i <= flatType.getRank() + axis - 1; ++i)
      split.push_back({i});
    llvm::append_range(shape, flatType.getShape());
    SmallVector<OpFoldResult> sizes(axis, b.getIndexAttr(1));
    llvm::append_range(sizes, tensor::getMixedSizes(b, b.getLoc(), whole));
    whole = tensor::ExpandShapeOp::create(
        b, RankedTensorType::get(shape, flatType.getElementType()), whole,
        split, sizes);
  }
  if (whole.getType() != wholeType)
    whole = tensor::CastOp::create(b, wholeType, whole);
  return whole;
}

/// `tensor` with dimension `axis` of the static size `size`.
Value withStaticAxis(ImplicitLocOpBuilder &b, Value tensor, int64_t axis,
                     int64_t size) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (type.getDimSize(axis) == size)
    return tensor;
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  return tensor::CastOp::create(b, type.clone(shape), tensor);
}

/// The whole from the gathered rows of padded slices: row r's first
/// `sliceOf(r).length` steps copied to `sliceOf(r).start`.
Value copySlicesIntoPlace(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                          Value gathered, int64_t axis,
                          llvm::function_ref<RankSlice(Value)> sliceOf,
                          int64_t ranks, RankedTensorType wholeType,
                          ValueRange wholeSizes) {
  auto gatheredType = cast<RankedTensorType>(gathered.getType());
  int64_t rank = gatheredType.getRank() - 1;
  // The sizes of one rank's slice: its row's, but for the steps.
  SmallVector<OpFoldResult> sliceSizes =
      tensor::getMixedSizes(b, b.getLoc(), gathered);
  sliceSizes.erase(sliceSizes.begin());
  Value whole = kb.empty(wholeType, wholeSizes);
  return kb.loop(
      kb.idx(0), kb.idx(ranks), {whole},
      [&](Value r, ValueRange it) -> SmallVector<Value> {
        RankSlice mine = sliceOf(r);
        SmallVector<OpFoldResult> sizes(sliceSizes);
        sizes[axis] = mine.length;
        // Row r's first steps, without the row dimension.
        SmallVector<OpFoldResult> rowOffsets(rank + 1, b.getIndexAttr(0));
        rowOffsets[0] = r;
        SmallVector<OpFoldResult> rowSizes{b.getIndexAttr(1)};
        llvm::append_range(rowSizes, sizes);
        SmallVector<OpFoldResult> ones(rank + 1, b.getIndexAttr(1));
        auto sliceType =
            tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
                rank, gatheredType, rowSizes);
        Value slice = tensor::ExtractSliceOp::create(
            b, sliceType, gathered, rowOffsets, rowSizes, ones);
        SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
        offsets[axis] = mine.start;
        return {tensor::InsertSliceOp::create(b, slice, it[0], offsets, sizes,
                                              ArrayRef(ones).drop_front())
                    .getResult()};
      })[0];
}

} // namespace

Value seqc::gatherSlices(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                         Value local, int64_t axis, Value total, int64_t ranks,
                         RankedTensorType wholeType, ValueRange wholeSizes) {
  auto evenSlice = [&](Value r) { return rankSlice(kb, r, total, ranks); };
  auto localType = cast<RankedTensorType>(local.getType());
  std::optional<int64_t> staticTotal = getConstantIntValue(total);
  if (staticTotal && *staticTotal % ranks == 0) {
    // Equal slices: as they are. When they lie one after another, the
    // gathered rows are the whole.
    Value gathered = gatherRows(
        b, withStaticAxis(b, local, axis, *staticTotal / ranks), ranks);
    bool contiguous = true;
    for (int64_t i = 0; i < axis; ++i)
      contiguous &= localType.getDimSize(i) == 1;
    if (contiguous)
      return rowsAsWhole(b, gathered, axis, wholeType);
    return copySlicesIntoPlace(b, kb, gathered, axis, evenSlice, ranks,
                               wholeType, wholeSizes);
  }
  // Every slice travels in ceil(total / R) steps.
  Value longest = kb.divs(kb.add(total, kb.idx(ranks - 1)), kb.idx(ranks));
  std::optional<int64_t> staticLongest;
  if (staticTotal)
    staticLongest = (*staticTotal + ranks - 1) / ranks;
  Value gathered =
      gatherRows(b, padAxis(b, local, axis, longest, staticLongest), ranks);
  return copySlicesIntoPlace(b, kb, gathered, axis, evenSlice, ranks, wholeType,
                             wholeSizes);
}

//===----------------------------------------------------------------------===//
// Slices of any length (rank-local steps)
//===----------------------------------------------------------------------===//

Value seqc::gatherCounts(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                         Value count, int64_t ranks) {
  Value mine = tensor::FromElementsOp::create(
      b, RankedTensorType::get({1}, b.getI64Type()),
      ValueRange{kb.indexToI64(count)});
  return gatherRows(b, mine, ranks);
}

Value seqc::countOf(ImplicitLocOpBuilder &b, Value counts, Value r) {
  Value count = tensor::ExtractOp::create(
      b, counts, ValueRange{r, arith::ConstantIndexOp::create(b, 0)});
  return arith::IndexCastOp::create(b, b.getIndexType(), count);
}

Value seqc::sumOfCounts(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                        Value counts, Value from, Value to) {
  return kb.loop(from, to, {kb.idx(0)}, [&](Value j, ValueRange sum) {
    return SmallVector<Value>{kb.add(sum[0], countOf(b, counts, j))};
  })[0];
}

RankSlice seqc::countedSlice(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                             Value counts, Value r) {
  return {sumOfCounts(b, kb, counts, kb.idx(0), r), countOf(b, counts, r)};
}

Value seqc::gatherCountedSlices(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                                Value local, int64_t axis, Value counts,
                                int64_t ranks) {
  auto type = cast<RankedTensorType>(local.getType());
  SmallVector<Value> wholeSizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    wholeSizes.push_back(kb.dim(local, i));
  wholeSizes[axis] = sumOfCounts(b, kb, counts, kb.idx(0), kb.idx(ranks));
  SmallVector<int64_t> wholeShape(type.getShape());
  wholeShape[axis] = ShapedType::kDynamic;
  RankedTensorType wholeType = type.clone(wholeShape);
  // Every slice travels in the longest one's steps.
  Value longest = kb.loop(
      kb.idx(0), kb.idx(ranks), {kb.idx(0)}, [&](Value j, ValueRange most) {
        Value count = countOf(b, counts, j);
        return SmallVector<Value>{arith::MaxSIOp::create(b, most[0], count)};
      })[0];
  Value gathered =
      gatherRows(b, padAxis(b, local, axis, longest, std::nullopt), ranks);
  auto sliceOf = [&](Value r) { return countedSlice(b, kb, counts, r); };
  return copySlicesIntoPlace(b, kb, gathered, axis, sliceOf, ranks, wholeType,
                             wholeSizes);
}

//===----------------------------------------------------------------------===//
// Tails (a causal window's halo under rank-local steps)
//===----------------------------------------------------------------------===//

RankTails seqc::gatherTails(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                            Value local, int64_t axis, Value window,
                            int64_t ranks) {
  auto type = cast<RankedTensorType>(local.getType());
  Value steps = kb.dim(local, axis);
  Value count = kb.mins(steps, window);
  Value tail = sliceAlong(b, local, axis, kb.sub(steps, count), count);
  Value travels = arith::MaxSIOp::create(b, window, kb.idx(1));
  SmallVector<Value> paddedSizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    paddedSizes.push_back(i == axis ? travels : kb.dim(local, i));
  // Static where the window is (a token shift's).
  SmallVector<int64_t> paddedShape(type.getShape());
  paddedShape[axis] = ShapedType::kDynamic;
  if (std::optional<int64_t> w = getConstantIntValue(window))
    paddedShape[axis] = std::max<int64_t>(*w, 1);
  Value padded = kb.zeros(type.clone(paddedShape), paddedSizes);
  SmallVector<OpFoldResult> zeros(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> ones(type.getRank(), b.getIndexAttr(1));
  padded = tensor::InsertSliceOp::create(
      b, tail, padded, zeros, tensor::getMixedSizes(b, b.getLoc(), tail), ones);
  return {gatherRows(b, padded, ranks), gatherCounts(b, kb, count, ranks),
          axis};
}

Value seqc::foldTails(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                      const RankTails &tails, Value state, Value from, Value to,
                      function_ref<Value(Value, Value)> step) {
  auto rowsType = cast<RankedTensorType>(tails.rows.getType());
  int64_t rank = rowsType.getRank() - 1;
  return kb.loop(from, to, {state}, [&](Value j, ValueRange it) {
    // Row j's first countOf(j) steps, without the row dimension.
    SmallVector<OpFoldResult> offsets(rank + 1, b.getIndexAttr(0));
    offsets[0] = j;
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(b, b.getLoc(), tails.rows);
    sizes[0] = b.getIndexAttr(1);
    sizes[tails.axis + 1] = countOf(b, tails.counts, j);
    SmallVector<OpFoldResult> ones(rank + 1, b.getIndexAttr(1));
    auto tailType = tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
        rank, rowsType, sizes);
    Value tail = tensor::ExtractSliceOp::create(b, tailType, tails.rows,
                                                offsets, sizes, ones);
    Value next = step(it[0], tail);
    if (next.getType() != it[0].getType())
      next = tensor::CastOp::create(b, it[0].getType(), next);
    return SmallVector<Value>{next};
  })[0];
}

//===----------------------------------------------------------------------===//
// A MoE layer's counts
//===----------------------------------------------------------------------===//

namespace {
Value indexAt(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value table,
              ValueRange ivs) {
  return arith::IndexCastOp::create(b, b.getIndexType(), kb.load(table, ivs));
}
} // namespace

Value seqc::gatherExpertCounts(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                               Value indices, Value T, Value K, Value E,
                               int64_t ranks) {
  Value size = affineIndex(kb, E, 1, 2);
  std::optional<int64_t> known = getConstantIntValue(size);
  auto type = RankedTensorType::get({known ? *known : ShapedType::kDynamic},
                                    b.getI64Type());
  Value counts = kb.zeros(type, {size});
  counts = kb.nest({T, K}, {counts}, [&](ValueRange tj, ValueRange it) {
    Value e = kb.i32ToIndex(kb.load(indices, tj));
    Value inside = kb.andi(kb.cmp(arith::CmpIPredicate::sge, e, kb.idx(0)),
                           kb.cmp(arith::CmpIPredicate::slt, e, E));
    Value slot = kb.select(inside, e, E);
    Value n = kb.add(indexAt(b, kb, it[0], {slot}), kb.idx(1));
    return SmallVector<Value>{kb.store(kb.indexToI64(n), it[0], {slot})};
  })[0];
  counts = kb.store(kb.indexToI64(T), counts, {affineIndex(kb, E, 1, 1)});
  return gatherRows(b, counts, ranks);
}

Value seqc::sumColumnToRank(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                            Value table, Value column, Value to) {
  return kb.loop(to, {kb.idx(0)}, [&](Value p, ValueRange sum) {
    return SmallVector<Value>{
        kb.add(sum[0], indexAt(b, kb, table, {p, column}))};
  })[0];
}

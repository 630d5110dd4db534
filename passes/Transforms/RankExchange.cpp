//===- RankExchange.cpp - gathers the distribution passes share -----------===//

#include "Transforms/RankExchange.h"

#include "Transforms/RankGrid.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace seqc;

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

/// The whole from the gathered rows of padded slices: rank r's first
/// [r total / R, (r + 1) total / R) steps copied into place.
Value copySlicesIntoPlace(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                          Value gathered, int64_t axis, Value total,
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
        RankSlice mine = rankSlice(kb, r, total, ranks);
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
    return copySlicesIntoPlace(b, kb, gathered, axis, total, ranks, wholeType,
                               wholeSizes);
  }
  // Every slice travels in ceil(total / R) steps.
  Value longest = kb.divs(kb.add(total, kb.idx(ranks - 1)), kb.idx(ranks));
  std::optional<int64_t> staticLongest;
  if (staticTotal)
    staticLongest = (*staticTotal + ranks - 1) / ranks;
  Value gathered =
      gatherRows(b, padAxis(b, local, axis, longest, staticLongest), ranks);
  return copySlicesIntoPlace(b, kb, gathered, axis, total, ranks, wholeType,
                             wholeSizes);
}

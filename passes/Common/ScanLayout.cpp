//===- ScanLayout.cpp - scans' operands as [B, T, S] tensors --------------===//

#include "Common/ScanLayout.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

/// `[B, T, S...]` -> `[B, T, S]` (S the product of the state dims, 1 if none).
Value seqc::toBTS(ImplicitLocOpBuilder &b, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  if (type.getRank() == 3)
    return t;
  if (type.getRank() == 2) {
    SmallVector<int64_t> shape{type.getDimSize(0), type.getDimSize(1), 1};
    return tensor::ExpandShapeOp::create(
        b, RankedTensorType::get(shape, type.getElementType()), t,
        ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  }
  SmallVector<ReassociationIndices> groups{{0}, {1}, {}};
  for (int64_t i = 2; i < type.getRank(); ++i)
    groups[2].push_back(i);
  return tensor::CollapseShapeOp::create(b, t, groups);
}

/// `[B, S...]` -> `[B, S]`.
Value seqc::toBS(ImplicitLocOpBuilder &b, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  if (type.getRank() == 2)
    return t;
  if (type.getRank() == 1) {
    SmallVector<int64_t> shape{type.getDimSize(0), 1};
    return tensor::ExpandShapeOp::create(
        b, RankedTensorType::get(shape, type.getElementType()), t,
        ArrayRef<ReassociationIndices>{{0, 1}});
  }
  SmallVector<ReassociationIndices> groups{{0}, {}};
  for (int64_t i = 1; i < type.getRank(); ++i)
    groups[1].push_back(i);
  return tensor::CollapseShapeOp::create(b, t, groups);
}

/// Reshapes `t` (collapsed by toBTS/toBS) back to `type` (dimension sizes
/// `sizes`).
Value seqc::restoreScanShape(ImplicitLocOpBuilder &b, Value t,
                             RankedTensorType type, ValueRange sizes) {
  auto from = cast<RankedTensorType>(t.getType());
  int64_t rank = type.getRank(), fromRank = from.getRank();
  auto dynType = RankedTensorType::get(
      SmallVector<int64_t>(rank, ShapedType::kDynamic), type.getElementType());
  Value r = t;
  if (fromRank > rank) { // a unit state dim was added
    SmallVector<ReassociationIndices> groups;
    for (int64_t i = 0; i < rank - 1; ++i)
      groups.push_back({i});
    groups.push_back({rank - 1, rank});
    r = tensor::CollapseShapeOp::create(b, dynType, t, groups);
  } else if (fromRank < rank) { // the state dims were collapsed
    SmallVector<ReassociationIndices> groups;
    for (int64_t i = 0; i < fromRank - 1; ++i)
      groups.push_back({i});
    ReassociationIndices tail;
    for (int64_t i = fromRank - 1; i < rank; ++i)
      tail.push_back(i);
    groups.push_back(tail);
    SmallVector<OpFoldResult> shape(sizes.begin(), sizes.end());
    r = tensor::ExpandShapeOp::create(b, dynType, t, groups, shape);
  }
  return tensor::CastOp::create(b, type, r);
}

Value seqc::transposeLastTwo(ImplicitLocOpBuilder &b, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  int64_t rank = type.getRank();
  auto perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 2], perm[rank - 1]);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, b.getLoc(), t);
  SmallVector<OpFoldResult> permuted;
  for (int64_t p : perm)
    permuted.push_back(sizes[p]);
  Value init =
      tensor::EmptyOp::create(b, permuted, type.getElementType()).getResult();
  return linalg::TransposeOp::create(b, t, init, perm).getResult()[0];
}

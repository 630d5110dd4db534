//===- MmaLayoutTest.cpp - seqc's mma.sync fragment layout ----------------===//
//
// The GPU kernels' tensor-core tiles place values into and out of mma.sync
// fragments by seqc's own statement of the PTX layout (passes/GPU/GpuMma.h).
// The emulated kernels cannot check that statement (they use it on both sides),
// so it is compared here with upstream MLIR's, which its nvgpu lowering uses
// on hardware: for every lane and value of A (16 x 16), B and C (16 x 8).
// Upstream describes 16-bit multiplicands with f16; bf16 has the same layout.
//
//===----------------------------------------------------------------------===//

#include "GPU/GpuMma.h"

#include "mlir/Dialect/NVGPU/Utils/MMAUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir;

namespace {

/// Upstream's (row, column) of `value` held by `lane` for a fragment of
/// shape `shape` and role `role`.
std::pair<int64_t, int64_t> upstream(MLIRContext &ctx,
                                     nvgpu::MatMulOperandRole role,
                                     ArrayRef<int64_t> shape, Type element,
                                     int64_t lane, int64_t value) {
  OpBuilder b(&ctx);
  nvgpu::WarpMatrixInfo info{VectorType::get(shape, element), role};
  FailureOr<AffineMap> map =
      nvgpu::getLaneIdAndValueIdToOperandCoord(b, b.getUnknownLoc(), info);
  EXPECT_TRUE(succeeded(map));
  SmallVector<int64_t> rc = map->compose(ArrayRef<int64_t>{lane, value});
  return {rc[0], rc[1]};
}

TEST(MmaLayout, MatchesUpstreamForEveryLaneAndValue) {
  MLIRContext ctx;
  Type f16 = Float16Type::get(&ctx), f32 = Float32Type::get(&ctx);
  using seqc::MmaOperand;
  for (int64_t lane = 0; lane < 32; ++lane) {
    for (int64_t v = 0; v < 8; ++v)
      EXPECT_EQ(
          seqc::mmaFragmentCoord(MmaOperand::A, lane, v),
          upstream(ctx, nvgpu::MatMulOperandRole::A, {16, 16}, f16, lane, v))
          << "A lane " << lane << " value " << v;
    // Upstream holds B as its transpose (n x k), as mma's `col` layout
    // stores it; seqc names B's coordinates (k, n).
    for (int64_t v = 0; v < 4; ++v) {
      auto [n, k] =
          upstream(ctx, nvgpu::MatMulOperandRole::B, {8, 16}, f16, lane, v);
      EXPECT_EQ(seqc::mmaFragmentCoord(MmaOperand::B, lane, v),
                std::make_pair(k, n))
          << "B lane " << lane << " value " << v;
    }
    for (int64_t v = 0; v < 4; ++v)
      EXPECT_EQ(
          seqc::mmaFragmentCoord(MmaOperand::C, lane, v),
          upstream(ctx, nvgpu::MatMulOperandRole::C, {16, 8}, f32, lane, v))
          << "C lane " << lane << " value " << v;
  }
}

TEST(MmaLayout, EveryElementHeldOnce) {
  using seqc::MmaOperand;
  struct Case {
    MmaOperand operand;
    int64_t rows, cols;
  };
  for (Case c : {Case{MmaOperand::A, 16, 16}, Case{MmaOperand::B, 16, 8},
                 Case{MmaOperand::C, 16, 8}}) {
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int64_t lane = 0; lane < 32; ++lane)
      for (int64_t v = 0; v < seqc::mmaFragmentValues(c.operand); ++v) {
        auto rc = seqc::mmaFragmentCoord(c.operand, lane, v);
        EXPECT_LT(rc.first, c.rows);
        EXPECT_LT(rc.second, c.cols);
        EXPECT_TRUE(seen.insert(rc).second);
      }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), c.rows * c.cols);
  }
}

} // namespace

//===- VectorMath.cpp - polynomial math for the fast CPU code -------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQVECTORMATH
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqVectorMath : seqc::impl::SeqVectorMathBase<SeqVectorMath> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Functions whose polynomial forms are accurate to a few ulp over the
    // whole f32 range; sin/cos stay libm calls, rsqrt becomes 1 / sqrt
    // (its approximation needs AVX2 intrinsics and 8-lane vectors).
    auto approximate = [](StringRef name) {
      name.consume_front("math.");
      return llvm::is_contained(
          {"exp", "expm1", "log", "log1p", "log2", "tanh", "erf"}, name);
    };
    populateMathF32ExpansionPatterns(patterns, approximate);
    populateMathPolynomialApproximationPatterns(patterns, approximate);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // The approximations use math.fma, which the libm conversion would turn
    // into scalar fmaf calls: make it the LLVM intrinsic (vectors included).
    getOperation()->walk([](math::FmaOp op) {
      OpBuilder b(op);
      Value fma =
          LLVM::FMAOp::create(b, op.getLoc(), op.getA(), op.getB(), op.getC());
      op.replaceAllUsesWith(fma);
      op.erase();
    });
  }
};
} // namespace

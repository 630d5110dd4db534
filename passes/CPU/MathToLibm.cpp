//===- MathToLibm.cpp - libm only where LLVM has no exact lowering --------===//
//
// Upstream convert-math-to-libm turns every math op it knows into scalar libm
// calls, floor and fma included, which unrolls vectors. LLVM lowers most math
// ops well itself; only the functions it would approximate badly
// (expm1 as exp - 1, log1p as log(1 + x)) or not at all go to libm here.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace seqc {
#define GEN_PASS_DEF_SEQMATHTOLIBM
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqMathToLibm : seqc::impl::SeqMathToLibmBase<SeqMathToLibm> {
  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    target.addIllegalOp<math::ExpM1Op, math::Log1pOp, math::ErfOp, math::ErfcOp,
                        math::TanOp, math::AtanOp, math::Atan2Op, math::SinhOp,
                        math::CoshOp, math::TanhOp, math::AsinOp, math::AcosOp,
                        math::AsinhOp, math::AcoshOp, math::AtanhOp,
                        math::CbrtOp>();
    RewritePatternSet patterns(&getContext());
    populateMathToLibmConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace

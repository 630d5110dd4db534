//===- ControlFlowToLLVM.cpp - cf to LLVM, AMX tiles included -------------===//
//
// Upstream's convert-cf-to-llvm converts block arguments with the builtin
// types' conversions only. The GEMM engine's AMX micro-kernel carries its
// accumulator tiles through a loop (they stay in tile registers over a
// reduction block), so after scf-to-cf the loop's blocks take
// `!amx.tile` arguments, which that pass cannot convert. This is the same
// conversion with the AMX dialect's type conversion added (tiles become
// LLVM's x86_amx, as convert-vector-to-llvm{enable-amx} makes them in the
// tile ops).
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/DialectConversion.h"

namespace seqc {
#define GEN_PASS_DEF_SEQCONTROLFLOWTOLLVM
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqControlFlowToLLVM
    : seqc::impl::SeqControlFlowToLLVMBase<SeqControlFlowToLLVM> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx);
    converter.addConversion(
        [ctx](amx::TileType) { return LLVM::LLVMX86AMXType::get(ctx); });
    RewritePatternSet patterns(ctx);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    cf::populateAssertToLLVMConversionPattern(converter, patterns);
    LLVMConversionTarget target(*ctx);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

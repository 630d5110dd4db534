//===- LowerToCpu.cpp - seq ops to fast CPU kernels -----------------------===//

#include "CPU/CpuPatterns.h"
#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQLOWERTOCPU
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqLowerToCpu : seqc::impl::SeqLowerToCpuBase<SeqLowerToCpu> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(seqc::checkLoweringInput(getOperation(), "seq-lower-to-cpu")))
      return signalPassFailure();
    seqc::CpuTarget target = seqc::CpuTarget::host();
    if (failed(seqc::checkCpuVectorWidth(getOperation(), "seq-lower-to-cpu",
                                         vectorWidth)))
      return signalPassFailure();
    if (vectorWidth > 0)
      target.vectorWidth = vectorWidth;
    // "dot" and "amx" emit their instructions whatever the host (IR for
    // another machine); the compiler checks the machine it generates code
    // for. A CPU with AMX has AVX-512 BF16, whose dot products serve the
    // products AMX does not (attention); "amx-emulated" runs anywhere and
    // keeps the host's dot products.
    if (bf16Products == "dot" || bf16Products == "widen" ||
        bf16Products == "amx") {
      target.bf16Dot = bf16Products != "widen";
      target.amxTiles = bf16Products == "amx";
    } else if (bf16Products == "amx-emulated") {
      target.amxTiles = true;
    } else if (bf16Products != "auto") {
      getOperation().emitError()
          << "seq-lower-to-cpu: unknown bf16-products '" << bf16Products
          << "' (amx, amx-emulated, dot, widen or auto)";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    seqc::populateCpuScanPatterns(patterns, target);
    seqc::populateCpuSelectiveScanPatterns(patterns, target);
    seqc::populateCpuSsdPatterns(patterns, target);
    seqc::populateCpuLinearAttentionPatterns(patterns, target);
    seqc::populateCpuDeltaRulePatterns(patterns, target);
    seqc::populateCpuAttentionPatterns(patterns, target);
    seqc::populateCpuMoEPatterns(patterns, target);
    seqc::populateCpuMatmulPatterns(patterns, target, fuse);
    seqc::populateCpuElementwisePatterns(patterns, target, fuse);
    seqc::CpuItemDispatch items;
    seqc::populateItemKernelPatterns(patterns, items);
    // Whatever has no kernel takes the reference lowering, reported.
    seqc::FallbackPolicy policy{"CPU", strict};
    if (failed(seqc::applyKernelLowerings(getOperation(), std::move(patterns),
                                          policy)))
      return signalPassFailure();
  }
};
} // namespace

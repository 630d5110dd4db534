//===- LowerToCpu.cpp - seq ops to fast CPU kernels -----------------------===//

#include "CPU/CpuPatterns.h"
#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

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
    if (failed(seqc::rejectUnexpandedSequences(getOperation(),
                                               "seq-lower-to-cpu")))
      return signalPassFailure();
    seqc::CpuTarget target = seqc::CpuTarget::host();
    if (vectorWidth > 0)
      target.vectorWidth = vectorWidth;
    // "dot" emits AVX-512 BF16 whatever the host (IR for another machine);
    // the compiler checks the machine it generates code for.
    if (bf16Products == "dot" || bf16Products == "widen") {
      target.bf16Dot = bf16Products == "dot";
    } else if (bf16Products != "auto") {
      getOperation().emitError() << "seq-lower-to-cpu: unknown bf16-products '"
                                 << bf16Products << "' (dot, widen or auto)";
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

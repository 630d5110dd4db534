//===- LowerToGpu.cpp - seq ops to GPU kernels ----------------------------===//

#include "GPU/GpuPatterns.h"
#include "Reference/Fallback.h"
#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQLOWERTOGPU
#include "passes/GPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqLowerToGpu : seqc::impl::SeqLowerToGpuBase<SeqLowerToGpu> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(seqc::checkLoweringInput(getOperation(), "seq-lower-to-gpu")))
      return signalPassFailure();
    if (blockThreads < 32 || blockThreads > 1024 || blockThreads % 32 != 0) {
      // The location only: printing the op would dump the whole module.
      emitError(getOperation().getLoc())
          << "block-threads must be a multiple of 32 in [32, 1024], not "
          << blockThreads;
      return signalPassFailure();
    }
    FailureOr<int64_t> sm = seqc::chipVersion(getOperation().getLoc(), chip);
    if (failed(sm))
      return signalPassFailure();
    seqc::GpuTarget target;
    target.emulate = emulate;
    target.smVersion = *sm;
    target.blockThreads = blockThreads;
    RewritePatternSet patterns(&getContext());
    seqc::populateGpuScanPatterns(patterns, target);
    seqc::populateGpuSsdPatterns(patterns, target);
    seqc::populateGpuAttentionPatterns(patterns, target);
    seqc::populateGpuMoEPatterns(patterns, target);
    seqc::GpuItemDispatch items(target);
    seqc::populateItemKernelPatterns(patterns, items);
    seqc::populateGpuLinalgPatterns(patterns, target);
    seqc::populateGpuLinearAttentionPatterns(patterns, target);
    seqc::populateGpuDeltaRulePatterns(patterns, target);
    // Whatever has no kernel takes the reference lowering, reported.
    seqc::FallbackPolicy policy{"GPU", strict};
    if (failed(seqc::applyKernelLowerings(getOperation(), std::move(patterns),
                                          policy)))
      return signalPassFailure();
  }
};
} // namespace

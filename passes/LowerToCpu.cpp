//===- LowerToCpu.cpp - seq ops to fast CPU kernels -----------------------===//

#include "CpuPatterns.h"
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
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQLOWERTOCPU
#include "passes/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqLowerToCpu : seqc::impl::SeqLowerToCpuBase<SeqLowerToCpu> {
  using Base::Base;

  void runOnOperation() override {
    seqc::CpuTarget target = seqc::CpuTarget::host();
    if (vectorWidth > 0)
      target.vectorWidth = vectorWidth;
    RewritePatternSet patterns(&getContext());
    seqc::populateCpuScanPatterns(patterns, target);
    seqc::populateCpuSsdPatterns(patterns, target);
    seqc::populateCpuLinearAttentionPatterns(patterns, target);
    seqc::populateCpuAttentionPatterns(patterns, target);
    seqc::populateCpuMoEPatterns(patterns, target);
    seqc::populateCpuMatmulPatterns(patterns, target, fuse);
    seqc::populateCpuElementwisePatterns(patterns, target, fuse);
    // Whatever has no fast lowering takes the reference one.
    seqc::populateReferenceScanPatterns(patterns);
    seqc::populateReferenceStateSpacePatterns(patterns);
    seqc::populateReferenceAttentionPatterns(patterns);
    seqc::populateReferenceConvPatterns(patterns);
    seqc::populateReferenceMoEPatterns(patterns);
    // Kernels are created at module level while their callers are rewritten.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    // No folding: to_buffer(to_tensor(m)) would fold to m, hiding a kernel's
    // read of its input from the bufferization analysis (see Pipelines.cpp).
    config.enableFolding(false);
    config.enableConstantCSE(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      return signalPassFailure();
  }
};
} // namespace

//===- Pipelines.cpp - seqc's named pass pipelines ------------------------===//

#include "seqc/Passes.h"
#include "seqc/InitSeqc.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void seqc::buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createSeqLowerChecks());
  pm.addPass(createSeqLowerParallel());
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Transcendentals LLVM would approximate (expm1, log1p, erf) go to libm,
  // which keeps them exact.
  // rsqrt has no libm function: expand it to 1 / sqrt first.
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"rsqrt"};
  pm.addPass(math::createMathExpandOpsPass(expand));
  pm.addPass(createSeqMathToLibm());
  pm.addPass(createConvertVectorToLLVMPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefOpts;
  // Allocations go through seqc's runtime, which tracks them per call.
  memrefOpts.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefOpts));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSeqEmitPackedWrappers());
}

/// Tensors to memrefs for whole functions, with deallocation of temporaries.
static void addBufferization(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions opts;
  opts.bufferizeFunctionBoundaries = true;
  opts.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  opts.unknownTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(opts));
  bufferization::buildBufferDeallocationPipeline(pm);
  // Clones the deallocation pipeline kept become alloc + copy.
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void seqc::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &opts) {
  pm.addPass(createCanonicalizerPass());
  // arith/math ops on whole tensors become linalg.generic (bufferizable).
  pm.addPass(createConvertElementwiseToLinalgPass());
  // Glue the seq ops compute themselves is folded into them first (the
  // checks below would add uses that keep it apart).
  if (!opts.reference && opts.fuse) {
    pm.addPass(createSeqFuseElementwise());
    pm.addPass(createCanonicalizerPass());
  }
  // Dynamic shapes of the graph's upstream ops (tensor.cast, linalg.matmul,
  // extract_slice, ...) are checked at run time; seq ops check themselves
  // in their lowerings.
  pm.addPass(createGenerateRuntimeVerificationPass());
  if (opts.reference) {
    pm.addPass(createSeqLowerToReference());
  } else {
    SeqLowerToCpuOptions cpu;
    cpu.vectorWidth = opts.vectorWidth;
    cpu.fuse = opts.fuse;
    pm.addPass(createSeqLowerToCpu(cpu));
  }
  // No canonicalization or CSE between the CPU kernels and bufferization:
  // a kernel reads its inputs through bufferization.to_buffer placed right
  // before its dispatch, and the analysis takes that as the moment of the
  // read. CSE would let one to_buffer serve later kernels (reading a buffer
  // an in-place op may have overwritten meanwhile), and folding
  // to_buffer(to_tensor) would hide the read altogether.
  if (opts.reference) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  addBufferization(pm);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (!opts.reference)
    pm.addPass(createSeqVectorMath());
  buildLowerToLLVMPipeline(pm);
}

namespace {
struct CpuPipelineCLOptions
    : public PassPipelineOptions<CpuPipelineCLOptions> {
  Option<bool> reference{*this, "reference",
                         llvm::cl::desc("Use the reference lowering"),
                         llvm::cl::init(false)};
  Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes per vector (0: the host's widest)"),
      llvm::cl::init(0)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse elementwise glue into seq ops and "
                                   "matmuls"),
                    llvm::cl::init(true)};
};
} // namespace

void seqc::registerPasses() {
  registerSeqcPasses();
  PassPipelineRegistration<CpuPipelineCLOptions>(
      "seqc-cpu-pipeline",
      "Lower a graph of seq and tensor-level ops to the LLVM dialect for the "
      "host CPU (the default pipeline of seqc-run and the JIT)",
      [](OpPassManager &pm, const CpuPipelineCLOptions &cl) {
        CpuPipelineOptions opts;
        opts.reference = cl.reference;
        opts.vectorWidth = cl.vectorWidth;
        opts.fuse = cl.fuse;
        buildCpuPipeline(pm, opts);
      });
  PassPipelineRegistration<>(
      "seqc-reference-pipeline",
      "Lower a graph through the reference lowering (the test oracle) to the "
      "LLVM dialect for the host CPU",
      [](OpPassManager &pm) {
        CpuPipelineOptions opts;
        opts.reference = true;
        buildCpuPipeline(pm, opts);
      });
}

//===- Pipelines.cpp - seqc's named pass pipelines ------------------------===//

#include "seqc/InitSeqc.h"
#include "seqc/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ShardToMPI/ShardToMPI.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include <cstdlib>
#include <functional>

#include <unistd.h>

using namespace mlir;

void seqc::buildLowerToLLVMPipeline(OpPassManager &pm, bool gpuHost) {
  pm.addPass(createSeqLowerChecks());
  pm.addPass(createSeqLowerParallel());
  // Copies into slices (packed sequences' results) as vectorized loops, not
  // the runtime's element-by-element memrefCopy.
  pm.addPass(createSeqStridedCopiesToLoops());
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // MLIR 22 crashes expanding an expand_shape with two dynamic sizes in a
  // group; those become reinterpret_casts first.
  pm.addPass(createSeqRelaxExpandShape());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Transcendentals LLVM would approximate (expm1, log1p, erf) go to libm,
  // which keeps them exact.
  // rsqrt has no libm function: expand it to 1 / sqrt first.
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"rsqrt"};
  pm.addPass(math::createMathExpandOpsPass(expand));
  pm.addPass(createSeqMathToLibm());
  // bf16 arithmetic left in loops (a bf16-accumulating linalg.matmul) runs
  // in f32 with a rounding after each op: without AVX-512 BF16, LLVM would
  // promote it the same way but through __truncsfbf2, a libcall the host
  // may not have. The conversions then become integer code (ExpandBf16).
  arith::ArithEmulateUnsupportedFloatsOptions bf16Arithmetic;
  bf16Arithmetic.sourceTypeStrs = {"bf16"};
  bf16Arithmetic.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(bf16Arithmetic));
  pm.addPass(createSeqExpandBf16());
  // The CPU kernels' bf16 dot products are x86vector ops, their AMX
  // products amx ops (LLVM configures the tiles: ldtilecfg per kernel).
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true;
  vectorToLLVM.amx = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  pm.addPass(createSeqMpiToLLVM());
  FinalizeMemRefToLLVMConversionPassOptions memrefOpts;
  // Allocations go through seqc's runtime, which tracks them per call.
  memrefOpts.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefOpts));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  // cf with the AMX micro-kernel's loop-carried tiles.
  pm.addPass(createSeqControlFlowToLLVM());
  pm.addPass(createConvertFuncToLLVMPass());
  if (gpuHost)
    pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSeqEmitPackedWrappers());
}

/// Tensors to memrefs for whole functions, with deallocation of temporaries
/// unless `deallocate` is false, and with `resultsInPlace` the kernels'
/// results written straight into the slices they are copied to.
static void addBufferization(OpPassManager &pm, bool deallocate = true,
                             bool resultsInPlace = false) {
  bufferization::OneShotBufferizePassOptions opts;
  opts.bufferizeFunctionBoundaries = true;
  opts.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  opts.unknownTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // A loop may carry a state each iteration's kernel allocates (the pieces
  // of seq-expand-sequences); the deallocation pipeline frees it.
  opts.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(opts));
  if (resultsInPlace) {
    // Folds what hides a copy's target: the loop-carried buffers a loop
    // yields unchanged, the sizes read back from an allocation.
    pm.addPass(createCanonicalizerPass());
    pm.addPass(seqc::createSeqWriteResultsInPlace());
  }
  if (!deallocate)
    return;
  bufferization::buildBufferDeallocationPipeline(pm);
  // Clones the deallocation pipeline kept become alloc + copy.
  pm.addPass(createConvertBufferizationToMemRefPass());
}

/// Splits the graph's work over `ranks` processes (each target then lowers
/// the exchanges, `shard` collectives, to its engine): "experts" gives each
/// rank its experts of every moe_ffn, the routed tokens exchanged;
/// "sequence" its steps of every op with a state, the states exchanged;
/// "sequence+experts" both.
static void addWorkSplit(OpPassManager &pm, int64_t ranks, StringRef parallel,
                         bool strict, bool localSteps) {
  if (localSteps) {
    // The steps' analysis finds the tokens; the experts' split of them
    // (sequence+experts) follows.
    bool experts = parallel != "sequence";
    seqc::SeqDistributeStepsOptions steps;
    steps.ranks = ranks;
    steps.strict = strict;
    steps.local = true;
    steps.leaveExperts = experts;
    pm.addPass(seqc::createSeqDistributeSteps(steps));
    if (experts) {
      seqc::SeqDistributeExpertsOptions split;
      split.ranks = ranks;
      split.local = true;
      pm.addPass(seqc::createSeqDistributeExperts(split));
    }
    return;
  }
  if (parallel != "sequence") {
    seqc::SeqDistributeExpertsOptions distribute;
    distribute.ranks = ranks;
    pm.addPass(seqc::createSeqDistributeExperts(distribute));
  }
  if (parallel != "experts") {
    seqc::SeqDistributeStepsOptions distribute;
    distribute.ranks = ranks;
    distribute.strict = strict;
    pm.addPass(seqc::createSeqDistributeSteps(distribute));
  }
}

/// The work split over `ranks` processes (addWorkSplit), then the check
/// at each call that the ranks agree on the module and their arguments'
/// shapes (seq-check-rank-agreement).
static void addDistribution(OpPassManager &pm, int64_t ranks,
                            StringRef parallel, bool strict, bool localSteps) {
  addWorkSplit(pm, ranks, parallel, strict, localSteps);
  pm.addPass(seqc::createSeqCheckRankAgreement());
}

/// Packed batches and checkpoints become loops of plain ops (which the
/// lowerings plan and lower like any other), then the work is split over
/// `ranks` processes (none: one process). Rank-local steps are found on the
/// graph as written, calls inlined (and the functions only they called
/// dropped): they take neither packed batches nor checkpoints, which the
/// analysis names, where the expansion's slices would leave it only slices.
static void addExpansionAndDistribution(OpPassManager &pm, int64_t ranks,
                                        StringRef parallel, bool strict,
                                        bool localSteps) {
  if (ranks > 0 && localSteps) {
    pm.addPass(createInlinerPass());
    pm.addPass(createSymbolDCEPass());
    addDistribution(pm, ranks, parallel, strict, localSteps);
    pm.addPass(seqc::createSeqExpandSequences());
    return;
  }
  pm.addPass(seqc::createSeqExpandSequences());
  if (ranks > 0)
    addDistribution(pm, ranks, parallel, strict, localSteps);
}

std::string seqc::cudaToolkitPath(const CudaPipelineOptions &opts) {
  if (!opts.toolkit.empty())
    return opts.toolkit;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    return home;
  return "/usr/local/cuda";
}

bool seqc::cudaHasPtxas(const CudaPipelineOptions &opts) {
  return access((cudaToolkitPath(opts) + "/bin/ptxas").c_str(), X_OK) == 0;
}

void seqc::buildCudaPipeline(OpPassManager &pm,
                             const CudaPipelineOptions &opts) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertElementwiseToLinalgPass());
  // The GPU kernels apply the same folded glue as the CPU ones (softplus
  // and bias of dt, output gates, the conv's SiLU, feature maps).
  if (opts.fuse) {
    pm.addPass(createSeqFuseElementwise());
    pm.addPass(createCanonicalizerPass());
  }
  pm.addPass(createGenerateRuntimeVerificationPass());
  addExpansionAndDistribution(pm, opts.ranks, opts.parallel, opts.strict,
                              opts.localSteps);
  if (opts.ranks > 0) {
    // The exchanges run on NCCL between device buffers (emulated: on MPI
    // between host buffers); MPI numbers the processes.
    SeqCollectivesToNcclOptions nccl;
    nccl.emulate = opts.emulate;
    nccl.mpiImplementation = opts.mpiImplementation;
    pm.addPass(createSeqCollectivesToNccl(nccl));
    pm.addPass(createConvertShardToMPIPass());
  }
  // One plan per op for the chip (also when emulated: the kernels are the
  // GPU's).
  SeqSelectStrategyOptions strategy;
  strategy.target = "gpu";
  strategy.chip = opts.chip;
  pm.addPass(createSeqSelectStrategy(strategy));
  SeqLowerToGpuOptions gpu;
  gpu.emulate = opts.emulate;
  gpu.blockThreads = opts.blockThreads;
  gpu.chip = opts.chip;
  gpu.strict = opts.strict;
  pm.addPass(createSeqLowerToGpu(gpu));
  // No canonicalization before bufferization, as in the CPU pipeline.
  if (opts.emulate) {
    addBufferization(pm);
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    buildLowerToLLVMPipeline(pm);
    return;
  }
  // Deallocation comes after outlining: the ownership-based analysis cannot
  // see through gpu.launch bodies (gpu.barrier declares no effects), but
  // handles gpu.launch_func, whose effects seqc declares (Registration.cpp).
  addBufferization(pm, /*deallocate=*/false);
  pm.addPass(createSeqCopyGlobalsToManaged());
  // seq-lower-to-gpu turned the graph's linalg ops into kernels; any created
  // later (none are known) still reach the GPU through the upstream mapping:
  // parallel loops tiled by the block size, tiles to blocks, iterations of a
  // tile to threads.
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addPass(createParallelLoopTilingPass({opts.blockThreads}));
  // Constant tile bounds (affine.min of constants) for the thread mapping.
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
  pm.addPass(createConvertParallelLoopToGpuPass());
  // Constants (and dims) the kernels use move into them before outlining;
  // otherwise every one becomes a kernel argument, and strides, tile sizes
  // and register-array indices are unknown to the device compiler (real
  // divisions, and fragments left in local memory).
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createSeqGpuRegisterBudget());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createLowerAffinePass());
  GpuNVVMAttachTargetOptions target;
  target.chip = opts.chip;
  // PTX 8.0 (CUDA 12.0) is the first to know sm_90a.
  target.features = "+ptx80";
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = cudaToolkitPath(opts);
  binary.compilationTarget = opts.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  buildLowerToLLVMPipeline(pm, /*gpuHost=*/true);
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
  addExpansionAndDistribution(pm, opts.ranks, opts.parallel, opts.strict,
                              opts.localSteps);
  if (opts.ranks > 0) {
    SeqCollectivesToMpiOptions mpi;
    mpi.mpiImplementation = opts.mpiImplementation;
    pm.addPass(createSeqCollectivesToMpi(mpi));
    pm.addPass(createConvertShardToMPIPass());
  }
  if (opts.reference) {
    pm.addPass(createSeqLowerToReference());
  } else {
    SeqSelectStrategyOptions strategy;
    strategy.target = "cpu";
    strategy.vectorWidth = opts.vectorWidth;
    pm.addPass(createSeqSelectStrategy(strategy));
    SeqLowerToCpuOptions cpu;
    cpu.vectorWidth = opts.vectorWidth;
    cpu.fuse = opts.fuse;
    cpu.strict = opts.strict;
    cpu.bf16Products = opts.bf16Products;
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
  addBufferization(pm, /*deallocate=*/true,
                   /*resultsInPlace=*/!opts.reference);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Emulated AMX tiles become vector code (with math.fma, which the vector
  // math pass then makes the LLVM intrinsic).
  if (opts.bf16Products == "amx-emulated")
    pm.addPass(createSeqEmulateAmx());
  if (!opts.reference)
    pm.addPass(createSeqVectorMath());
  buildLowerToLLVMPipeline(pm);
}

namespace {
/// What the ranks of a distributed pipeline split (both pipelines' option).
enum class Split { Sequence, Experts, SequenceAndExperts };

/// The `ranks` and `parallel` options of a pipeline with `Options`.
template <typename Options> struct DistributionCLOptions {
  explicit DistributionCLOptions(Options &owner)
      : ranks(owner, "ranks",
              llvm::cl::desc("split the work over this many MPI processes "
                             "(0: one process)"),
              llvm::cl::init(0)),
        localSteps(owner, "local-steps",
                   llvm::cl::desc("each rank's arguments and results with "
                                  "steps are its own steps (every op with "
                                  "steps split by them; with "
                                  "parallel=sequence+experts or experts, "
                                  "moe_ffn's experts split the rank's own "
                                  "tokens)"),
                   llvm::cl::init(false)),
        mpiImplementation(
            owner, "mpi-implementation",
            llvm::cl::desc("the ABI of the MPI library the code calls: "
                           "OpenMPI or MPICH"),
            llvm::cl::init("OpenMPI")),
        parallel(
            owner, "parallel", llvm::cl::desc("what ranks split"),
            llvm::cl::init(Split::Sequence),
            llvm::cl::values(
                clEnumValN(Split::Sequence, "sequence", "every seq op's steps"),
                clEnumValN(Split::Experts, "experts", "moe_ffn's experts"),
                clEnumValN(Split::SequenceAndExperts, "sequence+experts",
                           "moe_ffn's experts and every other op's "
                           "steps"))) {}

  typename Options::template Option<int64_t> ranks;
  typename Options::template Option<bool> localSteps;
  typename Options::template Option<std::string> mpiImplementation;
  typename Options::template Option<Split> parallel;

  /// `parallel` as the pipelines' option string.
  std::string split() const {
    return parallel == Split::Experts              ? "experts"
           : parallel == Split::SequenceAndExperts ? "sequence+experts"
                                                   : "sequence";
  }
};

struct CudaPipelineCLOptions
    : public PassPipelineOptions<CudaPipelineCLOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("GPU architecture"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("embedded kernels: bin (cubin), isa (PTX), fatbin, llvm"),
      llvm::cl::init("bin")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit path (default: $CUDA_HOME or "
                     "/usr/local/cuda)"),
      llvm::cl::init("")};
  Option<int64_t> blockThreads{*this, "block-threads",
                               llvm::cl::desc("threads per block"),
                               llvm::cl::init(256)};
  Option<bool> emulate{
      *this, "emulate",
      llvm::cl::desc("run the kernels' IR on the host (tests without a GPU)"),
      llvm::cl::init(false)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse elementwise glue into seq ops"),
                    llvm::cl::init(true)};
  Option<bool> strict{
      *this, "strict",
      llvm::cl::desc("an op without a fast kernel is an error (else a "
                     "remark)"),
      llvm::cl::init(false)};
  DistributionCLOptions<CudaPipelineCLOptions> distribution{*this};
};

struct CpuPipelineCLOptions : public PassPipelineOptions<CpuPipelineCLOptions> {
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
  Option<bool> strict{
      *this, "strict",
      llvm::cl::desc("an op without a fast kernel is an error (else a "
                     "remark)"),
      llvm::cl::init(false)};
  Option<std::string> bf16Products{
      *this, "bf16-products",
      llvm::cl::desc("products of bf16 operands: amx (AMX tiles in "
                     "matmuls and experts), amx-emulated (the same kernels "
                     "as vector code), dot (AVX-512 BF16), widen (f32 FMAs), "
                     "auto (amx, else dot, where the host has it)"),
      llvm::cl::init("auto")};
  DistributionCLOptions<CpuPipelineCLOptions> distribution{*this};
};
} // namespace

void seqc::registerPasses() {
  registerSeqcPasses();
  PassPipelineRegistration<CudaPipelineCLOptions>(
      "seqc-cuda-pipeline",
      "Lower a graph of seq and tensor-level ops to GPU kernels compiled to an "
      "embedded cubin (or PTX) for `chip`, and host code to the LLVM dialect "
      "(seqc-run --target cuda)",
      [](OpPassManager &pm, const CudaPipelineCLOptions &cl) {
        CudaPipelineOptions opts;
        opts.chip = cl.chip;
        opts.format = cl.format;
        opts.toolkit = cl.toolkit;
        opts.blockThreads = cl.blockThreads;
        opts.emulate = cl.emulate;
        opts.fuse = cl.fuse;
        opts.strict = cl.strict;
        opts.ranks = cl.distribution.ranks;
        opts.mpiImplementation = cl.distribution.mpiImplementation;
        opts.parallel = cl.distribution.split();
        opts.localSteps = cl.distribution.localSteps;
        buildCudaPipeline(pm, opts);
      });
  PassPipelineRegistration<CpuPipelineCLOptions>(
      "seqc-cpu-pipeline",
      "Lower a graph of seq and tensor-level ops to the LLVM dialect for the "
      "host CPU (the default pipeline of seqc-run and the JIT)",
      [](OpPassManager &pm, const CpuPipelineCLOptions &cl) {
        CpuPipelineOptions opts;
        opts.reference = cl.reference;
        opts.vectorWidth = cl.vectorWidth;
        opts.fuse = cl.fuse;
        opts.strict = cl.strict;
        opts.ranks = cl.distribution.ranks;
        opts.mpiImplementation = cl.distribution.mpiImplementation;
        opts.parallel = cl.distribution.split();
        opts.localSteps = cl.distribution.localSteps;
        opts.bf16Products = cl.bf16Products;
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

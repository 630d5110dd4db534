//===- Passes.h - seqc passes and pipelines ---------------------*- C++ -*-===//

#ifndef SEQC_PASSES_H
#define SEQC_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "Seq/SeqDialect.h"
#include "SeqRt/SeqRtDialect.h"

#include <memory>
#include <string>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace seqc {

/// The module attribute in which seq-distribute-steps (local, without
/// strict) names the public functions it left out, each with why: a
/// dictionary of function name -> string.
inline constexpr llvm::StringLiteral kNotRankLocalAttrName =
    "seq.not_rank_local";

#define GEN_PASS_DECL
#include "passes/Transforms/Passes.h.inc"
#define GEN_PASS_DECL
#include "passes/Reference/Passes.h.inc"
#define GEN_PASS_DECL
#include "passes/CPU/Passes.h.inc"
#define GEN_PASS_DECL
#include "passes/GPU/Passes.h.inc"
#define GEN_PASS_DECL
#include "passes/RuntimeABI/Passes.h.inc"

/// The f32 lanes of a CPU's widest vectors, from its features (`has`
/// answers for LLVM's feature names): 16 with AVX-512, 8 with AVX, else 4.
/// The host's description and code for a named CPU both take it.
int64_t cpuVectorLanes(llvm::function_ref<bool(llvm::StringRef)> has);

/// The host facts the CPU kernels are tuned from besides its features: its
/// data cache sizes ("l1 49152 l2 2097152"). The compile cache keys on them,
/// since code compiled on one host of a CPU model may not suit another with
/// other caches. (The cores are not among them: kernels split their work by
/// the threads they run on, read when they run.)
std::string cpuHostTuning();

/// An error on `root` unless `lanes`, the `vector-width` option of `pass`,
/// is 0 (the host's) or a CPU's: 4, 8 or 16 (SSE, AVX, AVX-512; the
/// kernels' in-register transposes take powers of two).
mlir::LogicalResult checkCpuVectorWidth(mlir::Operation *root,
                                        llvm::StringRef pass, int64_t lanes);

/// An error on the first op with `segments` or `checkpoint_every` under
/// `root`: the lowering `pass` takes only plain ops, which
/// seq-expand-sequences makes.
mlir::LogicalResult rejectUnexpandedSequences(mlir::Operation *root,
                                              llvm::StringRef pass);

/// What a lowering `pass` (CPU, GPU, reference) takes: no op left for an
/// earlier transform to finish, the first such op named with the pass that
/// must run first (rejectUnexpandedSequences; a moe_ffn that
/// seq-distribute-steps leave-experts=1 left to seq-distribute-experts
/// local=1, whose tokens are a rank's own and whose load and capacity only
/// that pass counts over every rank).
mlir::LogicalResult checkLoweringInput(mlir::Operation *root,
                                       llvm::StringRef pass);

/// Patterns of the reference lowering, one entry per op family.
void populateReferenceScanPatterns(mlir::RewritePatternSet &patterns);
void populateReferenceStateSpacePatterns(mlir::RewritePatternSet &patterns);
void populateReferenceAttentionPatterns(mlir::RewritePatternSet &patterns);
void populateReferenceDeltaRulePatterns(mlir::RewritePatternSet &patterns);
void populateReferenceConvPatterns(mlir::RewritePatternSet &patterns);
void populateReferenceMoEPatterns(mlir::RewritePatternSet &patterns);

/// Options shared by the CPU pipelines.
struct CpuPipelineOptions {
  /// Lower through the reference lowering (the oracle) instead of the fast
  /// chunked / vectorized one.
  bool reference = false;
  /// f32 lanes per vector for the fast kernels (0: the host's widest).
  int64_t vectorWidth = 0;
  /// Fuse elementwise glue into seq ops and matmuls (fast pipeline).
  bool fuse = true;
  /// An op without a fast kernel is an error, not a remark (fast pipeline).
  bool strict = false;
  /// Sequence parallelism over this many MPI processes (0: one process, no
  /// MPI): seq-distribute-steps, its collectives on MPI.
  int64_t ranks = 0;
  /// What `ranks` split: "sequence" (seq-distribute-steps: every op's
  /// steps), "experts" (seq-distribute-experts: moe_ffn's experts) or
  /// "sequence+experts" (both).
  std::string parallel = "sequence";
  /// Rank-local steps (with "sequence"): each rank's arguments and results
  /// with steps are its own steps, not the whole (seq-distribute-steps
  /// local=1, the graph inlined first).
  bool localSteps = false;
  /// The ABI of the MPI library the distributed code calls, as MLIR's
  /// MPIToLLVM names it: "OpenMPI" or "MPICH".
  std::string mpiImplementation = "OpenMPI";
  /// Products of bf16 operands in the fast kernels: "amx" (AMX tiles in
  /// matmuls and experts, dot products elsewhere), "amx-emulated" (the
  /// same kernels with the tiles as vector code: any host), "dot" (AVX-512
  /// BF16 vdpbf16ps on bf16 pairs), "widen" (f32 FMAs on widened operands)
  /// or "auto" (amx, else dot, where the host has it).
  std::string bf16Products = "auto";
};

/// Tensor-level graph (seq + linalg/tensor/arith/math ops in func.func) to
/// the LLVM dialect for the host CPU.
void buildCpuPipeline(mlir::OpPassManager &pm, const CpuPipelineOptions &opts);

/// Options of the CUDA pipeline.
struct CudaPipelineOptions {
  /// The GPU architecture kernels are compiled for (sm_80, sm_90a, ...).
  std::string chip = "sm_90a";
  /// What gpu-module-to-binary embeds: "bin" (cubin, by ptxas), "isa" (PTX
  /// text, compiled by the driver), "fatbin" or "llvm".
  std::string format = "bin";
  /// The CUDA toolkit (ptxas, libdevice); "": $CUDA_HOME, else
  /// /usr/local/cuda.
  std::string toolkit;
  /// Threads per block of seqc's kernels.
  int64_t blockThreads = 256;
  /// Run the kernels' IR on the host (seq-lower-to-gpu emulate=1) and lower
  /// everything for the CPU: tests of the kernels without a GPU.
  bool emulate = false;
  /// Fold elementwise glue into the seq ops whose kernels apply it
  /// (seq-fuse-elementwise), as the CPU pipeline does.
  bool fuse = true;
  /// An op without a GPU kernel is an error, not a remark.
  bool strict = false;
  /// Distributed over this many processes (0: one process), one GPU each,
  /// the exchanges on NCCL (seq-collectives-to-nccl); what they split as in
  /// CpuPipelineOptions::parallel; the MPI ABI as in
  /// CpuPipelineOptions::mpiImplementation.
  int64_t ranks = 0;
  std::string parallel = "sequence";
  bool localSteps = false;
  std::string mpiImplementation = "OpenMPI";
};

/// Tensor-level graph to the LLVM dialect for the host, with the kernels as
/// embedded GPU binaries launched through the mgpu* runtime.
void buildCudaPipeline(mlir::OpPassManager &pm,
                       const CudaPipelineOptions &opts);

/// The toolkit `opts` names, or $CUDA_HOME, or /usr/local/cuda.
std::string cudaToolkitPath(const CudaPipelineOptions &opts);
/// Whether that toolkit has an executable ptxas (cubins); without one the
/// CUDA pipeline can only embed PTX, which the driver compiles at load.
bool cudaHasPtxas(const CudaPipelineOptions &opts);

/// The part of the CPU pipeline after bufferization: memrefs, loops and
/// vectors to the LLVM dialect. `gpuHost`: also lower gpu.launch_func and
/// gpu.binary (host code of the CUDA pipeline).
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm, bool gpuHost = false);

#define GEN_PASS_REGISTRATION
#include "passes/Transforms/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "passes/Reference/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "passes/CPU/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "passes/GPU/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "passes/RuntimeABI/Passes.h.inc"

/// Registers every seqc pass, stage by stage (each stage's Passes.td).
inline void registerSeqcPasses() {
  registerSeqcTransformsPasses();
  registerSeqcReferencePasses();
  registerSeqcCPUPasses();
  registerSeqcGPUPasses();
  registerSeqcRuntimeABIPasses();
}

} // namespace seqc

#endif // SEQC_PASSES_H

//===- GPU/Passes.td - passes of the GPU target ------------*- tablegen -*-===//

#ifndef SEQC_PASSES_GPU_PASSES_TD
#define SEQC_PASSES_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def SeqLowerToGpu : Pass<"seq-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower seq ops to GPU kernels (gpu.launch) in phases";
  let description = [{
    Rewrites each seq op with a GPU lowering into `gpu.launch` kernels on
    memrefs, bridged to the tensor graph with `bufferization.to_buffer` /
    `to_tensor`: chunked scans, one thread per channel with states in
    registers for selective scans, and SSD as chunk-state, state-passing
    and chunk-output kernels whose tiles are staged in shared memory
    (workgroup attributions). Matrix products of bf16 operands (f16 too in
    matmuls and attention) use the tensor cores (`nvvm.mma.sync` m16n8k16,
    f32 accumulators) on sm_80 and later. Ops without a GPU kernel take the
    reference lowering (host code over managed memory), and a remark says
    so with the reasons; with `strict` that is an error.

    With `emulate`, the same kernels are emitted as host code instead: one
    thread-pool task per thread block, shared memory on the task's stack,
    the threads of a phase one after another. Tests use it to check the
    kernels' arithmetic without a GPU.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Emit the kernels as host code (tests without a GPU)">,
    Option<"blockThreads", "block-threads", "int64_t", /*default=*/"256",
           "Threads per thread block">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_80\"",
           "GPU architecture (sm_80 and later: bf16/f16 products on tensor "
           "cores, mma.sync)">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "An op without a GPU kernel is an error (else a remark)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::seqc::seq::SeqDialect",
    "::seqc::seq_rt::SeqRtDialect"
  ];
}

def SeqCollectivesToNccl : Pass<"seq-collectives-to-nccl", "::mlir::ModuleOp"> {
  let summary = "shard all-reduces and sends / receives as calls of the runtime's NCCL entry points";
  let description = [{
    The CUDA target's form of `seq-collectives-to-mpi`. An all-reduce of a
    tensor over every process of a one-dimensional grid becomes a call of
    `seqc_rt_nccl_all_reduce` from the tensor's buffer into a new one, with
    the runtime's codes for the element type (f32, f64, i32, i64) and the
    reduction; a `shard.send` / `shard.recv` with one peer becomes
    `seqc_rt_nccl_send` / `_recv` of the buffer's bytes. Each call takes the
    module's MPI communicator first (a load of `seqc_mpi_communicator`),
    over whose ranks the runtime makes the NCCL communicator. With
    `emulate`, the calls name the `seqc_rt_nccl_emulated_*` entry points,
    which do the same on MPI between host buffers (`--target
    cuda-emulated`). The module gets the DLTI entry
    `"MPI:Implementation"` (the `mpi-implementation` option: "OpenMPI" or
    "MPICH", as in `seq-collectives-to-mpi`) for upstream
    `convert-shard-to-mpi`, which takes the process index after it.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Call the emulated target's entry points (MPI between host buffers)">,
    Option<"mpiImplementation", "mpi-implementation", "std::string",
           /*default=*/"\"OpenMPI\"",
           "The ABI of the MPI library the code calls, as MPIToLLVM names it: OpenMPI or MPICH">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::DLTIDialect"];
}

def SeqCopyGlobalsToManaged
    : Pass<"seq-copy-globals-to-managed", "::mlir::ModuleOp"> {
  let summary = "Give kernels managed copies of constant globals";
  let description = [{
    Constant tensors bufferize to `memref.get_global` of host globals, which
    a GPU cannot read (without HMM). In every host function, each
    `memref.get_global` becomes a `memref.alloc` (managed memory in a CUDA
    call) filled from the global with `memref.copy`; host code and kernels
    then read the copy. Runs after bufferization, before kernel outlining.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SeqGpuRegisterBudget : Pass<"seq-gpu-register-budget", "::mlir::ModuleOp"> {
  let summary = "Give every GPU kernel an explicit register budget";
  let description = [{
    Sets `nvvm.maxnreg` on every kernel (`gpu.func` with `gpu.kernel`) that
    has none. Kernels whose block size is known carry `.maxntid`, and ptxas
    then aims at full occupancy, spilling registers to local memory (the
    SSD output kernel: 48 registers and spills at 256 threads on sm_90a).
    Shared memory caps seqc's tiled kernels at a few blocks per SM anyway,
    so an explicit budget keeps them spill-free. The budget never exceeds
    what one block of the kernel's known size may have (64K registers per
    SM: 64 per thread at 1024 threads), or the launch would fail.

    It also aligns the kernels' shared buffers (workgroup attributions) to
    16 bytes, for the vector loads LLVM forms on them.
  }];
  let options = [
    Option<"maxRegisters", "max-registers", "int64_t", /*default=*/"255",
           "Registers per thread a kernel may use">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

#endif // SEQC_PASSES_GPU_PASSES_TD

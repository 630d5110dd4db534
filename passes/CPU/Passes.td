//===- CPU/Passes.td - passes of the CPU target ------------*- tablegen -*-===//

#ifndef SEQC_PASSES_CPU_PASSES_TD
#define SEQC_PASSES_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def SeqLowerToCpu : Pass<"seq-lower-to-cpu", "::mlir::ModuleOp"> {
  let summary = "Lower seq ops to fast, vectorized, multi-threaded CPU kernels";
  let description = [{
    Rewrites each seq op into kernels on memrefs that run over a task space
    on seqc's thread pool (`seq_rt.parallel_for`), bridged to the tensor graph
    with `bufferization.to_buffer` / `to_tensor`. Kernels keep recurrent
    states in vector registers of the target's width. Ops (or element
    types) without a fast kernel take the reference lowering, and a remark
    says so, naming the op, its types and why each fast kernel declined it
    (matmuls left to generic loops too); with `strict` that is an error.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "f32 lanes per vector (0: the host's widest)">,
    Option<"fuse", "fuse", "bool", /*default=*/"true",
           "Apply elementwise producers and consumers inside matmul kernels">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "An op without a fast kernel is an error (else a remark)">,
    Option<"bf16Products", "bf16-products", "std::string", /*default=*/"\"auto\"",
           "Products of bf16 operands: amx (AMX tiles in matmuls and "
           "experts, dot products elsewhere), amx-emulated (the same "
           "kernels, for seq-emulate-amx), dot (AVX-512 BF16 vdpbf16ps on "
           "bf16 pairs), widen (f32 FMAs), auto (amx, else dot, where the "
           "host has it)">
  ];
  let dependentDialects = [
    "::mlir::amx::AMXDialect",
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect", "::mlir::x86vector::X86VectorDialect",
    "::seqc::seq::SeqDialect", "::seqc::seq_rt::SeqRtDialect"
  ];
}

def SeqEmulateAmx : Pass<"seq-emulate-amx"> {
  let summary = "AMX tile ops as vector code, for hosts without AMX";
  let description = [{
    Rewrites the `amx` ops the GEMM engine emits for AMX products
    (`bf16-products=amx-emulated`) into vector code with their meaning:
    each `!amx.tile<RxCxT>` becomes a `vector<RxCxT>`, loads and stores go
    row by row (rows one memref row apart), and `tile_mulf` multiplies
    VNNI-packed bf16 pairs in f32 FMAs. Loops that carry tiles are
    converted too. The kernels are the ones real AMX runs, so their
    packing, padding and tails are tested on any host.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

def SeqControlFlowToLLVM : Pass<"seq-control-flow-to-llvm", "::mlir::ModuleOp"> {
  let summary = "cf to LLVM, with AMX tiles as block arguments";
  let description = [{
    convert-cf-to-llvm with the AMX dialect's type conversion added: the
    AMX micro-kernel's accumulator tiles are loop-carried, so its blocks
    take `!amx.tile` arguments, which become LLVM's `x86_amx`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def SeqVectorMath : Pass<"seq-vector-math"> {
  let summary = "Polynomial approximations of exp, log, erf, ... (fast path)";
  let description = [{
    Replaces `math` ops on f32 (scalars and vectors) by the upstream
    polynomial approximations, which vectorize. Used by the fast CPU
    pipeline; the reference pipeline keeps libm.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect", "::mlir::vector::VectorDialect"
  ];
}

def SeqMathToLibm : Pass<"seq-math-to-libm", "::mlir::ModuleOp"> {
  let summary = "Call libm for the math functions LLVM cannot lower exactly";
  let description = [{
    expm1, log1p, erf, erfc, the inverse and hyperbolic trigonometric
    functions and cbrt become libm calls (vectors unrolled); every other math
    op is left to the LLVM conversion, which keeps floor, fma, sqrt, exp, ...
    as (vector) intrinsics.
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def SeqStridedCopiesToLoops : Pass<"seq-strided-copies-to-loops"> {
  let summary = "Copy between strided views with loops LLVM vectorizes";
  let description = [{
    `memref.copy` between buffers that are not both contiguous (a result
    inserted into a slice of a larger tensor: each sequence of a packed
    batch, each piece of a checkpointed op) lowers to a call of MLIR's
    generic `memrefCopy`, which copies element by element. As `linalg.copy`
    it becomes loops over the innermost dimension, which LLVM vectorizes.
    Copies between contiguous buffers stay `memref.copy` (a `memcpy`).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def SeqWriteResultsInPlace : Pass<"seq-write-results-in-place"> {
  let summary = "Kernels write their results straight into the slices they "
                "are copied to";
  let description = [{
    Runs on buffers, right after one-shot bufferization. A kernel's result
    that is copied whole into a slice of a larger buffer (each sequence of a
    packed batch, each piece of a checkpointed op, as seq-expand-sequences
    inserts them) is written in place: the strided view the kernels write
    through (`allocResult`) becomes a view of that slice, and the
    allocation and the copy go away. Only when nothing between the
    allocation and the copy uses the larger buffer, the buffer is allocated
    in the function (not an argument, which may alias another), and the
    slice is defined from values available at the allocation.
  }];
}

def SeqRelaxExpandShape : Pass<"seq-relax-expand-shape"> {
  let summary = "memref.expand_shape with several dynamic sizes in a group as "
                "memref.reinterpret_cast";
  let description = [{
    MLIR 22's expand-strided-metadata assumes at most one dynamic size per
    reassociation group of a `memref.expand_shape` and crashes on more
    (llvm-project issue 186830, fixed for LLVM 23 by reading
    `output_shape`). Graphs produce them (a `tensor.expand_shape` of `?`
    into `? x ?`, such as a batch and a sequence length both dynamic). Such
    an expand_shape becomes a `memref.reinterpret_cast` of its source with
    the sizes of `output_shape` and the strides that expansion implies:
    within a group, each dimension's stride is the next one's times its
    size, the innermost taking the source dimension's stride.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def SeqCollectivesToMpi : Pass<"seq-collectives-to-mpi", "::mlir::ModuleOp"> {
  let summary = "shard all-reduces, all-gathers and sends / receives as MPI calls";
  let description = [{
    The collectives `seq-distribute-steps` creates, all-reduces of a tensor
    over every process of a one-dimensional grid, become `mpi.allreduce` on
    `mpi.comm_world` from the tensor's buffer into a new buffer; a
    `shard.send` / `shard.recv` with one peer (the all-to-all of
    `seq-distribute-experts`) becomes `mpi.send` / `mpi.recv` of the
    tensor's buffer, or into a new one, with tag 0; an all-gather along
    dimension 0 (the distribution passes' states and results) becomes a call
    of the runtime's `seqc_rt_mpi_all_gather` (MPI_Allgather of the bytes;
    the `mpi` dialect has no all-gather). The module gets the DLTI entry
    `"MPI:Implementation"` naming the ABI of the library the code will call
    (the `mpi-implementation` option: "OpenMPI", the MPI Debian ships, or
    "MPICH", whose ABI Intel MPI, Cray MPICH and MVAPICH share), added to
    the module's DLTI map if it has one; a module that names another ABI is
    an error. Upstream `convert-shard-to-mpi` runs after it for the
    process index; its own all-reduce lowering splits the communicator on
    every call, and MLIR 22's MPIToLLVM truncates the split communicator of
    OpenMPI to 32 bits.
  }];
  let options = [
    Option<"mpiImplementation", "mpi-implementation", "std::string",
           /*default=*/"\"OpenMPI\"",
           "The ABI of the MPI library the code calls, as MPIToLLVM names it: OpenMPI or MPICH">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::mpi::MPIDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::DLTIDialect"];
}

def SeqMpiToLLVM : Pass<"seq-mpi-to-llvm", "::mlir::ModuleOp"> {
  let summary = "MPI ops as calls to the MPI library (upstream MPIToLLVM), grids erased";
  let description = [{
    Applies upstream MPIToLLVM to the `mpi` ops, for the ABI the module's
    DLTI entry names, but with `mpi.comm_world` read from the module's
    communicator cell (`seqc_mpi_communicator`: MPI_COMM_WORLD or the
    host's communicator, of either ABI), erases the `shard.grid` symbols
    nothing refers to (none, once the collectives are lowered), and renames
    the predefined reductions MLIR 22 declares as `ompi_mpi_<op>` to the
    `ompi_mpi_op_<op>` OpenMPI exports.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def SeqExpandBf16 : Pass<"seq-expand-bf16"> {
  let summary = "Host bf16 conversions as integer arithmetic";
  let description = [{
    Rewrites `arith.truncf` to bf16 (round to nearest even, NaN kept) and
    `arith.extf` from bf16 as bit operations on i32. LLVM would otherwise
    call compiler-rt's `__truncsfbf2`, which neither the C library nor GCC 12's
    libgcc provide: ahead-of-time libraries with bf16 failed to load.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // SEQC_PASSES_CPU_PASSES_TD

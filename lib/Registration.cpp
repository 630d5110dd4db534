//===- Registration.cpp - dialects, interfaces and translations -----------===//
//
// One translation unit pulls in the upstream registration headers, so no other
// file of seqc pays for them.
//
//===----------------------------------------------------------------------===//

#include "seqc/InitSeqc.h"

#include "Seq/SeqDialect.h"
#include "SeqRt/SeqRtDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MPI/IR/MPI.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

namespace {
/// gpu.launch_func reads and writes the memrefs it passes (seqc's launches
/// are synchronous: the kernel is done when the op is). Upstream declares
/// no effects, which the ownership-based buffer deallocation rejects; with
/// this model the CUDA pipeline's compiled code frees its temporaries (at
/// the end of the block that made them) instead of leaving them to the end
/// of the call.
struct LaunchFuncMemoryEffects
    : mlir::MemoryEffectOpInterface::ExternalModel<LaunchFuncMemoryEffects,
                                                   mlir::gpu::LaunchFuncOp> {
  void getEffects(mlir::Operation *op,
                  llvm::SmallVectorImpl<mlir::SideEffects::EffectInstance<
                      mlir::MemoryEffects::Effect>> &effects) const {
    for (mlir::OpOperand &operand : op->getOpOperands()) {
      if (!mlir::isa<mlir::MemRefType>(operand.get().getType()))
        continue;
      effects.emplace_back(mlir::MemoryEffects::Read::get(), &operand,
                           mlir::SideEffects::DefaultResource::get());
      effects.emplace_back(mlir::MemoryEffects::Write::get(), &operand,
                           mlir::SideEffects::DefaultResource::get());
    }
    // Once lowered, the operands are plain pointers: a launch still writes
    // memory (without this it would look effect-free, hence dead).
    effects.emplace_back(mlir::MemoryEffects::Read::get(),
                         mlir::SideEffects::DefaultResource::get());
    effects.emplace_back(mlir::MemoryEffects::Write::get(),
                         mlir::SideEffects::DefaultResource::get());
  }
};

/// mpi.allreduce reads its send buffer and writes its receive buffer (and
/// talks to the other processes, a resource of its own, so that no two
/// collectives are reordered or dropped). Upstream declares no effects,
/// which the ownership-based buffer deallocation rejects.
struct AllReduceMemoryEffects
    : mlir::MemoryEffectOpInterface::ExternalModel<AllReduceMemoryEffects,
                                                   mlir::mpi::AllReduceOp> {
  void getEffects(mlir::Operation *op,
                  llvm::SmallVectorImpl<mlir::SideEffects::EffectInstance<
                      mlir::MemoryEffects::Effect>> &effects) const {
    auto reduce = mlir::cast<mlir::mpi::AllReduceOp>(op);
    effects.emplace_back(mlir::MemoryEffects::Read::get(),
                         &reduce.getSendbufMutable(),
                         mlir::SideEffects::DefaultResource::get());
    effects.emplace_back(mlir::MemoryEffects::Write::get(),
                         &reduce.getRecvbufMutable(),
                         mlir::SideEffects::DefaultResource::get());
    effects.emplace_back(mlir::MemoryEffects::Write::get(),
                         mlir::SideEffects::DefaultResource::get());
  }
};

/// mpi.send reads its buffer, mpi.recv writes its own; both talk to the
/// other processes, like the collectives, so none is reordered or dropped.
template <typename Op>
struct PointToPointMemoryEffects : mlir::MemoryEffectOpInterface::ExternalModel<
                                       PointToPointMemoryEffects<Op>, Op> {
  void getEffects(mlir::Operation *op,
                  llvm::SmallVectorImpl<mlir::SideEffects::EffectInstance<
                      mlir::MemoryEffects::Effect>> &effects) const {
    auto message = mlir::cast<Op>(op);
    if constexpr (std::is_same_v<Op, mlir::mpi::SendOp>)
      effects.emplace_back(mlir::MemoryEffects::Read::get(),
                           &message.getRefMutable(),
                           mlir::SideEffects::DefaultResource::get());
    else
      effects.emplace_back(mlir::MemoryEffects::Write::get(),
                           &message.getRefMutable(),
                           mlir::SideEffects::DefaultResource::get());
    effects.emplace_back(mlir::MemoryEffects::Write::get(),
                         mlir::SideEffects::DefaultResource::get());
  }
};
} // namespace

void seqc::registerDialects(mlir::DialectRegistry &registry) {
  registry.addExtension(+[](mlir::MLIRContext *ctx, mlir::gpu::GPUDialect *) {
    mlir::gpu::LaunchFuncOp::attachInterface<LaunchFuncMemoryEffects>(*ctx);
  });
  registry.addExtension(+[](mlir::MLIRContext *ctx, mlir::mpi::MPIDialect *) {
    mlir::mpi::AllReduceOp::attachInterface<AllReduceMemoryEffects>(*ctx);
    mlir::mpi::SendOp::attachInterface<
        PointToPointMemoryEffects<mlir::mpi::SendOp>>(*ctx);
    mlir::mpi::RecvOp::attachInterface<
        PointToPointMemoryEffects<mlir::mpi::RecvOp>>(*ctx);
  });
  registry.insert<seq::SeqDialect, seq_rt::SeqRtDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
}

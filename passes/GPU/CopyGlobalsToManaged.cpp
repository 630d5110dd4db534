//===- CopyGlobalsToManaged.cpp - constants where kernels can read them ---===//

#include "seqc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

namespace seqc {
#define GEN_PASS_DEF_SEQCOPYGLOBALSTOMANAGED
#include "passes/GPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqCopyGlobalsToManaged
    : seqc::impl::SeqCopyGlobalsToManagedBase<SeqCopyGlobalsToManaged> {
  void runOnOperation() override {
    SmallVector<memref::GetGlobalOp> globals;
    // Host functions only: kernels live in gpu.module and are outlined
    // later from gpu.launch bodies, which take the copies as captures.
    for (auto fn : getOperation().getOps<func::FuncOp>())
      fn.walk([&](memref::GetGlobalOp g) { globals.push_back(g); });
    for (memref::GetGlobalOp g : globals) {
      auto type = cast<MemRefType>(g.getType());
      if (!type.hasStaticShape() || !type.getLayout().isIdentity()) {
        g.emitError("a constant global of type ")
            << type << " cannot be copied for the GPU";
        return signalPassFailure();
      }
      OpBuilder b(g);
      b.setInsertionPointAfter(g);
      Value copy =
          memref::AllocOp::create(b, g.getLoc(), type, b.getI64IntegerAttr(64));
      g.getResult().replaceAllUsesWith(copy);
      memref::CopyOp::create(b, g.getLoc(), g.getResult(), copy);
    }
  }
};
} // namespace

//===- GpuRegisterBudget.cpp - explicit register budgets for kernels ------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace seqc {
#define GEN_PASS_DEF_SEQGPUREGISTERBUDGET
#include "passes/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqGpuRegisterBudget
    : seqc::impl::SeqGpuRegisterBudgetBase<SeqGpuRegisterBudget> {
  using Base::Base;

  void runOnOperation() override {
    if (maxRegisters < 16 || maxRegisters > 255) {
      getOperation().emitError()
          << "max-registers must be in [16, 255], not " << maxRegisters;
      return signalPassFailure();
    }
    auto budget =
        IntegerAttr::get(IntegerType::get(&getContext(), 32), maxRegisters);
    getOperation().walk([&](gpu::GPUFuncOp fn) {
      if (fn.isKernel() && !fn->hasAttr("nvvm.maxnreg"))
        fn->setAttr("nvvm.maxnreg", budget);
    });
  }
};
} // namespace

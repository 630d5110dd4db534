//===- GpuRegisterBudget.cpp - kernels' register budgets, shared alignment ===//

#include "seqc/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace seqc {
#define GEN_PASS_DEF_SEQGPUREGISTERBUDGET
#include "passes/GPU/Passes.h.inc"
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
    Type i32 = IntegerType::get(&getContext(), 32);
    Type i64 = IntegerType::get(&getContext(), 64);
    getOperation().walk([&](gpu::GPUFuncOp fn) {
      if (!fn.isKernel())
        return;
      if (!fn->hasAttr("nvvm.maxnreg")) {
        // A block must fit the SM's 64K registers: 1024 threads get 64 each.
        int64_t budget = maxRegisters;
        if (std::optional<ArrayRef<int32_t>> block = fn.getKnownBlockSize()) {
          int64_t threads = 1;
          for (int32_t d : *block)
            threads *= d;
          // Registers are allocated to threads in groups of 8.
          budget = std::min<int64_t>(budget, 65536 / threads / 8 * 8);
        }
        fn->setAttr("nvvm.maxnreg", IntegerAttr::get(i32, budget));
      }
      // Shared buffers aligned for the vector accesses LLVM forms on them
      // (the default, 4 bytes, would only hold by the buffers' sizes).
      for (unsigned i = 0; i < fn.getNumWorkgroupAttributions(); ++i)
        if (!fn.getWorkgroupAttributionAttr(
                i, LLVM::LLVMDialect::getAlignAttrName()))
          fn.setWorkgroupAttributionAttr(i,
                                         LLVM::LLVMDialect::getAlignAttrName(),
                                         IntegerAttr::get(i64, 16));
    });
  }
};
} // namespace

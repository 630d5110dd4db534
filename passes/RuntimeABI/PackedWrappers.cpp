//===- PackedWrappers.cpp - one C entry point per public function ---------===//
//
// After the conversion to LLVM a public function takes its memrefs as
// expanded descriptors (allocated, aligned, offset, sizes..., strides...):
// a signature that depends on the ranks. Each gets a companion
//
//   void _seqc_packed_<name>(void **args)
//
// whose args[i] points at the i-th scalar argument and whose last pointer
// receives the results, so hosts (the JIT, the compile cache, ahead-of-time
// objects) call every function the same way. Private functions (kernels,
// trampolines) become internal, so several objects link together.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"
#include "seqc/Signature.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace seqc {
#define GEN_PASS_DEF_SEQEMITPACKEDWRAPPERS
#include "passes/RuntimeABI/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqEmitPackedWrappers
    : seqc::impl::SeqEmitPackedWrappersBase<SeqEmitPackedWrappers> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    SmallVector<LLVM::LLVMFuncOp> publicFns;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>()) {
      if (fn.isExternal())
        continue;
      if (fn.isPrivate()) {
        fn.setLinkage(LLVM::Linkage::Internal);
        continue;
      }
      if (!StringRef(fn.getSymName()).starts_with("_seqc_packed_"))
        publicFns.push_back(fn);
    }
    OpBuilder top = OpBuilder::atBlockEnd(module.getBody());
    for (LLVM::LLVMFuncOp fn : publicFns) {
      std::string name = seqc::packedSymbol(fn.getSymName().str());
      if (module.lookupSymbol(name)) {
        fn.emitError() << "'" << name << "' is already defined";
        return signalPassFailure();
      }
      auto type =
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr});
      auto wrapper = LLVM::LLVMFuncOp::create(top, fn.getLoc(), name, type);
      Block *entry = wrapper.addEntryBlock(top);
      ImplicitLocOpBuilder b(fn.getLoc(), ctx);
      b.setInsertionPointToStart(entry);
      Value args = entry->getArgument(0);
      auto slot = [&](int64_t i) {
        Value at =
            LLVM::GEPOp::create(b, ptr, ptr, args, ArrayRef<LLVM::GEPArg>{i});
        return LLVM::LoadOp::create(b, ptr, at).getResult();
      };
      LLVM::LLVMFunctionType fnType = fn.getFunctionType();
      SmallVector<Value> operands;
      for (auto [i, t] : llvm::enumerate(fnType.getParams()))
        operands.push_back(LLVM::LoadOp::create(b, t, slot(i)));
      auto call = LLVM::CallOp::create(b, fn, operands);
      if (!isa<LLVM::LLVMVoidType>(fnType.getReturnType()))
        LLVM::StoreOp::create(b, call.getResult(), slot(fnType.getNumParams()));
      LLVM::ReturnOp::create(b, ValueRange{});
    }
  }
};
} // namespace

//===- LowerParallel.cpp - seq_rt.parallel_for to the runtime's thread pool
//--===//

#include "EntryPoints.h"
#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace seqc {
#define GEN_PASS_DEF_SEQLOWERPARALLEL
#include "passes/RuntimeABI/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {

/// The callee's shared arguments as one LLVM struct (memrefs as their
/// descriptors), with unrealized casts that the conversion to LLVM resolves.
struct ContextLayout {
  SmallVector<Type> argTypes;
  SmallVector<Type> fieldTypes;
  LLVM::LLVMStructType structType;
};

struct SeqLowerParallel : seqc::impl::SeqLowerParallelBase<SeqLowerParallel> {
  void runOnOperation() override {
    if (failed(lowerWidths()) || failed(lowerLoops()))
      signalPassFailure();
  }

  /// Each seq_rt.parallel_width becomes a call of seqc_rt_parallel_width.
  LogicalResult lowerWidths() {
    ModuleOp module = getOperation();
    SmallVector<seqc::seq_rt::ParallelWidthOp> widths;
    module.walk(
        [&](seqc::seq_rt::ParallelWidthOp op) { widths.push_back(op); });
    if (widths.empty())
      return success();
    OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
    Type i64 = IntegerType::get(&getContext(), 64);
    FailureOr<LLVM::LLVMFuncOp> runtimeFn = LLVM::lookupOrCreateFn(
        top, module, seqc::rt::entry::kParallelWidth, {}, i64);
    if (failed(runtimeFn))
      return failure();
    for (seqc::seq_rt::ParallelWidthOp op : widths) {
      ImplicitLocOpBuilder b(op.getLoc(), op);
      Value width =
          LLVM::CallOp::create(b, *runtimeFn, ValueRange{}).getResult();
      op.replaceAllUsesWith(
          arith::IndexCastOp::create(b, b.getIndexType(), width).getResult());
      op.erase();
    }
    return success();
  }

  /// Each seq_rt.parallel_for becomes a call of seqc_rt_parallel_for with
  /// its arguments packed for a trampoline.
  LogicalResult lowerLoops() {
    ModuleOp module = getOperation();
    SmallVector<seqc::seq_rt::ParallelForOp> loops;
    module.walk([&](seqc::seq_rt::ParallelForOp op) { loops.push_back(op); });
    if (loops.empty())
      return success();

    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx);
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
    FailureOr<LLVM::LLVMFuncOp> runtimeFn =
        LLVM::lookupOrCreateFn(top, module, seqc::rt::entry::kParallelFor,
                               {i64, ptr, ptr}, LLVM::LLVMVoidType::get(ctx));
    if (failed(runtimeFn))
      return failure();

    llvm::StringMap<func::FuncOp> trampolines;
    SymbolTable symbols(module);
    for (seqc::seq_rt::ParallelForOp op : loops) {
      ContextLayout layout;
      for (Value arg : op.getArgs()) {
        Type converted = converter.convertType(arg.getType());
        if (!converted) {
          return op.emitOpError()
                 << "cannot pass " << arg.getType() << " to the thread pool";
        }
        layout.argTypes.push_back(arg.getType());
        layout.fieldTypes.push_back(converted);
      }
      layout.structType =
          LLVM::LLVMStructType::getLiteral(ctx, layout.fieldTypes);

      StringRef callee = op.getCallee();
      func::FuncOp &tramp = trampolines[callee];
      if (!tramp)
        tramp = createTrampoline(module, symbols, callee, layout);

      // Pack the shared arguments into a stack slot of the enclosing
      // function (allocated once, at its entry).
      auto parent = op->getParentOfType<FunctionOpInterface>();
      OpBuilder entry =
          OpBuilder::atBlockBegin(&parent.getFunctionBody().front());
      Value one = LLVM::ConstantOp::create(entry, op.getLoc(), i64,
                                           entry.getI64IntegerAttr(1));
      Value slot = LLVM::AllocaOp::create(entry, op.getLoc(), ptr,
                                          layout.structType, one);

      ImplicitLocOpBuilder b(op.getLoc(), op);
      Value packed = LLVM::PoisonOp::create(b, layout.structType);
      for (auto [i, arg] : llvm::enumerate(op.getArgs())) {
        Value field =
            UnrealizedConversionCastOp::create(b, layout.fieldTypes[i], arg)
                .getResult(0);
        packed = LLVM::InsertValueOp::create(b, packed, field, i);
      }
      LLVM::StoreOp::create(b, packed, slot);
      Value fn = func::ConstantOp::create(b, tramp.getFunctionType(),
                                          SymbolRefAttr::get(tramp));
      Value fnPtr = UnrealizedConversionCastOp::create(b, ptr, fn).getResult(0);
      Value count = arith::IndexCastOp::create(b, i64, op.getCount());
      LLVM::CallOp::create(b, *runtimeFn, ValueRange{count, fnPtr, slot});
      op.erase();
    }
    return success();
  }

  /// func.func private @callee$task(%ctx: !llvm.ptr, %begin: i64, %end: i64)
  func::FuncOp createTrampoline(ModuleOp module, SymbolTable &symbols,
                                StringRef callee, const ContextLayout &layout) {
    MLIRContext *ctx = module.getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    Location loc = module.getLoc();
    OpBuilder top = OpBuilder::atBlockEnd(module.getBody());
    auto type = FunctionType::get(ctx, {ptr, i64, i64}, {});
    auto tramp = func::FuncOp::create(top, loc, (callee + "$task").str(), type);
    tramp.setPrivate();
    symbols.insert(tramp);

    Block *body = tramp.addEntryBlock();
    ImplicitLocOpBuilder b(loc, ctx);
    b.setInsertionPointToStart(body);
    Value packed =
        LLVM::LoadOp::create(b, layout.structType, body->getArgument(0));
    SmallVector<Value> args{
        arith::IndexCastOp::create(b, b.getIndexType(), body->getArgument(1)),
        arith::IndexCastOp::create(b, b.getIndexType(), body->getArgument(2))};
    for (auto [i, argType] : llvm::enumerate(layout.argTypes)) {
      Value field = LLVM::ExtractValueOp::create(b, packed, i);
      args.push_back(
          UnrealizedConversionCastOp::create(b, argType, field).getResult(0));
    }
    func::CallOp::create(b, callee, TypeRange{}, args);
    func::ReturnOp::create(b);
    return tramp;
  }
};

} // namespace

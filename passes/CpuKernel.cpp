//===- CpuKernel.cpp - parallel CPU kernels emitted by lowerings ----------===//

#include "CpuKernel.h"
#include "seqc/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/TargetParser/Host.h"

#include <unistd.h>

using namespace mlir;
using namespace seqc;

CpuTarget CpuTarget::host() {
  CpuTarget t;
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto has = [&](const char *f) { return features.lookup(f); };
  if (has("avx512f"))
    t.vectorWidth = 16;
  else if (has("avx2") || has("avx"))
    t.vectorWidth = 8;
  else
    t.vectorWidth = 4; // SSE, NEON
#ifdef _SC_LEVEL1_DCACHE_SIZE
  long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l1 > 0)
    t.l1Bytes = l1;
  if (l2 > 0)
    t.l2Bytes = l2;
#endif
  return t;
}

void seqc::emitParallelKernel(ImplicitLocOpBuilder &b, StringRef name,
                              Value count, ValueRange args,
                              const TaskBody &body) {
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  SmallVector<Type> types{b.getIndexType(), b.getIndexType()};
  for (Value a : args)
    types.push_back(a.getType());

  func::FuncOp fn;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    fn = func::FuncOp::create(b, ("__seqc_" + name).str(),
                              b.getFunctionType(types, {}));
    fn.setPrivate();
    SymbolTable(module).insert(fn); // unique name
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    KernelBuilder kb(b);
    kb.setAllocaBlock(entry);
    kb.setFastMath(true);
    SmallVector<Value> shared(entry->getArguments().drop_front(2));
    kb.forEach(entry->getArgument(0), entry->getArgument(1), kb.idx(1),
               [&](Value task) { body(kb, task, shared); });
    func::ReturnOp::create(b);
  }
  seq::ParallelForOp::create(b, count, fn.getSymName(), args);
}

static MemRefType bufferTypeOf(RankedTensorType t) {
  return MemRefType::get(t.getShape(), t.getElementType());
}

/// A view of any row-major slice: dynamic offset and outer strides, a
/// contiguous innermost dimension (what vector loads need).
static MemRefType stridedBufferTypeOf(RankedTensorType t) {
  int64_t rank = t.getRank();
  if (rank == 0)
    return bufferTypeOf(t);
  SmallVector<int64_t> strides(rank, ShapedType::kDynamic);
  strides.back() = 1;
  auto layout =
      StridedLayoutAttr::get(t.getContext(), ShapedType::kDynamic, strides);
  return MemRefType::get(t.getShape(), t.getElementType(), layout);
}

Value seqc::readBuffer(ImplicitLocOpBuilder &b, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  // Inputs are read in place when they are slices of a larger tensor (the
  // columns of a fused projection): no copy into a contiguous buffer.
  return bufferization::ToBufferOp::create(b, stridedBufferTypeOf(type), tensor,
                                           /*read_only=*/true);
}

Value seqc::allocBuffer(ImplicitLocOpBuilder &b, RankedTensorType type,
                        ValueRange sizes) {
  SmallVector<Value> dynamic;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dynamic.push_back(sizes[i]);
  // 64-byte alignment: whole cache lines, aligned vector loads.
  return memref::AllocOp::create(b, bufferTypeOf(type), dynamic,
                                 b.getI64IntegerAttr(64));
}

Value seqc::asTensor(ImplicitLocOpBuilder &b, Value buffer,
                     RankedTensorType type) {
  return bufferization::ToTensorOp::create(b, type, buffer, /*restrict=*/true,
                                           /*writable=*/true);
}

bool seqc::allF32(Operation *op) {
  auto isF32 = [](Type t) {
    auto shaped = dyn_cast<ShapedType>(t);
    Type elt = shaped ? shaped.getElementType() : t;
    return elt.isF32() || elt.isInteger();
  };
  return llvm::all_of(op->getOperandTypes(), isF32) &&
         llvm::all_of(op->getResultTypes(), isF32);
}


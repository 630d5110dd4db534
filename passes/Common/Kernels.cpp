//===- Kernels.cpp - kernels on buffers, shared by every target ----------===//

#include "Common/Kernels.h"

#include "SeqRt/SeqRtDialect.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace seqc;

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
  seq_rt::ParallelForOp::create(b, count, fn.getSymName(), args);
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

Value seqc::readOptionalBuffer(ImplicitLocOpBuilder &b, Value tensor) {
  return tensor ? readBuffer(b, tensor) : Value();
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

Value seqc::allocResult(ImplicitLocOpBuilder &b, RankedTensorType type,
                        ValueRange sizes) {
  Value memory = allocBuffer(b, type, sizes);
  return memref::CastOp::create(b, stridedBufferTypeOf(type), memory);
}

Value seqc::asTensor(ImplicitLocOpBuilder &b, Value buffer,
                     RankedTensorType type) {
  if (auto view = buffer.getDefiningOp<memref::CastOp>())
    if (view.getSource().getDefiningOp<memref::AllocOp>())
      buffer = view.getSource();
  return bufferization::ToTensorOp::create(b, type, buffer, /*restrict=*/true,
                                           /*writable=*/true);
}

SmallVector<Value> seqc::delinearize(KernelBuilder &kb, Value item,
                                     ArrayRef<Value> sizes) {
  SmallVector<Value> idx(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    idx[i] = kb.rems(item, sizes[i]);
    item = kb.divs(item, sizes[i]);
  }
  return idx;
}

RegionCaptures RegionCaptures::of(Region &region) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(region, above);
  RegionCaptures c;
  for (Value v : above) {
    Operation *def = v.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>())
      c.constants.push_back(def);
    else
      c.values.push_back(v);
  }
  return c;
}

bool RegionCaptures::scalarOnly() const {
  auto scalar = [](Value v) { return v.getType().isIntOrIndexOrFloat(); };
  return llvm::all_of(values, scalar) &&
         llvm::all_of(constants, [&](Operation *c) {
           return llvm::all_of(c->getResults(), scalar);
         });
}

IRMapping RegionCaptures::map(OpBuilder &b, ValueRange args) const {
  IRMapping m;
  for (auto [v, arg] : llvm::zip(values, args))
    m.map(v, arg);
  for (Operation *c : constants)
    b.clone(*c, m);
  return m;
}

Value seqc::deferredScaleOutOfRange(KernelBuilder &k, Value c) {
  // Unordered comparisons: NaN is out of range.
  return k.ori(k.fcmp(arith::CmpFPredicate::ULT, c, k.like(c, 0x1p-32)),
               k.fcmp(arith::CmpFPredicate::UGT, c, k.like(c, 0x1p32)));
}

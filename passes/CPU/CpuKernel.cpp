//===- CpuKernel.cpp - what the CPU lowerings know of the host ------------===//

#include "CPU/CpuKernel.h"
#include "seqc/Passes.h"

using namespace mlir;
using namespace seqc;

CpuTarget CpuTarget::host() {
  TargetDescription host = TargetDescription::host();
  CpuTarget t;
  t.vectorWidth = host.vectorWidth;
  t.l1Bytes = host.l1Bytes;
  t.l2Bytes = host.l2Bytes;
  t.bf16Dot = host.avx512bf16;
  t.amxTiles = host.amx;
  return t;
}

std::string seqc::cpuHostTuning() {
  CpuTarget host = CpuTarget::host();
  return "l1 " + std::to_string(host.l1Bytes) + " l2 " +
         std::to_string(host.l2Bytes);
}

void CpuItemDispatch::emit(ImplicitLocOpBuilder &b, StringRef name,
                           KernelBuilder &, Value count, ValueRange args,
                           const ItemBody &body) const {
  emitParallelKernel(b, name, count, args, body);
}

bool seqc::cpuTakesElementTypes(Operation *op) {
  auto takes = [](Type t) {
    auto shaped = dyn_cast<ShapedType>(t);
    Type elt = shaped ? shaped.getElementType() : t;
    return elt.isF32() || elt.isBF16() || elt.isF16() || elt.isInteger();
  };
  return llvm::all_of(op->getOperandTypes(), takes) &&
         llvm::all_of(op->getResultTypes(), takes);
}

std::string CpuItemDispatch::unsupportedTypes(Operation *op) const {
  return cpuTakesElementTypes(op) ? "" : cpuElementTypesReason;
}

SmallVector<size_t> seqc::columnBlocks(const CpuTarget &target, size_t vectors,
                                       int64_t perVector, int64_t fixed) {
  const size_t fit = static_cast<size_t>(
      std::max<int64_t>((target.vectorRegisters() - fixed) / perVector, 1));
  const size_t count = (vectors + fit - 1) / fit;
  SmallVector<size_t> bounds;
  for (size_t i = 0; i <= count; ++i)
    bounds.push_back(count ? vectors * i / count : 0);
  return bounds;
}

SmallVector<Value> seqc::rowMasks(KernelBuilder &k, int64_t n, int64_t lanes) {
  SmallVector<Value> masks;
  for (int64_t c0 = 0; c0 < n; c0 += lanes)
    masks.push_back(k.vmask(k.idx(n - c0), lanes));
  return masks;
}

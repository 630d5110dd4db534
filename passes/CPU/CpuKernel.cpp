//===- CpuKernel.cpp - what the CPU lowerings know of the host ------------===//

#include "CPU/CpuKernel.h"

using namespace mlir;
using namespace seqc;

CpuTarget CpuTarget::host() {
  TargetDescription host = TargetDescription::host();
  CpuTarget t;
  t.vectorWidth = host.vectorWidth;
  t.l1Bytes = host.l1Bytes;
  t.l2Bytes = host.l2Bytes;
  return t;
}

void CpuItemDispatch::emit(ImplicitLocOpBuilder &b, StringRef name,
                           KernelBuilder &, Value count, ValueRange args,
                           const ItemBody &body) const {
  emitParallelKernel(b, name, count, args, body);
}

std::string CpuItemDispatch::unsupportedTypes(Operation *op) const {
  if (allF32(op))
    return "";
  return "takes f32 operands only (bf16 and f16 have no fast CPU kernel yet)";
}

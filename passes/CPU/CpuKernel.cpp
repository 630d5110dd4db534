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

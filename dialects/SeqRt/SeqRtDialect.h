//===- SeqRtDialect.h - seqc's internal runtime-ABI ops ---------*- C++ -*-===//
//
// seq_rt.check and seq_rt.parallel_for: what the lowerings emit for the
// runtime (SeqRtOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_DIALECT_SEQRT_SEQRTDIALECT_H
#define SEQC_DIALECT_SEQRT_SEQRTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "SeqRt/SeqRtDialect.h.inc"

#define GET_OP_CLASSES
#include "SeqRt/SeqRtOps.h.inc"

#endif // SEQC_DIALECT_SEQRT_SEQRTDIALECT_H

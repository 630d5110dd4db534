//===- SeqDialect.h - the seq dialect ---------------------------*- C++ -*-===//
//
// Include this header to use the seq dialect: its attributes, interfaces and
// operations.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_DIALECT_SEQ_SEQDIALECT_H
#define SEQC_DIALECT_SEQ_SEQDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Seq/ShapeSignature.h"

#include "Seq/SeqDialect.h.inc"
#include "Seq/SeqEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Seq/SeqAttrs.h.inc"

#include "Seq/SeqInterfaces.h.inc"

#define GET_OP_CLASSES
#include "Seq/SeqOps.h.inc"

#endif // SEQC_DIALECT_SEQ_SEQDIALECT_H

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

#include <limits>

#include "Seq/ShapeSignature.h"

#include "Seq/SeqDialect.h.inc"
#include "Seq/SeqEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Seq/SeqAttrs.h.inc"

#include "Seq/SeqInterfaces.h.inc"

namespace seqc::seq {

/// The discardable attribute holding an op's #seq.plan.
inline constexpr llvm::StringLiteral kPlanAttrName = "seq.plan";

/// An error naming each undotted attribute of `op` that is not one of its
/// own (`inherent`), with the nearest known name: a misspelled attribute
/// must not silently keep its default. Dialect-prefixed attributes
/// (`seq.name`, `foo.bar`) are allowed.
mlir::LogicalResult
verifyKnownAttributes(mlir::Operation *op,
                      llvm::ArrayRef<llvm::StringRef> inherent);

/// The name among `known` closest to `name` by edit distance, if it is close
/// enough to be a likely misspelling; empty otherwise.
llvm::StringRef nearestName(llvm::StringRef name,
                            llvm::ArrayRef<llvm::StringRef> known);

/// The op trait behind verifyKnownAttributes.
template <typename ConcreteType>
class KnownAttributesOnly
    : public mlir::OpTrait::TraitBase<ConcreteType, KnownAttributesOnly> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyKnownAttributes(op, ConcreteType::getAttributeNames());
  }
};

} // namespace seqc::seq

#define GET_OP_CLASSES
#include "Seq/SeqOps.h.inc"

#endif // SEQC_DIALECT_SEQ_SEQDIALECT_H

//===- SeqDialect.cpp - the seq dialect -----------------------------------===//

#include "Seq/SeqDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace seqc::seq;

#include "Seq/SeqDialect.cpp.inc"
#include "Seq/SeqEnums.cpp.inc"
#include "Seq/SeqInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Seq/SeqAttrs.cpp.inc"

void SeqDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Seq/SeqAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Seq/SeqOps.cpp.inc"
      >();
}

//===- Registration.cpp - dialects, interfaces and translations -----------===//
//
// One translation unit pulls in the upstream registration headers, so no other
// file of seqc pays for them.
//
//===----------------------------------------------------------------------===//

#include "seqc/InitSeqc.h"

#include "Seq/SeqDialect.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void seqc::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<seq::SeqDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
}

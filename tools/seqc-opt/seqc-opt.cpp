//===- seqc-opt.cpp - the opt-style driver of seqc ------------------------===//
//
// Parses, verifies, transforms and prints IR with the seq dialect, the
// upstream dialects around it, every upstream pass and seqc's passes and
// named pipelines.
//
//===----------------------------------------------------------------------===//

#include "seqc/InitSeqc.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  seqc::registerPasses();

  mlir::DialectRegistry registry;
  seqc::registerDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "seqc optimizer driver: the seq dialect and its lowerings\n",
      registry));
}

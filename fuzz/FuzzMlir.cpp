//===- FuzzMlir.cpp - the seq dialect's parser and verifiers --------------===//
//
// Mutated .mlir text (seeded with the lit tests and examples) is parsed with
// every dialect seqc registers and verified. Errors are diagnostics; the
// process must never crash, assert or leak.
//
//===----------------------------------------------------------------------===//

#include "seqc/InitSeqc.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstddef>
#include <cstdint>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // One context for all inputs (creating one per input costs more than the
  // parse); types and attributes interned by earlier inputs do no harm.
  static std::unique_ptr<mlir::MLIRContext> ctx = [] {
    mlir::DialectRegistry registry;
    seqc::registerDialects(registry);
    auto c = std::make_unique<mlir::MLIRContext>(
        registry, mlir::MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    return c;
  }();
  mlir::ScopedDiagnosticHandler quiet(
      ctx.get(), [](mlir::Diagnostic &) { return mlir::success(); });
  // As seqc reads sources: a null-terminated copy (MLIR's lexer relies on
  // the terminator; parseSourceString over raw bytes would read past them).
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.mlir"),
      llvm::SMLoc());
  mlir::ParserConfig config(ctx.get());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, config);
  if (module)
    (void)mlir::verify(*module);
  return 0;
}

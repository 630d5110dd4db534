//===- InitSeqc.h - registration of everything seqc uses --------*- C++ -*-===//

#ifndef SEQC_INITSEQC_H
#define SEQC_INITSEQC_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace seqc {

/// Registers the seq dialect, the upstream dialects a model graph and its
/// lowerings use, their interface models (bufferization, conversion to LLVM,
/// inlining) and the translations to LLVM IR.
void registerDialects(mlir::DialectRegistry &registry);

/// Registers seqc's passes and named pipelines with the global registry.
void registerPasses();

} // namespace seqc

#endif // SEQC_INITSEQC_H

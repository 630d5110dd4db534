//===- ScanLayout.h - scans' operands as [B, T, S] tensors ------*- C++ -*-===//
//
// Scans take any trailing state dims `S...`; their kernels see one flattened
// state dim. These reshape operands to that form and results back.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_SCANLAYOUT_H
#define SEQC_PASSES_SCANLAYOUT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace seqc {

/// `[B, T, S...]` -> `[B, T, S]` (S the product of the state dims, 1 if none).
mlir::Value toBTS(mlir::ImplicitLocOpBuilder &b, mlir::Value t);
/// `[B, S...]` -> `[B, S]`.
mlir::Value toBS(mlir::ImplicitLocOpBuilder &b, mlir::Value t);
/// Reshapes `t` (made by toBTS/toBS) back to `type`, whose dimension sizes
/// are `sizes`.
mlir::Value restoreScanShape(mlir::ImplicitLocOpBuilder &b, mlir::Value t,
                             mlir::RankedTensorType type,
                             mlir::ValueRange sizes);

/// `[d0, ..., dn-2, dn-1]` -> `[d0, ..., dn-1, dn-2]` (linalg.transpose):
/// the layouts the CPU scans want their per-channel operands in (A^T of the
/// selective scan, the conv's taps, states with channels innermost).
mlir::Value transposeLastTwo(mlir::ImplicitLocOpBuilder &b, mlir::Value t);

} // namespace seqc

#endif // SEQC_PASSES_SCANLAYOUT_H

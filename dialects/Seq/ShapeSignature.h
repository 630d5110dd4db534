//===- ShapeSignature.h - named-dimension shape contracts -------*- C++ -*-===//
//
// Every seq op declares its operand and result shapes with named dimensions
// (`x: B x T x H x P`, `dt: B x T x H`, ...). The same declaration serves the
// static verifier, which names the operand and the dimension of a mismatch
// ("dimension 1 (T) of dt is 9 but x has 8"), and the lowerings, which read
// each dimension's size from its first occurrence and emit run-time checks for
// the occurrences that are dynamic.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_DIALECT_SEQ_SHAPESIGNATURE_H
#define SEQC_DIALECT_SEQ_SHAPESIGNATURE_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace seqc::seq {

/// The element-type class of a declared tensor.
enum class ElementKind {
  Data,  ///< f32, f16 or bf16; all Data tensors of one op share one type.
  State, ///< f32 (recurrent states, scalars such as the aux loss).
  Int32, ///< i32 (expert indices).
  Int64, ///< i64 (expert loads).
  Param, ///< f32, or the op's Data type (per-channel parameters: A, biases).
  Any,   ///< checked by the op itself.
};

/// One dimension of a declared tensor: `scale * symbol + offset`.
struct DimExpr {
  std::string symbol;
  int64_t scale = 1;
  int64_t offset = 0;

  DimExpr(const char *symbol) : symbol(symbol) {}
  DimExpr(std::string symbol, int64_t scale = 1, int64_t offset = 0)
      : symbol(std::move(symbol)), scale(scale), offset(offset) {}

  bool isPlain() const { return scale == 1 && offset == 0; }
  /// The size this dimension has when the symbol is `value`.
  int64_t apply(int64_t value) const { return scale * value + offset; }
  /// "T", "W-1", "2M".
  std::string str() const;
};

/// A tensor (operand or result) declared with named dimensions.
struct TensorDecl {
  std::string name;
  mlir::Value value;
  llvm::SmallVector<DimExpr, 4> dims;
  ElementKind kind;
};

/// Where a symbol's size comes from: a tensor dimension or an attribute.
struct SymbolSource {
  /// Index into tensors(), or -1 when bound by an attribute.
  int tensor = -1;
  unsigned dim = 0;
  /// The attribute's value when `tensor == -1`.
  int64_t constant = 0;
  std::string origin;
};

class SignatureVerifier;

class ShapeSignature {
public:
  /// Declares `value` (an operand or result named `name`) with `dims`.
  /// Null values (absent optional operands) are ignored.
  void add(llvm::StringRef name, mlir::Value value,
           llvm::ArrayRef<DimExpr> dims, ElementKind kind = ElementKind::Data);
  /// Binds `symbol` to a constant known from an attribute named `origin`.
  void bind(llvm::StringRef symbol, int64_t value, llvm::StringRef origin);
  /// Requires `dividend % divisor == 0` (and `divisor >= 1`).
  void requireDivisible(llvm::StringRef dividend, llvm::StringRef divisor);
  /// Requires `symbol >= 1`.
  void requirePositive(llvm::StringRef symbol);

  /// Checks ranks, element types and every statically known dimension;
  /// reports the first violation on `op`.
  mlir::LogicalResult verify(mlir::Operation *op) const;

  llvm::ArrayRef<TensorDecl> tensors() const { return decls; }
  /// Symbols in order of first appearance.
  llvm::ArrayRef<std::string> symbols() const { return symbolOrder; }
  /// The first occurrence (or the binding) of `symbol`.
  std::optional<SymbolSource> source(llvm::StringRef symbol) const;
  llvm::ArrayRef<std::pair<std::string, std::string>> divisibilities() const {
    return divisible;
  }
  llvm::ArrayRef<std::string> positives() const { return positive; }

  /// "dimension 1 (T) of dt" style description of a tensor dimension.
  std::string describe(unsigned tensor, unsigned dim) const;
  /// The message of a run-time mismatch between occurrence (tensor, dim) and
  /// the symbol's source, with `{0}` the actual size and `{1}` the source's.
  std::string mismatchMessage(unsigned tensor, unsigned dim) const;

private:
  friend class SignatureVerifier;
  void noteSymbol(llvm::StringRef symbol);

  llvm::SmallVector<TensorDecl, 8> decls;
  llvm::SmallVector<std::string, 8> symbolOrder;
  llvm::SmallVector<std::pair<std::string, SymbolSource>, 2> bindings;
  llvm::SmallVector<std::pair<std::string, std::string>, 2> divisible;
  llvm::SmallVector<std::string, 2> positive;
};

/// Builds the signature of `op` (which must implement
/// ShapeSignatureOpInterface) and verifies it.
mlir::LogicalResult verifyShapeSignature(mlir::Operation *op);

} // namespace seqc::seq

#endif // SEQC_DIALECT_SEQ_SHAPESIGNATURE_H

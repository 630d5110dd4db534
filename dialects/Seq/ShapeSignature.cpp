//===- ShapeSignature.cpp - named-dimension shape contracts ---------------===//

#include "Seq/SeqDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace seqc::seq;

std::string DimExpr::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (scale != 1)
    os << scale;
  os << symbol;
  if (offset > 0)
    os << "+" << offset;
  else if (offset < 0)
    os << offset;
  return s;
}

void ShapeSignature::noteSymbol(StringRef symbol) {
  if (!llvm::is_contained(symbolOrder, symbol))
    symbolOrder.push_back(symbol.str());
}

void ShapeSignature::add(StringRef name, Value value, ArrayRef<DimExpr> dims,
                         ElementKind kind) {
  if (!value)
    return;
  decls.push_back(
      TensorDecl{name.str(), value, {dims.begin(), dims.end()}, kind});
  for (const DimExpr &d : dims)
    noteSymbol(d.symbol);
}

void ShapeSignature::bind(StringRef symbol, int64_t value, StringRef origin) {
  SymbolSource src;
  src.constant = value;
  src.origin = origin.str();
  bindings.push_back({symbol.str(), src});
  noteSymbol(symbol);
}

void ShapeSignature::requireDivisible(StringRef dividend, StringRef divisor) {
  divisible.push_back({dividend.str(), divisor.str()});
}

void ShapeSignature::requirePositive(StringRef symbol) {
  positive.push_back(symbol.str());
}

std::optional<SymbolSource> ShapeSignature::source(StringRef symbol) const {
  for (const auto &[sym, src] : bindings)
    if (sym == symbol)
      return src;
  for (auto [i, decl] : llvm::enumerate(decls))
    for (auto [j, d] : llvm::enumerate(decl.dims))
      if (d.symbol == symbol) {
        SymbolSource src;
        src.tensor = i;
        src.dim = j;
        return src;
      }
  return std::nullopt;
}

std::string ShapeSignature::describe(unsigned tensor, unsigned dim) const {
  const TensorDecl &decl = decls[tensor];
  return "dimension " + std::to_string(dim) + " (" + decl.dims[dim].str() +
         ") of " + decl.name;
}

std::string ShapeSignature::mismatchMessage(unsigned tensor,
                                            unsigned dim) const {
  const DimExpr &e = decls[tensor].dims[dim];
  std::optional<SymbolSource> src = source(e.symbol);
  std::string msg = describe(tensor, dim) + " is {0} but ";
  if (!src || src->tensor < 0)
    return msg + "attribute " + (src ? src->origin : e.symbol) + " gives " +
           e.symbol + " = {1}";
  const TensorDecl &srcDecl = decls[src->tensor];
  if (e.isPlain() && srcDecl.dims[src->dim].isPlain())
    return msg + srcDecl.name + " has {1}";
  return msg + srcDecl.name + " has " + e.symbol + " = {1}";
}

static std::string formatDims(const TensorDecl &decl) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(decl.dims)) {
    if (i)
      s += " x ";
    s += d.str();
  }
  return s;
}

static bool isDataElementType(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

namespace seqc::seq {
/// ShapeSignature::verify's stages: ranks and element types, then each
/// static size against what the sizes before it (or an attribute) fixed,
/// then the constraints on the symbols. The first violation is reported on
/// the op.
class SignatureVerifier {
public:
  SignatureVerifier(const ShapeSignature &sig, Operation *op)
      : sig(sig), decls(sig.decls), op(op) {}

  LogicalResult run() {
    if (failed(checkRanksAndTypes()) || failed(checkParameterTypes()))
      return failure();
    for (const auto &[sym, src] : sig.bindings)
      known[sym] = Known{src.constant, -1, 0, src.origin};
    for (unsigned i = 0; i < decls.size(); ++i)
      for (unsigned j = 0; j < decls[i].dims.size(); ++j)
        if (failed(checkStaticSize(i, j)))
          return failure();
    return checkConstraints();
  }

private:
  /// A symbol's statically known value and where it came from.
  struct Known {
    int64_t value;
    int tensor; // -1: attribute
    unsigned dim;
    std::string origin;
  };

  static RankedTensorType typeOf(const TensorDecl &decl) {
    return cast<RankedTensorType>(decl.value.getType());
  }

  // Ranks and element types first: dimension checks assume the right rank.
  LogicalResult checkRanksAndTypes() {
    for (auto [i, decl] : llvm::enumerate(decls)) {
      int64_t rank = typeOf(decl).getRank();
      if (rank != static_cast<int64_t>(decl.dims.size())) {
        auto diag = op->emitOpError()
                    << decl.name << " must have rank " << decl.dims.size();
        if (!decl.dims.empty())
          diag << " (" << formatDims(decl) << ")";
        return diag << " but has rank " << rank;
      }
      if (failed(checkElementType(i, decl)))
        return failure();
    }
    return success();
  }

  LogicalResult checkElementType(unsigned index, const TensorDecl &decl) {
    Type elt = typeOf(decl).getElementType();
    switch (decl.kind) {
    case ElementKind::Data:
      if (!isDataElementType(elt))
        return op->emitOpError()
               << decl.name << " must have element type f32, f16 or bf16, "
               << "but has " << elt;
      if (!dataType) {
        dataType = elt;
        dataDecl = index;
      } else if (elt != dataType) {
        return op->emitOpError()
               << decl.name << " has element type " << elt << " but "
               << decls[dataDecl].name << " has " << dataType;
      }
      return success();
    case ElementKind::State:
      if (!elt.isF32())
        return op->emitOpError()
               << decl.name << " must have element type f32 (states and "
               << "scalar results stay f32), but has " << elt;
      return success();
    case ElementKind::Int32:
      if (!elt.isSignlessInteger(32))
        return op->emitOpError()
               << decl.name << " must have element type i32, but has " << elt;
      return success();
    case ElementKind::Int64:
      if (!elt.isSignlessInteger(64))
        return op->emitOpError()
               << decl.name << " must have element type i64, but has " << elt;
      return success();
    case ElementKind::Param:
      if (!isDataElementType(elt))
        return op->emitOpError()
               << decl.name << " must have element type f32, f16 or bf16, "
               << "but has " << elt;
      return success();
    case ElementKind::Any:
      return success();
    }
    return success();
  }

  // Parameters may stay f32 when the data is f16/bf16, as Mamba keeps A, D
  // and the biases in f32; any other mix is an error.
  LogicalResult checkParameterTypes() {
    for (const TensorDecl &decl : decls) {
      if (decl.kind != ElementKind::Param)
        continue;
      Type elt = typeOf(decl).getElementType();
      if (elt.isF32() || !dataType || elt == dataType)
        continue;
      return op->emitOpError()
             << decl.name << " has element type " << elt << " but "
             << decls[dataDecl].name << " has " << dataType
             << " (parameters are f32 or the data type)";
    }
    return success();
  }

  bool isDivisor(StringRef sym) const {
    return llvm::any_of(sig.divisible,
                        [&](const auto &d) { return d.second == sym; });
  }

  /// Dimension `dim` of tensor `tensor`, when static: fixes its symbol if
  /// nothing did before, else must be what the symbol's value gives.
  LogicalResult checkStaticSize(unsigned tensor, unsigned dim) {
    int64_t size = typeOf(decls[tensor]).getDimSize(dim);
    if (ShapedType::isDynamic(size))
      return success();
    const DimExpr &e = decls[tensor].dims[dim];
    auto it = known.find(e.symbol);
    if (it == known.end())
      return learnSymbol(tensor, dim, size);
    const Known &k = it->second;
    int64_t expected = e.apply(k.value);
    if (size == expected)
      return success();
    auto diag = op->emitOpError()
                << sig.describe(tensor, dim) << " is " << size << " but ";
    if (k.tensor < 0) {
      diag << "attribute " << k.origin << " is " << k.value;
      if (!e.isPlain())
        diag << ", so it must be " << expected;
      return diag;
    }
    const TensorDecl &src = decls[k.tensor];
    if (e.isPlain() && src.dims[k.dim].isPlain())
      return diag << src.name << " has " << k.value;
    return diag << src.name << " has " << e.symbol << " = " << k.value
                << ", so it must be " << expected;
  }

  /// The first static size of a symbol's expression fixes the symbol.
  LogicalResult learnSymbol(unsigned tensor, unsigned dim, int64_t size) {
    const DimExpr &e = decls[tensor].dims[dim];
    int64_t base = size - e.offset;
    if (base < 0 || base % e.scale != 0)
      return op->emitOpError()
             << sig.describe(tensor, dim) << " is " << size << ", which is not "
             << e.str() << " for any " << e.symbol << " >= 0";
    int64_t value = base / e.scale;
    known[e.symbol] = Known{value, static_cast<int>(tensor), dim, ""};
    // A size that must be positive is reported before anything derived
    // from it (W-1 of a zero-width filter would be -1).
    if (value < 1 &&
        (llvm::is_contained(sig.positive, e.symbol) || isDivisor(e.symbol)))
      return op->emitOpError() << e.symbol << " must be at least 1, but "
                               << sig.describe(tensor, dim) << " gives "
                               << e.symbol << " = " << value;
    return success();
  }

  /// Where a known symbol's value came from.
  std::string where(StringRef sym) const {
    const Known &k = known.find(sym)->second;
    if (k.tensor < 0)
      return "attribute " + k.origin;
    return "dimension " + std::to_string(k.dim) + " of " + decls[k.tensor].name;
  }

  LogicalResult checkConstraints() const {
    for (const std::string &sym : sig.positive) {
      auto it = known.find(sym);
      if (it != known.end() && it->second.value < 1)
        return op->emitOpError()
               << sym << " must be at least 1, but " << where(sym) << " gives "
               << sym << " = " << it->second.value;
    }
    for (const auto &[dividend, divisor] : sig.divisible) {
      auto num = known.find(dividend), den = known.find(divisor);
      if (den != known.end() && den->second.value < 1)
        return op->emitOpError()
               << divisor << " must be at least 1, but " << where(divisor)
               << " gives " << divisor << " = " << den->second.value;
      if (num == known.end() || den == known.end())
        continue;
      if (num->second.value % den->second.value != 0)
        return op->emitOpError()
               << dividend << " = " << num->second.value
               << " is not a multiple of " << divisor << " = "
               << den->second.value << " (" << dividend << " from "
               << where(dividend) << ", " << divisor << " from "
               << where(divisor) << ")";
    }
    return success();
  }

  const ShapeSignature &sig;
  llvm::ArrayRef<TensorDecl> decls;
  Operation *op;
  /// The data's element type and the first tensor that has it.
  Type dataType;
  unsigned dataDecl = 0;
  llvm::StringMap<Known> known;
};
} // namespace seqc::seq

LogicalResult ShapeSignature::verify(Operation *op) const {
  return SignatureVerifier(*this, op).run();
}

LogicalResult seqc::seq::verifyShapeSignature(Operation *op) {
  auto iface = dyn_cast<ShapeSignatureOpInterface>(op);
  if (!iface)
    return success();
  ShapeSignature sig;
  iface.buildShapeSignature(sig);
  return sig.verify(op);
}

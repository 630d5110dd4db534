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

namespace {
/// A symbol's statically known value and where it came from.
struct Known {
  int64_t value;
  int tensor; // -1: attribute
  unsigned dim;
  std::string origin;
};
} // namespace

LogicalResult ShapeSignature::verify(Operation *op) const {
  // Ranks and element types first: dimension checks assume the right rank.
  Type dataType;
  int dataDecl = -1;
  for (auto [i, decl] : llvm::enumerate(decls)) {
    auto type = cast<RankedTensorType>(decl.value.getType());
    if (type.getRank() != static_cast<int64_t>(decl.dims.size())) {
      auto diag = op->emitOpError()
                  << decl.name << " must have rank " << decl.dims.size();
      if (!decl.dims.empty())
        diag << " (" << formatDims(decl) << ")";
      return diag << " but has rank " << type.getRank();
    }
    Type elt = type.getElementType();
    switch (decl.kind) {
    case ElementKind::Data:
      if (!isDataElementType(elt))
        return op->emitOpError()
               << decl.name << " must have element type f32, f16 or bf16, "
               << "but has " << elt;
      if (!dataType) {
        dataType = elt;
        dataDecl = i;
      } else if (elt != dataType) {
        return op->emitOpError()
               << decl.name << " has element type " << elt << " but "
               << decls[dataDecl].name << " has " << dataType;
      }
      break;
    case ElementKind::State:
      if (!elt.isF32())
        return op->emitOpError()
               << decl.name << " must have element type f32 (states and "
               << "scalar results stay f32), but has " << elt;
      break;
    case ElementKind::Int32:
      if (!elt.isSignlessInteger(32))
        return op->emitOpError()
               << decl.name << " must have element type i32, but has " << elt;
      break;
    case ElementKind::Int64:
      if (!elt.isSignlessInteger(64))
        return op->emitOpError()
               << decl.name << " must have element type i64, but has " << elt;
      break;
    case ElementKind::Param:
      if (!isDataElementType(elt))
        return op->emitOpError()
               << decl.name << " must have element type f32, f16 or bf16, "
               << "but has " << elt;
      break;
    case ElementKind::Any:
      break;
    }
  }
  // Parameters may stay f32 when the data is f16/bf16, as Mamba keeps A, D
  // and the biases in f32; any other mix is an error.
  for (const TensorDecl &decl : decls) {
    if (decl.kind != ElementKind::Param)
      continue;
    Type elt = cast<RankedTensorType>(decl.value.getType()).getElementType();
    if (elt.isF32() || !dataType || elt == dataType)
      continue;
    return op->emitOpError()
           << decl.name << " has element type " << elt << " but "
           << decls[dataDecl].name << " has " << dataType
           << " (parameters are f32 or the data type)";
  }

  auto isDivisor = [&](StringRef sym) {
    for (const auto &d : divisible)
      if (d.second == sym)
        return true;
    return false;
  };
  llvm::StringMap<Known> known;
  for (const auto &[sym, src] : bindings)
    known[sym] = Known{src.constant, -1, 0, src.origin};

  for (auto [i, decl] : llvm::enumerate(decls)) {
    auto type = cast<RankedTensorType>(decl.value.getType());
    for (auto [j, e] : llvm::enumerate(decl.dims)) {
      int64_t size = type.getDimSize(j);
      if (ShapedType::isDynamic(size))
        continue;
      auto it = known.find(e.symbol);
      if (it == known.end()) {
        int64_t base = size - e.offset;
        if (base < 0 || base % e.scale != 0)
          return op->emitOpError()
                 << describe(i, j) << " is " << size << ", which is not "
                 << e.str() << " for any " << e.symbol << " >= 0";
        int64_t value = base / e.scale;
        known[e.symbol] =
            Known{value, static_cast<int>(i), static_cast<unsigned>(j), ""};
        // A size that must be positive is reported before anything derived
        // from it (W-1 of a zero-width filter would be -1).
        if (value < 1 &&
            (llvm::is_contained(positive, e.symbol) || isDivisor(e.symbol)))
          return op->emitOpError()
                 << e.symbol << " must be at least 1, but " << describe(i, j)
                 << " gives " << e.symbol << " = " << value;
        continue;
      }
      const Known &k = it->second;
      int64_t expected = e.apply(k.value);
      if (size == expected)
        continue;
      auto diag = op->emitOpError()
                  << describe(i, j) << " is " << size << " but ";
      if (k.tensor < 0) {
        diag << "attribute " << k.origin << " is " << k.value;
        if (!e.isPlain())
          diag << ", so it must be " << expected;
        return diag;
      }
      const TensorDecl &src = decls[k.tensor];
      const DimExpr &srcExpr = src.dims[k.dim];
      if (e.isPlain() && srcExpr.isPlain())
        return diag << src.name << " has " << k.value;
      return diag << src.name << " has " << e.symbol << " = " << k.value
                  << ", so it must be " << expected;
    }
  }

  auto where = [&](StringRef sym) -> std::string {
    const Known &k = known.find(sym)->second;
    if (k.tensor < 0)
      return "attribute " + k.origin;
    return "dimension " + std::to_string(k.dim) + " of " + decls[k.tensor].name;
  };
  for (const std::string &sym : positive) {
    auto it = known.find(sym);
    if (it != known.end() && it->second.value < 1)
      return op->emitOpError()
             << sym << " must be at least 1, but " << where(sym) << " gives "
             << sym << " = " << it->second.value;
  }
  for (const auto &[dividend, divisor] : divisible) {
    auto num = known.find(dividend), den = known.find(divisor);
    if (den != known.end() && den->second.value < 1)
      return op->emitOpError()
             << divisor << " must be at least 1, but " << where(divisor)
             << " gives " << divisor << " = " << den->second.value;
    if (num == known.end() || den == known.end())
      continue;
    if (num->second.value % den->second.value != 0)
      return op->emitOpError() << dividend << " = " << num->second.value
                               << " is not a multiple of " << divisor << " = "
                               << den->second.value << " (" << dividend
                               << " from " << where(dividend) << ", " << divisor
                               << " from " << where(divisor) << ")";
  }
  return success();
}

LogicalResult seqc::seq::verifyShapeSignature(Operation *op) {
  auto iface = dyn_cast<ShapeSignatureOpInterface>(op);
  if (!iface)
    return success();
  ShapeSignature sig;
  iface.buildShapeSignature(sig);
  return sig.verify(op);
}

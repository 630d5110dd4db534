//===- BoundWeights.cpp - weights bound into a module when compiled -------===//
//
// A weight bound at compile time is a constant of the module: the kernels
// see a function constant (a matmul packs its panels when compiled,
// CPU/CpuMatmul.cpp), and the compiled function no longer takes it.
//
//===----------------------------------------------------------------------===//

#include "BoundWeights.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace seqc;

namespace {

mlir::Type elementTypeOf(DType dtype, mlir::MLIRContext *ctx) {
  mlir::Builder b(ctx);
  switch (dtype) {
  case DType::F32:
    return b.getF32Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::I32:
    return b.getI32Type();
  case DType::I64:
    return b.getI64Type();
  }
  return {};
}

std::string typeString(mlir::Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

bool isContiguous(const TensorView &view) {
  if (view.strides.empty())
    return true;
  int64_t expected = 1;
  for (size_t d = view.shape.size(); d-- > 0;) {
    if (view.shape[d] != 1 && view.strides[d] != expected)
      return false;
    expected *= view.shape[d];
  }
  return true;
}

/// `weight` (checked: checkBoundWeights) as a constant for an argument of
/// type `argType` (its static dimensions equal to the weight's), or why it
/// cannot be.
Expected<mlir::DenseElementsAttr> constantFor(const BoundWeight &weight,
                                              mlir::Type argType,
                                              const std::string &where) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(argType);
  mlir::Type element = elementTypeOf(weight.value.dtype, argType.getContext());
  std::string given = std::string(dtypeName(weight.value.dtype)) + " [";
  for (size_t d = 0; d < weight.value.shape.size(); ++d)
    given += (d ? ", " : "") + std::to_string(weight.value.shape[d]);
  given += "]";
  auto mismatch = [&] {
    return Status::error("bound weight '" + weight.name + "' is " + given +
                         " but " + where + " is " + typeString(argType));
  };
  if (!tensor || tensor.getElementType() != element ||
      tensor.getRank() != static_cast<int64_t>(weight.value.shape.size()))
    return mismatch();
  for (int64_t d = 0; d < tensor.getRank(); ++d)
    if (!tensor.isDynamicDim(d) &&
        tensor.getDimSize(d) != weight.value.shape[d])
      return mismatch();
  auto type = mlir::RankedTensorType::get(weight.value.shape, element);
  size_t bytes =
      static_cast<size_t>(weight.value.numel()) * dtypeSize(weight.value.dtype);
  return mlir::DenseElementsAttr::getFromRawBuffer(
      type, llvm::ArrayRef<char>(static_cast<const char *>(weight.value.data),
                                 bytes));
}

/// Binds the arguments of `fn` that `byName` names; records their names.
Status bindArguments(mlir::func::FuncOp fn, mlir::ModuleOp module,
                     const llvm::StringMap<const BoundWeight *> &byName,
                     llvm::StringSet<> &bound) {
  llvm::BitVector erase(fn.getNumArguments());
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, "seq.name");
    auto it = name ? byName.find(name.getValue()) : byName.end();
    if (it == byName.end())
      continue;
    std::string where =
        "argument " + std::to_string(i) + " of @" + fn.getSymName().str();
    // Callers inside the module would pass the argument still.
    if (!mlir::SymbolTable::symbolKnownUseEmpty(fn, module))
      return Status::error("bound weight '" + it->first().str() + "' names " +
                           where +
                           ", a function the module calls: only the "
                           "arguments of functions the host calls are bound");
    mlir::BlockArgument arg = fn.getArgument(i);
    Expected<mlir::DenseElementsAttr> value =
        constantFor(*it->second, arg.getType(), where);
    if (!value)
      return value.status();
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(&fn.getBody().front());
    mlir::Value constant =
        mlir::arith::ConstantOp::create(b, arg.getLoc(), *value);
    // A dynamic dimension of the argument takes the weight's size.
    if (constant.getType() != arg.getType())
      constant = mlir::tensor::CastOp::create(b, arg.getLoc(), arg.getType(),
                                              constant);
    arg.replaceAllUsesWith(constant);
    erase.set(i);
    bound.insert(it->first());
  }
  if (mlir::failed(fn.eraseArguments(erase)))
    return Status::error("cannot remove the bound arguments of @" +
                         fn.getSymName().str());
  return Status::ok();
}

} // namespace

Status seqc::checkBoundWeights(const std::vector<BoundWeight> &weights) {
  llvm::StringSet<> names;
  for (const BoundWeight &w : weights) {
    if (!names.insert(w.name).second)
      return Status::error("bound weight '" + w.name + "' is given twice");
    if (llvm::any_of(w.value.shape, [](int64_t d) { return d < 0; }))
      return Status::error("bound weight '" + w.name +
                           "' has a negative dimension");
    if (!isContiguous(w.value))
      return Status::error("bound weight '" + w.name +
                           "' is not contiguous (row-major data is bound)");
    if (!w.value.data && w.value.numel() > 0)
      return Status::error("bound weight '" + w.name + "' has no data");
  }
  return Status::ok();
}

Status seqc::bindWeights(mlir::ModuleOp module,
                         const std::vector<BoundWeight> &weights) {
  if (weights.empty())
    return Status::ok();
  if (Status valid = checkBoundWeights(weights); !valid)
    return valid;
  llvm::StringMap<const BoundWeight *> byName;
  for (const BoundWeight &w : weights)
    byName.try_emplace(w.name, &w);
  llvm::StringSet<> bound;
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    if (!fn.isPublic() || fn.isDeclaration())
      continue;
    if (Status s = bindArguments(fn, module, byName, bound); !s)
      return s;
  }
  for (const BoundWeight &w : weights)
    if (!bound.contains(w.name))
      return Status::error("bound weight '" + w.name +
                           "' names no argument of a public function (an "
                           "argument's name is its seq.name)");
  return Status::ok();
}

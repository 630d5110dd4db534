//===- KernelBuilder.cpp - terse IR construction for lowerings ------------===//

#include "Common/KernelBuilder.h"
#include "SeqRt/SeqRtDialect.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallVectorExtras.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <limits>

#include <cmath>

using namespace mlir;
using namespace seqc;

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

Value KernelBuilder::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}
Value KernelBuilder::f32(double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(static_cast<float>(v)));
}
Value KernelBuilder::i1(bool v) {
  return arith::ConstantOp::create(b, b.getBoolAttr(v));
}
Value KernelBuilder::i64(int64_t v) {
  return arith::ConstantOp::create(b, b.getI64IntegerAttr(v));
}

Value KernelBuilder::add(Value a, Value c) {
  return arith::AddIOp::create(b, a, c);
}
Value KernelBuilder::sub(Value a, Value c) {
  return arith::SubIOp::create(b, a, c);
}
Value KernelBuilder::mul(Value a, Value c) {
  return arith::MulIOp::create(b, a, c);
}
Value KernelBuilder::divs(Value a, Value c) {
  return arith::DivSIOp::create(b, a, c);
}
Value KernelBuilder::rems(Value a, Value c) {
  return arith::RemSIOp::create(b, a, c);
}
Value KernelBuilder::mins(Value a, Value c) {
  return arith::MinSIOp::create(b, a, c);
}
Value KernelBuilder::cmp(arith::CmpIPredicate p, Value a, Value c) {
  return arith::CmpIOp::create(b, p, a, c);
}
Value KernelBuilder::andi(Value a, Value c) {
  return arith::AndIOp::create(b, a, c);
}
Value KernelBuilder::ori(Value a, Value c) {
  return arith::OrIOp::create(b, a, c);
}
Value KernelBuilder::noti(Value a) {
  return arith::XOrIOp::create(b, a, i1(true));
}
Value KernelBuilder::select(Value cond, Value a, Value c) {
  return arith::SelectOp::create(b, cond, a, c);
}
Value KernelBuilder::indexToI64(Value v) {
  return arith::IndexCastOp::create(b, b.getI64Type(), v);
}
Value KernelBuilder::i32ToIndex(Value v) {
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

Value KernelBuilder::fadd(Value a, Value c) {
  return arith::AddFOp::create(b, a, c, contractFlags());
}
Value KernelBuilder::fsub(Value a, Value c) {
  return arith::SubFOp::create(b, a, c, contractFlags());
}
Value KernelBuilder::fmul(Value a, Value c) {
  return arith::MulFOp::create(b, a, c, contractFlags());
}
arith::FastMathFlags KernelBuilder::contractFlags() const {
  return contract ? arith::FastMathFlags::contract : arith::FastMathFlags::none;
}
Value KernelBuilder::fdiv(Value a, Value c) {
  return arith::DivFOp::create(b, a, c);
}
Value KernelBuilder::fneg(Value a) { return arith::NegFOp::create(b, a); }
Value KernelBuilder::fmax(Value a, Value c) {
  return arith::MaxNumFOp::create(b, a, c);
}
Value KernelBuilder::fcmp(arith::CmpFPredicate p, Value a, Value c) {
  return arith::CmpFOp::create(b, p, a, c);
}
Value KernelBuilder::exp(Value a) { return exp(ValueRange{a}).front(); }

SmallVector<Value> KernelBuilder::exp(ValueRange xs) {
  if (xs.empty())
    return {};
  Type elt = getElementTypeOrSelf(xs.front().getType());
  if (fastMath && elt.isF32())
    return polynomialExp(xs);
  return llvm::map_to_vector(
      xs, [&](Value x) -> Value { return math::ExpOp::create(b, x); });
}

SmallVector<Value> KernelBuilder::polynomialExp(ValueRange xs) {
  // exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2]
  // (ln 2 split in two for an exact product), e^r by a polynomial of
  // degree 5, then scaled by 2^n. x is clamped to at most 88.7228...,
  // where the scaling overflows to +inf exactly as exp does (past FLT_MAX).
  // Where n <= -126 (x below about -86.99, e^x below sqrt(2) FLT_MIN) the
  // result is 0, never a subnormal, which would slow the FMAs that read it
  // on some cores. Both ways of scaling give the same bits: scalef's p 2^n
  // and the exponent bits' 2p 2^(n-1) are exact.
  //
  // The clamps are selects that keep x when the comparison is unordered,
  // the form x86's min and max instructions take (one instruction, where
  // arith.minimumf is three on AVX2): a NaN x stays NaN through n, r and
  // p, and p 2^n is NaN whatever the exponent bits made of it.
  //
  // Each stage is emitted for every x before the next, so independent
  // chains sit side by side in the instruction stream (one exp is a chain
  // of about 12 dependent operations, some 45 cycles) instead of leaving
  // the core's out-of-order window to find them. (On the Intel host where
  // this was measured, the selective scan's exps ran at the vector ports'
  // bound either way.)
  bool scalef = scalesWithScalef(xs.front().getType());
  SmallVector<Value> c = llvm::map_to_vector(xs, [&](Value x) {
    Value top = clampAbove(x, 88.72283935546875);
    // The exponent bits need n >= -126 (x >= -87.68).
    return scalef ? top : clampBelow(top, -87.3);
  });
  // n by the shifter 1.5 x 2^23: the sum keeps round(x / ln 2) (to nearest
  // even) in its low mantissa bits, and subtracting the shifter leaves it:
  // an FMA and a subtraction, where a multiply and a rounding instruction
  // take three operations on Intel's cores.
  SmallVector<Value> shifted = llvm::map_to_vector(c, [&](Value ci) -> Value {
    return math::FmaOp::create(b, ci, like(ci, 1.4426950408889634),
                               like(ci, ExpShifter));
  });
  SmallVector<Value> n = llvm::map_to_vector(
      shifted, [&](Value si) { return fsub(si, like(si, ExpShifter)); });
  SmallVector<Value> r;
  for (auto [ni, ci] : llvm::zip_equal(n, c))
    r.push_back(math::FmaOp::create(b, ni, like(ci, -0.693359375), ci));
  for (auto [ni, ri] : llvm::zip_equal(n, r))
    ri = math::FmaOp::create(b, ni, like(ri, 2.12194440e-4), ri);
  if (!scalef) {
    SmallVector<Value> twoP = expPolynomial(r, /*scale=*/2.0);
    return llvm::map_to_vector(llvm::zip_equal(twoP, shifted),
                               [&](auto pair) -> Value {
                                 auto [p2, si] = pair;
                                 return fmul(p2, halfPowerOfTwo(si));
                               });
  }
  SmallVector<Value> p = expPolynomial(r);
  SmallVector<Value> out;
  for (auto [x, ni, pi] : llvm::zip_equal(xs, n, p)) {
    // A NaN x is a NaN n and p, and scalef's result is NaN. x86vector's
    // mask.scalef (MLIR 22) hands its operands (src, a, b) to the
    // intrinsic's (a, b, pass-through) in that order: with every lane
    // selected, the value scaled is its `src` and the exponent its `a`
    // (test/Integration/fast_exp.py checks the result).
    Value allLanes = arith::ConstantOp::create(b, b.getI16IntegerAttr(-1));
    Value currentRounding =
        arith::ConstantOp::create(b, b.getI32IntegerAttr(4));
    Value e = x86vector::MaskScaleFOp::create(b, x.getType(), pi, ni, pi,
                                              allLanes, currentRounding);
    Value under = fcmp(arith::CmpFPredicate::OLT, ni, like(ni, -125.5));
    out.push_back(select(under, like(x, 0.0), e));
  }
  return out;
}

SmallVector<Value> KernelBuilder::expPolynomial(ValueRange rs, double scale) {
  // e^r = 1 + r + r^2 q(r) on [-ln2/2, ln2/2], q of degree 3 fitted for the
  // least maximum relative error (Remez, scripts/fit-exp-polynomial.py):
  // 1.6e-7 after f32 rounding, below the 2.2e-7 of the degree-6 Taylor
  // polynomial it replaces, in one FMA fewer. The leading 1 + r stays
  // exact, so e^0 is 1 and a recurrence whose decay is near 1 gathers no
  // bias step after step. A power-of-two scale of every coefficient scales
  // each step's rounding exactly: the result is scale e^r to the bit.
  SmallVector<Value> q = llvm::map_to_vector(
      rs, [&](Value r) { return like(r, scale * 8.312525227665901e-3); });
  auto fmaEach = [&](double coef) {
    for (auto [qi, r] : llvm::zip_equal(q, rs))
      qi = math::FmaOp::create(b, qi, r, like(r, scale * coef));
  };
  for (double coef :
       {4.1890114545822144e-2, 1.6667114198207855e-1, 4.99992311000824e-1})
    fmaEach(coef);
  fmaEach(1.0);
  fmaEach(1.0);
  return q;
}

bool KernelBuilder::scalesWithScalef(Type type) const {
  // p 2^n is one AVX-512 instruction (vscalefps), n a float. The CPU
  // kernels' vectors have 16 f32 lanes only for a CPU with AVX-512
  // (cpuVectorLanes), the one where x86vector's scalef exists; only the
  // CPU lowering loads x86vector (the GPU's kernels never take this path).
  auto vt = dyn_cast<VectorType>(type);
  return vt && vt.getRank() == 1 && vt.getElementType().isF32() &&
         vt.getNumElements() == 16 &&
         b.getContext()->getLoadedDialect<x86vector::X86VectorDialect>();
}

Value KernelBuilder::halfPowerOfTwo(Value shifted) {
  // `shifted` is 1.5 x 2^23 + n, n in [-126, 128]: its bits are
  // 0x4B400000 + n, and shifting them left by 23 leaves n's low 9 bits in
  // the exponent field, the shifter's bits all shifted out. Adding a bias
  // of 126 makes 2^(n-1): a normal float for n >= -125, 2^127 for
  // n = 128 (2^128 is not a float), and +0 for n = -126, so exp's
  // underflow needs no select. No float-to-int conversion: a NaN x makes
  // some bits here, never poison.
  Type intType = b.getI32Type();
  if (auto vt = dyn_cast<VectorType>(shifted.getType()))
    intType = vt.clone(b.getI32Type());
  auto intConst = [&](int32_t v) -> Value {
    if (auto vt = dyn_cast<VectorType>(intType))
      return arith::ConstantOp::create(
          b, DenseElementsAttr::get(vt, b.getI32IntegerAttr(v)));
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(v));
  };
  // One op a statement: the printed order must not depend on the order
  // the compiler evaluates a call's arguments in (test/Passes/fast-exp.mlir).
  Value asInt = arith::BitcastOp::create(b, intType, shifted);
  Value bits = arith::ShLIOp::create(b, asInt, intConst(23));
  Value biased = arith::AddIOp::create(b, bits, intConst(126 << 23));
  return arith::BitcastOp::create(b, shifted.getType(), biased);
}

Value KernelBuilder::clampAbove(Value x, double bound) {
  Value c = like(x, bound);
  return select(fcmp(arith::CmpFPredicate::OLT, c, x), c, x);
}
Value KernelBuilder::clampBelow(Value x, double bound) {
  Value c = like(x, bound);
  return select(fcmp(arith::CmpFPredicate::OGT, c, x), c, x);
}

Value KernelBuilder::maximumf(Value a, Value c) {
  return arith::MaximumFOp::create(b, a, c);
}
Value KernelBuilder::minimumf(Value a, Value c) {
  return arith::MinimumFOp::create(b, a, c);
}
Value KernelBuilder::expm1(Value a) { return math::ExpM1Op::create(b, a); }
Value KernelBuilder::log1p(Value a) { return math::Log1pOp::create(b, a); }
Value KernelBuilder::sqrt(Value a) { return math::SqrtOp::create(b, a); }
Value KernelBuilder::sin(Value a) { return math::SinOp::create(b, a); }
Value KernelBuilder::cos(Value a) { return math::CosOp::create(b, a); }
Value KernelBuilder::erf(Value a) { return math::ErfOp::create(b, a); }

Value KernelBuilder::like(Value ref, double v) {
  Type t = ref.getType();
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(vt, b.getFloatAttr(vt.getElementType(), v)));
  return arith::ConstantOp::create(b, b.getFloatAttr(t, v));
}

Value KernelBuilder::sigmoid(Value a) {
  return fdiv(like(a, 1.0), fadd(like(a, 1.0), exp(fneg(a))));
}
Value KernelBuilder::softplus(Value a) {
  return softplus(ValueRange{a}).front();
}
SmallVector<Value> KernelBuilder::softplus(ValueRange xs) {
  // exp is evaluated on min(x, 20) so the branch not taken cannot overflow.
  // The exps go side by side (exp of a range); each log1p follows.
  SmallVector<Value> big = llvm::map_to_vector(xs, [&](Value x) {
    return fcmp(arith::CmpFPredicate::OGT, x, like(x, 20.0));
  });
  SmallVector<Value> clamped;
  for (auto [x, isBig] : llvm::zip_equal(xs, big))
    clamped.push_back(select(isBig, like(x, 20.0), x));
  SmallVector<Value> out;
  for (auto [x, isBig, e] : llvm::zip_equal(xs, big, exp(clamped)))
    out.push_back(select(isBig, x, log1p(e)));
  return out;
}
Value KernelBuilder::silu(Value a) { return fmul(a, sigmoid(a)); }

SsdStepSize SsdStepSize::of(seq::SsdOp op) {
  SsdStepSize rule;
  rule.softplus = op.getDtSoftplus();
  rule.clamp = op.clampsDt();
  rule.min = op.getDtMin().convertToDouble();
  rule.max = op.getDtMax().convertToDouble();
  return rule;
}

Value SsdStepSize::apply(KernelBuilder &k, Value dt, Value bias) const {
  if (bias)
    dt = k.fadd(dt, bias);
  if (softplus)
    dt = k.softplus(dt);
  if (clamp)
    dt = k.minimumf(k.maximumf(dt, k.like(dt, min)), k.like(dt, max));
  return dt;
}
Value KernelBuilder::gelu(Value a) {
  Value inner = erf(fmul(a, like(a, M_SQRT1_2)));
  return fmul(fmul(like(a, 0.5), a), fadd(like(a, 1.0), inner));
}
Value KernelBuilder::relu(Value a) {
  // max(x, 0) that propagates NaN, as torch.relu does.
  Value neg = fcmp(arith::CmpFPredicate::OLT, a, like(a, 0.0));
  return select(neg, like(a, 0.0), a);
}
Value KernelBuilder::eluPlusOne(Value a) {
  Value pos = fcmp(arith::CmpFPredicate::OGT, a, like(a, 0.0));
  return select(pos, fadd(a, like(a, 1.0)), exp(a));
}
Value KernelBuilder::activation(seq::Activation act, Value a) {
  switch (act) {
  case seq::Activation::none:
    return a;
  case seq::Activation::silu:
    return silu(a);
  case seq::Activation::gelu:
    return gelu(a);
  case seq::Activation::relu:
    return relu(a);
  }
  return a;
}
Value KernelBuilder::featureMap(seq::FeatureMap map, Value a) {
  switch (map) {
  case seq::FeatureMap::identity:
    return a;
  case seq::FeatureMap::elu_plus_one:
    return eluPlusOne(a);
  case seq::FeatureMap::relu:
    return relu(a);
  }
  return a;
}
Value KernelBuilder::indexToF32(Value v) {
  Value i = arith::IndexCastOp::create(b, b.getI64Type(), v);
  return arith::SIToFPOp::create(b, f32Type(), i);
}

//===----------------------------------------------------------------------===//
// Memrefs and vectors
//===----------------------------------------------------------------------===//

VectorType KernelBuilder::vec(int64_t lanes) {
  return VectorType::get({lanes}, f32Type());
}

Value KernelBuilder::vconst(double v, int64_t lanes) {
  return arith::ConstantOp::create(
      b, DenseElementsAttr::get(vec(lanes), b.getF32FloatAttr(v)));
}

Value KernelBuilder::viota(int64_t lanes) {
  return vector::StepOp::create(b, VectorType::get({lanes}, b.getIndexType()));
}

Value KernelBuilder::mdim(Value memref, int64_t d) {
  auto type = cast<MemRefType>(memref.getType());
  if (!type.isDynamicDim(d))
    return idx(type.getDimSize(d));
  return memref::DimOp::create(b, memref, d);
}

Value KernelBuilder::mload(Value memref, ValueRange ivs) {
  Value v = memref::LoadOp::create(b, memref, ivs);
  if (isa<FloatType>(v.getType()) && !v.getType().isF32())
    v = arith::ExtFOp::create(b, f32Type(), v);
  return v;
}

void KernelBuilder::mstore(Value scalar, Value memref, ValueRange ivs) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  if (isa<FloatType>(elt) && scalar.getType() != elt)
    scalar = arith::TruncFOp::create(b, elt, scalar);
  memref::StoreOp::create(b, scalar, memref, ivs);
}

/// The element type of `memref` when it is a float narrower than f32 (bf16,
/// f16): vector loads widen from it and stores narrow to it.
static Type narrowFloatElement(Value memref) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  return elt.isBF16() || elt.isF16() ? elt : Type();
}

Value KernelBuilder::vload(Value memref, ValueRange ivs, int64_t lanes) {
  Type narrow = narrowFloatElement(memref);
  if (!narrow)
    return vector::LoadOp::create(b, vec(lanes), memref, ivs);
  Value v =
      vector::LoadOp::create(b, VectorType::get({lanes}, narrow), memref, ivs);
  return arith::ExtFOp::create(b, vec(lanes), v);
}

Value KernelBuilder::vloadMasked(Value memref, ValueRange ivs, int64_t lanes,
                                 Value mask) {
  Type narrow = narrowFloatElement(memref);
  auto type = VectorType::get({lanes}, narrow ? narrow : f32Type());
  Value zero = arith::ConstantOp::create(
      b,
      DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0)));
  Value v = vector::MaskedLoadOp::create(b, type, memref, ivs, mask, zero);
  return narrow ? arith::ExtFOp::create(b, vec(lanes), v) : v;
}

/// `v` (f32 lanes) rounded to `memref`'s narrower float element type, if any.
static Value narrowFor(ImplicitLocOpBuilder &b, Value v, Value memref) {
  Type narrow = narrowFloatElement(memref);
  auto type = dyn_cast<VectorType>(v.getType());
  if (!narrow || !type || type.getElementType() == narrow)
    return v;
  return arith::TruncFOp::create(b, VectorType::get(type.getShape(), narrow),
                                 v);
}

void KernelBuilder::vstore(Value v, Value memref, ValueRange ivs,
                           bool streaming) {
  vector::StoreOp::create(b, narrowFor(b, v, memref), memref, ivs, streaming);
}

void KernelBuilder::vstoreMasked(Value v, Value memref, ValueRange ivs,
                                 Value mask) {
  vector::MaskedStoreOp::create(b, memref, ivs, mask, narrowFor(b, v, memref));
}

void KernelBuilder::prefetchRow(Value memref, ValueRange ivs, int64_t elements,
                                bool forWrite) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t perLine =
      std::max<int64_t>(1, 64 * 8 / type.getElementTypeBitWidth());
  SmallVector<Value> at(ivs);
  // A row that does not start on a line ends on one more, which the
  // next-line prefetchers bring.
  for (int64_t e = 0; e < elements; e += perLine) {
    at.back() = add(ivs.back(), idx(e));
    memref::PrefetchOp::create(b, memref, at, forWrite, /*localityHint=*/3,
                               /*isDataCache=*/true);
  }
}

Value KernelBuilder::vmask(Value active, int64_t lanes) {
  auto maskType = VectorType::get({lanes}, b.getI1Type());
  return vector::CreateMaskOp::create(b, maskType, ValueRange{active});
}

Value KernelBuilder::splat(Value scalar, int64_t lanes) {
  return vector::BroadcastOp::create(
      b, VectorType::get({lanes}, scalar.getType()), scalar);
}

Value KernelBuilder::vfma(Value a, Value c, Value acc) {
  return vector::FMAOp::create(b, a, c, acc);
}

Value KernelBuilder::hsum(Value v) {
  // Reassociable: a tree of shuffles and adds (log2 lanes deep) rather
  // than LLVM's strictly ordered chain of one add per lane.
  auto reduction =
      vector::ReductionOp::create(b, vector::CombiningKind::ADD, v);
  reduction.setFastmath(arith::FastMathFlags::reassoc);
  return reduction;
}

Value KernelBuilder::hmax(Value v) {
  return vector::ReductionOp::create(b, vector::CombiningKind::MAXNUMF, v);
}

Value KernelBuilder::stackBuffer(ArrayRef<int64_t> shape, Type elementType) {
  assert(allocaBlock && "stack buffers need a kernel entry block");
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(allocaBlock);
  return memref::AllocaOp::create(
      b, MemRefType::get(shape, elementType ? elementType : f32Type()),
      b.getI64IntegerAttr(64));
}

void KernelBuilder::forEach(Value lb, Value ub, Value step,
                            const std::function<void(Value)> &body) {
  scf::ForOp::create(b, lb, ub, step, ValueRange{},
                     [&](OpBuilder &, Location, Value iv, ValueRange) {
                       body(iv);
                       scf::YieldOp::create(b);
                     });
}

void KernelBuilder::ifThen(Value cond, const std::function<void()> &body) {
  auto ifOp = scf::IfOp::create(b, TypeRange{}, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  body();
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Value KernelBuilder::dim(Value tensor, int64_t d) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(d))
    return idx(type.getDimSize(d));
  return tensor::DimOp::create(b, tensor, d);
}

Value KernelBuilder::load(Value tensor, ValueRange ivs) {
  Value v = tensor::ExtractOp::create(b, tensor, ivs);
  if (isa<FloatType>(v.getType()) && !v.getType().isF32())
    v = arith::ExtFOp::create(b, f32Type(), v);
  return v;
}

Value KernelBuilder::store(Value scalar, Value tensor, ValueRange ivs) {
  Type elt = cast<RankedTensorType>(tensor.getType()).getElementType();
  if (isa<FloatType>(elt) && scalar.getType() != elt)
    scalar = arith::TruncFOp::create(b, elt, scalar);
  return tensor::InsertOp::create(b, scalar, tensor, ivs);
}

Value KernelBuilder::empty(RankedTensorType type, ValueRange sizes) {
  SmallVector<Value> dynamic;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dynamic.push_back(sizes[i]);
  return tensor::EmptyOp::create(b, type, dynamic);
}

Value KernelBuilder::filled(RankedTensorType type, ValueRange sizes,
                            Value value) {
  Type elt = type.getElementType();
  if (isa<FloatType>(elt) && value.getType() != elt)
    value = arith::TruncFOp::create(b, elt, value);
  Value init = empty(type, sizes);
  return linalg::FillOp::create(b, ValueRange{value}, ValueRange{init})
      .getResult(0);
}

Value KernelBuilder::zeros(RankedTensorType type, ValueRange sizes) {
  Type elt = type.getElementType();
  Value zero = arith::ConstantOp::create(b, b.getZeroAttr(elt));
  Value init = empty(type, sizes);
  return linalg::FillOp::create(b, ValueRange{zero}, ValueRange{init})
      .getResult(0);
}

Value KernelBuilder::castTensor(Value tensor, RankedTensorType type,
                                ValueRange sizes) {
  if (tensor.getType() == type)
    return tensor;
  auto from = cast<RankedTensorType>(tensor.getType());
  if (from.getElementType() == type.getElementType())
    return tensor::CastOp::create(b, type, tensor);
  Value out = empty(type, sizes);
  SmallVector<Value> ubs(sizes.begin(), sizes.end());
  return nest(ubs, {out}, [&](ValueRange ivs, ValueRange it) {
    return SmallVector<Value>{store(load(tensor, ivs), it[0], ivs)};
  })[0];
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

SmallVector<Value> KernelBuilder::loop(Value lb, Value ub, ValueRange inits,
                                       const LoopBody &body) {
  auto forOp = scf::ForOp::create(
      b, lb, ub, idx(1), inits,
      [&](OpBuilder &, Location, Value iv, ValueRange iters) {
        // The nested builder is `b` itself, positioned in the body.
        SmallVector<Value> next = body(iv, iters);
        scf::YieldOp::create(b, next);
      });
  return SmallVector<Value>(forOp.getResults());
}

SmallVector<Value> KernelBuilder::nest(ValueRange ubs, ValueRange inits,
                                       const NestBody &body) {
  SmallVector<Value> ivs;
  std::function<SmallVector<Value>(size_t, ValueRange)> level =
      [&](size_t depth, ValueRange iters) -> SmallVector<Value> {
    if (depth == ubs.size())
      return body(ivs, iters);
    return loop(ubs[depth], iters, [&](Value iv, ValueRange inner) {
      ivs.push_back(iv);
      SmallVector<Value> r = level(depth + 1, inner);
      ivs.pop_back();
      return r;
    });
  };
  return level(0, inits);
}

SmallVector<Value> KernelBuilder::ifElse(Value cond, TypeRange types,
                                         const BranchBody &thenBody,
                                         const BranchBody &elseBody) {
  auto ifOp = scf::IfOp::create(b, types, cond, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<Value> r = thenBody();
    if (types.empty() && !r.empty())
      r.clear();
    if (!ifOp.getThenRegion().front().mightHaveTerminator())
      scf::YieldOp::create(b, r);
  }
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    SmallVector<Value> r = elseBody ? elseBody() : SmallVector<Value>{};
    if (!ifOp.getElseRegion().front().mightHaveTerminator())
      scf::YieldOp::create(b, r);
  }
  return SmallVector<Value>(ifOp.getResults());
}

Value KernelBuilder::sumOver(Value n, const std::function<Value(Value)> &term) {
  return loop(n, {f32(0.0)}, [&](Value i, ValueRange c) {
    return SmallVector<Value>{fadd(c[0], term(i))};
  })[0];
}

Value KernelBuilder::maxOver(Value n, const std::function<Value(Value)> &term) {
  Value init = f32(-std::numeric_limits<float>::infinity());
  return loop(n, {init}, [&](Value i, ValueRange c) {
    return SmallVector<Value>{fmax(c[0], term(i))};
  })[0];
}

Value KernelBuilder::loadIf(Value cond, Value source, ValueRange ivs,
                            Value fallback) {
  SmallVector<Value> ivCopy(ivs.begin(), ivs.end());
  bool isMemref = isa<MemRefType>(source.getType());
  return ifElse(
      cond, {fallback.getType()},
      [&] {
        return SmallVector<Value>{isMemref ? mload(source, ivCopy)
                                           : load(source, ivCopy)};
      },
      [&] { return SmallVector<Value>{fallback}; })[0];
}

SmallVector<Value> KernelBuilder::inlineBlock(Block &body, ValueRange args,
                                              const IRMapping *base) {
  IRMapping map = base ? *base : IRMapping();
  for (auto [arg, value] : llvm::zip(body.getArguments(), args))
    map.map(arg, value);
  for (Operation &inner : body.without_terminator())
    b.clone(inner, map);
  SmallVector<Value> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(map.lookupOrDefault(v));
  return results;
}

void KernelBuilder::check(Value ok, StringRef message, ValueRange args) {
  seq_rt::CheckOp::create(b, ok, b.getStringAttr(checkPrefix + message.str()),
                          args);
}

/// The first file:line:col inside `loc` (fused, named and call-site
/// locations wrap one), or empty.
static std::string fileLocation(Location loc) {
  std::string found;
  loc->walk([&](Location inner) {
    if (auto fl = dyn_cast<FileLineColLoc>(inner)) {
      found = (fl.getFilename().getValue() + ":" + Twine(fl.getLine()) + ":" +
               Twine(fl.getColumn()))
                  .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

void KernelBuilder::checksFor(Operation *op) {
  std::string where = fileLocation(op->getLoc());
  checkPrefix = op->getName().getStringRef().str() +
                (where.empty() ? "" : " at " + where) + ": ";
}

//===----------------------------------------------------------------------===//
// DimSizes
//===----------------------------------------------------------------------===//

DimSizes DimSizes::checkAndCollect(KernelBuilder &kb, Operation *op) {
  DimSizes result;
  result.kb = &kb;
  kb.checksFor(op);
  cast<seq::ShapeSignatureOpInterface>(op).buildShapeSignature(result.sig);
  result.collectSymbols();
  result.checkOccurrences(op);
  result.checkRules();
  return result;
}

void DimSizes::collectSymbols() {
  // The first occurrence is always an operand or an attribute binding.
  for (const std::string &sym : sig.symbols()) {
    std::optional<seq::SymbolSource> src = sig.source(sym);
    if (!src)
      continue;
    if (src->tensor < 0) {
      sizes[sym] = kb->idx(src->constant);
      continue;
    }
    const seq::TensorDecl &decl = sig.tensors()[src->tensor];
    const seq::DimExpr &e = decl.dims[src->dim];
    Value size = kb->dim(decl.value, src->dim);
    // Invert scale * sym + offset.
    if (e.offset != 0)
      size = kb->sub(size, kb->idx(e.offset));
    if (e.scale != 1)
      size = kb->divs(size, kb->idx(e.scale));
    sizes[sym] = size;
  }
}

void DimSizes::checkOccurrences(Operation *op) {
  auto isOperand = [&](const seq::TensorDecl &d) {
    auto res = dyn_cast<OpResult>(d.value);
    return !res || res.getOwner() != op;
  };
  auto staticSize = [](const seq::TensorDecl &d, unsigned i) {
    return cast<RankedTensorType>(d.value.getType()).getDimSize(i);
  };
  // Static occurrences of a static first one were verified already.
  for (auto [ti, decl] : llvm::enumerate(sig.tensors())) {
    bool operand = isOperand(decl);
    for (auto [di, e] : llvm::enumerate(decl.dims)) {
      std::optional<seq::SymbolSource> src = sig.source(e.symbol);
      if (src && src->tensor == static_cast<int>(ti) && src->dim == di)
        continue;
      int64_t st = staticSize(decl, di);
      if (!ShapedType::isDynamic(st) && src && src->tensor >= 0) {
        const seq::TensorDecl &srcDecl = sig.tensors()[src->tensor];
        if (!ShapedType::isDynamic(staticSize(srcDecl, src->dim)))
          continue; // both static: the verifier has seen it
      }
      if (!ShapedType::isDynamic(st) && src && src->tensor < 0)
        continue;
      Value sym = sizes[e.symbol];
      Value expected =
          kb->add(kb->mul(sym, kb->idx(e.scale)), kb->idx(e.offset));
      // A dynamic result dimension is produced from the symbol: nothing to
      // check. A static one must match what the operands say.
      Value actual;
      if (operand)
        actual = kb->dim(decl.value, di);
      else if (!ShapedType::isDynamic(st))
        actual = kb->idx(st);
      else
        continue;
      kb->check(kb->cmp(arith::CmpIPredicate::eq, actual, expected),
                sig.mismatchMessage(ti, di), {actual, sym});
    }
  }
}

void DimSizes::checkRules() {
  for (const std::string &sym : sig.positives()) {
    Value v = sizes[sym];
    kb->check(kb->cmp(arith::CmpIPredicate::sge, v, kb->idx(1)),
              sym + " must be at least 1, but is {0}", {v});
  }
  for (const auto &[num, den] : sig.divisibilities()) {
    Value n = sizes[num], d = sizes[den];
    kb->check(kb->cmp(arith::CmpIPredicate::sge, d, kb->idx(1)),
              den + " must be at least 1, but is {0}", {d});
    // The remainder is taken only of a positive divisor.
    Value safe = kb->select(kb->cmp(arith::CmpIPredicate::sge, d, kb->idx(1)),
                            d, kb->idx(1));
    kb->check(kb->cmp(arith::CmpIPredicate::eq, kb->rems(n, safe), kb->idx(0)),
              num + " = {0} is not a multiple of " + den + " = {1}", {n, d});
  }
}

Value DimSizes::operator[](StringRef symbol) const {
  auto it = sizes.find(symbol);
  assert(it != sizes.end() && "unknown dimension symbol");
  return it->second;
}

SmallVector<Value> DimSizes::of(StringRef name) const {
  for (const seq::TensorDecl &decl : sig.tensors()) {
    if (decl.name != name)
      continue;
    SmallVector<Value> r;
    for (const seq::DimExpr &e : decl.dims) {
      Value v = (*this)[e.symbol];
      if (e.scale != 1)
        v = kb->mul(v, kb->idx(e.scale));
      if (e.offset != 0)
        v = kb->add(v, kb->idx(e.offset));
      r.push_back(v);
    }
    return r;
  }
  assert(false && "unknown tensor name");
  return {};
}

//===- KernelBuilder.h - terse IR construction for lowerings ----*- C++ -*-===//
//
// The reference lowerings are written as explicit loop nests on tensors. This
// builder keeps them readable: index and f32 arithmetic, element loads that
// widen to f32 and stores that narrow back, loops with iteration values, and
// the numerically careful pointwise functions the SPEC defines (softplus with
// its linear tail, expm1-based ZOH, exact-erf GELU, ...).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_KERNELBUILDER_H
#define SEQC_PASSES_KERNELBUILDER_H

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/StringMap.h"

#include <functional>

namespace seqc {

using mlir::Value;
using mlir::ValueRange;

/// Body of a loop: receives the induction variable(s) and the current
/// iteration values, returns the next iteration values.
using LoopBody =
    std::function<llvm::SmallVector<Value>(Value iv, ValueRange iters)>;
using NestBody =
    std::function<llvm::SmallVector<Value>(ValueRange ivs, ValueRange iters)>;
using BranchBody = std::function<llvm::SmallVector<Value>()>;

class KernelBuilder {
public:
  KernelBuilder(mlir::ImplicitLocOpBuilder &b) : b(b) {}

  mlir::ImplicitLocOpBuilder &builder() { return b; }
  mlir::Type f32Type() { return b.getF32Type(); }

  // Constants.
  Value idx(int64_t v);
  Value f32(double v);
  Value i1(bool v);
  Value i64(int64_t v);

  // Index arithmetic.
  Value add(Value a, Value c);
  Value sub(Value a, Value c);
  Value mul(Value a, Value c);
  Value divs(Value a, Value c); ///< signed floor-free division (c > 0)
  Value rems(Value a, Value c);
  Value mins(Value a, Value c);
  Value cmp(mlir::arith::CmpIPredicate p, Value a, Value c);
  Value andi(Value a, Value c);
  Value ori(Value a, Value c);
  Value noti(Value a);
  Value select(Value cond, Value a, Value c);
  Value indexToI64(Value v);
  Value i32ToIndex(Value v);

  // f32 arithmetic.
  Value fadd(Value a, Value c);
  Value fsub(Value a, Value c);
  Value fmul(Value a, Value c);
  Value fdiv(Value a, Value c);
  Value fneg(Value a);
  Value fmax(Value a, Value c); ///< maxnumf: NaN-ignoring, as in softmax max
  Value maximumf(Value a, Value c); ///< NaN-propagating max
  Value minimumf(Value a, Value c); ///< NaN-propagating min
  Value fcmp(mlir::arith::CmpFPredicate p, Value a, Value c);
  Value exp(Value a);
  /// exp of each of `xs` (all of one type), their instructions interleaved
  /// stage by stage (independent chains side by side in the instruction
  /// stream).
  llvm::SmallVector<Value> exp(mlir::ValueRange xs);
  Value expm1(Value a);
  Value log1p(Value a);
  Value sqrt(Value a);
  Value sin(Value a);
  Value cos(Value a);
  Value erf(Value a);
  Value sigmoid(Value a);
  /// softplus(x) = log1p(exp(x)), and x itself for x > 20 (Mamba's tail).
  Value softplus(Value a);
  /// softplus of each x, their exps emitted side by side.
  llvm::SmallVector<Value> softplus(mlir::ValueRange xs);
  Value silu(Value a);
  /// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)).
  Value gelu(Value a);
  Value relu(Value a);
  Value eluPlusOne(Value a);
  Value activation(seq::Activation act, Value a);
  Value featureMap(seq::FeatureMap map, Value a);
  Value indexToF32(Value v);

  /// A constant of `ref`'s type (scalar or vector splat) with value `v`.
  Value like(Value ref, double v);

  // Memrefs and vectors (CPU kernels).
  mlir::VectorType vec(int64_t lanes);
  /// An f32 vector with every lane `v`.
  Value vconst(double v, int64_t lanes);
  /// 0, 1, ..., lanes-1 as an index vector.
  Value viota(int64_t lanes);
  Value mdim(Value memref, int64_t d);
  /// Scalar load, widened to f32 for floats.
  Value mload(Value memref, ValueRange ivs);
  void mstore(Value scalar, Value memref, ValueRange ivs);
  Value vload(Value memref, ValueRange ivs, int64_t lanes);
  /// Loads the lanes enabled by `mask` and zeros elsewhere.
  Value vloadMasked(Value memref, ValueRange ivs, int64_t lanes, Value mask);
  /// `streaming`: a non-temporal store (bypasses the caches; for large
  /// outputs written once).
  void vstore(Value v, Value memref, ValueRange ivs, bool streaming = false);
  void vstoreMasked(Value v, Value memref, ValueRange ivs, Value mask);
  /// Asks the caches for the lines of `elements` consecutive elements from
  /// `ivs` (the last index advancing): for rows of a later step that lie a
  /// page or more apart, where the hardware's prefetchers stop.
  void prefetchRow(Value memref, ValueRange ivs, int64_t elements,
                   bool forWrite = false);
  /// The mask of the first `active` lanes (all when active >= lanes).
  Value vmask(Value active, int64_t lanes);
  Value splat(Value scalar, int64_t lanes);
  Value vfma(Value a, Value b, Value c);
  /// The sum of a vector's lanes, in any order (a shuffle tree).
  Value hsum(Value v);
  Value hmax(Value v);
  /// A 64-byte aligned stack buffer of static `shape` (f32 unless
  /// `elementType` says otherwise), allocated once at
  /// the start of the kernel's entry block (so loops do not grow the stack).
  Value stackBuffer(llvm::ArrayRef<int64_t> shape, mlir::Type elementType = {});
  /// The block stack buffers are allocated in (a kernel's entry block).
  void setAllocaBlock(mlir::Block *block) { allocaBlock = block; }
  /// In fast-math mode (the CPU kernels), exp is an inline polynomial
  /// (Cody-Waite reduction, degree 5, 1.6e-7 relative) instead of math.exp; the
  /// reference lowering keeps math.exp (libm).
  void setFastMath(bool on) { fastMath = on; }
  /// Let a product feeding a sum contract into one fused multiply-add
  /// (`contract` on fmul/fadd/fsub): the GPU kernels' dot products, which
  /// would otherwise stay separate `mul.rn` and `add.rn` instructions.
  void setContract(bool on) { contract = on; }
  /// A loop without results.
  void forEach(Value lb, Value ub, Value step,
               const std::function<void(Value)> &body);
  void ifThen(Value cond, const std::function<void()> &body);

  // Tensors.
  Value dim(Value tensor, int64_t d);
  /// Extracts an element and widens floats to f32.
  Value load(Value tensor, ValueRange ivs);
  /// Narrows an f32 value to the tensor's element type and inserts it.
  Value store(Value scalar, Value tensor, ValueRange ivs);
  /// An uninitialized tensor of `type`; `sizes` gives every dimension.
  Value empty(mlir::RankedTensorType type, ValueRange sizes);
  /// A tensor of `type` filled with `value` (an f32 or integer scalar).
  Value filled(mlir::RankedTensorType type, ValueRange sizes, Value value);
  /// A tensor of `type` filled with zeros of its element type.
  Value zeros(mlir::RankedTensorType type, ValueRange sizes);
  /// Converts `tensor` (f32) elementwise to `type`'s element type.
  Value castTensor(Value tensor, mlir::RankedTensorType type, ValueRange sizes);

  // Control flow.
  llvm::SmallVector<Value> loop(Value lb, Value ub, ValueRange inits,
                                const LoopBody &body);
  llvm::SmallVector<Value> loop(Value ub, ValueRange inits,
                                const LoopBody &body) {
    return loop(idx(0), ub, inits, body);
  }
  /// sum_{i < n} term(i), accumulated in f32 in order.
  Value sumOver(Value n, const std::function<Value(Value)> &term);
  /// max_{i < n} term(i) (maxnumf: NaN-ignoring), -inf when n = 0.
  Value maxOver(Value n, const std::function<Value(Value)> &term);
  /// Nested loops from 0 to each of `ubs`.
  llvm::SmallVector<Value> nest(ValueRange ubs, ValueRange inits,
                                const NestBody &body);
  llvm::SmallVector<Value> ifElse(Value cond, mlir::TypeRange types,
                                  const BranchBody &thenBody,
                                  const BranchBody &elseBody);
  /// `cond ? load(source, ivs) : fallback` without touching memory when the
  /// condition is false (the indices may be out of bounds then). `source`
  /// is a tensor or a memref.
  Value loadIf(Value cond, Value source, ValueRange ivs, Value fallback);

  /// Inlines `body` (a block ending in a terminator whose operands are the
  /// results, e.g. associative_scan's combiner) with its arguments bound to
  /// `args`; returns the values its terminator yields.
  /// `base` maps values the block uses from above.
  llvm::SmallVector<Value> inlineBlock(mlir::Block &body, ValueRange args,
                                       const mlir::IRMapping *base = nullptr);

  /// Emits a run-time check. Its message names the op being lowered and
  /// its source location ("seq.ssd at graph.mlir:3:8: ..."), once
  /// checksFor() has said which op that is.
  void check(Value ok, llvm::StringRef message, ValueRange args = {});
  /// The op whose run-time checks the following check() calls emit.
  void checksFor(mlir::Operation *op);

private:
  mlir::ImplicitLocOpBuilder &b;
  /// "seq.ssd at graph.mlir:3:8: ", or empty before checksFor().
  std::string checkPrefix;
  mlir::Block *allocaBlock = nullptr;
  bool fastMath = false;
  bool contract = false;
  mlir::arith::FastMathFlags contractFlags() const;

  llvm::SmallVector<Value> polynomialExp(mlir::ValueRange xs);
  /// The shifter whose sum with x / ln 2 rounds it to an integer n, kept in
  /// the sum's low mantissa bits (1.5 x 2^23).
  static constexpr double ExpShifter = 0x1.8p23;
  /// scale e^r for each r in [-ln2/2, ln2/2] (exp after its range
  /// reduction); `scale` a power of two.
  llvm::SmallVector<Value> expPolynomial(mlir::ValueRange rs,
                                         double scale = 1.0);
  /// Whether exp of `type` scales by 2^n with AVX-512's scalef.
  bool scalesWithScalef(mlir::Type type) const;
  /// 2^(n-1) from the shifter's sum 1.5 x 2^23 + n, n in [-126, 128],
  /// through a float's exponent bits (+0 for n = -126).
  Value halfPowerOfTwo(Value shifted);
  /// min(x, bound) and max(x, bound) that keep a NaN x (x86's minps and
  /// maxps with x second).
  Value clampAbove(Value x, double bound);
  Value clampBelow(Value x, double bound);
};

/// A kernel's buffers by name. `Derived` lists its Value fields once, in
/// the kernel's argument order (`fields()`); absent optional buffers stay
/// null and take no argument. The launch passes list(); the body, whose
/// arguments are the kernel's own values, names them with rebind(in), so
/// no body reads an argument by its position.
template <typename Derived> struct KernelBuffers {
  /// The present buffers, in argument order.
  llvm::SmallVector<Value> list() const {
    Derived copy = static_cast<const Derived &>(*this);
    llvm::SmallVector<Value> all;
    for (Value *field : copy.fields())
      if (*field)
        all.push_back(*field);
    return all;
  }
  /// The same buffers as the kernel's arguments `in` (list()'s order).
  Derived rebind(ValueRange in) const {
    Derived r = static_cast<const Derived &>(*this);
    size_t next = 0;
    for (Value *field : r.fields())
      if (*field)
        *field = in[next++];
    return r;
  }
};

/// seq.ssd's step size (SPEC 2.4), one rule for every lowering: dt + bias,
/// softplus when asked, then clamped to [dt_min, dt_max] when the op sets a
/// range (mamba_ssm's dt_limit: the default (0, inf) clamps nothing, so a
/// negative dt without softplus stays negative, as there).
struct SsdStepSize {
  bool softplus = false;
  bool clamp = false;
  double min = 0.0, max = 0.0;

  static SsdStepSize of(seq::SsdOp op);
  /// `dt` (a scalar or a vector) and `bias` (null: none) of one head.
  Value apply(KernelBuilder &k, Value dt, Value bias) const;
};

/// The sizes of the named dimensions of an op (B, T, H, ...), read from their
/// first occurrence after run-time checks that every other occurrence
/// agrees, that divisibility and positivity rules hold.
class DimSizes {
public:
  /// Emits the checks of `op`'s shape signature and records every size.
  static DimSizes checkAndCollect(KernelBuilder &kb, mlir::Operation *op);

  Value operator[](llvm::StringRef symbol) const;
  /// The sizes of every dimension of declared tensor `name`.
  llvm::SmallVector<Value> of(llvm::StringRef name) const;

private:
  /// Each symbol's size from its first occurrence.
  void collectSymbols();
  /// Checks every other occurrence of a symbol in `op`'s tensors.
  void checkOccurrences(mlir::Operation *op);
  /// Checks the signature's positivity and divisibility rules.
  void checkRules();

  llvm::StringMap<Value> sizes;
  seq::ShapeSignature sig;
  KernelBuilder *kb = nullptr;
};

} // namespace seqc

#endif // SEQC_PASSES_KERNELBUILDER_H

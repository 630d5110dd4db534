//===- GpuRowOps.cpp - ops computed a row per GPU thread ------------------===//
//
// Ops whose outputs split into independent rows or columns, one thread each,
// adjacent threads on adjacent memory:
//  - semiseparable_mask: a thread per column j of a mask, its segment sums
//    accumulated down the rows (each L[i, j] from its own sum, never a
//    difference of cumulative sums); threads of adjacent columns write
//    adjacent addresses of each row;
//  - associative_scan: a thread per position outside the scanned dim,
//    running the op's combiner region inline over the scanned dim;
//  - random_features: a thread per output feature (row, m).
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace seqc;

namespace {

using arith::CmpIPredicate;

/// Every dimension size of memref `m`.
static SmallVector<Value> sizesOf(KernelBuilder &k, Value m) {
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < cast<MemRefType>(m.getType()).getRank(); ++d)
    sizes.push_back(k.mdim(m, d));
  return sizes;
}

static Value product(KernelBuilder &k, ArrayRef<Value> sizes) {
  Value n = k.idx(1);
  for (Value s : sizes)
    n = k.mul(n, s);
  return n;
}

struct GpuSemiseparableMask : OpRewritePattern<seq::SemiseparableMaskOp> {
  GpuSemiseparableMask(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SemiseparableMaskOp op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(op, "needs float (f32, f16, bf16) operands");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    auto maskType = cast<RankedTensorType>(op.getMask().getType());
    Value maskBuf = allocBuffer(b, maskType, dims.of("mask"));
    Value logA = readBuffer(b, op.getLogA());
    // Columns: every position of log_a (the last index is the column j).
    emitItemKernel(b, target, "semiseparable_mask", kb,
                   product(kb, dims.of("log_a")), {logA, maskBuf},
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     SmallVector<Value> sizes = sizesOf(k, in[0]);
                     SmallVector<Value> pos = delinearize(k, item, sizes);
                     SmallVector<Value> lead(pos.begin(), pos.end() - 1);
                     Value j = pos.back(), T = sizes.back();
                     auto at = [&](Value i) {
                       SmallVector<Value> idx(lead);
                       idx.push_back(i);
                       idx.push_back(j);
                       return idx;
                     };
                     k.forEach(k.idx(0), j, k.idx(1), [&](Value i) {
                       k.mstore(k.f32(0.0), in[1], at(i));
                     });
                     k.mstore(k.f32(1.0), in[1], at(j));
                     k.loop(k.add(j, k.idx(1)), T, {k.f32(0.0)},
                            [&](Value i, ValueRange c) {
                              SmallVector<Value> src(lead);
                              src.push_back(i);
                              Value s = k.fadd(c[0], k.mload(in[0], src));
                              k.mstore(k.exp(s), in[1], at(i));
                              return SmallVector<Value>{s};
                            });
                   });
    rewriter.replaceOp(op, asTensor(b, maskBuf, maskType));
    return success();
  }

  GpuTarget target;
};

struct GpuAssociativeScan : OpRewritePattern<seq::AssociativeScanOp> {
  GpuAssociativeScan(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::AssociativeScanOp op,
                                PatternRewriter &rewriter) const override {
    if (!RegionCaptures::of(op.getCombiner()).scalarOnly())
      return rewriter.notifyMatchFailure(op, "its combiner captures values from outside other than scalars");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    size_t n = op.getInputs().size();
    int64_t scanDim = op.getDim();
    bool reverse = op.getReverse();
    SmallVector<Value> sizes = dims.of("input #0");
    SmallVector<Value> outer;
    for (auto [i, s] : llvm::enumerate(sizes))
      if (static_cast<int64_t>(i) != scanDim)
        outer.push_back(s);

    SmallVector<Value> args, outs;
    for (Value in : op.getInputs())
      args.push_back(readBuffer(b, in));
    for (Value r : op.getOutputs()) {
      outs.push_back(
          allocBuffer(b, cast<RankedTensorType>(r.getType()), sizes));
      args.push_back(outs.back());
    }
    Block &combiner = op.getCombiner().front();
    // The combiner may use values from above (it is not isolated).
    RegionCaptures captures = RegionCaptures::of(op.getCombiner());
    size_t numArgs = args.size();
    args.append(captures.values);

    emitItemKernel(
        b, target, "associative_scan", kb, product(kb, outer), args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          ImplicitLocOpBuilder &kbld = k.builder();
          IRMapping outside = captures.map(kbld, in.drop_front(numArgs));
          SmallVector<Value> all = sizesOf(k, in[0]);
          Value len = all[scanDim];
          SmallVector<Value> outerSizes;
          for (auto [i, s] : llvm::enumerate(all))
            if (static_cast<int64_t>(i) != scanDim)
              outerSizes.push_back(s);
          SmallVector<Value> ivs = delinearize(k, item, outerSizes);
          auto at = [&](Value t) {
            SmallVector<Value> idx(ivs);
            idx.insert(idx.begin() + scanDim, t);
            return idx;
          };
          // The running prefix (undefined before step 0) in the inputs'
          // element types, exactly as the combiner takes them.
          SmallVector<Value> inits;
          SmallVector<Type> types;
          for (size_t i = 0; i < n; ++i) {
            Type t = cast<MemRefType>(in[i].getType()).getElementType();
            types.push_back(t);
            inits.push_back(
                arith::ConstantOp::create(kbld, kbld.getZeroAttr(t)));
          }
          k.loop(len, inits, [&](Value step, ValueRange c) {
            Value t = reverse ? k.sub(k.sub(len, k.idx(1)), step) : step;
            SmallVector<Value> idx = at(t);
            SmallVector<Value> next;
            for (size_t i = 0; i < n; ++i)
              next.push_back(memref::LoadOp::create(kbld, in[i], idx));
            Value first = k.cmp(CmpIPredicate::eq, step, k.idx(0));
            SmallVector<Value> prefix = k.ifElse(
                first, types, [&] { return next; },
                [&] {
                  SmallVector<Value> operands(c.begin(), c.end());
                  operands.append(next);
                  return k.inlineBlock(combiner, operands, &outside);
                });
            for (size_t i = 0; i < n; ++i)
              memref::StoreOp::create(kbld, prefix[i], in[n + i], idx);
            return prefix;
          });
        });
    SmallVector<Value> results;
    for (auto [r, buf] : llvm::zip(op.getOutputs(), outs))
      results.push_back(asTensor(b, buf, cast<RankedTensorType>(r.getType())));
    rewriter.replaceOp(op, results);
    return success();
  }

  GpuTarget target;
};

struct GpuRandomFeatures : OpRewritePattern<seq::RandomFeaturesOp> {
  GpuRandomFeatures(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::RandomFeaturesOp op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(op, "needs float (f32, f16, bf16) operands");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    bool trig = op.getKind() == seq::RandomFeatures::trigonometric;
    auto fType = cast<RankedTensorType>(op.getFeatures().getType());
    Value fBuf = allocBuffer(b, fType, dims.of("features"));
    SmallVector<Value> xSizes = dims.of("x");
    SmallVector<Value> rows(xSizes.begin(), xSizes.end() - 1);
    emitItemKernel(
        b, target, "random_features", kb, kb.mul(product(kb, rows), dims["M"]),
        {readBuffer(b, op.getX()), readBuffer(b, op.getOmega()), fBuf},
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value x = in[0], omega = in[1];
          SmallVector<Value> xs = sizesOf(k, x);
          Value nK = xs.back(), nM = k.mdim(omega, 1);
          SmallVector<Value> lead =
              delinearize(k, k.divs(item, nM), ArrayRef(xs).drop_back());
          Value m = k.rems(item, nM);
          auto xAt = [&](Value kk) {
            SmallVector<Value> idx(lead);
            idx.push_back(kk);
            return k.mload(x, idx);
          };
          auto at = [&](Value col) {
            SmallVector<Value> idx(lead);
            idx.push_back(col);
            return idx;
          };
          Value norm = k.fdiv(k.f32(1.0), k.sqrt(k.indexToF32(nM)));
          Value half = k.fmul(k.sumOver(nK,
                                        [&](Value kk) {
                                          Value v = xAt(kk);
                                          return k.fmul(v, v);
                                        }),
                              k.f32(0.5));
          Value dot = k.sumOver(nK, [&](Value kk) {
            return k.fmul(xAt(kk), k.mload(omega, {kk, m}));
          });
          if (!trig) {
            k.mstore(k.fmul(k.exp(k.fsub(dot, half)), norm), in[2], at(m));
            return;
          }
          Value amp = k.fmul(k.exp(half), norm);
          k.mstore(k.fmul(k.sin(dot), amp), in[2], at(m));
          k.mstore(k.fmul(k.cos(dot), amp), in[2], at(k.add(nM, m)));
        });
    rewriter.replaceOp(op, asTensor(b, fBuf, fType));
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuRowPatterns(RewritePatternSet &patterns,
                                  const GpuTarget &target) {
  patterns.add<GpuSemiseparableMask, GpuAssociativeScan, GpuRandomFeatures>(
      patterns.getContext(), target);
}

//===- ItemKernels.cpp - independent-item ops for every target ------------===//
//
// Ops whose work splits into independent items, each computed by one
// sequential body; the body is written once here and each target supplies
// only the dispatch (ItemKernels.h): a task of the CPU's thread pool, a GPU
// thread with adjacent threads on adjacent memory.
//  - semiseparable_mask: an item per column (GPU) or row (CPU) of a mask,
//    each L[i, j] from its own segment sum, never a difference of
//    cumulative sums;
//  - associative_scan: an item per position outside the scanned dim,
//    running the op's combiner region inline over the scanned dim;
//  - random_features: an item per output feature (row, m);
//  - route: an item per token selects its k experts (k rounds of "best not
//    chosen yet", ties to the lower index) and computes their weights; the
//    load-balancing statistics are summed over tokens in order (an item per
//    expert on a GPU, one pass over the rows on a CPU), and one item forms
//    the auxiliary loss.
//
//===----------------------------------------------------------------------===//

#include "Common/ItemKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace seqc;

ItemDispatch::~ItemDispatch() = default;

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

/// An item-kernel lowering: declines the element types the target's kernels
/// do not take (a reported fallback), then lowers the op with `lower`.
template <typename OpTy> struct ItemKernelPattern : OpRewritePattern<OpTy> {
  ItemKernelPattern(MLIRContext *ctx, const ItemDispatch &dispatch)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), dispatch(dispatch) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const final {
    if (std::string why = dispatch.unsupportedTypes(op); !why.empty())
      return rewriter.notifyMatchFailure(op, why);
    return lower(op, rewriter);
  }
  virtual LogicalResult lower(OpTy op, PatternRewriter &rewriter) const = 0;

  const ItemDispatch &dispatch;
};

/// Column j of a semiseparable mask: zeros above the diagonal, then
/// L[i, j] = exp(sum_{r = j+1..i} log_a[r]) down the rows.
void emitMaskColumn(KernelBuilder &k, Value j, Value T,
                    llvm::function_ref<Value(Value)> logAt,
                    llvm::function_ref<void(Value, Value, Value)> store) {
  k.forEach(k.idx(0), j, k.idx(1), [&](Value i) { store(k.f32(0.0), i, j); });
  store(k.f32(1.0), j, j);
  k.loop(k.add(j, k.idx(1)), T, {k.f32(0.0)}, [&](Value i, ValueRange c) {
    Value s = k.fadd(c[0], logAt(i));
    store(k.exp(s), i, j);
    return SmallVector<Value>{s};
  });
}

/// Row i of a semiseparable mask: L[i, j] = exp(sum_{r = j+1..i} log_a[r])
/// from the diagonal leftwards, zeros right of it.
void emitMaskRow(KernelBuilder &k, Value i, Value T,
                 llvm::function_ref<Value(Value)> logAt,
                 llvm::function_ref<void(Value, Value, Value)> store) {
  k.loop(i, {k.f32(0.0)}, [&](Value r, ValueRange c) {
    // j = i - 1 - r: the segment grows by log_a[j + 1] = log_a[i - r].
    Value s = k.fadd(c[0], logAt(k.sub(i, r)));
    store(k.exp(s), i, k.sub(k.sub(i, k.idx(1)), r));
    return SmallVector<Value>{s};
  });
  store(k.f32(1.0), i, i);
  k.forEach(k.add(i, k.idx(1)), T, k.idx(1),
            [&](Value j) { store(k.f32(0.0), i, j); });
}

struct SemiseparableMaskKernel : ItemKernelPattern<seq::SemiseparableMaskOp> {
  using ItemKernelPattern::ItemKernelPattern;

  LogicalResult lower(seq::SemiseparableMaskOp op,
                      PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    auto maskType = cast<RankedTensorType>(op.getMask().getType());
    Value maskBuf = allocBuffer(b, maskType, dims.of("mask"));
    Value logA = readBuffer(b, op.getLogA());
    // An item per column j on a target whose adjacent items share memory
    // lines (a GPU: each row's writes coalesce), an item per row i on one
    // where an item should write contiguous memory (a CPU task). Both sum
    // segments, never differences of a long cumulative sum.
    bool byColumn = dispatch.adjacentItemsShareLines();
    dispatch.emit(b, "semiseparable_mask", kb, product(kb, dims.of("log_a")),
                  {logA, maskBuf},
                  [&](KernelBuilder &k, Value item, ValueRange in) {
                    Value la = in[0], mask = in[1];
                    SmallVector<Value> sizes = sizesOf(k, la);
                    SmallVector<Value> pos = delinearize(k, item, sizes);
                    SmallVector<Value> lead(pos.begin(), pos.end() - 1);
                    Value T = sizes.back();
                    auto logAt = [&](Value t) {
                      SmallVector<Value> idx(lead);
                      idx.push_back(t);
                      return k.mload(la, idx);
                    };
                    auto store = [&](Value v, Value i, Value j) {
                      SmallVector<Value> idx(lead);
                      idx.push_back(i);
                      idx.push_back(j);
                      k.mstore(v, mask, idx);
                    };
                    if (byColumn)
                      emitMaskColumn(k, pos.back(), T, logAt, store);
                    else
                      emitMaskRow(k, pos.back(), T, logAt, store);
                  });
    rewriter.replaceOp(op, asTensor(b, maskBuf, maskType));
    return success();
  }
};

struct AssociativeScanKernel : ItemKernelPattern<seq::AssociativeScanOp> {
  using ItemKernelPattern::ItemKernelPattern;

  LogicalResult lower(seq::AssociativeScanOp op,
                      PatternRewriter &rewriter) const override {
    if (!RegionCaptures::of(op.getCombiner()).scalarOnly())
      return rewriter.notifyMatchFailure(
          op, "its combiner captures values from outside other than scalars");
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

    dispatch.emit(
        b, "associative_scan", kb, product(kb, outer), args,
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
};

struct RandomFeaturesKernel : ItemKernelPattern<seq::RandomFeaturesOp> {
  using ItemKernelPattern::ItemKernelPattern;

  LogicalResult lower(seq::RandomFeaturesOp op,
                      PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    bool trig = op.getKind() == seq::RandomFeatures::trigonometric;
    auto fType = cast<RankedTensorType>(op.getFeatures().getType());
    Value fBuf = allocBuffer(b, fType, dims.of("features"));
    SmallVector<Value> xSizes = dims.of("x");
    SmallVector<Value> rows(xSizes.begin(), xSizes.end() - 1);
    dispatch.emit(
        b, "random_features", kb, kb.mul(product(kb, rows), dims["M"]),
        {readBuffer(b, op.getX()), readBuffer(b, op.getOmega()), fBuf},
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value x = in[0], omega = in[1], features = in[2];
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
            k.mstore(k.fmul(k.exp(k.fsub(dot, half)), norm), features, at(m));
            return;
          }
          Value amp = k.fmul(k.exp(half), norm);
          k.mstore(k.fmul(k.sin(dot), amp), features, at(m));
          k.mstore(k.fmul(k.cos(dot), amp), features, at(k.add(nM, m)));
        });
    rewriter.replaceOp(op, asTensor(b, fBuf, fType));
    return success();
  }
};

/// The router's buffers: the logits [T, E]; its results, weights and
/// indices [T, k], aux; per token its first choice and the max and
/// normalizer of the softmax of its plain logits; per expert the
/// statistics [2, E] (the fraction of first choices, the mean probability);
/// the optional bias [E] and noise (eps and logits [T, E]).
struct RouteBuffers : KernelBuffers<RouteBuffers> {
  Value logits, weights, indices, first, rowMax, rowSum;
  Value bias, noiseEps, noiseLogits;

  /// The select kernel's arguments, in order.
  SmallVector<Value *> fields() {
    return {&logits, &weights, &indices,  &first,      &rowMax,
            &rowSum, &bias,    &noiseEps, &noiseLogits};
  }
};

/// The router's kernels: an item per token selects its k experts (k rounds
/// of "best not chosen yet", ties to the lower index) and computes their
/// weights; the load-balancing statistics are then summed over tokens in
/// order (see emitStatistics), and one item forms the auxiliary loss.
class RouteKernels {
public:
  RouteKernels(ImplicitLocOpBuilder &b, KernelBuilder &kb,
               const ItemDispatch &dispatch, seq::RouteOp op)
      : b(b), kb(kb), dispatch(dispatch), score(op.getScore()),
        scale(op.getRoutedScale().convertToDouble()),
        normalize(op.getNormalize()),
        auxCoef(op.getAuxLossCoef().convertToDouble()) {}

  void emitSelect(const RouteBuffers &io, Value T) {
    dispatch.emit(b, "route_select", kb, T, io.list(),
                  [&](KernelBuilder &k, Value t, ValueRange in) {
                    selectToken(k, io.rebind(in), t);
                  });
  }

  /// The load-balancing statistics, summed over tokens in order: an item
  /// per expert walking its column where adjacent items share memory lines
  /// (a GPU), else one item walking the logits row by row (a CPU task:
  /// contiguous reads; each expert's sums keep the same order).
  void emitStatistics(const RouteBuffers &io, Value stats, Value E) {
    SmallVector<Value> args{io.logits, io.first, io.rowMax, io.rowSum, stats};
    if (dispatch.adjacentItemsShareLines())
      dispatch.emit(b, "route_statistics", kb, E, args,
                    [&](KernelBuilder &k, Value e, ValueRange in) {
                      expertColumn(k, in[0], in[1], in[2], in[3], in[4], e);
                    });
    else
      dispatch.emit(b, "route_statistics", kb, kb.idx(1), args,
                    [&](KernelBuilder &k, Value, ValueRange in) {
                      tokenRows(k, in[0], in[1], in[2], in[3], in[4]);
                    });
  }

  /// aux = coef * E * sum_i f_i P_i (0 for an empty batch).
  void emitAux(Value stats, Value aux, Value T) {
    dispatch.emit(
        b, "route_aux", kb, kb.idx(1), {stats, aux, T},
        [&](KernelBuilder &k, Value, ValueRange in) {
          Value st = in[0], auxOut = in[1], nT = in[2];
          Value nE = k.mdim(st, 1);
          Value dot = k.sumOver(nE, [&](Value e) {
            return k.fmul(k.mload(st, {k.idx(0), e}),
                          k.mload(st, {k.idx(1), e}));
          });
          Value hasTokens = k.cmp(CmpIPredicate::sgt, nT, k.idx(0));
          Value tF = k.select(hasTokens, k.indexToF32(nT), k.f32(1.0));
          Value value = k.fmul(k.fmul(k.f32(auxCoef), k.indexToF32(nE)),
                               k.fdiv(dot, k.fmul(tF, tF)));
          k.mstore(k.select(hasTokens, value, k.f32(0.0)), auxOut, {});
        });
  }

private:
  /// Token t's choices, their weights, and its row of the statistics'
  /// inputs (first choice, softmax max and normalizer of its logits).
  void selectToken(KernelBuilder &k, const RouteBuffers &io, Value t) const {
    Value nE = k.mdim(io.logits, 1), nK = k.mdim(io.weights, 1);
    // The selection score of expert e: the logit, plus the noise.
    auto hAt = [&](Value e) {
      Value h = k.mload(io.logits, {t, e});
      if (io.noiseEps)
        h = k.fadd(h, k.fmul(k.mload(io.noiseEps, {t, e}),
                             k.softplus(k.mload(io.noiseLogits, {t, e}))));
      return h;
    };
    auto expertAt = [&](Value j) {
      return k.i32ToIndex(k.mload(io.indices, {t, j}));
    };
    k.forEach(k.idx(0), nK, k.idx(1), [&](Value j) {
      Value best = bestNotTaken(k, io, nE, j, hAt, expertAt);
      k.mstore(arith::IndexCastOp::create(k.builder(), k.builder().getI32Type(),
                                          best),
               io.indices, {t, j});
    });
    writeWeights(k, io, t, nE, nK, hAt,
                 [&](Value j) { return hAt(expertAt(j)); });
    k.mstore(k.mload(io.indices, {t, k.idx(0)}), io.first, {t});
    Value pmx = k.maxOver(nE, [&](Value e) {
      return k.mload(io.logits, {t, e});
    });
    k.mstore(pmx, io.rowMax, {t});
    k.mstore(k.sumOver(nE,
                       [&](Value e) {
                         return k.exp(k.fsub(k.mload(io.logits, {t, e}), pmx));
                       }),
             io.rowSum, {t});
  }

  /// The expert of the highest selection score (plus the bias) among those
  /// not among the first j choices; ties to the lower index.
  static Value bestNotTaken(KernelBuilder &k, const RouteBuffers &io, Value nE,
                            Value j, const std::function<Value(Value)> &hAt,
                            const std::function<Value(Value)> &expertAt) {
    return k.loop(nE, {k.idx(-1), k.f32(0.0)}, [&](Value e, ValueRange ce) {
      Value taken = k.loop(j, {k.i1(false)}, [&](Value jj, ValueRange tk) {
        return SmallVector<Value>{
            k.ori(tk[0], k.cmp(CmpIPredicate::eq, expertAt(jj), e))};
      })[0];
      Value sel = hAt(e);
      if (io.bias)
        sel = k.fadd(sel, k.mload(io.bias, {e}));
      Value better = k.ori(k.cmp(CmpIPredicate::slt, ce[0], k.idx(0)),
                           k.fcmp(arith::CmpFPredicate::OGT, sel, ce[1]));
      Value take = k.andi(k.noti(taken), better);
      return SmallVector<Value>{k.select(take, e, ce[0]),
                                k.select(take, sel, ce[1])};
    })[0];
  }

  /// The chosen experts' gates by the score function, normalized over the
  /// choices when asked, times the routed scale.
  void writeWeights(KernelBuilder &k, const RouteBuffers &io, Value t, Value nE,
                    Value nK, const std::function<Value(Value)> &hAt,
                    const std::function<Value(Value)> &hChosen) const {
    Value mx, den;
    if (score == seq::Score::softmax_topk) {
      mx = k.maxOver(nK, hChosen);
      den =
          k.sumOver(nK, [&](Value j) { return k.exp(k.fsub(hChosen(j), mx)); });
    } else if (score == seq::Score::softmax) {
      mx = k.maxOver(nE, hAt);
      den = k.sumOver(nE, [&](Value e) { return k.exp(k.fsub(hAt(e), mx)); });
    }
    auto gate = [&](Value j) {
      Value h = hChosen(j);
      if (score == seq::Score::sigmoid)
        return k.sigmoid(h);
      return k.fdiv(k.exp(k.fsub(h, mx)), den);
    };
    Value norm = normalize ? k.sumOver(nK, gate) : Value();
    k.forEach(k.idx(0), nK, k.idx(1), [&](Value j) {
      Value g = gate(j);
      if (norm)
        g = k.fdiv(g, norm);
      k.mstore(k.fmul(g, k.f32(scale)), io.weights, {t, j});
    });
  }

  /// Expert e's statistics, walking its column of the logits.
  static void expertColumn(KernelBuilder &k, Value logits, Value first,
                           Value rowMax, Value rowSum, Value stats, Value e) {
    Value nT = k.mdim(logits, 0);
    auto r = k.loop(nT, {k.f32(0.0), k.f32(0.0)}, [&](Value t, ValueRange c) {
      Value isFirst =
          k.cmp(CmpIPredicate::eq, k.i32ToIndex(k.mload(first, {t})), e);
      Value fc = k.select(isFirst, k.fadd(c[0], k.f32(1.0)), c[0]);
      Value p =
          k.fdiv(k.exp(k.fsub(k.mload(logits, {t, e}), k.mload(rowMax, {t}))),
                 k.mload(rowSum, {t}));
      return SmallVector<Value>{fc, k.fadd(c[1], p)};
    });
    k.mstore(r[0], stats, {k.idx(0), e});
    k.mstore(r[1], stats, {k.idx(1), e});
  }

  /// Every expert's statistics, walking the logits row by row.
  static void tokenRows(KernelBuilder &k, Value logits, Value first,
                        Value rowMax, Value rowSum, Value stats) {
    Value nT = k.mdim(logits, 0), nE = k.mdim(logits, 1);
    k.forEach(k.idx(0), nE, k.idx(1), [&](Value e) {
      k.mstore(k.f32(0.0), stats, {k.idx(0), e});
      k.mstore(k.f32(0.0), stats, {k.idx(1), e});
    });
    k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
      Value f = k.i32ToIndex(k.mload(first, {t}));
      k.mstore(k.fadd(k.mload(stats, {k.idx(0), f}), k.f32(1.0)), stats,
               {k.idx(0), f});
      Value mx = k.mload(rowMax, {t}), den = k.mload(rowSum, {t});
      k.forEach(k.idx(0), nE, k.idx(1), [&](Value e) {
        Value p = k.fdiv(k.exp(k.fsub(k.mload(logits, {t, e}), mx)), den);
        k.mstore(k.fadd(k.mload(stats, {k.idx(1), e}), p), stats,
                 {k.idx(1), e});
      });
    });
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const ItemDispatch &dispatch;
  seq::Score score;
  double scale;
  bool normalize;
  double auxCoef;
};

struct RouteKernel : ItemKernelPattern<seq::RouteOp> {
  using ItemKernelPattern::ItemKernelPattern;

  LogicalResult lower(seq::RouteOp op,
                      PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value T = dims["T"], E = dims["E"], K = dims["k"];
    kb.check(kb.cmp(CmpIPredicate::sle, K, E),
             "k = {0} exceeds the number of experts E = {1}", {K, E});
    Type f32 = b.getF32Type(), i32 = b.getI32Type();
    int64_t dyn = ShapedType::kDynamic;
    auto wType = cast<RankedTensorType>(op.getWeights().getType());
    auto iType = cast<RankedTensorType>(op.getIndices().getType());
    auto auxType = cast<RankedTensorType>(op.getAux().getType());
    RouteBuffers io;
    io.logits = readBuffer(b, op.getLogits());
    io.weights = allocBuffer(b, wType, {T, K});
    io.indices = allocBuffer(b, iType, {T, K});
    Value aux = allocBuffer(b, auxType, {});
    io.first = allocBuffer(b, RankedTensorType::get({dyn}, i32), {T});
    io.rowMax = allocBuffer(b, RankedTensorType::get({dyn}, f32), {T});
    io.rowSum = allocBuffer(b, RankedTensorType::get({dyn}, f32), {T});
    Value stats =
        allocBuffer(b, RankedTensorType::get({dyn, dyn}, f32), {kb.idx(2), E});
    io.bias = readOptionalBuffer(b, op.getBias());
    if (op.getNoiseEps()) {
      io.noiseEps = readBuffer(b, op.getNoiseEps());
      io.noiseLogits = readBuffer(b, op.getNoiseLogits());
    }

    RouteKernels kernels(b, kb, dispatch, op);
    kernels.emitSelect(io, T);
    kernels.emitStatistics(io, stats, E);
    kernels.emitAux(stats, aux, T);
    rewriter.replaceOp(op, {asTensor(b, io.weights, wType),
                            asTensor(b, io.indices, iType),
                            asTensor(b, aux, auxType)});
    return success();
  }
};

} // namespace

void seqc::populateItemKernelPatterns(RewritePatternSet &patterns,
                                      const ItemDispatch &dispatch) {
  patterns.add<SemiseparableMaskKernel, AssociativeScanKernel,
               RandomFeaturesKernel, RouteKernel>(patterns.getContext(),
                                                  dispatch);
}

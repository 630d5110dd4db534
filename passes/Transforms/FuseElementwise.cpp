//===- FuseElementwise.cpp - elementwise glue into the seq ops ------------===//
//
// Model graphs often compute around a seq op what the op can do itself:
// softplus(dt + bias) before ssd / selective_scan, y * silu(z) after them,
// silu after a causal convolution, elu + 1 or relu on the queries and keys
// of linear attention. Folding them into the op's operands and attributes
// lets its kernel apply them on the fly, so the graph does not materialize
// them (one pass over the tensor each, written and read back).
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQFUSEELEMENTWISE
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc::seq;

namespace {

//===----------------------------------------------------------------------===//
// Matching scalar expressions in a linalg.generic body
//===----------------------------------------------------------------------===//

static bool isConst(Value v, double c) {
  FloatAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.getValueAsDouble() == c;
}

/// The constant float behind `v`, if any.
static std::optional<double> constValue(Value v) {
  FloatAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  return attr.getValueAsDouble();
}

/// Whether `cmp` is `x > c` (or >=, ordered or not) with `x` on the left:
/// then a select on it takes its true side exactly for large x (and, for
/// the unordered forms, NaN, which every branch below propagates anyway).
static bool isGreaterThan(arith::CmpFOp cmp, Value x) {
  if (!cmp || cmp.getLhs() != x)
    return false;
  using P = arith::CmpFPredicate;
  P p = cmp.getPredicate();
  return p == P::OGT || p == P::OGE || p == P::UGT || p == P::UGE;
}

template <typename OpTy> static OpTy defOf(Value v) {
  return v ? v.getDefiningOp<OpTy>() : OpTy();
}

/// Whether `v` computes exp(-x).
static bool isExpNeg(Value v, Value x) {
  auto e = defOf<math::ExpOp>(v);
  if (!e)
    return false;
  auto n = defOf<arith::NegFOp>(e.getOperand());
  if (n && n.getOperand() == x)
    return true;
  // 0 - x
  auto s = defOf<arith::SubFOp>(e.getOperand());
  return s && isConst(s.getLhs(), 0.0) && s.getRhs() == x;
}

/// Whether `v` is 1 + exp(-x) (either order).
static bool isOnePlusExpNeg(Value v, Value x) {
  auto add = defOf<arith::AddFOp>(v);
  if (!add)
    return false;
  return (isConst(add.getLhs(), 1.0) && isExpNeg(add.getRhs(), x)) ||
         (isConst(add.getRhs(), 1.0) && isExpNeg(add.getLhs(), x));
}

/// Whether `v` is sigmoid(x) = 1 / (1 + exp(-x)).
static bool isSigmoid(Value v, Value x) {
  auto div = defOf<arith::DivFOp>(v);
  return div && isConst(div.getLhs(), 1.0) && isOnePlusExpNeg(div.getRhs(), x);
}

/// Whether `v` is silu(x): x sigmoid(x), or x / (1 + exp(-x)).
static bool isSilu(Value v, Value x) {
  if (auto mul = defOf<arith::MulFOp>(v))
    return (mul.getLhs() == x && isSigmoid(mul.getRhs(), x)) ||
           (mul.getRhs() == x && isSigmoid(mul.getLhs(), x));
  if (auto div = defOf<arith::DivFOp>(v))
    return div.getLhs() == x && isOnePlusExpNeg(div.getRhs(), x);
  return false;
}

/// Whether `v` is softplus(x): log1p(exp(x)), log(1 + exp(x)), optionally
/// behind `x > c ? x : ...` with c >= 15 (where softplus(x) and x agree to
/// float precision, as in mamba_ssm's threshold of 20).
static bool isSoftplus(Value v, Value x) {
  if (auto sel = defOf<arith::SelectOp>(v)) {
    auto cmp = defOf<arith::CmpFOp>(sel.getCondition());
    std::optional<double> c = cmp ? constValue(cmp.getRhs()) : std::nullopt;
    if (!isGreaterThan(cmp, x) || !c || *c < 15.0 || sel.getTrueValue() != x)
      return false;
    return isSoftplus(sel.getFalseValue(), x);
  }
  if (auto l1p = defOf<math::Log1pOp>(v)) {
    auto e = defOf<math::ExpOp>(l1p.getOperand());
    return e && e.getOperand() == x;
  }
  if (auto log = defOf<math::LogOp>(v)) {
    auto add = defOf<arith::AddFOp>(log.getOperand());
    if (!add)
      return false;
    Value other = isConst(add.getLhs(), 1.0)   ? add.getRhs()
                  : isConst(add.getRhs(), 1.0) ? add.getLhs()
                                               : Value();
    auto e = defOf<math::ExpOp>(other);
    return e && e.getOperand() == x;
  }
  return false;
}

/// Whether `v` is elu(x) + 1 (x > 0 ? x + 1 : exp(x)).
static bool isEluPlusOne(Value v, Value x) {
  auto sel = defOf<arith::SelectOp>(v);
  if (!sel)
    return false;
  auto cmp = defOf<arith::CmpFOp>(sel.getCondition());
  auto inc = defOf<arith::AddFOp>(sel.getTrueValue());
  auto e = defOf<math::ExpOp>(sel.getFalseValue());
  return isGreaterThan(cmp, x) && isConst(cmp.getRhs(), 0.0) && inc &&
         ((inc.getLhs() == x && isConst(inc.getRhs(), 1.0)) ||
          (inc.getRhs() == x && isConst(inc.getLhs(), 1.0))) &&
         e && e.getOperand() == x;
}

/// Whether `v` is relu(x): max(x, 0) or x > 0 ? x : 0.
static bool isRelu(Value v, Value x) {
  Operation *op = v.getDefiningOp();
  if (isa_and_nonnull<arith::MaximumFOp, arith::MaxNumFOp>(op))
    return (op->getOperand(0) == x && isConst(op->getOperand(1), 0.0)) ||
           (op->getOperand(1) == x && isConst(op->getOperand(0), 0.0));
  if (auto sel = dyn_cast_or_null<arith::SelectOp>(op)) {
    auto cmp = defOf<arith::CmpFOp>(sel.getCondition());
    return isGreaterThan(cmp, x) && isConst(cmp.getRhs(), 0.0) &&
           sel.getTrueValue() == x && isConst(sel.getFalseValue(), 0.0);
  }
  return false;
}

/// An elementwise linalg.generic over one value: identity maps, all
/// parallel, one result, and its yielded scalar.
struct Elementwise {
  linalg::GenericOp op;
  Value yielded;
  Block *body;
};

static std::optional<Elementwise> elementwise(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !generic.hasPureTensorSemantics() ||
      !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
           .isIdentity())
    return std::nullopt;
  Block *body = generic.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  return Elementwise{generic, yield.getOperand(0), body};
}

/// The generic's input tensor behind block argument `arg`, if its map is the
/// identity.
static Value identityInput(linalg::GenericOp g, Value arg) {
  auto barg = dyn_cast<BlockArgument>(arg);
  if (!barg || barg.getOwner() != g.getBody() ||
      barg.getArgNumber() >= g.getNumDpsInputs())
    return {};
  OpOperand *operand = g.getDpsInputOperand(barg.getArgNumber());
  if (!g.getMatchingIndexingMap(operand).isIdentity())
    return {};
  return operand->get();
}

/// Makes `v` usable by `user`: when it is computed later in the same block
/// by a side-effect-free op (a reshape of the gate, say) whose operands are
/// available, that op moves up before `user`. False when it cannot.
static bool makeAvailableBefore(Value v, Operation *user,
                                PatternRewriter &rewriter) {
  Operation *def = v.getDefiningOp();
  if (def == user)
    return false; // v is the user's own result (a self-gate y * silu(y))
  if (!def || def->getBlock() != user->getBlock() || def->isBeforeInBlock(user))
    return true;
  if (!isPure(def))
    return false;
  for (Value operand : def->getOperands()) {
    Operation *d = operand.getDefiningOp();
    if (d && d->getBlock() == user->getBlock() && !d->isBeforeInBlock(user))
      return false;
  }
  rewriter.moveOpBefore(def, user);
  return true;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// y' = y * silu(z) after ssd / selective_scan without a gate: gate(z).
template <typename OpTy> struct FuseGate : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (op.getGate() || !op->getResult(0).hasOneUse())
      return failure();
    auto ew = elementwise(*op->getResult(0).getUsers().begin());
    if (!ew || ew->op->getResult(0).getType() != op->getResult(0).getType())
      return failure();
    auto mul = defOf<arith::MulFOp>(ew->yielded);
    if (!mul)
      return failure();
    for (auto [yArg, gArg] : {std::pair(mul.getLhs(), mul.getRhs()),
                              std::pair(mul.getRhs(), mul.getLhs())}) {
      Value y = identityInput(ew->op, yArg);
      if (y != op->getResult(0))
        continue;
      // gArg = silu(zArg) with zArg an identity input.
      for (Value candidate : ew->body->getArguments()) {
        Value z = identityInput(ew->op, candidate);
        if (!z || z.getType() != y.getType() || !isSilu(gArg, candidate) ||
            !makeAvailableBefore(z, op, rewriter))
          continue;
        rewriter.modifyOpInPlace(op, [&] { op.getGateMutable().assign(z); });
        // The operand segments change with the new operand.
        rewriter.replaceOp(ew->op, op->getResult(0));
        return success();
      }
    }
    return failure();
  }
};

/// silu(y) after a causal_conv1d without activation: activation = silu.
struct FuseConvSilu : OpRewritePattern<CausalConv1dOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CausalConv1dOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getActivation() != Activation::none || !op.getY().hasOneUse())
      return failure();
    auto ew = elementwise(*op.getY().getUsers().begin());
    if (!ew || ew->op->getResult(0).getType() != op.getY().getType() ||
        ew->op.getNumDpsInputs() != 1 ||
        identityInput(ew->op, ew->body->getArgument(0)) != op.getY() ||
        !isSilu(ew->yielded, ew->body->getArgument(0)))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.setActivation(Activation::silu); });
    rewriter.replaceOp(ew->op, op.getY());
    return success();
  }
};

/// dt = softplus(x [+ bias]) before ssd / selective_scan without softplus
/// and bias: the op takes x, the bias and the softplus flag.
template <typename OpTy> struct FuseDtSoftplus : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  static constexpr bool isSsd = std::is_same_v<OpTy, SsdOp>;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value dt = op->getOperand(1); // dt (ssd) or delta (selective_scan)
    bool softplus;
    Value bias;
    if constexpr (isSsd) {
      softplus = op.getDtSoftplus();
      bias = op.getDtBias();
    } else {
      softplus = op.getDeltaSoftplus();
      bias = op.getDeltaBias();
    }
    if (softplus || bias)
      return failure();
    auto ew = elementwise(dt.getDefiningOp());
    if (!ew)
      return failure();
    linalg::GenericOp g = ew->op;
    // softplus(arg) with arg an input or an input plus a broadcast bias.
    Value x, newBias;
    for (Value arg : ew->body->getArguments()) {
      if (!isSoftplus(ew->yielded, arg))
        continue;
      x = identityInput(g, arg);
    }
    if (!x) {
      // softplus(a + b): one identity input, one bias over the last dim.
      for (Operation &inner : ew->body->without_terminator()) {
        auto add = dyn_cast<arith::AddFOp>(inner);
        if (!add || !isSoftplus(ew->yielded, add.getResult()))
          continue;
        for (auto [a, c] : {std::pair(add.getLhs(), add.getRhs()),
                            std::pair(add.getRhs(), add.getLhs())}) {
          Value in = identityInput(g, a);
          auto carg = dyn_cast<BlockArgument>(c);
          if (!in || !carg || carg.getOwner() != g.getBody() ||
              carg.getArgNumber() >= g.getNumDpsInputs())
            continue;
          OpOperand *cOperand = g.getDpsInputOperand(carg.getArgNumber());
          AffineMap map = g.getMatchingIndexingMap(cOperand);
          unsigned last = g.getNumLoops() - 1;
          // The bias is indexed by the head / channel dimension alone.
          if (map.getNumResults() == 1 &&
              map.getResult(0).isFunctionOfDim(last) &&
              map.getResult(0) == getAffineDimExpr(last, g.getContext())) {
            x = in;
            newBias = cOperand->get();
          }
        }
      }
    }
    if (!x || x.getType() != dt.getType())
      return failure();
    if (newBias) {
      // The bias operand must have the op's parameter shape ([H] or [D]).
      auto bt = cast<RankedTensorType>(newBias.getType());
      if (bt.getRank() != 1)
        return failure();
    }
    rewriter.modifyOpInPlace(op, [&] {
      op->setOperand(1, x);
      if constexpr (isSsd) {
        op.setDtSoftplus(true);
        if (newBias)
          op.getDtBiasMutable().assign(newBias);
      } else {
        op.setDeltaSoftplus(true);
        if (newBias)
          op.getDeltaBiasMutable().assign(newBias);
      }
    });
    return success();
  }
};

/// q = phi(q0), k = phi(k0) with the same elu+1 or relu before a linear
/// attention with the identity feature map: the op applies phi itself.
struct FuseFeatureMap : OpRewritePattern<LinearAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  static std::optional<std::pair<FeatureMap, Value>> featureOf(Value v) {
    auto ew = elementwise(v.getDefiningOp());
    if (!ew || ew->op.getNumDpsInputs() != 1)
      return std::nullopt;
    Value arg = ew->body->getArgument(0);
    Value in = identityInput(ew->op, arg);
    if (!in || in.getType() != v.getType())
      return std::nullopt;
    if (isEluPlusOne(ew->yielded, arg))
      return std::pair(FeatureMap::elu_plus_one, in);
    if (isRelu(ew->yielded, arg))
      return std::pair(FeatureMap::relu, in);
    return std::nullopt;
  }

  LogicalResult matchAndRewrite(LinearAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getFeatureMap() != FeatureMap::identity)
      return failure();
    auto q = featureOf(op.getQ()), k = featureOf(op.getK());
    if (!q || !k || q->first != k->first)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.getQMutable().assign(q->second);
      op.getKMutable().assign(k->second);
      op.setFeatureMap(q->first);
    });
    return success();
  }
};

struct SeqFuseElementwise
    : seqc::impl::SeqFuseElementwiseBase<SeqFuseElementwise> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGate<SsdOp>, FuseGate<SelectiveScanOp>, FuseConvSilu,
                 FuseDtSoftplus<SsdOp>, FuseDtSoftplus<SelectiveScanOp>,
                 FuseFeatureMap>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

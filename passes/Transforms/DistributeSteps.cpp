//===- DistributeSteps.cpp - seq ops split along T over ranks -------------===//
//
// Sequence parallelism (SPEC section 3, `--parallel sequence`): under R
// ranks, rank r computes steps [r T / R, (r + 1) T / R) of every seq op with
// a time axis. The function's arguments and results stay whole on every
// rank, so the graph around the ops runs replicated and a call's results
// equal the single-process run's.
//
// An op with a state (CHUNKED.md, "cross-rank state passing") is linear in
// it: a run over rank j's steps maps a state S to M_j S + S_j. Each rank
// computes
//
//   - S_r, its state from zero (the op on its steps, no init),
//   - M_r, its transition (the op with the additive input zero, started
//     from ones, or from the identity when the transition mixes the state's
//     rows: the delta rules),
//
// Nothing reads those two runs' outputs, so both targets' chunked kernels
// run only their state's phases (ChunkedForm::outputUsed).
// All ranks exchange the pairs (LASP-2: one all-gather), each folds
// S <- M_j S + S_j over the ranks before it (after it with `reverse`) into
// its incoming state, and runs its steps again from that state. `last` is
// the fold over every rank, the same on all of them. causal_conv1d reads
// its W-1 inputs before the slice (every rank has them) and its `last`
// from the sequence's tail, attention its slice's queries against the keys
// they see; their results need no state.
//
// The exchanges are `shard` collectives on a one-dimensional grid of R
// processes; each target lowers them to its engine (CPU: MPI). An op this
// pass does not split runs whole on every rank, with a remark (an error
// under `strict`), as the kernel lowerings report a fallback.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "Common/KernelBuilder.h"
#include "Seq/SeqDialect.h"
#include "Transforms/LocalTokens.h"
#include "Transforms/RankExchange.h"
#include "Transforms/RankGrid.h"
#include "Transforms/StepAxes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

namespace seqc {
#define GEN_PASS_DEF_SEQDISTRIBUTESTEPS
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc;
using namespace seqc::seq;

namespace {

/// How the transition of an op's state over a run of steps is computed.
struct TransitionForm {
  /// The operand (its number) whose zero leaves only the transition: b, u,
  /// x or v.
  unsigned additive;
  /// The state dimension the transition does not depend on ("" none): the
  /// transition run gives it size 1 (or K), and the operands that end in it
  /// (`widthOperands`, the additive one among them) are zeros of that size.
  StringRef width;
  SmallVector<unsigned, 3> widthOperands;
  /// The transition mixes the K rows of the state (the delta rules): it is
  /// K x K, computed from the identity, applied as a matrix product.
  bool mixesRows = false;
};

static void addOperand(SmallVectorImpl<unsigned> &numbers,
                       MutableOperandRange range) {
  if (!range.empty())
    numbers.push_back(range[0].getOperandNumber());
}

/// The ops whose state crosses ranks, and why the others do not split.
FailureOr<TransitionForm> transitionFormOf(Operation *op, std::string &whyNot) {
  using Form = FailureOr<TransitionForm>;
  return TypeSwitch<Operation *, Form>(op)
      .Case([](LinearScanOp scan) -> Form {
        return TransitionForm{scan.getBMutable().getOperandNumber(), "", {}};
      })
      .Case([](SelectiveScanOp scan) -> Form {
        return TransitionForm{scan.getUMutable().getOperandNumber(), "", {}};
      })
      .Case([](SsdOp ssd) -> Form {
        TransitionForm form{ssd.getXMutable().getOperandNumber(), "P", {}};
        form.widthOperands.push_back(form.additive);
        addOperand(form.widthOperands, ssd.getGateMutable());
        if (ssd.getSkip() &&
            cast<RankedTensorType>(ssd.getSkip().getType()).getRank() == 2)
          addOperand(form.widthOperands, ssd.getSkipMutable());
        return form;
      })
      .Case([&](LinearAttentionOp la) -> Form {
        if (!la.getCausal())
          whyNot = "causal = false sums every step into one state";
        else if (la.getNormalize())
          whyNot = "the normalizer of normalize = true is not carried";
        else
          return TransitionForm{la.getVMutable().getOperandNumber(),
                                "V",
                                {la.getVMutable().getOperandNumber()}};
        return failure();
      })
      .Case<DeltaRuleOp, GeneralizedDeltaRuleOp>([](auto delta) -> Form {
        unsigned v = delta.getVMutable().getOperandNumber();
        return TransitionForm{v, "V", {v}, /*mixesRows=*/true};
      })
      .Default([&](Operation *) -> Form {
        whyNot = "it has no transition over steps";
        return failure();
      });
}

/// New sizes of declared dimensions, by symbol (kDynamic: known at run time).
using Substitutions = llvm::StringMap<int64_t>;

class StepDistribution {
public:
  StepDistribution(Operation *op, ImplicitLocOpBuilder &b, KernelBuilder &kb,
                   const DimSizes &dims, int64_t ranks, bool local)
      : op(op), b(b), kb(kb), dims(dims), ranks(ranks), local(local) {
    cast<ShapeSignatureOpInterface>(op).buildShapeSignature(sig);
    if (auto reverseAttr = op->getAttrOfType<BoolAttr>("reverse"))
      reverse = reverseAttr.getValue();
    rank =
        shard::ProcessLinearIndexOp::create(b, b.getIndexType(), kRankGridName);
    if (local) {
      // The operands are the rank's steps already; where they start in
      // the whole takes an exchange (rankLocalStart), which only the conv
      // and attention need.
      length = dims["T"];
      return;
    }
    Value total = dims["T"];
    RankSlice mine = rankSlice(kb, rank, total, ranks);
    start = mine.start;
    length = mine.length;
    auto steps = cast<RankedTensorType>(op->getOperand(0).getType());
    if (!steps.isDynamicDim(1) && steps.getDimSize(1) % ranks == 0)
      staticLength = steps.getDimSize(1) / ranks;
  }

  SmallVector<Value> distributeState(const TransitionForm &form);
  SmallVector<Value> distributeConv();
  SmallVector<Value> distributeAttention();
  // Rank-local steps: the operands with steps are the rank's own.
  SmallVector<Value> distributeLocalConv();
  /// `keysWhole`: the keys and values follow a KV cache (StepAxes::
  /// cacheAppends) and are whole already.
  SmallVector<Value> distributeLocalAttention(bool keysWhole);

private:
  const TensorDecl *declOf(Value v) const;
  int64_t dimOf(const TensorDecl &decl, StringRef symbol) const;

  // Slices and whole tensors along T (dimension 1).
  Value sliceSteps(Value tensor, Value from, Value count,
                   std::optional<int64_t> staticCount);
  Value localSteps(Value tensor) {
    return sliceSteps(tensor, start, length, staticLength);
  }
  Value wholeSteps(Value local, Value declared);

  /// The op again on `operands` (one per operand of the original), from
  /// `init` (or none), with its results' declared dims replaced by `subs`.
  Operation *rerun(ArrayRef<Value> operands, Value init,
                   const Substitutions &subs);
  /// k and v cut to the keys causal queries before `end` see.
  void keepVisibleKeys(Value &k, Value &v, Value end, Value keys,
                       Value queries);
  /// The conv's `last`, from the sequence's tail.
  Value convLast(CausalConv1dOp conv);
  /// The conv's state after `x` (all its steps) from `state`.
  Value convStateAfter(Value x, Value state);
  Substitutions localSubstitutions() const;

  // The state exchange.
  Value transitionStart(const TransitionForm &form);
  Value transition(const TransitionForm &form, ArrayRef<Value> local);
  Value allGather(Value local);
  Value combine(const TransitionForm &form, Value m, Value state, Value s);
  Value foldRanks(const TransitionForm &form, Value gatheredM, Value gatheredS,
                  Value state, Value from, Value to);

  Operation *op;
  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const DimSizes &dims;
  int64_t ranks;
  bool local;
  ShapeSignature sig;
  bool reverse = false;
  Value rank, start, length;
  std::optional<int64_t> staticLength;
};

} // namespace

//===----------------------------------------------------------------------===//
// Signature queries
//===----------------------------------------------------------------------===//

const TensorDecl *StepDistribution::declOf(Value v) const {
  for (const TensorDecl &decl : sig.tensors())
    if (decl.value == v)
      return &decl;
  return nullptr;
}

int64_t StepDistribution::dimOf(const TensorDecl &decl,
                                StringRef symbol) const {
  for (auto [i, e] : llvm::enumerate(decl.dims))
    if (e.symbol == symbol && e.scale == 1 && e.offset == 0)
      return static_cast<int64_t>(i);
  return -1;
}

//===----------------------------------------------------------------------===//
// Slices
//===----------------------------------------------------------------------===//

Value StepDistribution::sliceSteps(Value tensor, Value from, Value count,
                                   std::optional<int64_t> staticCount) {
  return sliceAlong(b, tensor, /*axis=*/1, from,
                    staticCount ? OpFoldResult(b.getIndexAttr(*staticCount))
                                : OpFoldResult(count));
}

/// The whole result on every rank: each rank's steps, all-gathered.
Value StepDistribution::wholeSteps(Value local, Value declared) {
  return gatherSlices(b, kb, local, /*axis=*/1, dims["T"], ranks,
                      cast<RankedTensorType>(declared.getType()),
                      dims.of(declOf(declared)->name));
}

//===----------------------------------------------------------------------===//
// The op again
//===----------------------------------------------------------------------===//

Substitutions StepDistribution::localSubstitutions() const {
  Substitutions subs;
  subs["T"] = staticLength ? *staticLength : ShapedType::kDynamic;
  return subs;
}

Operation *StepDistribution::rerun(ArrayRef<Value> operands, Value init,
                                   const Substitutions &subs) {
  Operation *clone = b.clone(*op);
  clone->setOperands(operands);
  MutableOperandRange initOperand =
      cast<StatefulOpInterface>(clone).getInitMutable();
  if (init)
    initOperand.assign(init);
  else
    initOperand.clear();

  // The same op with result types for its new operands.
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(clone->getOperands());
  state.propertiesAttr = clone->getPropertiesAsAttribute();
  state.addAttributes(clone->getDiscardableAttrDictionary().getValue());
  for (Value result : op->getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (const TensorDecl *decl = declOf(result))
      for (auto [i, e] : llvm::enumerate(decl->dims))
        if (auto it = subs.find(e.symbol); it != subs.end() && e.scale == 1)
          shape[i] = it->second;
    state.addTypes(RankedTensorType::get(shape, type.getElementType()));
  }
  for (unsigned i = 0; i < clone->getNumRegions(); ++i)
    state.addRegion();
  Operation *created = b.create(state);
  for (unsigned i = 0; i < clone->getNumRegions(); ++i)
    created->getRegion(i).takeBody(clone->getRegion(i));
  clone->erase();
  return created;
}

//===----------------------------------------------------------------------===//
// The state exchange
//===----------------------------------------------------------------------===//

/// The transition run's first state: ones (a diagonal transition, its
/// width dimension 1), or the identity on K (the delta rules).
Value StepDistribution::transitionStart(const TransitionForm &form) {
  Value last = cast<StatefulOpInterface>(op).getLast();
  const TensorDecl *decl = declOf(last);
  auto type = cast<RankedTensorType>(last.getType());
  SmallVector<Value> sizes = dims.of(decl->name);
  SmallVector<int64_t> shape(type.getShape());
  int64_t widthDim = dimOf(*decl, form.width);
  if (!form.mixesRows) {
    if (widthDim >= 0) {
      shape[widthDim] = 1;
      sizes[widthDim] = kb.idx(1);
    }
    return kb.filled(RankedTensorType::get(shape, b.getF32Type()), sizes,
                     kb.f32(1.0));
  }
  // K x K from K x V: the last two dimensions.
  int64_t rows = type.getRank() - 2;
  shape[widthDim] = shape[rows];
  sizes[widthDim] = sizes[rows];
  auto identityType = RankedTensorType::get(shape, b.getF32Type());
  Value empty = kb.empty(identityType, sizes);
  AffineMap map = b.getMultiDimIdentityMap(identityType.getRank());
  SmallVector<utils::IteratorType> iterators(identityType.getRank(),
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, identityType, ValueRange{}, ValueRange{empty},
             ArrayRef<AffineMap>{map}, iterators,
             [&](OpBuilder &nb, Location loc, ValueRange) {
               ImplicitLocOpBuilder ib(loc, nb);
               Value i = linalg::IndexOp::create(ib, rows);
               Value j = linalg::IndexOp::create(ib, rows + 1);
               Value same =
                   arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, i, j);
               Value one = arith::ConstantOp::create(ib, ib.getF32FloatAttr(1));
               Value zero =
                   arith::ConstantOp::create(ib, ib.getF32FloatAttr(0));
               Value v = arith::SelectOp::create(ib, same, one, zero);
               linalg::YieldOp::create(ib, v);
             })
      .getResult(0);
}

/// The op's transition over the rank's steps: the op with its additive
/// operand zero, from transitionStart, its width operands narrowed to the
/// transition's width (1, or K for the delta rules).
Value StepDistribution::transition(const TransitionForm &form,
                                   ArrayRef<Value> local) {
  auto lastType =
      cast<RankedTensorType>(cast<StatefulOpInterface>(op).getLast().getType());
  const TensorDecl *lastDecl = declOf(cast<StatefulOpInterface>(op).getLast());
  Substitutions subs = localSubstitutions();
  Value widthSize = kb.idx(1);
  if (form.mixesRows) {
    int64_t rows = lastType.getRank() - 2;
    subs[form.width] = lastType.getDimSize(rows);
    widthSize = dims[lastDecl->dims[rows].symbol];
  } else if (!form.width.empty()) {
    subs[form.width] = 1;
  }
  SmallVector<Value> operands(local);
  SmallVector<unsigned, 3> zeroed(form.widthOperands);
  if (!llvm::is_contained(zeroed, form.additive))
    zeroed.push_back(form.additive);
  for (unsigned number : zeroed) {
    Value operand = local[number];
    auto type = cast<RankedTensorType>(operand.getType());
    SmallVector<int64_t> shape(type.getShape());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      sizes.push_back(kb.dim(operand, i));
    if (llvm::is_contained(form.widthOperands, number)) {
      shape.back() = subs[form.width];
      sizes.back() = widthSize;
    }
    operands[number] =
        kb.zeros(RankedTensorType::get(shape, type.getElementType()), sizes);
  }
  return cast<StatefulOpInterface>(rerun(operands, transitionStart(form), subs))
      .getLast();
}

/// R x local on every rank, row j rank j's.
Value StepDistribution::allGather(Value local) {
  return gatherRows(b, local, ranks);
}

/// M state + s: elementwise, M broadcast over the width dimension, or a
/// product over the rows (M K x K, state K x V).
Value StepDistribution::combine(const TransitionForm &form, Value m,
                                Value state, Value s) {
  auto stateType = cast<RankedTensorType>(state.getType());
  int64_t rank = stateType.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> all;
  for (int64_t i = 0; i < rank; ++i)
    all.push_back(getAffineDimExpr(i, ctx));
  const TensorDecl *lastDecl = declOf(cast<StatefulOpInterface>(op).getLast());

  if (!form.mixesRows) {
    SmallVector<AffineExpr> mExprs(all);
    if (int64_t w = dimOf(*lastDecl, form.width); w >= 0)
      mExprs[w] = getAffineConstantExpr(0, ctx);
    SmallVector<AffineMap> maps{AffineMap::get(rank, 0, mExprs, ctx),
                                AffineMap::get(rank, 0, all, ctx),
                                AffineMap::get(rank, 0, all, ctx)};
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    return linalg::GenericOp::create(
               b, stateType, ValueRange{m, state}, ValueRange{s}, maps,
               iterators,
               [](OpBuilder &nb, Location loc, ValueRange args) {
                 Value mul = arith::MulFOp::create(nb, loc, args[0], args[1]);
                 Value add = arith::AddFOp::create(nb, loc, mul, args[2]);
                 linalg::YieldOp::create(nb, loc, add);
               })
        .getResult(0);
  }
  // out[.., k, v] = s[.., k, v] + sum_j M[.., k, j] state[.., j, v].
  AffineExpr j = getAffineDimExpr(rank, ctx);
  SmallVector<AffineExpr> mExprs(all), stateExprs(all);
  mExprs[rank - 1] = j;
  stateExprs[rank - 2] = j;
  SmallVector<AffineMap> maps{AffineMap::get(rank + 1, 0, mExprs, ctx),
                              AffineMap::get(rank + 1, 0, stateExprs, ctx),
                              AffineMap::get(rank + 1, 0, all, ctx)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, stateType, ValueRange{m, state}, ValueRange{s}, maps, iterators,
             [](OpBuilder &nb, Location loc, ValueRange args) {
               Value mul = arith::MulFOp::create(nb, loc, args[0], args[1]);
               Value add = arith::AddFOp::create(nb, loc, mul, args[2]);
               linalg::YieldOp::create(nb, loc, add);
             })
      .getResult(0);
}

/// `state` carried over the ranks at positions [from, to) of the processing
/// order (rank p, or R - 1 - p with reverse).
Value StepDistribution::foldRanks(const TransitionForm &form, Value gatheredM,
                                  Value gatheredS, Value state, Value from,
                                  Value to) {
  auto row = [&](Value gathered, Value j) {
    auto type = cast<RankedTensorType>(gathered.getType());
    auto rowType = RankedTensorType::get(type.getShape().drop_front(),
                                         type.getElementType());
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(b, b.getLoc(), gathered);
    offsets[0] = j;
    sizes[0] = b.getIndexAttr(1);
    return tensor::ExtractSliceOp::create(b, rowType, gathered, offsets, sizes,
                                          strides)
        .getResult();
  };
  return kb.loop(from, to, {state}, [&](Value p, ValueRange it) {
    Value j = reverse ? kb.sub(kb.idx(ranks - 1), p) : p;
    return SmallVector<Value>{
        combine(form, row(gatheredM, j), it[0], row(gatheredS, j))};
  })[0];
}

//===----------------------------------------------------------------------===//
// The three ways an op splits
//===----------------------------------------------------------------------===//

/// The rank's slice of every operand with steps (T at dimension 1).
static bool hasSteps(const TensorDecl *decl) {
  return decl && decl->dims.size() >= 2 && decl->dims[1].symbol == "T" &&
         decl->dims[1].scale == 1 && decl->dims[1].offset == 0;
}

SmallVector<Value>
StepDistribution::distributeState(const TransitionForm &form) {
  auto stateful = cast<StatefulOpInterface>(op);
  Value init = stateful.getInit();
  Value last = stateful.getLast();
  SmallVector<Value> local;
  for (Value operand : op->getOperands())
    local.push_back(hasSteps(declOf(operand)) && !this->local
                        ? localSteps(operand)
                        : operand);

  // The rank's own state and its transition.
  Substitutions steps = localSubstitutions();
  Value own = cast<StatefulOpInterface>(rerun(local, Value(), steps)).getLast();
  Value m = transition(form, local);
  const TensorDecl *lastDecl = declOf(last);
  auto lastType = cast<RankedTensorType>(last.getType());

  // Everyone's, the incoming state, the rank's steps from it, and the
  // final state.
  Value everyM = allGather(m);
  Value everyS = allGather(own);
  Value first = init ? kb.castTensor(init, lastType, dims.of(lastDecl->name))
                     : kb.zeros(lastType, dims.of(lastDecl->name));
  Value position = reverse ? kb.sub(kb.idx(ranks - 1), rank) : rank;
  Value incoming = foldRanks(form, everyM, everyS, first, kb.idx(0), position);
  Operation *mine = rerun(local, incoming, steps);
  Value final =
      foldRanks(form, everyM, everyS, incoming, position, kb.idx(ranks));

  SmallVector<Value> results;
  for (auto [declared, computed] :
       llvm::zip(op->getResults(), mine->getResults())) {
    if (declared == last)
      results.push_back(
          final.getType() == lastType
              ? final
              : tensor::CastOp::create(b, lastType, final).getResult());
    else if (this->local)
      results.push_back(
          computed.getType() == declared.getType()
              ? Value(computed)
              : tensor::CastOp::create(b, declared.getType(), computed)
                    .getResult());
    else
      results.push_back(wholeSteps(computed, declared));
  }
  return results;
}

SmallVector<Value> StepDistribution::distributeConv() {
  auto conv = cast<CausalConv1dOp>(op);
  // The W - 1 inputs before the slice (fewer at the start) are read again,
  // and their outputs dropped: from the slice's start on, the outputs see
  // only inputs.
  Value halo = kb.mins(start, kb.sub(dims["W"], kb.idx(1)));
  Value from = kb.sub(start, halo);
  SmallVector<Value> operands(op->getOperands());
  operands[conv.getXMutable().getOperandNumber()] =
      sliceSteps(conv.getX(), from, kb.add(halo, length), {});
  Substitutions subs;
  subs["T"] = ShapedType::kDynamic;
  Operation *mine = rerun(operands, conv.getInit(), subs);
  Value y = sliceSteps(mine->getResult(0), halo, length, staticLength);

  return {wholeSteps(y, conv.getY()), convLast(conv)};
}

Value StepDistribution::convLast(CausalConv1dOp conv) {
  // `last` holds the sequence's final W - 1 inputs (with init's where T is
  // shorter), which every rank has: each reruns the conv over the last
  // min(T, W - 1) steps from the op's init, instead of taking the last
  // rank's through a collective.
  Value tail = kb.mins(dims["T"], kb.sub(dims["W"], kb.idx(1)));
  Value last =
      convStateAfter(sliceSteps(conv.getX(), kb.sub(dims["T"], tail), tail, {}),
                     conv.getInit());
  Type lastType = conv.getLast().getType();
  if (last.getType() != lastType)
    last = tensor::CastOp::create(b, lastType, last);
  return last;
}

/// Causal queries are aligned to the end of the keys: the queries before
/// `end` (of T) see the first end + S - T keys.
void StepDistribution::keepVisibleKeys(Value &k, Value &v, Value end,
                                       Value keys, Value queries) {
  Value seen = kb.sub(kb.add(end, keys), queries);
  seen = arith::MaxSIOp::create(b, kb.idx(0), seen);
  k = sliceSteps(k, kb.idx(0), seen, {});
  v = sliceSteps(v, kb.idx(0), seen, {});
}

SmallVector<Value> StepDistribution::distributeAttention() {
  auto attention = cast<AttentionOp>(op);
  Value q = localSteps(attention.getQ());
  Value k = attention.getK(), v = attention.getV();
  if (attention.getCausal())
    keepVisibleKeys(k, v, kb.add(start, length), dims["S"], dims["T"]);
  Operation *clone = b.clone(*op);
  auto mine = cast<AttentionOp>(clone);
  mine.getQMutable().assign(q);
  mine.getKMutable().assign(k);
  mine.getVMutable().assign(v);
  auto type = cast<RankedTensorType>(attention.getO().getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] = staticLength ? *staticLength : ShapedType::kDynamic;
  clone->getResult(0).setType(
      RankedTensorType::get(shape, type.getElementType()));
  return {wholeSteps(clone->getResult(0), attention.getO())};
}

//===----------------------------------------------------------------------===//
// Rank-local steps: the conv and attention
//===----------------------------------------------------------------------===//

Value StepDistribution::convStateAfter(Value x, Value state) {
  SmallVector<Value> operands(op->getOperands());
  operands[cast<CausalConv1dOp>(op).getXMutable().getOperandNumber()] = x;
  Substitutions subs;
  subs["T"] = ShapedType::kDynamic;
  return rerun(operands, state, subs)->getResult(1);
}

/// The conv's state entering a rank is the last W - 1 inputs before it,
/// which may span several ranks where theirs are short: every rank
/// contributes its last min(T, W - 1) inputs and their number, and each
/// carries the state over the ranks before it by running the conv on those
/// tails (its state is what it keeps of its inputs, so this is exact).
SmallVector<Value> StepDistribution::distributeLocalConv() {
  auto conv = cast<CausalConv1dOp>(op);
  Value window = kb.sub(dims["W"], kb.idx(1));
  RankTails tails = gatherTails(b, kb, conv.getX(), /*axis=*/1, window, ranks);
  auto carry = [&](Value state, Value tail) {
    return convStateAfter(tail, state);
  };

  auto lastType = cast<RankedTensorType>(conv.getLast().getType());
  SmallVector<Value> lastSizes = dims.of(declOf(conv.getLast())->name);
  Value first = conv.getInit() ? conv.getInit() : kb.zeros(lastType, lastSizes);
  if (first.getType() != lastType)
    first = tensor::CastOp::create(b, lastType, first);
  Value incoming = foldTails(b, kb, tails, first, kb.idx(0), rank, carry);
  SmallVector<Value> operands(op->getOperands());
  Operation *mine = rerun(operands, incoming, Substitutions());
  Value own = mine->getResult(1);
  if (own.getType() != lastType)
    own = tensor::CastOp::create(b, lastType, own);
  Value last = foldTails(b, kb, tails, own, kb.add(rank, kb.idx(1)),
                         kb.idx(ranks), carry);
  Value y = mine->getResult(0);
  if (y.getType() != conv.getY().getType())
    y = tensor::CastOp::create(b, conv.getY().getType(), y);
  return {y, last};
}

/// The rank's queries against the keys they see of every rank's: the keys
/// and values are all-gathered (each rank holds its own steps of them too),
/// unless they follow a KV cache, which holds them whole.
SmallVector<Value> StepDistribution::distributeLocalAttention(bool keysWhole) {
  auto attention = cast<AttentionOp>(op);
  Value keyCounts = keysWhole ? Value() : gatherCounts(b, kb, dims["S"], ranks);
  auto whole = [&](Value local) {
    if (keysWhole)
      return local;
    return gatherCountedSlices(b, kb, local, /*axis=*/1, keyCounts, ranks);
  };
  Value k = whole(attention.getK()), v = whole(attention.getV());
  if (attention.getCausal()) {
    // Where the rank's queries lie in the whole takes their counts.
    Value queryCounts = gatherCounts(b, kb, dims["T"], ranks);
    Value start = sumOfCounts(b, kb, queryCounts, kb.idx(0), rank);
    Value totalQueries =
        sumOfCounts(b, kb, queryCounts, kb.idx(0), kb.idx(ranks));
    keepVisibleKeys(k, v, kb.add(start, length), kb.dim(k, 1), totalQueries);
  }
  Operation *clone = b.clone(*op);
  auto mine = cast<AttentionOp>(clone);
  mine.getKMutable().assign(k);
  mine.getVMutable().assign(v);
  return {clone->getResult(0)};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// Why `op` runs whole on every rank, or "" when it splits.
std::string whyWhole(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    if (!attention.getCausal() && attention.getWindow() > 0)
      return "a window without causal aligns every query to the keys' end";
    return "";
  }
  if (isa<CausalConv1dOp>(op))
    return "";
  std::string why;
  if (succeeded(transitionFormOf(op, why)))
    return "";
  return why;
}

struct SeqDistributeSteps
    : seqc::impl::SeqDistributeStepsBase<SeqDistributeSteps> {
  using Base::Base;

  /// Attention's keys and values that follow a KV cache: whole.
  llvm::DenseSet<Value> wholeKeys;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    wholeKeys.clear();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      // Every op with a time axis can take segments.
      if (isa<PackedSequencesOpInterface>(op))
        ops.push_back(op);
    });
    // Rank-local steps take every argument with steps as it is: a split
    // before them (the experts', which slices whole tokens) would not be.
    if (local && ranks > 1 && module.lookupSymbol(kRankGridName)) {
      module.emitError() << "rank-local steps go with sequence parallelism "
                            "only: another split of this module ran before";
      return signalPassFailure();
    }
    // Under rank-local steps every function is analysed, those without a
    // seq op too: their arguments are a rank's own steps only where an op
    // with a time axis says so.
    FailureOr<bool> split = prepareRankGrid(
        module, getArgument(), ranks.getValue(), !ops.empty() || local);
    if (failed(split))
      return signalPassFailure();
    if (!*split)
      return;
    // Rank-local steps run before the expansion: the analysis rejects
    // packed batches and checkpoints by name.
    if (!local && failed(rejectUnexpandedSequences(module, getArgument())))
      return signalPassFailure();
    if (local) {
      if (failed(markLocalSteps(module)))
        return signalPassFailure();
      // Functions without a rank-local form are gone with their ops.
      ops.clear();
      module.walk([&](PackedSequencesOpInterface op) { ops.push_back(op); });
      // A MoE layer's tokens are the rank's own too.
      SmallVector<RouteOp> routers;
      SmallVector<MoeFfnOp> experts;
      module.walk([&](RouteOp op) { routers.push_back(op); });
      module.walk([&](MoeFfnOp op) { experts.push_back(op); });
      for (RouteOp op : routers)
        distributeLocalRoute(op, ranks);
      // Unless seq-distribute-experts splits them next.
      for (MoeFfnOp op : experts) {
        if (leaveExperts)
          op->setAttr(kLocalTokensAttrName, UnitAttr::get(op->getContext()));
        else
          distributeLocalExperts(op, ranks);
      }
    }
    bool failedAny = false;
    for (Operation *op : ops)
      failedAny |= failed(distribute(op));
    if (failedAny)
      signalPassFailure();
  }

  /// Rank-local steps are right only where the graph treats steps
  /// independently (StepAxes); each function's arguments and results with
  /// steps are marked `seq.steps` (their step dimension), the rank's own.
  /// Without `strict`, a public function that has no rank-local form is
  /// left out of the module with a remark, its reason recorded in the
  /// module's `seq.not_rank_local` (name -> why: calling it is an error
  /// that says so), so that one function of a model's module (a packed
  /// batch's, say) does not keep the others from running rank-local.
  LogicalResult markLocalSteps(ModuleOp module) {
    MLIRContext *ctx = module.getContext();
    SmallVector<NamedAttribute> leftOut;
    for (auto func :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      std::string why;
      FailureOr<StepAxes> axes = failure();
      {
        std::optional<ScopedDiagnosticHandler> catcher;
        if (!strict && func.isPublic())
          catcher.emplace(ctx, [&](Diagnostic &diag) {
            if (diag.getSeverity() != DiagnosticSeverity::Error)
              return failure();
            if (why.empty())
              why = describeDiagnostic(diag);
            return success();
          });
        axes = analyzeLocalSteps(func);
      }
      if (succeeded(axes)) {
        markSteps(func, *axes);
        for (tensor::ConcatOp shift : axes->shifts())
          distributeShift(shift);
        distributeCacheAppends(*axes);
        continue;
      }
      if (why.empty())
        return failure();
      // A call left to it would name nothing.
      if (!SymbolTable::symbolKnownUseEmpty(func, module)) {
        func.emitError() << "rank-local steps: @" << func.getSymName()
                         << " is called but has no rank-local form: " << why;
        return failure();
      }
      func.emitRemark() << "@" << func.getSymName()
                        << " has no rank-local form and is left out (calling "
                        << "it is an error): " << why;
      leftOut.emplace_back(func.getSymNameAttr(), StringAttr::get(ctx, why));
      func.erase();
    }
    if (!leftOut.empty())
      module->setAttr(kNotRankLocalAttrName, DictionaryAttr::get(ctx, leftOut));
    return success();
  }

  /// `diag` as "file:line:col: message" (the first file position of its
  /// location, which inlining makes a call-site chain).
  static std::string describeDiagnostic(Diagnostic &diag) {
    std::string text;
    llvm::raw_string_ostream os(text);
    diag.getLocation()->walk([&](Location loc) {
      auto file = dyn_cast<FileLineColLoc>(loc);
      if (!file)
        return WalkResult::advance();
      os << file.getFilename().getValue() << ":" << file.getLine() << ":"
         << file.getColumn() << ": ";
      return WalkResult::interrupt();
    });
    os << diag.str();
    return text;
  }

  /// The step axes of `func`'s tensors, or failure (with an error) where an
  /// op does not split over ranks, the glue mixes steps, or no argument
  /// holds steps.
  static FailureOr<StepAxes> analyzeLocalSteps(func::FuncOp func) {
    WalkResult whole = func.walk([&](Operation *op) {
      if (!isa<PackedSequencesOpInterface>(op))
        return WalkResult::advance();
      std::string why = whyWhole(op);
      if (why.empty())
        return WalkResult::advance();
      op->emitError() << "rank-local steps: " << op->getName()
                      << " does not split over ranks: " << why;
      return WalkResult::interrupt();
    });
    if (whole.wasInterrupted())
      return failure();
    FailureOr<StepAxes> axes = StepAxes::analyze(func);
    if (failed(axes))
      return failure();
    // Without one, a rank's own tokens would pass for the whole: a MoE
    // layer alone would apply its capacity to each rank's tokens.
    if (func.isPublic() && llvm::none_of(func.getArguments(), [&](Value arg) {
          return axes->of(arg).has_value();
        })) {
      func.emitError() << "rank-local steps: no argument of @"
                       << func.getSymName()
                       << " holds steps (none reaches the time axis of a "
                          "seq op that splits over ranks), so a rank's own "
                          "steps cannot be told from the whole";
      return failure();
    }
    return axes;
  }

  static void markSteps(func::FuncOp func, const StepAxes &axes) {
    Builder attrs(func.getContext());
    for (BlockArgument arg : func.getArguments())
      if (std::optional<StepAxis> a = axes.of(arg))
        func.setArgAttr(arg.getArgNumber(), kStepsAttrName,
                        attrs.getI64IntegerAttr(a->axis));
    markStepGroups(func, axes);
    func.walk([&](func::ReturnOp ret) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        if (std::optional<StepAxis> a = axes.of(v))
          func.setResultAttr(i, kStepsAttrName,
                             attrs.getI64IntegerAttr(a->axis));
    });
  }

  /// Marks the arguments that must count the same steps on each rank with
  /// the number of the first of them (seq-check-rank-agreement compares
  /// them), where there are two or more.
  static void markStepGroups(func::FuncOp func, const StepAxes &axes) {
    llvm::DenseMap<Value, SmallVector<unsigned>> members;
    for (BlockArgument arg : func.getArguments())
      if (Value stepClass = axes.stepClass(arg))
        members[stepClass].push_back(arg.getArgNumber());
    Builder attrs(func.getContext());
    for (auto &[stepClass, args] : members) {
      if (args.size() < 2)
        continue;
      for (unsigned arg : args) // in argument order: args[0] is the first
        func.setArgAttr(arg, kStepGroupAttrName,
                        attrs.getI64IntegerAttr(args.front()));
    }
  }

  /// A token shift under rank-local steps: the state entering a rank is
  /// the last k steps before it, which may span several ranks where theirs
  /// are short, and the state after is the last k steps of all. Every rank
  /// gathers every rank's last min(T, k) steps (the conv's halo) and carries
  /// the function's state over them: the ranks before it for its own shift,
  /// all of them for the state after, which its slices [T, T + s) take.
  void distributeShift(tensor::ConcatOp shift) {
    IRRewriter rewriter(shift->getContext());
    rewriter.setInsertionPoint(shift);
    ImplicitLocOpBuilder b(shift.getLoc(), rewriter);
    KernelBuilder kb(b);
    int64_t dim = shift.getDim();
    Value state = shift.getInputs()[0], x = shift.getInputs()[1];
    int64_t k = *staticLengthAlong(state, dim);
    RankTails tails = gatherTails(b, kb, x, dim, kb.idx(k), ranks);
    auto carry = [&](Value before, Value tail) {
      Value joined = tensor::ConcatOp::create(b, dim, ValueRange{before, tail});
      return sliceAlong(b, joined, dim, kb.dim(tail, dim), b.getIndexAttr(k));
    };
    Value rank =
        shard::ProcessLinearIndexOp::create(b, b.getIndexType(), kRankGridName);
    Value incoming = foldTails(b, kb, tails, state, kb.idx(0), rank, carry);
    Value after = foldTails(b, kb, tails, incoming, rank, kb.idx(ranks), carry);
    auto local = tensor::ConcatOp::create(b, shift.getType(), dim,
                                          ValueRange{incoming, x});
    for (OpOperand &use : llvm::make_early_inc_range(shift->getUses())) {
      // The shifted steps, and the size that the run-time checks bound the
      // slices by (this rank's steps and the state's: the slices' too).
      auto slice = dyn_cast<tensor::ExtractSliceOp>(use.getOwner());
      if (!slice || isConstantIntValue(slice.getMixedOffsets()[dim], 0)) {
        use.set(local);
        continue;
      }
      // [T, T + s) of the whole concatenation is [0, s) of the state after.
      SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
      offsets[dim] = rewriter.getIndexAttr(0);
      rewriter.setInsertionPoint(slice);
      rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
          slice, slice.getType(), after, offsets, slice.getMixedSizes(),
          slice.getMixedStrides());
    }
    rewriter.eraseOp(shift);
  }

  /// The KV caches attention reads under rank-local steps: each rank
  /// gathers every rank's new steps after the cache, so the keys and values
  /// are whole, the same on every rank (the attention reads them as they
  /// are; a returned cache is a whole result).
  void distributeCacheAppends(const StepAxes &axes) {
    for (tensor::ConcatOp append : axes.cacheAppends()) {
      wholeKeys.insert(append.getResult());
      if (axes.of(append.getInputs()[1]))
        gatherCacheSteps(append);
    }
  }

  /// concat(cache, x) with every rank's steps of x in place of its own.
  void gatherCacheSteps(tensor::ConcatOp append) {
    OpBuilder builder(append);
    ImplicitLocOpBuilder b(append.getLoc(), builder);
    KernelBuilder kb(b);
    Value x = append.getInputs()[1];
    Value counts = gatherCounts(b, kb, kb.dim(x, 1), ranks);
    Value all = gatherCountedSlices(b, kb, x, /*axis=*/1, counts, ranks);
    append->setOperand(1, all);
  }

  LogicalResult distribute(Operation *op) {
    if (std::string why = whyWhole(op); !why.empty()) {
      InFlightDiagnostic diag = strict ? op->emitError() : op->emitRemark();
      diag << op->getName() << " runs whole on every rank under sequence "
           << "parallelism: " << why;
      return strict ? failure() : success();
    }
    IRRewriter rewriter(op->getContext());
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    StepDistribution split(op, b, kb, dims, ranks, local);
    SmallVector<Value> results;
    std::string unused;
    if (isa<CausalConv1dOp>(op))
      results = local ? split.distributeLocalConv() : split.distributeConv();
    else if (auto attention = dyn_cast<AttentionOp>(op))
      results = local ? split.distributeLocalAttention(
                            wholeKeys.contains(attention.getK()))
                      : split.distributeAttention();
    else
      results = split.distributeState(*transitionFormOf(op, unused));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

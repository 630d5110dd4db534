//===- DeltaRecurrence.cpp - the delta rules' recurrence, described once --===//

#include "Transforms/DeltaRecurrence.h"

#include "Common/Kernels.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;

namespace {
/// Positions of the fixed kernel arguments (DeltaRecurrence::buffers).
enum FixedArg { Query, Key, ValueArg, Out, Last, NumFixed };

/// a * b + c on scalars (contracted where the target allows) or vectors.
Value mulAdd(KernelBuilder &k, Value a, Value b, Value c) {
  if (isa<VectorType>(c.getType()))
    return k.vfma(a, b, c);
  return k.fadd(k.fmul(a, b), c);
}

DeltaRecurrence::Decay decayOf(Value decay) {
  if (!decay)
    return DeltaRecurrence::Decay::None;
  switch (cast<RankedTensorType>(decay.getType()).getRank()) {
  case 1:
    return DeltaRecurrence::Decay::PerHead;
  case 3:
    return DeltaRecurrence::Decay::PerStep;
  default:
    return DeltaRecurrence::Decay::PerKey;
  }
}
} // namespace

std::optional<DeltaRecurrence>
DeltaRecurrence::describe(Operation *op, ImplicitLocOpBuilder &b,
                          const DimSizes &dims) {
  DeltaRecurrence form;
  Value q, key, v, out, last, decay, init;
  SmallVector<std::pair<int *, Value>> family;
  if (auto delta = dyn_cast<seq::DeltaRuleOp>(op)) {
    form.name = "delta_rule";
    q = delta.getQ(), key = delta.getK(), v = delta.getV();
    out = delta.getO(), last = delta.getLast();
    decay = delta.getDecay(), init = delta.getInit();
    form.l2norm = delta.getQkL2norm();
    form.scale = delta.getScale().convertToDouble();
    form.eps = delta.getEps().convertToDouble();
    family.push_back({&form.betaIndex, delta.getBeta()});
  } else if (auto dplr = dyn_cast<seq::GeneralizedDeltaRuleOp>(op)) {
    form.name = "generalized_delta_rule";
    form.generalized = true;
    q = dplr.getQ(), key = dplr.getK(), v = dplr.getV();
    out = dplr.getO(), last = dplr.getLast();
    decay = dplr.getDecay(), init = dplr.getInit();
    form.scale = dplr.getScale().convertToDouble();
    family.push_back({&form.aIndex, dplr.getA()});
    family.push_back({&form.bIndex, dplr.getB()});
  } else {
    return std::nullopt;
  }
  auto qType = cast<RankedTensorType>(q.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  form.queryHeads = qType.getDimSize(2);
  form.valueHeads = vType.getDimSize(2);
  form.keyDim = qType.getDimSize(3);
  form.valueDim = vType.getDimSize(3);
  form.decay = decayOf(decay);
  form.outputUsed = !out.use_empty();
  form.outType = out.getType();
  form.lastType = last.getType();
  form.buffers = {
      readBuffer(b, q), readBuffer(b, key), readBuffer(b, v),
      allocResult(b, cast<RankedTensorType>(form.outType), dims.of("o")),
      allocResult(b, cast<RankedTensorType>(form.lastType), dims.of("last"))};
  family.push_back({&form.decayIndex, decay});
  family.push_back({&form.initIndex, init});
  for (auto [index, value] : family) {
    if (!value)
      continue;
    *index = form.buffers.size();
    form.buffers.push_back(readBuffer(b, value));
  }
  return form;
}

DeltaArgs DeltaRecurrence::args(ValueRange in) const {
  auto at = [&](int index) { return index < 0 ? Value() : in[index]; };
  return DeltaArgs{in[Query],      in[Key],       in[ValueArg], in[Out],
                   in[Last],       at(betaIndex), at(aIndex),   at(bIndex),
                   at(decayIndex), at(initIndex)};
}

SmallVector<Value> DeltaRecurrence::results(ImplicitLocOpBuilder &b) const {
  return {asTensor(b, buffers[Out], cast<RankedTensorType>(outType)),
          asTensor(b, buffers[Last], cast<RankedTensorType>(lastType))};
}

Value DeltaRecurrence::queryHeadOf(KernelBuilder &k, const DeltaArgs &a,
                                   Value j) const {
  Value perHead = k.divs(k.mdim(a.value, 2), k.mdim(a.query, 2));
  return k.divs(j, perHead);
}

/// 1 / sqrt(|x|^2 + eps), as the SPEC writes it (no max with eps).
static Value inverseNorm(KernelBuilder &k, Value sumOfSquares, double eps) {
  return k.fdiv(k.f32(1.0), k.sqrt(k.fadd(sumOfSquares, k.f32(eps))));
}

DeltaStep DeltaRecurrence::keyScalars(
    KernelBuilder &k, const DeltaArgs &a, Value bi, Value t, Value j,
    const std::function<Value(Value)> &sumOfSquares, Value keyFactor) const {
  assert((!keyFactor || l2norm) && "a key factor without qk_l2norm");
  DeltaStep s;
  if (l2norm)
    s.keyFactor =
        keyFactor ? keyFactor : inverseNorm(k, sumOfSquares(a.key), eps);
  if (decay == Decay::PerHead)
    s.alpha = k.exp(k.mload(a.decay, {j}));
  else if (decay == Decay::PerStep)
    s.alpha = k.exp(k.mload(a.decay, {bi, t, j}));
  return s;
}

DeltaStep DeltaRecurrence::updateScalars(
    KernelBuilder &k, const DeltaArgs &a, Value bi, Value t, Value j,
    const std::function<Value(Value)> &sumOfSquares) const {
  DeltaStep s;
  if (outputUsed) {
    s.queryFactor = k.f32(scale);
    if (l2norm)
      s.queryFactor =
          k.fmul(inverseNorm(k, sumOfSquares(a.query), eps), s.queryFactor);
  }
  if (a.beta)
    s.beta = k.mload(a.beta, {bi, t, j});
  return s;
}

DeltaRow DeltaRecurrence::keyRows(KernelBuilder &k, const ChannelRun &run,
                                  const DeltaArgs &a, const DeltaStep &step,
                                  Value bi, Value t, Value j, Value h,
                                  Value r) const {
  DeltaRow row;
  row.key = run.load(a.key, {bi, t, h, r});
  if (step.keyFactor)
    row.key = k.fmul(row.key, run.broadcast(step.keyFactor));
  if (decay == Decay::PerKey)
    row.alpha = k.exp(run.load(a.decay, {bi, t, j, r}));
  else if (step.alpha)
    row.alpha = run.broadcast(step.alpha);
  if (generalized)
    row.a = run.load(a.a, {bi, t, h, r});
  else // S~^T k reads the decayed state: a = alpha o k.
    row.a = row.alpha ? k.fmul(row.alpha, row.key) : row.key;
  return row;
}

DeltaRow DeltaRecurrence::updateRows(KernelBuilder &k, const ChannelRun &run,
                                     const DeltaArgs &a, const DeltaStep &step,
                                     Value bi, Value t, Value h,
                                     Value r) const {
  DeltaRow row;
  if (outputUsed)
    row.query = k.fmul(run.load(a.query, {bi, t, h, r}),
                       run.broadcast(step.queryFactor));
  if (generalized)
    row.b = run.load(a.b, {bi, t, h, r});
  return row;
}

SmallVector<Value>
DeltaRecurrence::emitColumnSums(KernelBuilder &k, ArrayRef<ColumnRun> runs,
                                const std::function<Value(Value)> &a,
                                const std::function<Value(Value)> &broadcast,
                                Value K) const {
  SmallVector<Value> zeros(runs.size(), broadcast(k.f32(0.0)));
  return k.loop(K, zeros, [&](Value r, ValueRange acc) {
    Value ar = broadcast(a(r));
    SmallVector<Value> next;
    for (auto [run, sum] : llvm::zip(runs, acc))
      next.push_back(mulAdd(k, ar, run.loadState(r), sum));
    return next;
  });
}

ColumnStep
DeltaRecurrence::emitColumnStep(KernelBuilder &k, ArrayRef<ColumnRun> runs,
                                ValueRange sums,
                                const std::function<DeltaRow(Value)> &rows,
                                const std::function<Value(Value)> &broadcast,
                                const DeltaStep &step, Value K) const {
  // What every row takes of k_r: beta (v - p) (the delta rule's
  // correction) or v itself.
  SmallVector<Value> write;
  for (auto [run, sum] : llvm::zip(runs, sums))
    write.push_back(generalized
                        ? run.value
                        : k.fmul(broadcast(step.beta), k.fsub(run.value, sum)));
  // The loop carries the outputs' sums (when read), then the next step's.
  SmallVector<Value> init;
  for (int part = outputUsed ? 0 : 1; part < 2; ++part)
    for (const ColumnRun &run : runs)
      init.push_back(k.like(run.value, 0.0));
  size_t n = runs.size();
  SmallVector<Value> acc = k.loop(K, init, [&](Value r, ValueRange acc) {
    DeltaRow coeff = rows(r);
    Value alpha = coeff.alpha ? broadcast(coeff.alpha) : Value();
    Value key = broadcast(coeff.key), nextA = broadcast(coeff.a);
    Value query = outputUsed ? broadcast(coeff.query) : Value();
    Value lowRank = coeff.b ? broadcast(coeff.b) : Value();
    SmallVector<Value> next(acc);
    ValueRange nextSums = acc.take_back(n);
    for (size_t i = 0; i < n; ++i) {
      Value s = runs[i].loadState(r);
      if (alpha)
        s = k.fmul(alpha, s);
      s = mulAdd(k, key, write[i], s);
      if (lowRank)
        s = mulAdd(k, lowRank, sums[i], s);
      runs[i].storeState(r, s);
      if (outputUsed)
        next[i] = mulAdd(k, query, s, acc[i]);
      next[acc.size() - n + i] = mulAdd(k, nextA, s, nextSums[i]);
    }
    return next;
  });
  ColumnStep result;
  result.outputs.assign(acc.begin(), acc.end() - n);
  result.sums.assign(acc.end() - n, acc.end());
  return result;
}

DeltaRow DeltaRecurrence::deferDecay(KernelBuilder &k, const DeltaRow &row,
                                     Value scale, Value fold) const {
  // Both forms' coefficients; the step's choice selects one.
  auto pick = [&](Value folded, Value deferred) {
    return folded ? k.select(fold, folded, deferred) : Value();
  };
  auto over = [&](Value x) { return x ? k.fdiv(x, scale) : Value(); };
  auto times = [&](Value x) { return x ? k.fmul(x, scale) : Value(); };
  DeltaRow out;
  out.alpha = scale; // what a folding step multiplies U's rows by
  out.key = pick(row.key, over(row.key));
  out.b = pick(row.b, over(row.b));
  out.query = pick(row.query, times(row.query));
  out.a = pick(row.a, times(row.a));
  return out;
}

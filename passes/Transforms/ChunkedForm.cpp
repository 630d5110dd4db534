//===- ChunkedForm.cpp - the chunked families, described once -------------===//
//
// Each describe function says what its op is in the chunked form
// (ChunkedForm.h): the roles of its operands and its per-step functions,
// written with KernelBuilder so that every target evaluates them as they
// are, on scalars or on vectors.
//
//===----------------------------------------------------------------------===//

#include "Transforms/ChunkedForm.h"

#include "Common/Kernels.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace seqc;

namespace {
/// Positions of the fixed kernel arguments (ChunkedForm::buffers).
enum FixedArg { Query, Key, ValueArg, Out, Last, NumFixed };

/// Heads per group of `groups` shared q/k heads; kDynamic when either is.
int64_t headsPerGroupOf(int64_t heads, int64_t groups) {
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(groups))
    return ShapedType::kDynamic;
  return heads / groups;
}
} // namespace

std::optional<ChunkedForm> ChunkedForm::describe(Operation *op,
                                                 ImplicitLocOpBuilder &b,
                                                 const DimSizes &dims) {
  std::optional<ChunkedForm> form;
  if (isa<seq::SsdOp>(op))
    form = ssd(op, b, dims);
  else if (isa<seq::LinearAttentionOp>(op))
    form = linearAttention(op, b, dims);
  else if (isa<seq::DeltaRuleOp>(op))
    form = deltaRule(op, b, dims);
  if (form)
    form->outputUsed = !op->getResult(0).use_empty();
  return form;
}

ChunkedArgs ChunkedForm::args(ValueRange in) const {
  ChunkedArgs a{in[Query], in[Key],  in[ValueArg],
                in[Out],   in[Last], initIndex < 0 ? Value() : in[initIndex],
                {}};
  for (int index : familyIndex)
    a.family.push_back(index < 0 ? Value() : in[index]);
  return a;
}

SmallVector<Value> ChunkedForm::results(ImplicitLocOpBuilder &b) const {
  return {asTensor(b, buffers[Out], cast<RankedTensorType>(outType)),
          asTensor(b, buffers[Last], cast<RankedTensorType>(lastType))};
}

void ChunkedForm::setRoles(ImplicitLocOpBuilder &b, const DimSizes &dims,
                           Value query, Value key, Value value, Value out,
                           StringRef outName, Value last, Value init) {
  outType = out.getType();
  lastType = last.getType();
  buffers = {readBuffer(b, query), readBuffer(b, key), readBuffer(b, value),
             allocResult(b, cast<RankedTensorType>(outType), dims.of(outName)),
             allocResult(b, cast<RankedTensorType>(lastType), dims.of("last"))};
  if (init) {
    initIndex = buffers.size();
    buffers.push_back(readBuffer(b, init));
  }
}

void ChunkedForm::addFamilyOperand(unsigned slot, Value buffer) {
  if (familyIndex.size() <= slot)
    familyIndex.resize(slot + 1, -1);
  familyIndex[slot] = buffers.size();
  buffers.push_back(buffer);
}

Value ChunkedForm::groupOf(KernelBuilder &k, const ChunkedArgs &a,
                           Value h) const {
  if (headsPerGroup == 1)
    return h;
  Value perGroup = ShapedType::isDynamic(headsPerGroup)
                       ? k.divs(k.mdim(a.value, 2), k.mdim(a.query, 2))
                       : k.idx(headsPerGroup);
  return k.divs(h, perGroup);
}

SmallVector<Value> ChunkedForm::queryAt(KernelBuilder &k, const ChunkedArgs &a,
                                        Value bi, Value t, Value h,
                                        Value c) const {
  return {bi, t, groupOf(k, a, h), c};
}

SmallVector<Value> ChunkedForm::keyAt(KernelBuilder &k, const ChunkedArgs &a,
                                      Value bi, Value t, Value h,
                                      Value c) const {
  return {bi, t, groupOf(k, a, h), c};
}

SmallVector<Value> ChunkedForm::valueAt(Value bi, Value t, Value h,
                                        Value c) const {
  return {bi, t, h, c};
}

SmallVector<Value> ChunkedForm::stateAt(Value bi, Value h, Value kk,
                                        Value vv) const {
  if (stateValueMajor)
    return {bi, h, vv, kk};
  return {bi, h, kk, vv};
}

Value ChunkedForm::mapQuery(KernelBuilder &k, Value q) const {
  return queryMap ? queryMap(k, q) : q;
}

Value ChunkedForm::mapKey(KernelBuilder &k, Value key) const {
  return keyMap ? keyMap(k, key) : key;
}

StepCoefficients ChunkedForm::step(KernelBuilder &k, const ChunkedArgs &a,
                                   Value bi, Value t, Value h) const {
  return stepFn ? stepFn(k, a, bi, t, h) : StepCoefficients{};
}

Value ChunkedForm::keyLogDecay(KernelBuilder &k, const ChunkedArgs &a, Value bi,
                               Value t, Value h, Value kk) const {
  return keyDecayFn(k, a, bi, t, h, kk);
}

Value ChunkedForm::finish(KernelBuilder &k, const ChannelRun &run,
                          const ChunkedArgs &a, Value bi, Value t, Value h,
                          Value vv, Value y, Value v) const {
  return finishFn ? finishFn(k, run, a, bi, t, h, vv, y, v) : y;
}

//===----------------------------------------------------------------------===//
// seq.ssd: q = C, k = B (both per group), v = x, g = dt A, w = dt, and
// y = (Y + D x) silu(z); the state is S^T, stored as [B, H, P, N].
//===----------------------------------------------------------------------===//

namespace {
enum SsdSlot { SsdDt, SsdA, SsdBias, SsdSkip, SsdGate };
} // namespace

ChunkedForm ChunkedForm::ssd(Operation *op, ImplicitLocOpBuilder &b,
                             const DimSizes &dims) {
  auto ssd = cast<seq::SsdOp>(op);
  auto xType = cast<RankedTensorType>(ssd.getX().getType());
  auto bType = cast<RankedTensorType>(ssd.getB().getType());
  ChunkedForm form;
  form.name = "ssd";
  form.heads = xType.getDimSize(2);
  int64_t groups = bType.getDimSize(2);
  form.headsPerGroup = headsPerGroupOf(form.heads, groups);
  form.keyDim = bType.getDimSize(3);
  form.valueDim = xType.getDimSize(3);
  form.decay = Decay::PerStep;
  form.weighted = true;
  form.stateValueMajor = true;
  form.setRoles(b, dims, ssd.getC(), ssd.getB(), ssd.getX(), ssd.getY(), "y",
                ssd.getLast(), ssd.getInit());
  form.familyIndex.assign(SsdGate + 1, -1);
  form.addFamilyOperand(SsdDt, readBuffer(b, ssd.getDt()));
  form.addFamilyOperand(SsdA, readBuffer(b, ssd.getA()));
  if (Value bias = ssd.getDtBias())
    form.addFamilyOperand(SsdBias, readBuffer(b, bias));
  if (Value skip = ssd.getSkip())
    form.addFamilyOperand(SsdSkip, readBuffer(b, skip));
  if (Value gate = ssd.getGate())
    form.addFamilyOperand(SsdGate, readBuffer(b, gate));

  // The step decays by exp(dt A) and weighs its input by dt.
  SsdStepSize stepSize = SsdStepSize::of(ssd);
  form.stepFn = [stepSize](KernelBuilder &k, const ChunkedArgs &a, Value bi,
                           Value t, Value h) {
    Value bias = a.family[SsdBias];
    Value dt = stepSize.apply(k, k.mload(a.family[SsdDt], {bi, t, h}),
                              bias ? k.mload(bias, {h}) : Value());
    return StepCoefficients{k.fmul(dt, k.mload(a.family[SsdA], {h})), dt};
  };
  // D per head, or per head and channel (H x P).
  bool skipPerChannel =
      ssd.getSkip() &&
      cast<RankedTensorType>(ssd.getSkip().getType()).getRank() == 2;
  if (ssd.getSkip() || ssd.getGate())
    form.finishFn = [skipPerChannel](KernelBuilder &k, const ChannelRun &run,
                                     const ChunkedArgs &a, Value bi, Value t,
                                     Value h, Value p, Value y, Value x) {
      if (Value skip = a.family[SsdSkip])
        y = k.fadd(y, k.fmul(skipPerChannel ? run.load(skip, {h, p})
                                            : run.broadcast(k.mload(skip, {h})),
                             x));
      if (Value gate = a.family[SsdGate])
        y = k.fmul(y, k.silu(run.load(gate, {bi, t, h, p})));
      return y;
    };
  return form;
}

//===----------------------------------------------------------------------===//
// seq.linear_attention: q' = phi(q) scale, k' = phi(k), v; g = the log decay
// (none, per head, per (batch, step, head) or per key channel), w = 1.
//===----------------------------------------------------------------------===//

namespace {
enum LinearAttentionSlot { LaDecay };
} // namespace

ChunkedForm ChunkedForm::linearAttention(Operation *op, ImplicitLocOpBuilder &b,
                                         const DimSizes &dims) {
  auto la = cast<seq::LinearAttentionOp>(op);
  auto qType = cast<RankedTensorType>(la.getQ().getType());
  auto vType = cast<RankedTensorType>(la.getV().getType());
  ChunkedForm form;
  form.name = "linear_attention";
  form.heads = qType.getDimSize(2);
  form.keyDim = qType.getDimSize(3);
  form.valueDim = vType.getDimSize(3);
  form.causal = la.getCausal();
  form.normalize = la.getNormalize();
  form.eps = la.getEps().convertToDouble();
  form.setRoles(b, dims, la.getQ(), la.getK(), la.getV(), la.getO(), "o",
                la.getLast(), la.getInit());
  form.familyIndex.assign(1, -1);
  seq::FeatureMap phi = la.getFeatureMap();
  double scale = la.getScale().convertToDouble();
  form.queryMap = [phi, scale](KernelBuilder &k, Value q) {
    return k.fmul(k.featureMap(phi, q), k.like(q, scale));
  };
  if (phi != seq::FeatureMap::identity)
    form.keyMap = [phi](KernelBuilder &k, Value key) {
      return k.featureMap(phi, key);
    };
  Value decay = la.getDecay();
  if (!decay)
    return form;
  form.addFamilyOperand(LaDecay, readBuffer(b, decay));
  int64_t rank = cast<RankedTensorType>(decay.getType()).getRank();
  if (rank == 4) {
    form.decay = Decay::PerKey;
    form.keyDecayFn = [](KernelBuilder &k, const ChunkedArgs &a, Value bi,
                         Value t, Value h, Value kk) {
      return k.mload(a.family[LaDecay], {bi, t, h, kk});
    };
    return form;
  }
  form.decay = Decay::PerStep;
  form.stepFn = [rank](KernelBuilder &k, const ChunkedArgs &a, Value bi,
                       Value t, Value h) {
    Value g = rank == 1 ? k.mload(a.family[LaDecay], {h})
                        : k.mload(a.family[LaDecay], {bi, t, h});
    return StepCoefficients{g, Value()};
  };
  return form;
}

//===----------------------------------------------------------------------===//
// seq.delta_rule: q' = q/|q| scale and k/|k| (qk_l2norm; per group of value
// heads), v; g = the log decay (none, per head or per (batch, step, head)),
// w = 1, and the write strength beta of the WY transform.
//===----------------------------------------------------------------------===//

namespace {
enum DeltaRuleSlot { DeltaBeta, DeltaDecay };
} // namespace

ChunkedForm ChunkedForm::deltaRule(Operation *op, ImplicitLocOpBuilder &b,
                                   const DimSizes &dims) {
  auto delta = cast<seq::DeltaRuleOp>(op);
  auto qType = cast<RankedTensorType>(delta.getQ().getType());
  auto vType = cast<RankedTensorType>(delta.getV().getType());
  ChunkedForm form;
  form.name = "delta_rule";
  form.heads = vType.getDimSize(2);
  int64_t queryHeads = qType.getDimSize(2);
  form.headsPerGroup = headsPerGroupOf(form.heads, queryHeads);
  form.keyDim = qType.getDimSize(3);
  form.valueDim = vType.getDimSize(3);
  form.deltaTransition = true;
  double scale = delta.getScale().convertToDouble();
  if (delta.getQkL2norm()) {
    form.normalizeRows = true;
    form.rowEps = delta.getEps().convertToDouble();
    form.queryScale = scale;
  } else if (scale != 1.0) {
    form.queryMap = [scale](KernelBuilder &k, Value q) {
      return k.fmul(q, k.like(q, scale));
    };
  }
  form.setRoles(b, dims, delta.getQ(), delta.getK(), delta.getV(), delta.getO(),
                "o", delta.getLast(), delta.getInit());
  form.familyIndex.assign(DeltaDecay + 1, -1);
  form.addFamilyOperand(DeltaBeta, readBuffer(b, delta.getBeta()));
  int64_t rank = 0;
  if (Value decay = delta.getDecay()) {
    form.addFamilyOperand(DeltaDecay, readBuffer(b, decay));
    rank = cast<RankedTensorType>(decay.getType()).getRank();
    // A per-key decay (KDA) has no chunked kernel yet: the strategy plans
    // it recurrent (Transforms/DeltaRecurrence.h).
    form.decay = rank == 4 ? Decay::PerKey : Decay::PerStep;
  }
  form.stepFn = [rank](KernelBuilder &k, const ChunkedArgs &a, Value bi,
                       Value t, Value h) {
    StepCoefficients step;
    step.writeStrength = k.mload(a.family[DeltaBeta], {bi, t, h});
    if (rank == 1)
      step.logDecay = k.mload(a.family[DeltaDecay], {h});
    else if (rank == 3)
      step.logDecay = k.mload(a.family[DeltaDecay], {bi, t, h});
    return step;
  };
  return form;
}

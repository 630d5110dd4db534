//===- CpuLinearAttention.cpp - linear attention on the CPU ---------------===//
//
// Linear attention follows the strategy's plan: chunked plans (causal, a
// scalar decay per step or none, normalized or not) are the chunked form
// (Transforms/ChunkedForm.h, lowered by CPU/CpuChunked.cpp). Per-key decays
// (GLA) and short sequences run the recurrence directly, vectorized over V.
// Non-causal attention is two products: S = S0 + k'^T V, then O = q' S
// (normalized by q' . sum k').
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuChunked.h"
#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

/// The recurrent and global kernels' buffers: queries, keys, values
/// ([B, T, H, K or V]), the outputs and the last state; the optional decay,
/// bonus and init (null when the op lacks them).
struct LinearAttentionBuffers : KernelBuffers<LinearAttentionBuffers> {
  Value queries, keys, values, out, last, decay, bonus, init;

  SmallVector<Value *> fields() {
    return {&queries, &keys, &values, &out, &last, &decay, &bonus, &init};
  }
};

struct CpuLinearAttention : OpRewritePattern<seq::LinearAttentionOp> {
  CpuLinearAttention(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::LinearAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto qType = cast<RankedTensorType>(op.getQ().getType());
    auto vType = cast<RankedTensorType>(op.getV().getType());
    int64_t H = qType.getDimSize(2), K = qType.getDimSize(3);
    int64_t V = vType.getDimSize(3);
    if (ShapedType::isDynamic(H) || ShapedType::isDynamic(K) ||
        ShapedType::isDynamic(V))
      return rewriter.notifyMatchFailure(op, "needs static H, K and V");
    int64_t decayRank =
        op.getDecay()
            ? cast<RankedTensorType>(op.getDecay().getType()).getRank()
            : 0;
    // Chunked, recurrent or global, and the chunk size: the strategy's plan.
    TargetDescription machine = target.describe();
    FailureOr<seq::PlanAttr> followed = followPlan(op, machine, rewriter);
    if (failed(followed))
      return failure();
    seq::PlanAttr chosen = *followed;
    seq::PlanKind plan = chosen.getKind();

    // The chunked phases' preconditions (emitCpuChunked), which the plans
    // of TargetDescription::cpu keep: causal, no per-key decay.
    if (plan == seq::PlanKind::chunked && (decayRank == 4 || !op.getCausal()))
      return rewriter.notifyMatchFailure(
          op, "the CPU's chunked phases take a causal op with a scalar decay");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"];
    if (plan == seq::PlanKind::chunked) {
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      emitCpuChunked(b, kb, target, form, Bsz, chosen.getChunk());
      rewriter.replaceOp(op, form.results(b));
      return success();
    }
    auto oType = cast<RankedTensorType>(op.getO().getType());
    auto sType = cast<RankedTensorType>(op.getLast().getType());
    Value oBuf = allocResult(b, oType, dims.of("o"));
    Value sBuf = allocResult(b, sType, dims.of("last"));
    LinearAttentionBuffers io;
    io.queries = readBuffer(b, op.getQ());
    io.keys = readBuffer(b, op.getK());
    io.values = readBuffer(b, op.getV());
    io.out = oBuf;
    io.last = sBuf;
    io.decay = readOptionalBuffer(b, op.getDecay());
    io.bonus = readOptionalBuffer(b, op.getBonus());
    io.init = readOptionalBuffer(b, op.getInit());
    Params p{H,
             K,
             V,
             decayRank,
             static_cast<bool>(op.getBonus()),
             op.getFeatureMap(),
             op.getScale().convertToDouble(),
             op.getEps().convertToDouble(),
             op.getNormalize(),
             !op.getO().use_empty()};
    if (plan == seq::PlanKind::recurrent && takesDeferredDecay(p))
      emitDeferredDecayRecurrence(b, kb, io, Bsz, p);
    else if (plan == seq::PlanKind::recurrent)
      emitRecurrent(b, kb, io, Bsz, p);
    else
      emitGlobal(b, kb, io, Bsz, p);
    rewriter.replaceOp(op,
                       {asTensor(b, oBuf, oType), asTensor(b, sBuf, sType)});
    return success();
  }

  struct Params {
    int64_t H, K, V, decayRank;
    bool bonus;
    seq::FeatureMap phi;
    double scale, eps;
    bool normalize;
    /// Whether anything reads o (the state-only runs of
    /// seq-distribute-steps read only the state).
    bool outputUsed = true;
  };

  /// The log decay of step t, head h (0 without decay).
  static Value logDecay(KernelBuilder &k, const LinearAttentionBuffers &io,
                        const Params &p, Value bi, Value t, Value h) {
    if (p.decayRank == 1)
      return k.mload(io.decay, {h});
    if (p.decayRank == 3)
      return k.mload(io.decay, {bi, t, h});
    return k.f32(0.0);
  }

  /// S from init (or zeros) into the K x V buffer `S`.
  void loadState(KernelBuilder &k, const LinearAttentionBuffers &io,
                 const Params &p, Value bi, Value h, Value S) const {
    if (io.init) {
      seqc::packRows(k, target,
                     MatrixRef{io.init,
                               [&](Value kk, Value v) {
                                 return SmallVector<Value>{bi, h, kk, v};
                               }},
                     k.idx(p.K), p.V, S);
      return;
    }
    seqc::packRows(
        k, target, rowMajor(S), k.idx(p.K), p.V, S,
        [&](Value v, Value) { return k.vconst(0.0, target.vectorWidth); });
  }

  /// `last` = S (times `scale` when given).
  void storeState(KernelBuilder &k, const LinearAttentionBuffers &io,
                  const Params &p, Value bi, Value h, Value S,
                  Value scale = {}) const {
    const int64_t lanes = target.vectorWidth;
    std::function<Value(Value, Value)> scaled;
    if (scale)
      scaled = [&](Value v, Value) { return k.fmul(v, k.splat(scale, lanes)); };
    seqc::packRows(k, target, rowMajor(S), k.idx(p.K), p.V,
                   MatrixRef{io.last,
                             [&](Value kk, Value v) {
                               return SmallVector<Value>{bi, h, kk, v};
                             }},
                   scaled);
  }

  /// Prefetches the rows of a later step for the recurrences
  /// (recurrencePrefetchStep): without this every step waited for DRAM,
  /// and a step's work is too long for the core to reach the next step's
  /// loads under it (T4096 H16 K=V=64 on a Zen 5: 8.2 ms, over half of it
  /// in the loads, 5.4 ms with it).
  void prefetchStep(KernelBuilder &k, const LinearAttentionBuffers &io,
                    const Params &p, Value bi, Value h, Value t,
                    Value nT) const {
    Value ahead = recurrencePrefetchStep(k, t, nT);
    k.prefetchRow(io.keys, {bi, ahead, h, k.idx(0)}, p.K);
    k.prefetchRow(io.values, {bi, ahead, h, k.idx(0)}, p.V);
    if (p.decayRank == 4)
      k.prefetchRow(io.decay, {bi, ahead, h, k.idx(0)}, p.K);
    if (!p.outputUsed)
      return;
    k.prefetchRow(io.queries, {bi, ahead, h, k.idx(0)}, p.K);
    // The output's lines too: a store that misses waits like a load.
    k.prefetchRow(io.out, {bi, ahead, h, k.idx(0)}, p.V, /*forWrite=*/true);
  }

  /// Copies phi(x[bi, t0 + i, h, :]) * factor(i) for i < rows into `dst`
  /// [rows x K] (vectorized over K).
  void packRows(KernelBuilder &k, const Params &p, Value src, Value bi,
                Value t0, Value h, Value rows, Value dst,
                const std::function<Value(Value)> &factor) const {
    const int64_t lanes = target.vectorWidth;
    seqc::packRows(
        k, target,
        MatrixRef{src,
                  [&](Value i, Value c) {
                    return SmallVector<Value>{bi, k.add(t0, i), h, c};
                  }},
        rows, p.K, dst, [&](Value v, Value i) {
          v = k.featureMap(p.phi, v);
          return factor ? k.fmul(v, k.splat(factor(i), lanes)) : v;
        });
  }

  /// The recurrence, vectorized over V: per step every key row of S decays
  /// (per key for GLA) and takes k'_t v_t; o_t = q'_t S (/ q'_t . z + eps).
  /// With RWKV-6's bonus u, o_t = q'_t S_{t-1} + (q'_t . (u o k'_t)) v_t:
  /// rows are read before their update, and the current term is one more
  /// running sum (in the normalizer's place: the two never combine).
  void emitRecurrent(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     const LinearAttentionBuffers &io, Value Bsz,
                     const Params &p) const {
    emitParallelKernel(b, "linear_attention_recurrent",
                       kb.mul(Bsz, kb.idx(p.H)), io.list(),
                       [&](KernelBuilder &k, Value task, ValueRange in) {
                         RecurrentTask(*this, k, p, io.rebind(in), task).emit();
                       });
  }

  /// One (batch, head) of emitRecurrent. Each step first computes what is
  /// indexed by key, vectorized over K into rows (the decays' exps, phi(k'),
  /// phi(q') scale, and the normalizer z with q' . z, or the bonus's
  /// q' . (u o k')); then S's columns go in blocks that fit the register
  /// file (columnBlocks), each a pass over S's rows.
  class RecurrentTask {
  public:
    RecurrentTask(const CpuLinearAttention &pattern, KernelBuilder &k,
                  const Params &p, const LinearAttentionBuffers &io, Value task)
        : pattern(pattern), k(k), p(p), io(io),
          lanes(pattern.target.vectorWidth) {
      h = k.rems(task, k.idx(p.H));
      bi = k.divs(task, k.idx(p.H));
      S = k.stackBuffer({p.K, p.V});
      // Buffers only for what this op reads (keyIndexedSum: z).
      int64_t paddedK = roundUp(p.K, lanes);
      keyRow = k.stackBuffer({1, paddedK});
      if (p.outputUsed)
        queryRow = k.stackBuffer({1, paddedK});
      if (perKeyDecay())
        decayRow = k.stackBuffer({1, paddedK});
      if (p.normalize && !io.bonus && p.outputUsed)
        z = k.stackBuffer({paddedK});
      keyMasks = rowMasks(k, p.K, lanes);
      valueMasks = rowMasks(k, p.V, lanes);
      // Per column vector a value and (when o is read) an output sum;
      // besides them the row's decay, k' and (when o is read) q'
      // broadcasts and S's old and new vectors.
      blocks = columnBlocks(pattern.target, valueMasks.size(),
                            p.outputUsed ? 2 : 1, p.outputUsed ? 5 : 4);
    }

    void emit() {
      Value nT = k.mdim(io.queries, 1);
      pattern.loadState(k, io, p, bi, h, S);
      if (z)
        for (int64_t c0 = 0; c0 < roundUp(p.K, lanes); c0 += lanes)
          k.vstore(k.vconst(0.0, lanes), z, {k.idx(c0)});
      k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
        pattern.prefetchStep(k, io, p, bi, h, t, nT);
        step(t);
      });
      pattern.storeState(k, io, p, bi, h, S);
    }

  private:
    bool perKeyDecay() const { return p.decayRank == 4; }

    /// Step t: its key rows, the sums over keys, then S's column blocks.
    void step(Value t) {
      packKeyRows(t);
      Value decay = scalarDecay(t);
      Value keySum = keyIndexedSum(decay);
      // The output's scale (normalized) or current term (bonus), the same
      // for every column.
      Value inv, current;
      if (p.normalize && keySum)
        inv = k.splat(k.fdiv(k.f32(1.0), k.fadd(keySum, k.f32(p.eps))), lanes);
      if (io.bonus && keySum)
        current = k.splat(keySum, lanes);
      for (size_t i = 0; i + 1 < blocks.size(); ++i)
        stepColumns(t, blocks[i], blocks[i + 1], decay, inv, current);
    }

    /// Step t's decay factor, or null for per-key decays (packKeyRows).
    Value scalarDecay(Value t) {
      return perKeyDecay() ? Value() : k.exp(logDecay(k, io, p, bi, t, h));
    }

    /// Step t's key rows: phi(k'), phi(q') scale (when o is read) and
    /// per-key decays.
    void packKeyRows(Value t) {
      pattern.packRows(k, p, io.keys, bi, t, h, k.idx(1), keyRow, nullptr);
      Value scale = k.f32(p.scale);
      if (p.outputUsed)
        pattern.packRows(k, p, io.queries, bi, t, h, k.idx(1), queryRow,
                         [&](Value) { return scale; });
      if (!perKeyDecay())
        return;
      seqc::packRows(k, pattern.target,
                     MatrixRef{io.decay,
                               [&](Value, Value c) {
                                 return SmallVector<Value>{bi, t, h, c};
                               }},
                     k.idx(1), p.K, decayRow,
                     [&](Value v, Value) { return k.exp(v); });
    }

    /// q' . (u o k') with the bonus; normalized, z = decay z + k' and
    /// q' . z; else, or when o is not read, nothing (null). `scalarDecay`
    /// is null for per-key decays (decayRow).
    Value keyIndexedSum(Value scalarDecay) {
      // z lives in a stack buffer the next step reads: LLVM would keep its
      // update even where nothing reads the sum.
      if (!p.outputUsed || (!io.bonus && !z))
        return {};
      Value sum = k.vconst(0.0, lanes);
      for (size_t c = 0; c < keyMasks.size(); ++c) {
        Value mask = keyMasks[c];
        SmallVector<Value> at{k.idx(0), k.idx(c * lanes)};
        Value kp = k.vloadMasked(keyRow, at, lanes, mask);
        Value qp = k.vloadMasked(queryRow, at, lanes, mask);
        if (io.bonus) {
          Value u = k.vloadMasked(io.bonus, {h, k.idx(c * lanes)}, lanes, mask);
          sum = k.vfma(qp, k.fmul(u, kp), sum);
          continue;
        }
        Value f = scalarDecay ? k.splat(scalarDecay, lanes)
                              : k.vloadMasked(decayRow, at, lanes, mask);
        SmallVector<Value> zAt{k.idx(c * lanes)};
        Value zk = k.vfma(f, k.vloadMasked(z, zAt, lanes, mask), kp);
        k.vstoreMasked(zk, z, zAt, mask);
        sum = k.vfma(qp, zk, sum);
      }
      return k.hsum(sum);
    }

    /// Step t on S's column vectors [first, last): every row decays and
    /// takes k' v^T, and the output sums q'-weighted rows (S's new row, or
    /// the old one with the bonus). `scalarDecay` is null for per-key
    /// decays (decayRow).
    void stepColumns(Value t, size_t first, size_t last, Value scalarDecay,
                     Value inv, Value current) {
      SmallVector<Value> values, init;
      for (size_t v = first; v < last; ++v) {
        values.push_back(k.vloadMasked(io.values, {bi, t, h, k.idx(v * lanes)},
                                       lanes, valueMasks[v]));
        if (p.outputUsed)
          init.push_back(k.vconst(0.0, lanes));
      }
      SmallVector<Value> sums =
          k.loop(k.idx(p.K), init, [&](Value kk, ValueRange acc) {
            SmallVector<Value> row{k.idx(0), kk};
            Value fs = k.splat(
                scalarDecay ? scalarDecay : k.mload(decayRow, row), lanes);
            Value ks = k.splat(k.mload(keyRow, row), lanes);
            Value qs =
                p.outputUsed ? k.splat(k.mload(queryRow, row), lanes) : Value();
            SmallVector<Value> next;
            for (size_t j = 0; j < values.size(); ++j) {
              SmallVector<Value> at{kk, k.idx((first + j) * lanes)};
              Value mask = valueMasks[first + j];
              Value old = k.vloadMasked(S, at, lanes, mask);
              Value updated = k.vfma(ks, values[j], k.fmul(fs, old));
              k.vstoreMasked(updated, S, at, mask);
              if (p.outputUsed)
                next.push_back(k.vfma(qs, io.bonus ? old : updated, acc[j]));
            }
            return next;
          });
      if (!p.outputUsed)
        return;
      for (size_t j = 0; j < values.size(); ++j) {
        Value o = inv ? k.fmul(sums[j], inv) : sums[j];
        if (current)
          o = k.vfma(current, values[j], o);
        k.vstoreMasked(o, io.out, {bi, t, h, k.idx((first + j) * lanes)},
                       valueMasks[first + j]);
      }
    }

    const CpuLinearAttention &pattern;
    KernelBuilder &k;
    const Params &p;
    LinearAttentionBuffers io;
    int64_t lanes;
    Value h, bi, S, z, decayRow, keyRow, queryRow;
    SmallVector<Value> keyMasks, valueMasks;
    SmallVector<size_t> blocks;
  };

  /// Whether the deferred-decay recurrence covers the op: a scalar decay
  /// (or none), no normalizer and no bonus.
  static bool takesDeferredDecay(const Params &p) {
    return p.decayRank != 4 && !p.normalize && !p.bonus;
  }

  /// The recurrence with the state kept as c U (c a scalar), two steps per
  /// pass over U. A step's decay then multiplies c alone, its update adds
  /// (k'_t / c_t) v_t^T to U and its output is (c_t q'_t) U: the two FMAs
  /// per state element that are the step's useful work, where decaying S
  /// itself costs a third operation and a pass of its own; and two steps
  /// per pass halve the loads and stores of U, which is what bounds a step
  /// whose state lives in L1. c stays in [2^-32, 2^32], so k'/c cannot
  /// overflow: a pair of steps that would take it out folds c into U
  /// instead, and runs with each step's decay applied to U directly.
  void emitDeferredDecayRecurrence(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                                   const LinearAttentionBuffers &io, Value Bsz,
                                   const Params &p) const {
    emitParallelKernel(
        b, "linear_attention_recurrent", kb.mul(Bsz, kb.idx(p.H)), io.list(),
        [&](KernelBuilder &k, Value task, ValueRange in) {
          DeferredDecayTask(*this, k, p, io.rebind(in), task).emit();
        });
  }

  /// One (batch, head) of emitDeferredDecayRecurrence.
  class DeferredDecayTask {
  public:
    DeferredDecayTask(const CpuLinearAttention &pattern, KernelBuilder &k,
                      const Params &p, const LinearAttentionBuffers &io,
                      Value task)
        : pattern(pattern), k(k), p(p), io(io),
          lanes(pattern.target.vectorWidth) {
      h = k.rems(task, k.idx(p.H));
      bi = k.divs(task, k.idx(p.H));
      U = k.stackBuffer({p.K, p.V});
      kRows = k.stackBuffer({2, roundUp(p.K, lanes)});
      qRows = k.stackBuffer({2, roundUp(p.K, lanes)});
      masks = rowMasks(k, p.V, lanes);
    }

    void emit() {
      nT = k.mdim(io.queries, 1);
      pattern.loadState(k, io, p, bi, h, U);
      Value pairs = k.divs(nT, k.idx(2));
      Value c = k.loop(pairs, {k.f32(1.0)}, [&](Value i, ValueRange it) {
        return SmallVector<Value>{pair(k.mul(i, k.idx(2)), it[0])};
      })[0];
      Value odd = k.cmp(CmpIPredicate::ne, k.rems(nT, k.idx(2)), k.idx(0));
      c = k.ifElse(
          odd, {k.f32Type()},
          [&] { return SmallVector<Value>{single(k.sub(nT, k.idx(1)), c)}; },
          [&] { return SmallVector<Value>{c}; })[0];
      pattern.storeState(k, io, p, bi, h, U, c);
    }

  private:
    /// Steps t and t + 1 from scale c; returns the scale after them.
    Value pair(Value t, Value c) {
      Value t1 = k.add(t, k.idx(1));
      pattern.prefetchStep(k, io, p, bi, h, t, nT);
      pattern.prefetchStep(k, io, p, bi, h, t1, nT);
      Value f0 = decay(t), f1 = decay(t1);
      Value c1 = k.fmul(c, f0), c2 = k.fmul(c1, f1);
      return k.ifElse(
          k.andi(inRange(c1), inRange(c2)), {k.f32Type()},
          [&] {
            pass(t, 2, {}, {c1, c2});
            return SmallVector<Value>{c2};
          },
          [&] {
            Value one = k.f32(1.0);
            pass(t, 1, k.fmul(c, f0), {one});
            pass(t1, 1, f1, {one});
            return SmallVector<Value>{one};
          })[0];
    }

    /// Step t alone (the last of an odd count).
    Value single(Value t, Value c) {
      pattern.prefetchStep(k, io, p, bi, h, t, nT);
      Value c1 = k.fmul(c, decay(t));
      return k.ifElse(
          inRange(c1), {k.f32Type()},
          [&] {
            pass(t, 1, {}, {c1});
            return SmallVector<Value>{c1};
          },
          [&] {
            Value one = k.f32(1.0);
            pass(t, 1, c1, {one});
            return SmallVector<Value>{one};
          })[0];
    }

    /// One pass over U's rows for steps t .. t + steps - 1 at scales
    /// `scales` (c_t of each step): each row is first multiplied by
    /// `rowScale` when given, then takes each step's (k'/c) v^T in turn
    /// and adds (c q')-weighted itself to that step's output (when o is
    /// read: a state-only run makes one FMA per element and step). The
    /// columns go in blocks whose vectors fit the register file
    /// (columnBlocks), each block a pass over the rows.
    void pass(Value t, int steps, Value rowScale, ArrayRef<Value> scales) {
      auto factorOf = [&](Value i) {
        if (steps == 1)
          return scales[0];
        return k.select(k.cmp(CmpIPredicate::eq, i, k.idx(0)), scales[0],
                        scales[1]);
      };
      Value qScale = k.f32(p.scale);
      pattern.packRows(
          k, p, io.keys, bi, t, h, k.idx(steps), kRows,
          [&](Value i) { return k.fdiv(k.f32(1.0), factorOf(i)); });
      if (p.outputUsed)
        pattern.packRows(k, p, io.queries, bi, t, h, k.idx(steps), qRows,
                         [&](Value i) { return k.fmul(factorOf(i), qScale); });
      // Per column vector each step's value and (when o is read) output
      // sum; besides them each step's k' and q' broadcasts, U's vector and
      // the row scale.
      int64_t perStep = p.outputUsed ? 2 : 1;
      SmallVector<size_t> blocks =
          columnBlocks(pattern.target, masks.size(), steps * perStep,
                       steps * perStep + 1 + (rowScale ? 1 : 0));
      for (size_t i = 0; i + 1 < blocks.size(); ++i)
        passColumns(t, steps, rowScale, blocks[i], blocks[i + 1]);
    }

    /// pass for the column vectors [first, last).
    void passColumns(Value t, int steps, Value rowScale, size_t first,
                     size_t last) {
      size_t count = last - first;
      SmallVector<SmallVector<Value>> values(steps);
      SmallVector<Value> init;
      for (int s = 0; s < steps; ++s)
        for (size_t v = first; v < last; ++v) {
          values[s].push_back(k.vloadMasked(
              io.values, {bi, k.add(t, k.idx(s)), h, k.idx(v * lanes)}, lanes,
              masks[v]));
          if (p.outputUsed)
            init.push_back(k.vconst(0.0, lanes));
        }
      Value rowScaleVector = rowScale ? k.splat(rowScale, lanes) : Value();
      SmallVector<Value> outputs =
          k.loop(k.idx(p.K), init, [&](Value kk, ValueRange acc) {
            SmallVector<Value> ks, qs, next(acc);
            for (int s = 0; s < steps; ++s) {
              ks.push_back(k.splat(k.mload(kRows, {k.idx(s), kk}), lanes));
              if (p.outputUsed)
                qs.push_back(k.splat(k.mload(qRows, {k.idx(s), kk}), lanes));
            }
            for (size_t j = 0; j < count; ++j) {
              size_t v = first + j;
              SmallVector<Value> at{kk, k.idx(v * lanes)};
              Value u = k.vloadMasked(U, at, lanes, masks[v]);
              if (rowScaleVector)
                u = k.fmul(u, rowScaleVector);
              for (int s = 0; s < steps; ++s) {
                u = k.vfma(ks[s], values[s][j], u);
                if (!p.outputUsed)
                  continue;
                size_t out = s * count + j;
                next[out] = k.vfma(qs[s], u, next[out]);
              }
              k.vstoreMasked(u, U, at, masks[v]);
            }
            return next;
          });
      if (!p.outputUsed)
        return;
      for (int s = 0; s < steps; ++s)
        for (size_t j = 0; j < count; ++j)
          k.vstoreMasked(
              outputs[s * count + j], io.out,
              {bi, k.add(t, k.idx(s)), h, k.idx((first + j) * lanes)},
              masks[first + j]);
    }

    Value decay(Value t) { return k.exp(logDecay(k, io, p, bi, t, h)); }

    /// 2^-32 <= c <= 2^32 (false for NaN).
    Value inRange(Value c) { return k.noti(deferredScaleOutOfRange(k, c)); }

    const CpuLinearAttention &pattern;
    KernelBuilder &k;
    const Params &p;
    LinearAttentionBuffers io;
    int64_t lanes;
    Value h, bi, nT, U, kRows, qRows;
    SmallVector<Value> masks;
  };

  /// Non-causal: S = S0 + k'^T V over the whole sequence, then O = q' S.
  void emitGlobal(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                  const LinearAttentionBuffers &io, Value Bsz,
                  const Params &p) const {
    const int64_t lanes = target.vectorWidth;
    const int64_t block = 64;
    emitParallelKernel(
        b, "linear_attention_global", kb.mul(Bsz, kb.idx(p.H)), io.list(),
        [&](KernelBuilder &k, Value task, ValueRange in) {
          LinearAttentionBuffers my = io.rebind(in);
          Value Qm = my.queries, Km = my.keys, Vm = my.values, O = my.out;
          Value nT = k.mdim(Qm, 1);
          Value h = k.rems(task, k.idx(p.H)), bi = k.divs(task, k.idx(p.H));
          Value S = k.stackBuffer({p.K, p.V});
          Value zs = k.stackBuffer({roundUp(p.K, lanes)});
          Value rows = k.stackBuffer({block, p.K});
          Value outRows = k.stackBuffer({block, p.V});
          loadState(k, my, p, bi, h, S);
          for (int64_t c0 = 0; c0 < roundUp(p.K, lanes); c0 += lanes)
            k.vstore(k.vconst(0.0, lanes), zs, {k.idx(c0)});
          Value nBlocks = k.divs(k.add(nT, k.idx(block - 1)), k.idx(block));
          // S += k'^T V, z = sum k', block by block.
          k.forEach(k.idx(0), nBlocks, k.idx(1), [&](Value c) {
            Value t0 = k.mul(c, k.idx(block));
            Value len = k.mins(k.idx(block), k.sub(nT, t0));
            packRows(k, p, Km, bi, t0, h, len, rows, nullptr);
            k.forEach(k.idx(0), len, k.idx(1), [&](Value j) {
              for (int64_t c0 = 0; c0 < p.K; c0 += lanes) {
                Value mask = k.vmask(k.idx(p.K - c0), lanes);
                Value s =
                    k.fadd(k.vloadMasked(zs, {k.idx(c0)}, lanes, mask),
                           k.vloadMasked(rows, {j, k.idx(c0)}, lanes, mask));
                k.vstoreMasked(s, zs, {k.idx(c0)}, mask);
              }
            });
            MatrixRef vRows{Vm, [&](Value j, Value v) {
                              return SmallVector<Value>{bi, k.add(t0, j), h, v};
                            }};
            emitGemm(k, target, {k.idx(p.K), k.idx(p.V), len}, transposed(rows),
                     vRows, rowMajor(S), GemmMode::Accumulate);
          });
          // O = q' S (normalized by q' . z + eps).
          Value scale = k.f32(p.scale);
          k.forEach(k.idx(0), nBlocks, k.idx(1), [&](Value c) {
            Value t0 = k.mul(c, k.idx(block));
            Value len = k.mins(k.idx(block), k.sub(nT, t0));
            packRows(k, p, Qm, bi, t0, h, len, rows,
                     [&](Value) { return scale; });
            emitGemm(k, target, {len, k.idx(p.V), k.idx(p.K)}, rowMajor(rows),
                     rowMajor(S), rowMajor(outRows), GemmMode::Overwrite);
            // The f32 rows (normalized) rounded once into o.
            k.forEach(k.idx(0), len, k.idx(1), [&](Value i) {
              Value inv;
              if (p.normalize) {
                Value dot = k.loop(
                    k.idx(p.K), {k.f32(0.0)}, [&](Value kk, ValueRange a) {
                      return SmallVector<Value>{
                          k.fadd(a[0], k.fmul(k.mload(rows, {i, kk}),
                                              k.mload(zs, {kk})))};
                    })[0];
                inv = k.splat(k.fdiv(k.f32(1.0), k.fadd(dot, k.f32(p.eps))),
                              lanes);
              }
              for (int64_t v0 = 0; v0 < p.V; v0 += lanes) {
                Value mask = k.vmask(k.idx(p.V - v0), lanes);
                Value o = k.vloadMasked(outRows, {i, k.idx(v0)}, lanes, mask);
                k.vstoreMasked(inv ? k.fmul(o, inv) : o, O,
                               {bi, k.add(t0, i), h, k.idx(v0)}, mask);
              }
            });
          });
          storeState(k, my, p, bi, h, S);
        });
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuLinearAttentionPatterns(RewritePatternSet &patterns,
                                              const CpuTarget &target) {
  patterns.add<CpuLinearAttention>(patterns.getContext(), target);
}

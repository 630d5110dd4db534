//===- CpuChunked.cpp - the chunked form's phases on the CPU --------------===//
//
// One kernel, `<family>_chunks`, runs a task per (batch, head) over the
// chunks in order; state passing is the order itself. Per chunk of Q steps
// (ChunkedForm.h):
//
//   decay      cs_i = g_0 + ... + g_i, w_i                     (stack)
//   pack       q'_c, k'_c, v_c rows, contiguous                (stack)
//   delta      v_c = U0 - W S (the delta rule's WY transform:   (stack)
//              A = strictly lower beta_i L o k'k'^T, then
//              (I + A) [W | U0] = diag(beta) [exp(cs) o k' | v_c]
//              by forward substitution)
//   intra      M = L o q'k'^T o w (j <= i);  Y = M v_c
//   inter      Y += (exp(cs) o q') S
//   state      S = exp(cs_Q) S + (exp(cs_Q - cs) o w o k')^T v_c
//   finish     out_t = finish(Y_t)
//
// When nothing reads the op's output (ChunkedForm::outputUsed), only
// decay, pack (k and v), delta and state run, and no scores kernel.
// A normalizer is one more value column of ones (S's column V is then z,
// the decayed sum of k'), and outputs divide by Y's column V + eps.
// When heads share q and k (SSD's groups), q'k'^T is the same for every
// head of a group: a kernel `<family>_scores` computes it once per (batch,
// chunk, group) before the chunks run.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuChunked.h"
#include "CPU/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

/// The stack buffers of one task: the state and the current chunk's tiles.
struct ChunkTiles {
  Value state;          // S [K x Vx]
  Value cs, weight;     // cumulative log decay and w per step [Qpad]
                        // (weight: weighted families only)
  Value query, key;     // q'_c, k'_c [Q x K] (then scaled in place)
  Value keyT;           // k'_c^T [K x Qpad], without shared scores
  Value scores;         // M [Q x Qpad]
  Value values, output; // v_c, Y [Q x Vx]
  // The delta rule's: beta per step [Qpad], -A [Q x Qpad] and -W [Q x K].
  Value beta, transition, weights;
};

/// A task's position: its batch, head, and the current chunk.
struct ChunkPosition {
  Value bi, h, c, t0, len;
};

class CpuChunkedLowering {
public:
  CpuChunkedLowering(const CpuTarget &target, const ChunkedForm &form,
                     int64_t chunk)
      : target(target), form(form), lanes(target.vectorWidth), Q(chunk),
        Qpad(roundUp(chunk, target.vectorWidth)), K(form.keyDim),
        V(form.valueDim), Vx(form.valueDim + (form.normalize ? 1 : 0)) {}

  void emit(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value batch) const {
    SmallVector<Value> args(form.buffers);
    if (scoresKernel()) {
      Value T = kb.mdim(form.buffers.front(), 1);
      Value nChunks = kb.divs(kb.add(T, kb.idx(Q - 1)), kb.idx(Q));
      args.push_back(emitScoresKernel(b, kb, batch, nChunks));
    }
    emitParallelKernel(b, form.name + "_chunks",
                       kb.mul(batch, kb.idx(form.heads)), args,
                       [&](KernelBuilder &k, Value task, ValueRange in) {
                         emitTask(k, task, in);
                       });
  }

private:
  /// Whether heads share q'k'^T (q and k per group of several heads).
  bool sharedScores() const { return form.headsPerGroup > 1; }
  /// Whether a kernel computes the shared q'k'^T first: only the output
  /// reads it.
  bool scoresKernel() const { return sharedScores() && form.outputUsed; }
  /// Whether the task transposes k'_c: for its own q'k'^T (the output's,
  /// unless shared) and for the delta rule's k'k'^T.
  bool needsKeyTranspose() const {
    return form.deltaTransition || (form.outputUsed && !sharedScores());
  }

  /// q'k'^T per (batch, chunk, group) into [B, chunks, G, Q, Qpad].
  Value emitScoresKernel(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                         Value batch, Value nChunks) const {
    int64_t groups = form.heads / form.headsPerGroup;
    auto type = MemRefType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic, groups, Q, Qpad},
        b.getF32Type());
    Value scores = memref::AllocOp::create(b, type, ValueRange{batch, nChunks},
                                           b.getI64IntegerAttr(64));
    SmallVector<Value> args{form.buffers[0], form.buffers[1], scores};
    emitParallelKernel(
        b, form.name + "_scores",
        kb.mul(kb.mul(batch, nChunks), kb.idx(groups)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          ChunkedArgs a;
          a.query = in[0];
          a.key = in[1];
          Value out = in[2];
          Value nc = k.mdim(out, 1), nT = k.mdim(a.query, 1);
          Value g = k.rems(task, k.idx(groups));
          Value rest = k.divs(task, k.idx(groups));
          Value c = k.rems(rest, nc), bi = k.divs(rest, nc);
          Value t0 = k.mul(c, k.idx(Q));
          Value len = k.mins(k.idx(Q), k.sub(nT, t0));
          // Group g's rows, through the family's maps.
          Value h = k.mul(g, k.idx(form.headsPerGroup));
          Value qRows = k.stackBuffer({Q, K}), kRows = k.stackBuffer({Q, K});
          Value keyT = k.stackBuffer({K, Qpad});
          packMapped(k, a, bi, t0, h, len, qRows, /*isQuery=*/true);
          packMapped(k, a, bi, t0, h, len, kRows, /*isQuery=*/false);
          transposeInto(k, target, rowMajor(kRows), len, K, keyT);
          MatrixRef result{out, [&](Value i, Value j) {
                             return SmallVector<Value>{bi, c, g, i, j};
                           }};
          emitGemm(k, target, {len, len, k.idx(K)}, rowMajor(qRows),
                   rowMajor(keyT), result, GemmMode::Overwrite);
        });
    return scores;
  }

  /// One task: the chunks of (batch, head) in order.
  void emitTask(KernelBuilder &k, Value task, ValueRange in) const {
    ChunkedArgs a = form.args(in);
    Value sharedScoresBuf = scoresKernel() ? in.back() : Value();
    Value nT = k.mdim(a.query, 1);
    Value h = k.rems(task, k.idx(form.heads));
    Value bi = k.divs(task, k.idx(form.heads));
    ChunkTiles tiles{k.stackBuffer({K, Vx}),
                     k.stackBuffer({Qpad}),
                     form.weighted ? k.stackBuffer({Qpad}) : Value(),
                     k.stackBuffer({Q, K}),
                     k.stackBuffer({Q, K}),
                     needsKeyTranspose() ? k.stackBuffer({K, Qpad}) : Value(),
                     k.stackBuffer({Q, Qpad}),
                     k.stackBuffer({Q, Vx}),
                     k.stackBuffer({Q, Vx}),
                     Value(),
                     Value(),
                     Value()};
    if (form.deltaTransition) {
      tiles.beta = k.stackBuffer({Qpad});
      tiles.transition = k.stackBuffer({Q, Qpad});
      tiles.weights = k.stackBuffer({Q, K});
    }
    loadState(k, a, bi, h, tiles.state);
    Value nChunks = k.divs(k.add(nT, k.idx(Q - 1)), k.idx(Q));
    k.forEach(k.idx(0), nChunks, k.idx(1), [&](Value c) {
      Value t0 = k.mul(c, k.idx(Q));
      ChunkPosition at{bi, h, c, t0, k.mins(k.idx(Q), k.sub(nT, t0))};
      Value csLast = chunkDecay(k, a, at, tiles);
      packChunk(k, a, at, tiles);
      if (form.deltaTransition)
        deltaValues(k, at, tiles);
      // A run for its state alone skips the output's phases.
      if (form.outputUsed) {
        intraChunk(k, a, at, tiles, sharedScoresBuf);
        interChunk(k, at, tiles);
      }
      passState(k, at, tiles, csLast);
      if (form.outputUsed)
        finishRows(k, a, at, tiles);
    });
    storeState(k, a, bi, h, tiles.state);
  }

  /// cs and w of the chunk's steps (lanes past its end 0, so that whole
  /// vectors can be read); returns cs of its last step.
  Value chunkDecay(KernelBuilder &k, const ChunkedArgs &a,
                   const ChunkPosition &at, const ChunkTiles &tiles) const {
    for (int64_t i0 = 0; i0 < Qpad; i0 += lanes) {
      k.vstore(k.vconst(0.0, lanes), tiles.cs, {k.idx(i0)});
      if (form.weighted)
        k.vstore(k.vconst(0.0, lanes), tiles.weight, {k.idx(i0)});
    }
    return k.loop(at.len, {k.f32(0.0)}, [&](Value i, ValueRange cum) {
      StepCoefficients step = form.step(k, a, at.bi, k.add(at.t0, i), at.h);
      if (form.weighted)
        k.mstore(step.weight, tiles.weight, {i});
      if (form.deltaTransition)
        k.mstore(step.writeStrength, tiles.beta, {i});
      Value cs = step.logDecay ? k.fadd(cum[0], step.logDecay) : cum[0];
      k.mstore(cs, tiles.cs, {i});
      return SmallVector<Value>{cs};
    })[0];
  }

  /// Rows [t0, t0 + len) of q or k (head h's group), mapped, into `dst`.
  void packMapped(KernelBuilder &k, const ChunkedArgs &a, Value bi, Value t0,
                  Value h, Value len, Value dst, bool isQuery) const {
    MatrixRef rows{isQuery ? a.query : a.key, [&](Value i, Value ch) {
                     Value t = k.add(t0, i);
                     return isQuery ? form.queryAt(k, a, bi, t, h, ch)
                                    : form.keyAt(k, a, bi, t, h, ch);
                   }};
    packRows(k, target, rows, len, K, dst, [&](Value v, Value) {
      return isQuery ? form.mapQuery(k, v) : form.mapKey(k, v);
    });
    if (form.normalizeRows)
      normalizeRows(k, dst, len, isQuery ? form.queryScale : 1.0);
  }

  /// Rows [0, rows) of `m` [rows x K] divided by sqrt(|row|^2 + eps), then
  /// times `scale`.
  void normalizeRows(KernelBuilder &k, Value m, Value rows,
                     double scale) const {
    scaleRows(k, m, rows, K, [&](Value r) {
      Value sum = k.vconst(0.0, lanes);
      for (int64_t c0 = 0; c0 < K; c0 += lanes) {
        Value e = k.vloadMasked(m, {r, k.idx(c0)}, lanes,
                                k.vmask(k.idx(K - c0), lanes));
        sum = k.vfma(e, e, sum);
      }
      Value norm = k.sqrt(k.fadd(k.hsum(sum), k.f32(form.rowEps)));
      return k.fdiv(k.f32(scale), norm);
    });
  }

  /// The delta rule's values: v_c = U0 - W S, with -A, -W and U0 solved
  /// in place (CHUNKED.md): the chunk's own writes correct one another
  /// through the unit lower triangular I + A, which never divides.
  void deltaValues(KernelBuilder &k, const ChunkPosition &at,
                   const ChunkTiles &tiles) const {
    // -A[i, j] = -beta_i exp(cs_i - cs_j) k'_i . k'_j for j < i.
    emitGemm(k, target, {at.len, at.len, k.idx(K)}, rowMajor(tiles.key),
             rowMajor(tiles.keyT), rowMajor(tiles.transition),
             GemmMode::Overwrite);
    Value iota = k.viota(lanes);
    k.forEach(k.idx(0), at.len, k.idx(1), [&](Value i) {
      Value csI = k.splat(k.mload(tiles.cs, {i}), lanes);
      Value minusBeta = k.splat(k.fneg(k.mload(tiles.beta, {i})), lanes);
      Value iSplat = k.splat(i, lanes);
      for (int64_t j0 = 0; j0 < Qpad; j0 += lanes) {
        Value j = k.idx(j0);
        Value cols =
            arith::AddIOp::create(k.builder(), iota, k.splat(j, lanes));
        Value below = k.cmp(CmpIPredicate::ult, cols, iSplat);
        Value l = k.exp(k.fsub(csI, k.vload(tiles.cs, {j}, lanes)));
        Value a = k.fmul(k.fmul(minusBeta, l),
                         k.vload(tiles.transition, {i, j}, lanes));
        k.vstore(k.select(below, a, k.vconst(0.0, lanes)), tiles.transition,
                 {i, j});
      }
    });
    // Right-hand sides -beta exp(cs) o k' and beta v_c, then the solve.
    packRows(k, target, rowMajor(tiles.key), at.len, K, tiles.weights,
             [&](Value v, Value i) {
               Value f = k.fmul(k.fneg(k.mload(tiles.beta, {i})),
                                k.exp(k.mload(tiles.cs, {i})));
               return k.fmul(v, k.splat(f, lanes));
             });
    scaleRows(k, tiles.values, at.len, V,
              [&](Value i) { return k.mload(tiles.beta, {i}); });
    forwardSubstitute(k, tiles.transition, at.len, tiles.weights, K);
    forwardSubstitute(k, tiles.transition, at.len, tiles.values, V);
    // v_c = U0 + (-W) S.
    emitGemm(k, target, {at.len, k.idx(V), k.idx(K)}, rowMajor(tiles.weights),
             rowMajor(tiles.state), rowMajor(tiles.values),
             GemmMode::Accumulate);
  }

  /// X <- (I - N)^-1 X for N = `negLower` (strictly lower, Q x Qpad), rows
  /// [0, len) of X [len x cols]: X_i += sum_{j<i} N[i, j] X_j in order,
  /// kColumnVectors vectors of a row at a time.
  void forwardSubstitute(KernelBuilder &k, Value negLower, Value len, Value x,
                         int64_t cols) const {
    constexpr int64_t kColumnVectors = 4;
    for (int64_t c0 = 0; c0 < cols; c0 += kColumnVectors * lanes) {
      SmallVector<Value> masks;
      for (int64_t v0 = c0; v0 < std::min(cols, c0 + kColumnVectors * lanes);
           v0 += lanes)
        masks.push_back(k.vmask(k.idx(cols - v0), lanes));
      k.forEach(k.idx(1), len, k.idx(1), [&](Value i) {
        SmallVector<Value> rows;
        for (auto [n, mask] : llvm::enumerate(masks))
          rows.push_back(k.vloadMasked(x, {i, k.idx(c0 + int64_t(n) * lanes)},
                                       lanes, mask));
        rows = k.loop(k.idx(0), i, rows, [&](Value j, ValueRange acc) {
          Value n = k.splat(k.mload(negLower, {i, j}), lanes);
          SmallVector<Value> next;
          for (auto [m, mask] : llvm::enumerate(masks))
            next.push_back(
                k.vfma(n,
                       k.vloadMasked(x, {j, k.idx(c0 + int64_t(m) * lanes)},
                                     lanes, mask),
                       acc[m]));
          return next;
        });
        for (auto [n, mask] : llvm::enumerate(masks))
          k.vstoreMasked(rows[n], x, {i, k.idx(c0 + int64_t(n) * lanes)}, mask);
      });
    }
  }

  /// q'_c, k'_c (and k'_c^T) and v_c, contiguous: a head's rows in [B, T,
  /// H, V] are H V floats apart (4 KiB for 16 heads of 64), and would evict
  /// each other from L1.
  void packChunk(KernelBuilder &k, const ChunkedArgs &a,
                 const ChunkPosition &at, const ChunkTiles &tiles) const {
    if (form.outputUsed)
      packMapped(k, a, at.bi, at.t0, at.h, at.len, tiles.query, true);
    packMapped(k, a, at.bi, at.t0, at.h, at.len, tiles.key, false);
    if (tiles.keyT)
      transposeInto(k, target, rowMajor(tiles.key), at.len, K, tiles.keyT);
    MatrixRef values{a.value, [&](Value j, Value ch) {
                       return form.valueAt(at.bi, k.add(at.t0, j), at.h, ch);
                     }};
    packRows(k, target, values, at.len, V, tiles.values);
    // The normalizer's column of ones: S's column V sums the decayed k'.
    if (form.normalize)
      k.forEach(k.idx(0), at.len, k.idx(1), [&](Value j) {
        k.mstore(k.f32(1.0), tiles.values, {j, k.idx(V)});
      });
  }

  /// M = L o q'k'^T o w (zero above the diagonal), then Y = M v_c.
  void intraChunk(KernelBuilder &k, const ChunkedArgs &a,
                  const ChunkPosition &at, const ChunkTiles &tiles,
                  Value sharedScoresBuf) const {
    if (!sharedScoresBuf)
      emitGemm(k, target, {at.len, at.len, k.idx(K)}, rowMajor(tiles.query),
               rowMajor(tiles.keyT), rowMajor(tiles.scores),
               GemmMode::Overwrite);
    Value g = form.groupOf(k, a, at.h);
    Value iota = k.viota(lanes);
    k.forEach(k.idx(0), at.len, k.idx(1), [&](Value i) {
      Value csI = k.splat(k.mload(tiles.cs, {i}), lanes);
      Value iSplat = k.splat(i, lanes);
      for (int64_t j0 = 0; j0 < Qpad; j0 += lanes) {
        Value j = k.idx(j0);
        Value cols =
            arith::AddIOp::create(k.builder(), iota, k.splat(j, lanes));
        Value causal = k.cmp(CmpIPredicate::ule, cols, iSplat);
        Value l = k.exp(k.fsub(csI, k.vload(tiles.cs, {j}, lanes)));
        Value qk = sharedScoresBuf
                       ? k.vload(sharedScoresBuf, {at.bi, at.c, g, i, j}, lanes)
                       : k.vload(tiles.scores, {i, j}, lanes);
        Value m = k.fmul(l, qk);
        if (form.weighted)
          m = k.fmul(m, k.vload(tiles.weight, {j}, lanes));
        k.vstore(k.select(causal, m, k.vconst(0.0, lanes)), tiles.scores,
                 {i, j});
      }
    });
    emitGemm(k, target, {at.len, k.idx(Vx), at.len}, rowMajor(tiles.scores),
             rowMajor(tiles.values), rowMajor(tiles.output),
             GemmMode::Overwrite);
  }

  /// Y += (exp(cs) o q') S: what the earlier chunks contribute.
  void interChunk(KernelBuilder &k, const ChunkPosition &at,
                  const ChunkTiles &tiles) const {
    scaleRows(k, tiles.query, at.len, K,
              [&](Value i) { return k.exp(k.mload(tiles.cs, {i})); });
    emitGemm(k, target, {at.len, k.idx(Vx), k.idx(K)}, rowMajor(tiles.query),
             rowMajor(tiles.state), rowMajor(tiles.output),
             GemmMode::Accumulate);
  }

  /// S = exp(cs_Q) S + (exp(cs_Q - cs) o w o k')^T v_c.
  void passState(KernelBuilder &k, const ChunkPosition &at,
                 const ChunkTiles &tiles, Value csLast) const {
    scaleRows(k, tiles.key, at.len, K, [&](Value j) {
      Value w = k.exp(k.fsub(csLast, k.mload(tiles.cs, {j})));
      return form.weighted ? k.fmul(w, k.mload(tiles.weight, {j})) : w;
    });
    // The state's decay is applied where the product adds to it.
    emitGemm(k, target, {k.idx(K), k.idx(Vx), at.len}, transposed(tiles.key),
             rowMajor(tiles.values), rowMajor(tiles.state),
             GemmMode::Accumulate, nullptr, nullptr, k.exp(csLast));
  }

  /// out_t = finish(Y_t) for the chunk's steps, vectorized over V.
  void finishRows(KernelBuilder &k, const ChunkedArgs &a,
                  const ChunkPosition &at, const ChunkTiles &tiles) const {
    k.forEach(k.idx(0), at.len, k.idx(1), [&](Value i) {
      Value t = k.add(at.t0, i);
      // 1 / (q'_t . z_t + eps), z_t in the normalizer's column.
      Value inverse;
      if (form.normalize) {
        Value z = k.mload(tiles.output, {i, k.idx(V)});
        inverse =
            k.splat(k.fdiv(k.f32(1.0), k.fadd(z, k.f32(form.eps))), lanes);
      }
      for (int64_t v0 = 0; v0 < V; v0 += lanes) {
        Value mask = k.vmask(k.idx(V - v0), lanes);
        ChannelRun run{[&](Value m, ArrayRef<Value> idx) {
                         return k.vloadMasked(m, idx, lanes, mask);
                       },
                       [&](Value s) { return k.splat(s, lanes); }};
        Value y = k.vloadMasked(tiles.output, {i, k.idx(v0)}, lanes, mask);
        if (inverse)
          y = k.fmul(y, inverse);
        if (form.hasFinish()) {
          Value v = k.vloadMasked(tiles.values, {i, k.idx(v0)}, lanes, mask);
          y = form.finish(k, run, a, at.bi, t, at.h, k.idx(v0), y, v);
        }
        k.vstoreMasked(y, a.out, form.valueAt(at.bi, t, at.h, k.idx(v0)), mask);
      }
    });
  }

  /// Rows [0, rows) of the [rows x cols] buffer `m` times factor(row),
  /// computed once per row.
  void scaleRows(KernelBuilder &k, Value m, Value rows, int64_t cols,
                 const std::function<Value(Value)> &factor) const {
    k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
      Value f = k.splat(factor(r), lanes);
      for (int64_t c0 = 0; c0 < cols; c0 += lanes) {
        SmallVector<Value> at{r, k.idx(c0)};
        if (c0 + lanes <= cols) {
          k.vstore(k.fmul(k.vload(m, at, lanes), f), m, at);
          continue;
        }
        Value mask = k.vmask(k.idx(cols - c0), lanes);
        k.vstoreMasked(k.fmul(k.vloadMasked(m, at, lanes, mask), f), m, at,
                       mask);
      }
    });
  }

  /// S from init (zeros without), whichever way the family lays it out;
  /// the normalizer's column starts at 0.
  void loadState(KernelBuilder &k, const ChunkedArgs &a, Value bi, Value h,
                 Value S) const {
    if (form.normalize)
      k.forEach(k.idx(0), k.idx(K), k.idx(1), [&](Value kk) {
        k.mstore(k.f32(0.0), S, {kk, k.idx(V)});
      });
    if (!a.init) {
      packRows(k, target, rowMajor(S), k.idx(K), V, S,
               [&](Value, Value) { return k.vconst(0.0, lanes); });
      return;
    }
    if (form.stateValueMajor) {
      // init rows are value channels: transpose them into S's key rows.
      MatrixRef init{a.init, [&](Value vv, Value kk) {
                       return form.stateAt(bi, h, kk, vv);
                     }};
      transposeInto(k, target, init, k.idx(V), K, S);
      return;
    }
    MatrixRef init{a.init, [&](Value kk, Value vv) {
                     return form.stateAt(bi, h, kk, vv);
                   }};
    packRows(k, target, init, k.idx(K), V, S);
  }

  void storeState(KernelBuilder &k, const ChunkedArgs &a, Value bi, Value h,
                  Value S) const {
    if (form.stateValueMajor) {
      k.forEach(k.idx(0), k.idx(V), k.idx(1), [&](Value vv) {
        k.forEach(k.idx(0), k.idx(K), k.idx(1), [&](Value kk) {
          k.mstore(k.mload(S, {kk, vv}), a.last, form.stateAt(bi, h, kk, vv));
        });
      });
      return;
    }
    MatrixRef last{a.last, [&](Value kk, Value vv) {
                     return form.stateAt(bi, h, kk, vv);
                   }};
    packRows(k, target, rowMajor(S), k.idx(K), V, last);
  }

  const CpuTarget &target;
  const ChunkedForm &form;
  /// Value channels, and columns carried (one more for the normalizer).
  const int64_t lanes, Q, Qpad, K, V, Vx;
};

} // namespace

void seqc::emitCpuChunked(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                          const CpuTarget &target, const ChunkedForm &form,
                          Value batch, int64_t chunk) {
  CpuChunkedLowering(target, form, chunk).emit(b, kb, batch);
}

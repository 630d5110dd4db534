//===- CpuSsd.cpp - the chunked SSD algorithm as CPU kernels --------------===//
//
// Mamba-2 SSD by chunks of Q steps (Dao & Gu 2024), per (batch, head), with
// the state kept as S^T [N x P] in a stack buffer:
//
//   CB  = C_c B_c^T                       per (batch, chunk, group), shared by
//                                         the heads of the group (own kernel)
//   M   = L o CB o dt                     L[i,j] = exp(cs_i - cs_j), j <= i
//   Y   = M X_c                           intra-chunk (masked matmul)
//   Y  += (exp(cs) o C_c) S^T             contribution of earlier chunks
//   S^T = exp(cs_Q) S^T + (w o B_c)^T X_c  chunk state, w_j = exp(cs_Q-cs_j)
//   dt_j Y   = (Y + D X) silu(z)
//
// cs is the chunk-local cumulative sum of dt * A, so every exponent is
// bounded by one chunk. States passing over chunks is the sequential loop of
// each task. Short sequences (decode, T < 16) skip the chunk machinery: the
// recurrence runs directly, vectorized over P.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

static Value scratch(KernelBuilder &kb, ArrayRef<int64_t> shape) {
  return kb.stackBuffer(shape);
}

static Value imin(KernelBuilder &kb, Value a, Value b) { return kb.mins(a, b); }

} // namespace

namespace {

/// seq.ssd's operands as a kernel sees them (optional ones null if absent).
struct SsdOperands {
  Value x, dt, a, b, c, y, last;
  Value skip, gate, bias, init;
};

struct CpuSsd : OpRewritePattern<seq::SsdOp> {
  CpuSsd(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SsdOp op,
                                PatternRewriter &rewriter) const override {
    if (!allF32(op))
      return rewriter.notifyMatchFailure(
          op,
          "takes f32 operands only (bf16 and f16 have no fast CPU kernel yet)");
    auto xType = cast<RankedTensorType>(op.getX().getType());
    auto bType = cast<RankedTensorType>(op.getB().getType());
    int64_t H = xType.getDimSize(2), P = xType.getDimSize(3);
    int64_t G = bType.getDimSize(2), N = bType.getDimSize(3);
    if (ShapedType::isDynamic(H) || ShapedType::isDynamic(P) ||
        ShapedType::isDynamic(G) || ShapedType::isDynamic(N) || H % G != 0)
      return rewriter.notifyMatchFailure(op, "needs static H, P, G and N");
    const int64_t lanes = target.vectorWidth;
    // Recurrent or chunked, and the chunk size: the strategy's plan.
    TargetDescription machine = target.describe();
    FailureOr<seq::PlanAttr> followed = followPlan(op, machine, rewriter);
    if (failed(followed))
      return failure();
    seq::PlanAttr plan = *followed;
    bool recurrent = plan.getKind() == seq::PlanKind::recurrent;

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"];

    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    Value yBuf = allocBuffer(b, yType, dims.of("y"));
    Value lastBuf = allocBuffer(b, lastType, dims.of("last"));
    SmallVector<Value> args{readBuffer(b, op.getX()),
                            readBuffer(b, op.getDt()),
                            readBuffer(b, op.getA()),
                            readBuffer(b, op.getB()),
                            readBuffer(b, op.getC()),
                            yBuf,
                            lastBuf};
    enum Opt { Skip, Gate, Bias, Init };
    int optIndex[4] = {-1, -1, -1, -1};
    auto addOpt = [&](Opt which, Value v) {
      if (!v)
        return;
      optIndex[which] = args.size();
      args.push_back(readBuffer(b, v));
    };
    addOpt(Skip, op.getSkip());
    addOpt(Gate, op.getGate());
    addOpt(Bias, op.getDtBias());
    addOpt(Init, op.getInit());
    auto opt = [&](ValueRange in, Opt which) {
      return optIndex[which] < 0 ? Value() : in[optIndex[which]];
    };
    // A kernel's view of `args` by name.
    auto view = [&](ValueRange in) {
      return SsdOperands{in[0],         in[1],         in[2],
                         in[3],         in[4],         in[5],
                         in[6],         opt(in, Skip), opt(in, Gate),
                         opt(in, Bias), opt(in, Init)};
    };

    const int64_t Q = recurrent ? lanes : plan.getChunk();
    const int64_t Qpad = roundUp(Q, lanes);
    Value nChunks = kb.divs(kb.add(T, kb.idx(Q - 1)), kb.idx(Q));
    int64_t headsPerGroup = H / G;

    // dt of step t for head h: softplus(dt + bias) as asked.
    auto stepDt = [&](KernelBuilder &k, ValueRange in, Value bi, Value t,
                      Value h) {
      Value dt = k.mload(view(in).dt, {bi, t, h});
      if (Value bias = opt(in, Bias))
        dt = k.fadd(dt, k.mload(bias, {h}));
      return op.getDtSoftplus() ? k.softplus(dt) : dt;
    };
    // y = (y + D x) * silu(z) for row (bi, t, h), vectorized over P.
    auto finishRow = [&](KernelBuilder &k, ValueRange in, Value bi, Value t,
                         Value h) {
      Value skip = opt(in, Skip), gate = opt(in, Gate);
      if (!skip && !gate)
        return;
      Value d = skip ? k.splat(k.mload(skip, {h}), lanes) : Value();
      for (int64_t p0 = 0; p0 < P; p0 += lanes) {
        Value mask = k.vmask(k.idx(P - p0), lanes);
        SmallVector<Value> at{bi, t, h, k.idx(p0)};
        Value y = k.vloadMasked(view(in).y, at, lanes, mask);
        if (d)
          y = k.vfma(d, k.vloadMasked(view(in).x, at, lanes, mask), y);
        if (gate)
          y = k.fmul(y, k.silu(k.vloadMasked(gate, at, lanes, mask)));
        k.vstoreMasked(y, view(in).y, at, mask);
      }
    };
    // Row i of the chunk buffers Yc (and Xc) finished into y[bi, t, h, :].
    auto finishChunkRow = [&](KernelBuilder &k, ValueRange in, Value bi,
                              Value t, Value h, Value Yc, Value Xc, Value i) {
      Value skip = opt(in, Skip), gate = opt(in, Gate);
      Value d = skip ? k.splat(k.mload(skip, {h}), lanes) : Value();
      for (int64_t p0 = 0; p0 < P; p0 += lanes) {
        Value mask = k.vmask(k.idx(P - p0), lanes);
        Value y = k.vloadMasked(Yc, {i, k.idx(p0)}, lanes, mask);
        if (d)
          y = k.vfma(d, k.vloadMasked(Xc, {i, k.idx(p0)}, lanes, mask), y);
        if (gate)
          y = k.fmul(y, k.silu(k.vloadMasked(gate, {bi, t, h, k.idx(p0)}, lanes,
                                             mask)));
        k.vstoreMasked(y, view(in).y, {bi, t, h, k.idx(p0)}, mask);
      }
    };
    // S^T from init (or zeros), and last from S^T.
    auto loadState = [&](KernelBuilder &k, ValueRange in, Value bi, Value h,
                         Value ST) {
      Value init = opt(in, Init);
      k.forEach(k.idx(0), k.idx(N), k.idx(1), [&](Value n) {
        k.forEach(k.idx(0), k.idx(P), k.idx(1), [&](Value p) {
          Value v = init ? k.mload(init, {bi, h, p, n}) : k.f32(0.0);
          k.mstore(v, ST, {n, p});
        });
      });
    };
    auto storeState = [&](KernelBuilder &k, ValueRange in, Value bi, Value h,
                          Value ST) {
      k.forEach(k.idx(0), k.idx(P), k.idx(1), [&](Value p) {
        k.forEach(k.idx(0), k.idx(N), k.idx(1), [&](Value n) {
          k.mstore(k.mload(ST, {n, p}), view(in).last, {bi, h, p, n});
        });
      });
    };

    if (recurrent) {
      emitRecurrent(b, kb, args, Bsz, H, P, N, headsPerGroup, stepDt, finishRow,
                    optIndex[Init]);
    } else {
      // CB = C_c B_c^T per (batch, chunk, group).
      auto cbType = MemRefType::get(
          {ShapedType::kDynamic, ShapedType::kDynamic, G, Q, Qpad},
          b.getF32Type());
      Value cb = memref::AllocOp::create(b, cbType, ValueRange{Bsz, nChunks},
                                         b.getI64IntegerAttr(64));
      emitParallelKernel(
          b, "ssd_cb", kb.mul(kb.mul(Bsz, nChunks), kb.idx(G)),
          {args[3], args[4], cb},
          [&](KernelBuilder &k, Value task, ValueRange in) {
            Value bm = in[0], cm = in[1], cbOut = in[2];
            Value nc = k.mdim(cbOut, 1), nT = k.mdim(bm, 1);
            Value g = k.rems(task, k.idx(G));
            Value rest = k.divs(task, k.idx(G));
            Value c = k.rems(rest, nc), bi = k.divs(rest, nc);
            Value t0 = k.mul(c, k.idx(Q));
            Value qlen = imin(k, k.idx(Q), k.sub(nT, t0));
            // B_c^T [N x Q] so a row of the right operand is contiguous.
            Value BT = scratch(k, {N, Qpad});
            transposeInto(
                k, target,
                MatrixRef{bm,
                          [&](Value j, Value n) {
                            return SmallVector<Value>{bi, k.add(t0, j), g, n};
                          }},
                qlen, N, BT);
            MatrixRef A{cm, [&](Value i, Value n) {
                          return SmallVector<Value>{bi, k.add(t0, i), g, n};
                        }};
            MatrixRef Cm{cbOut, [&](Value i, Value j) {
                           return SmallVector<Value>{bi, c, g, i, j};
                         }};
            emitGemm(k, target, {qlen, qlen, k.idx(N)}, A, rowMajor(BT), Cm,
                     GemmMode::Overwrite);
          });
      args.push_back(cb);
      emitChunked(b, kb, args, Bsz, H, P, N, Q, Qpad, headsPerGroup, stepDt,
                  finishChunkRow, loadState, storeState);
    }

    rewriter.replaceOp(
        op, {asTensor(b, yBuf, yType), asTensor(b, lastBuf, lastType)});
    return success();
  }

  using StepDt =
      std::function<Value(KernelBuilder &, ValueRange, Value, Value, Value)>;
  using RowFn =
      std::function<void(KernelBuilder &, ValueRange, Value, Value, Value)>;

  /// The chunked algorithm, one task per (batch, head).
  using ChunkRowFn = std::function<void(KernelBuilder &, ValueRange, Value,
                                        Value, Value, Value, Value, Value)>;

  void emitChunked(ImplicitLocOpBuilder &b, KernelBuilder &kb, ValueRange args,
                   Value Bsz, int64_t H, int64_t P, int64_t N, int64_t Q,
                   int64_t Qpad, int64_t headsPerGroup, const StepDt &stepDt,
                   const ChunkRowFn &finishChunkRow, const RowFn &loadState,
                   const RowFn &storeState) const {
    const int64_t lanes = target.vectorWidth;
    emitParallelKernel(
        b, "ssd_chunks", kb.mul(Bsz, kb.idx(H)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value X = in[0], Am = in[2], Bm = in[3], Cm = in[4], Y = in[5];
          Value CB = in.back();
          Value nT = k.mdim(X, 1);
          Value h = k.rems(task, k.idx(H)), bi = k.divs(task, k.idx(H));
          Value g = k.divs(h, k.idx(headsPerGroup));
          Value aH = k.mload(Am, {h});
          Value ST = scratch(k, {N, P});
          Value dtS = scratch(k, {Qpad}), csS = scratch(k, {Qpad});
          Value Mm = scratch(k, {Q, Qpad});
          Value Cs = scratch(k, {Q, N}), Bw = scratch(k, {Q, N});
          // The chunk's rows of x and y, contiguous (their rows in [B, T, H,
          // P] are H P floats apart: 4 KiB for Mamba-2 heads, which would
          // evict each other from L1).
          Value Xc = scratch(k, {Q, P}), Yc = scratch(k, {Q, P});
          loadState(k, in, bi, h, ST);
          Value nChunks = k.divs(k.add(nT, k.idx(Q - 1)), k.idx(Q));
          k.forEach(k.idx(0), nChunks, k.idx(1), [&](Value c) {
            Value t0 = k.mul(c, k.idx(Q));
            Value qlen = imin(k, k.idx(Q), k.sub(nT, t0));
            // dt and the chunk-local cumulative log decay; lanes past qlen
            // stay 0 so whole vectors can be read.
            for (int64_t i0 = 0; i0 < Qpad; i0 += lanes) {
              k.vstore(k.vconst(0.0, lanes), dtS, {k.idx(i0)});
              k.vstore(k.vconst(0.0, lanes), csS, {k.idx(i0)});
            }
            Value csLast =
                k.loop(qlen, {k.f32(0.0)}, [&](Value i, ValueRange cum) {
                  Value dt = stepDt(k, in, bi, k.add(t0, i), h);
                  k.mstore(dt, dtS, {i});
                  Value cs = k.fadd(cum[0], k.fmul(dt, aH));
                  k.mstore(cs, csS, {i});
                  return SmallVector<Value>{cs};
                })[0];

            // M = L o CB o dt (rows i < qlen, columns j <= i).
            Value iota = k.viota(lanes);
            k.forEach(k.idx(0), qlen, k.idx(1), [&](Value i) {
              Value csI = k.splat(k.mload(csS, {i}), lanes);
              Value iSplat = k.splat(i, lanes);
              for (int64_t j0 = 0; j0 < Qpad; j0 += lanes) {
                Value j = k.idx(j0);
                Value cols =
                    arith::AddIOp::create(k.builder(), iota, k.splat(j, lanes));
                Value causal = k.cmp(CmpIPredicate::ule, cols, iSplat);
                Value l = k.exp(k.fsub(csI, k.vload(csS, {j}, lanes)));
                Value cb = k.vload(CB, {bi, c, g, i, j}, lanes);
                Value m = k.fmul(k.fmul(l, cb), k.vload(dtS, {j}, lanes));
                k.vstore(k.select(causal, m, k.vconst(0.0, lanes)), Mm, {i, j});
              }
            });

            packRows(
                k, target,
                MatrixRef{X,
                          [&](Value j, Value p) {
                            return SmallVector<Value>{bi, k.add(t0, j), h, p};
                          }},
                qlen, P, Xc);
            MatrixRef xRows = rowMajor(Xc), yRows = rowMajor(Yc);
            // Y = M X_c.
            emitGemm(k, target, {qlen, k.idx(P), qlen}, rowMajor(Mm), xRows,
                     yRows, GemmMode::Overwrite);

            // Y += (exp(cs) o C_c) S^T, the state of the earlier chunks.
            k.forEach(k.idx(0), qlen, k.idx(1), [&](Value i) {
              Value e = k.splat(k.exp(k.mload(csS, {i})), lanes);
              for (int64_t n0 = 0; n0 < N; n0 += lanes) {
                Value mask = k.vmask(k.idx(N - n0), lanes);
                Value cv = k.vloadMasked(Cm, {bi, k.add(t0, i), g, k.idx(n0)},
                                         lanes, mask);
                k.vstoreMasked(k.fmul(cv, e), Cs, {i, k.idx(n0)}, mask);
              }
            });
            emitGemm(k, target, {qlen, k.idx(P), k.idx(N)}, rowMajor(Cs),
                     rowMajor(ST), yRows, GemmMode::Accumulate);

            // S^T = exp(cs_Q) S^T + (w o B_c)^T X_c.
            Value decay = k.splat(k.exp(csLast), lanes);
            k.forEach(k.idx(0), k.idx(N), k.idx(1), [&](Value n) {
              for (int64_t p0 = 0; p0 < P; p0 += lanes) {
                Value mask = k.vmask(k.idx(P - p0), lanes);
                Value s = k.vloadMasked(ST, {n, k.idx(p0)}, lanes, mask);
                k.vstoreMasked(k.fmul(s, decay), ST, {n, k.idx(p0)}, mask);
              }
            });
            k.forEach(k.idx(0), qlen, k.idx(1), [&](Value j) {
              Value w = k.fmul(k.exp(k.fsub(csLast, k.mload(csS, {j}))),
                               k.mload(dtS, {j}));
              Value ws = k.splat(w, lanes);
              for (int64_t n0 = 0; n0 < N; n0 += lanes) {
                Value mask = k.vmask(k.idx(N - n0), lanes);
                Value bv = k.vloadMasked(Bm, {bi, k.add(t0, j), g, k.idx(n0)},
                                         lanes, mask);
                k.vstoreMasked(k.fmul(bv, ws), Bw, {j, k.idx(n0)}, mask);
              }
            });
            emitGemm(k, target, {k.idx(N), k.idx(P), qlen}, transposed(Bw),
                     xRows, rowMajor(ST), GemmMode::Accumulate);

            // y = (Y + D x) silu(z), written out row by row.
            k.forEach(k.idx(0), qlen, k.idx(1), [&](Value i) {
              finishChunkRow(k, in, bi, k.add(t0, i), h, Yc, Xc, i);
            });
          });
          storeState(k, in, bi, h, ST);
        });
  }

  /// The recurrence step by step (decode), one task per (batch, head). The
  /// state lives in `last` itself, in its [P, N] layout, vectorized over N:
  /// a decode step reads the carried state once and writes it once.
  void emitRecurrent(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     ValueRange args, Value Bsz, int64_t H, int64_t P,
                     int64_t N, int64_t headsPerGroup, const StepDt &stepDt,
                     const RowFn &finishRow, int initIndex) const {
    const int64_t lanes = target.vectorWidth;
    emitParallelKernel(
        b, "ssd_recurrent", kb.mul(Bsz, kb.idx(H)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value X = in[0], Am = in[2], Bm = in[3], Cm = in[4], Y = in[5];
          Value Last = in[6];
          Value nT = k.mdim(X, 1);
          Value h = k.rems(task, k.idx(H)), bi = k.divs(task, k.idx(H));
          Value g = k.divs(h, k.idx(headsPerGroup));
          Value aH = k.mload(Am, {h});
          SmallVector<Value> masks;
          for (int64_t n0 = 0; n0 < N; n0 += lanes)
            masks.push_back(k.vmask(k.idx(N - n0), lanes));
          // Step t reads the state from `from` and writes it to Last.
          auto step = [&](Value t, Value from) {
            Value dt = stepDt(k, in, bi, t, h);
            Value decay = k.splat(k.exp(k.fmul(dt, aH)), lanes);
            SmallVector<Value> bv, cv;
            for (size_t v = 0; v < masks.size(); ++v) {
              Value n0 = k.idx(v * lanes);
              bv.push_back(k.vloadMasked(Bm, {bi, t, g, n0}, lanes, masks[v]));
              cv.push_back(k.vloadMasked(Cm, {bi, t, g, n0}, lanes, masks[v]));
            }
            k.forEach(k.idx(0), k.idx(P), k.idx(1), [&](Value p) {
              Value xdt = k.splat(k.fmul(k.mload(X, {bi, t, h, p}), dt), lanes);
              Value acc = k.vconst(0.0, lanes);
              for (size_t v = 0; v < masks.size(); ++v) {
                SmallVector<Value> at{bi, h, p, k.idx(v * lanes)};
                Value s = from ? k.vloadMasked(from, at, lanes, masks[v])
                               : k.vconst(0.0, lanes);
                s = k.vfma(xdt, bv[v], k.fmul(decay, s));
                k.vstoreMasked(s, Last, at, masks[v]);
                acc = k.vfma(cv[v], s, acc);
              }
              k.mstore(k.hsum(acc), Y, {bi, t, h, p});
            });
            finishRow(k, in, bi, t, h);
          };
          // The first step reads init (or nothing), the others Last.
          k.ifThen(k.cmp(CmpIPredicate::sgt, nT, k.idx(0)), [&] {
            step(k.idx(0), initIndex >= 0 ? in[initIndex] : Value());
            k.forEach(k.idx(1), nT, k.idx(1), [&](Value t) { step(t, Last); });
          });
          // No steps: the state is init (or zeros).
          k.ifThen(k.cmp(CmpIPredicate::eq, nT, k.idx(0)), [&] {
            k.forEach(k.idx(0), k.idx(P), k.idx(1), [&](Value p) {
              for (size_t v = 0; v < masks.size(); ++v) {
                SmallVector<Value> at{bi, h, p, k.idx(v * lanes)};
                Value s = initIndex >= 0 ? k.vloadMasked(in[initIndex], at,
                                                         lanes, masks[v])
                                         : k.vconst(0.0, lanes);
                k.vstoreMasked(s, Last, at, masks[v]);
              }
            });
          });
        });
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuSsdPatterns(RewritePatternSet &patterns,
                                  const CpuTarget &target) {
  patterns.add<CpuSsd>(patterns.getContext(), target);
}

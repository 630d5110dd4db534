//===- CpuSelectiveScan.cpp - the Mamba-1 selective scan on the CPU -------===//
//
// A task owns up to four adjacent blocks of `lanes` channels of one batch
// row and runs the whole sequence; how many is chosen when the kernel
// runs, from the threads it runs on (seq_rt.parallel_width), so an object
// compiled on one machine splits its work for the machine that runs it. A
// block's N states live in vector registers while it runs (one vector per
// state index, lanes over channels), in an L1 buffer between chunks. The
// sequence goes by chunks of chunkSteps() steps, and each chunk in three
// stages:
//   - stage:  the step sizes (bias, softplus) and dt u of the chunk's steps
//             for every block into L1 buffers, while the next chunk's
//             lines are prefetched;
//   - recur:  each block's recurrence over the chunk, reading only L1, a
//             few steps at a time: first their decays exp(dt A) (decays),
//             then the states' updates;
//   - finish: skip and gate, and the stores of y.
//
// Why the stages: one step of the recurrence is about 20 N vector
// instructions (an exp per state). With softplus and the step's loads in
// it, a step filled the reorder buffer, so the next step's loads could not
// start under the current one's misses. And consecutive steps of a channel
// lie D x 4 bytes apart (6 KiB at D = 1536): farther than Intel's L1 stride
// prefetcher follows (2 KiB) and on another 4 KiB page, where the L2
// streamer stops. On Intel every step waited for DRAM (32 ms at T2048
// D1536 N16, three times a Zen 4's 10 ms). The stages keep the recurrence in
// L1 and put the independent work and the misses in short loops the core
// overlaps, with the lines prefetched a chunk ahead; and a task's several
// blocks make each step's row four adjacent lines rather than one.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuKernel.h"
#include "CPU/CpuPatterns.h"
#include "Common/ScanLayout.h"
#include "SeqRt/SeqRtDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace seqc;

namespace {

/// The kernel's buffers, named. The optional ones are null when the op
/// lacks them.
struct ScanBuffers : KernelBuffers<ScanBuffers> {
  Value u, delta, aT, b, c, y, last;
  Value skip, gate, bias, init;

  SmallVector<Value *> fields() {
    return {&u, &delta, &aT, &b, &c, &y, &last, &skip, &gate, &bias, &init};
  }
};

/// What the kernel knows statically.
struct ScanShape {
  int64_t N, D, perGroup, lanes, blocks;
  /// The most channel blocks (of `lanes` channels) a task may take: four,
  /// fewer where their states would pass 64 vectors. The run's split
  /// (CpuSelectiveScan::blocksPerTask) takes 1, 2 or 4 blocks per task, up
  /// to this.
  int64_t maxBlocksPerTask;
  bool zoh, softplus;
  /// D is not a multiple of the vector width: the last block is masked.
  bool ragged() const { return D % lanes != 0; }
};

/// One channel block of a task: its slot among the task's blocks, its
/// first channel, its B/C group and, where D is ragged, the mask of its
/// channels (all lanes but in the last block).
struct ChannelBlock {
  Value slot, d0, group, mask;
};

/// One task: a few adjacent channel blocks of one batch row, the whole
/// sequence.
class SelectiveScanTask {
public:
  /// Exps emitted side by side (KernelBuilder::exp): 8 chains of about 12
  /// dependent operations each, which fit the vector registers without
  /// spilling.
  static constexpr int64_t ExpGroup = 8;
  /// Steps staged together (their softplus side by side).
  static constexpr int64_t StageGroup = 4;

  /// Task `task` of tasks of `perTask` channel blocks.
  SelectiveScanTask(KernelBuilder &k, const ScanShape &s, const ScanBuffers &io,
                    Value perTask, Value task)
      : k(k), s(s), io(io) {
    Value tasksPerRow = tasksPerBatchRow(k, s, perTask);
    bi = k.divs(task, tasksPerRow);
    firstBlock = k.mul(k.rems(task, tasksPerRow), perTask);
    blockCount = k.mins(perTask, k.sub(k.idx(s.blocks), firstBlock));
    nT = k.mdim(io.u, 1);
    int64_t slots = s.maxBlocksPerTask;
    dtBuf = k.stackBuffer({slots, chunkSteps(), s.lanes});
    dtuBuf = k.stackBuffer({slots, chunkSteps(), s.lanes});
    uBuf = k.stackBuffer({slots, chunkSteps(), s.lanes});
    yBuf = k.stackBuffer({slots, chunkSteps(), s.lanes});
    aCols = k.stackBuffer({slots, s.N, s.lanes});
    states = k.stackBuffer({slots, s.N, s.lanes});
    decayBuf = k.stackBuffer({decaySteps() * s.N, s.lanes});
    if (s.zoh)
      weightBuf = k.stackBuffer({decaySteps() * s.N, s.lanes});
  }

  /// Tasks per batch row (the last may hold fewer blocks).
  static Value tasksPerBatchRow(KernelBuilder &k, const ScanShape &s,
                                Value perTask) {
    return k.divs(k.add(k.idx(s.blocks), k.sub(perTask, k.idx(1))), perTask);
  }

  /// Steps per chunk: the chunk's step sizes, dt u, u and outputs of a
  /// task's blocks take 16 KiB of L1 at most (16 steps of four 16-lane
  /// blocks, 32 of one), next to the decays and the columns of A; a chunk's
  /// loads are enough to cover DRAM's latency. Sized for the most blocks a
  /// task may take, whatever the run's split: a chunk that followed the
  /// split (a run-time value) cost 6-8 % in the loops' arithmetic, and
  /// tasks of one block ran as fast with 16 steps as with 32 (T2048).
  int64_t chunkSteps() const {
    return std::clamp<int64_t>(1024 / (s.maxBlocksPerTask * s.lanes), 8, 32);
  }
  /// Steps whose decays are computed before their recurrence: N vectors
  /// each, 8 KiB in all (16 KiB with the zero-order hold's weights). N = 0
  /// (no states) takes whole chunks.
  int64_t decaySteps() const {
    return std::clamp<int64_t>(128 / std::max<int64_t>(s.N, 1), 1,
                               chunkSteps());
  }

  void emit() {
    forEachBlock([&](const ChannelBlock &c) { loadParameters(c); });
    Value chunks =
        k.divs(k.add(nT, k.idx(chunkSteps() - 1)), k.idx(chunkSteps()));
    k.forEach(k.idx(0), chunks, k.idx(1), [&](Value ci) {
      Value t0 = k.mul(ci, k.idx(chunkSteps()));
      Value steps = k.mins(k.idx(chunkSteps()), k.sub(nT, t0));
      stage(t0, steps);
      forEachBlock([&](const ChannelBlock &c) {
        SmallVector<Value> h;
        for (int64_t n = 0; n < s.N; ++n)
          h.push_back(row(states, c.slot, k.idx(n)));
        h = recur(c, t0, steps, h);
        for (int64_t n = 0; n < s.N; ++n)
          setRow(h[n], states, c.slot, k.idx(n));
      });
      finish(t0, steps);
    });
    forEachBlock([&](const ChannelBlock &c) {
      for (int64_t n = 0; n < s.N; ++n)
        store(c, row(states, c.slot, k.idx(n)), io.last, {bi, k.idx(n), c.d0});
    });
  }

private:
  /// body for each of the task's channel blocks in turn.
  void forEachBlock(const std::function<void(const ChannelBlock &)> &body) {
    k.forEach(k.idx(0), blockCount, k.idx(1), [&](Value slot) {
      ChannelBlock c;
      c.slot = slot;
      c.d0 = k.mul(k.add(firstBlock, slot), k.idx(s.lanes));
      c.group = k.divs(c.d0, k.idx(s.perGroup));
      if (s.ragged())
        c.mask = k.vmask(k.sub(k.idx(s.D), c.d0), s.lanes);
      body(c);
    });
  }

  /// The block's lanes of a row of a [.., D]-innermost buffer (zero past D).
  Value load(const ChannelBlock &c, Value m, ValueRange ivs) {
    return c.mask ? k.vloadMasked(m, ivs, s.lanes, c.mask)
                  : k.vload(m, ivs, s.lanes);
  }
  void store(const ChannelBlock &c, Value v, Value m, ValueRange ivs) {
    if (c.mask)
      k.vstoreMasked(v, m, ivs, c.mask);
    else
      k.vstore(v, m, ivs);
  }
  /// Row r of a block's slot of a [slots, rows, lanes] buffer.
  Value row(Value m, Value slot, Value r) {
    return k.vload(m, {slot, r, k.idx(0)}, s.lanes);
  }
  void setRow(Value v, Value m, Value slot, Value r) {
    k.vstore(v, m, {slot, r, k.idx(0)});
  }
  /// Row r of a [rows, lanes] buffer.
  Value row(Value m, Value r) { return k.vload(m, {r, k.idx(0)}, s.lanes); }
  void setRow(Value v, Value m, Value r) { k.vstore(v, m, {r, k.idx(0)}); }

  /// The block's columns of A (into L1, zero past D) and initial states.
  void loadParameters(const ChannelBlock &c) {
    for (int64_t n = 0; n < s.N; ++n) {
      Value at = k.idx(n);
      setRow(load(c, io.aT, {at, c.d0}), aCols, c.slot, at);
      setRow(io.init ? load(c, io.init, {bi, at, c.d0})
                     : k.vconst(0.0, s.lanes),
             states, c.slot, at);
    }
  }

  /// Prefetches the block's lanes of row `t` of a [B, T, D] buffer.
  void prefetch(const ChannelBlock &c, Value m, Value t, bool forWrite) {
    k.prefetchRow(m, ValueRange{bi, t, c.d0}, s.lanes, forWrite);
  }

  /// dt (bias, softplus), dt u and u of steps [t0, t0 + steps) into L1,
  /// StageGroup steps at a time over the task's blocks (the lines of a
  /// step's row are adjacent); the same rows of the next chunk are
  /// prefetched. A group's softplus chains run side by side: one step's
  /// (an exp, then a log1p with a division) is some 100 cycles of
  /// dependent operations, and about two fit the reorder buffer. The last
  /// group repeats the chunk's last step where `steps` is not a multiple
  /// of StageGroup (the same row, written again).
  void stage(Value t0, Value steps) {
    Value lastStep = k.sub(nT, k.idx(1));
    Value lastOfChunk = k.sub(steps, k.idx(1));
    Value groups =
        k.divs(k.add(steps, k.idx(StageGroup - 1)), k.idx(StageGroup));
    k.forEach(k.idx(0), groups, k.idx(1), [&](Value g) {
      SmallVector<Value> rows, ts;
      for (int64_t j = 0; j < StageGroup; ++j) {
        rows.push_back(
            k.mins(k.add(k.mul(g, k.idx(StageGroup)), k.idx(j)), lastOfChunk));
        ts.push_back(k.add(t0, rows.back()));
      }
      forEachBlock([&](const ChannelBlock &c) {
        SmallVector<Value> dts, us;
        for (Value t : ts) {
          Value ahead = k.mins(k.add(t, k.idx(chunkSteps())), lastStep);
          for (Value m : {io.delta, io.u, io.gate})
            if (m)
              prefetch(c, m, ahead, /*forWrite=*/false);
          prefetch(c, io.y, ahead, /*forWrite=*/true);
          Value dt = load(c, io.delta, {bi, t, c.d0});
          if (io.bias)
            dt = k.fadd(dt, load(c, io.bias, {c.d0}));
          dts.push_back(dt);
          us.push_back(load(c, io.u, {bi, t, c.d0}));
        }
        if (s.softplus)
          dts = k.softplus(dts);
        for (auto [i, dt, u] : llvm::zip_equal(rows, dts, us)) {
          setRow(dt, dtBuf, c.slot, i);
          setRow(k.fmul(dt, u), dtuBuf, c.slot, i);
          setRow(u, uBuf, c.slot, i);
        }
      });
    });
  }

  /// exp(dt A_n) of steps [i0, i0 + len) of the chunk into decayBuf (row
  /// j N + n for step i0 + j), and with the zero-order hold the input's
  /// weight (expm1(dt A_n) / A_n, dt where A_n = 0) into weightBuf. The
  /// exps are independent of the states, so they run here, ExpGroup at a
  /// time with their instructions interleaved, rather than inside the
  /// recurrence, where the states hold most vector registers.
  void decays(const ChannelBlock &c, Value i0, Value len) {
    k.forEach(k.idx(0), len, k.idx(1), [&](Value j) {
      Value dt = row(dtBuf, c.slot, k.add(i0, j));
      Value first = k.mul(j, k.idx(s.N));
      for (int64_t n0 = 0; n0 < s.N; n0 += ExpGroup) {
        int64_t n1 = std::min(s.N, n0 + ExpGroup);
        SmallVector<Value> dA;
        for (int64_t n = n0; n < n1; ++n)
          dA.push_back(k.fmul(dt, row(aCols, c.slot, k.idx(n))));
        SmallVector<Value> decay = k.exp(dA);
        for (int64_t n = n0; n < n1; ++n) {
          Value at = k.add(first, k.idx(n));
          setRow(decay[n - n0], decayBuf, at);
          if (s.zoh)
            setRow(holdWeight(dt, dA[n - n0], row(aCols, c.slot, k.idx(n))),
                   weightBuf, at);
        }
      }
    });
  }

  /// The zero-order hold's weight of dt u B_n: expm1(dt A) / A, whose limit
  /// at A = 0 is dt.
  Value holdWeight(Value dt, Value dA, Value aCol) {
    Value isZero = k.fcmp(arith::CmpFPredicate::OEQ, aCol, k.like(dt, 0.0));
    Value safeA = k.select(isZero, k.like(dt, 1.0), aCol);
    return k.select(isZero, dt, k.fdiv(k.expm1(dA), safeA));
  }

  /// The block's recurrence over the chunk's steps, decaySteps() at a
  /// time: their decays, then h_n <- decay_n h_n + input_n and
  /// y = sum_n C_n h_n for each step.
  SmallVector<Value> recur(const ChannelBlock &c, Value t0, Value steps,
                           ValueRange h) {
    Value passes =
        k.divs(k.add(steps, k.idx(decaySteps() - 1)), k.idx(decaySteps()));
    return k.loop(passes, h, [&](Value pass, ValueRange hb) {
      Value i0 = k.mul(pass, k.idx(decaySteps()));
      Value len = k.mins(k.idx(decaySteps()), k.sub(steps, i0));
      decays(c, i0, len);
      return k.loop(len, hb, [&](Value j, ValueRange hj) {
        return step(c, k.add(t0, k.add(i0, j)), k.add(i0, j), j, hj);
      });
    });
  }

  /// Step t (row i of the chunk's buffers, row j N + n of the decays): the
  /// states' update and y into L1. y sums in four partial sums (a chain of
  /// N dependent FMAs would be the step's critical path).
  SmallVector<Value> step(const ChannelBlock &c, Value t, Value i, Value j,
                          ValueRange h) {
    Value first = k.mul(j, k.idx(s.N));
    Value dtu = s.zoh ? Value() : row(dtuBuf, c.slot, i);
    Value u = s.zoh ? row(uBuf, c.slot, i) : Value();
    SmallVector<Value> partial(4, k.vconst(0.0, s.lanes));
    SmallVector<Value> next;
    for (int64_t n = 0; n < s.N; ++n) {
      Value at = k.add(first, k.idx(n));
      Value Bn = k.splat(k.mload(io.b, {bi, t, c.group, k.idx(n)}), s.lanes);
      Value Cn = k.splat(k.mload(io.c, {bi, t, c.group, k.idx(n)}), s.lanes);
      // The input dt u B_n, or with the zero-order hold w_n u B_n.
      Value in =
          s.zoh ? k.fmul(k.fmul(row(weightBuf, at), u), Bn) : k.fmul(dtu, Bn);
      Value hn = k.vfma(row(decayBuf, at), h[n], in);
      partial[n % 4] = k.vfma(Cn, hn, partial[n % 4]);
      next.push_back(hn);
    }
    setRow(
        k.fadd(k.fadd(partial[0], partial[1]), k.fadd(partial[2], partial[3])),
        yBuf, c.slot, i);
    return next;
  }

  /// y + skip u, times silu(gate), stored.
  void finish(Value t0, Value steps) {
    k.forEach(k.idx(0), steps, k.idx(1), [&](Value i) {
      Value t = k.add(t0, i);
      forEachBlock([&](const ChannelBlock &c) {
        Value y = row(yBuf, c.slot, i);
        if (io.skip)
          y = k.vfma(load(c, io.skip, {c.d0}), row(uBuf, c.slot, i), y);
        if (io.gate)
          y = k.fmul(y, k.silu(load(c, io.gate, {bi, t, c.d0})));
        store(c, y, io.y, {bi, t, c.d0});
      });
    });
  }

  KernelBuilder &k;
  const ScanShape &s;
  const ScanBuffers io;
  Value bi, firstBlock, blockCount, nT;
  Value dtBuf, dtuBuf, uBuf, yBuf, aCols, states, decayBuf, weightBuf;
};

struct CpuSelectiveScan : OpRewritePattern<seq::SelectiveScanOp> {
  CpuSelectiveScan(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SelectiveScanOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto aType = cast<RankedTensorType>(op.getA().getType());
    auto bType = cast<RankedTensorType>(op.getB().getType());
    ScanShape s;
    s.N = aType.getDimSize(1);
    s.D = aType.getDimSize(0);
    int64_t G = bType.getDimSize(2);
    s.lanes = target.vectorWidth;
    // States in registers need a static, modest N; a channel block must not
    // straddle two B/C groups so B and C are one broadcast per step.
    if (ShapedType::isDynamic(s.N) || s.N > 64 || ShapedType::isDynamic(G) ||
        ShapedType::isDynamic(s.D) || (G > 1 && (s.D / G) % s.lanes != 0))
      return rewriter.notifyMatchFailure(
          op, "needs static N <= 64, static D and G, and D / G a multiple of "
              "the vector width when G > 1");
    s.perGroup = s.D / G;
    s.blocks = (s.D + s.lanes - 1) / s.lanes;
    s.maxBlocksPerTask = 4;
    while (s.maxBlocksPerTask > 1 && s.maxBlocksPerTask * s.N > 64)
      s.maxBlocksPerTask /= 2;
    s.zoh = op.getDiscretization() == seq::Discretization::zoh;
    s.softplus = op.getDeltaSoftplus();

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    // A^T [N, D] and the state as [B, N, D]: lanes run over channels.
    auto stateType = RankedTensorType::get(
        {cast<RankedTensorType>(op.getLast().getType()).getDimSize(0), s.N,
         s.D},
        getElementTypeOrSelf(op.getLast().getType()));
    ScanBuffers io;
    io.u = readBuffer(b, op.getU());
    io.delta = readBuffer(b, op.getDelta());
    io.aT = readBuffer(b, transposeLastTwo(b, op.getA()));
    io.b = readBuffer(b, op.getB());
    io.c = readBuffer(b, op.getC());
    io.y = allocResult(b, cast<RankedTensorType>(op.getY().getType()),
                       dims.of("y"));
    io.last = allocBuffer(b, stateType, {dims["B"], kb.idx(s.N), kb.idx(s.D)});
    auto optional = [&](Value v) { return v ? readBuffer(b, v) : Value(); };
    io.skip = optional(op.getSkip());
    io.gate = optional(op.getGate());
    io.bias = optional(op.getDeltaBias());
    if (op.getInit())
      io.init = readBuffer(b, transposeLastTwo(b, op.getInit()));

    Value perTask = blocksPerTask(b, kb, s);
    Value tasks =
        kb.mul(dims["B"], SelectiveScanTask::tasksPerBatchRow(kb, s, perTask));
    SmallVector<Value> args = io.list();
    args.push_back(perTask);
    emitParallelKernel(b, "selective_scan", tasks, args,
                       [&](KernelBuilder &k, Value task, ValueRange in) {
                         SelectiveScanTask(k, s, io.rebind(in.drop_back()),
                                           in.back(), task)
                             .emit();
                       });

    Value y = asTensor(b, io.y, cast<RankedTensorType>(op.getY().getType()));
    Value last = transposeLastTwo(b, asTensor(b, io.last, stateType));
    rewriter.replaceOp(
        op, {y, tensor::CastOp::create(b, op.getLast().getType(), last)});
    return success();
  }

  /// Channel blocks per task: up to s.maxBlocksPerTask, whose rows of a
  /// step are adjacent lines (one line per step and page, as one block
  /// reads them, left the memory system little to stream: T2048 D1536 N16
  /// ran 25-35% slower than the same work with contiguous rows), while
  /// every thread the kernel runs on keeps at least four tasks per batch
  /// row. The threads are the run's (seq_rt.parallel_width), not the
  /// compiler's: an object compiled on 2 cores and run on 64 gives every
  /// thread work.
  static Value blocksPerTask(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                             const ScanShape &s) {
    Value threads = seq_rt::ParallelWidthOp::create(b, b.getIndexType());
    Value minTasks = kb.mul(threads, kb.idx(4));
    // The largest size that leaves enough tasks wins.
    Value perTask = kb.idx(1);
    for (int64_t p = 2; p <= s.maxBlocksPerTask; p *= 2) {
      Value enough =
          kb.cmp(arith::CmpIPredicate::sge, kb.idx(s.blocks / p), minTasks);
      perTask = kb.select(enough, kb.idx(p), perTask);
    }
    return perTask;
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuSelectiveScanPatterns(RewritePatternSet &patterns,
                                            const CpuTarget &target) {
  patterns.add<CpuSelectiveScan>(patterns.getContext(), target);
}

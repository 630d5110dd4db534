//===- CpuElementwise.cpp - the graph's elementwise ops and row sums ------===//
//
// What fusion leaves of the glue around the seq ops and matmuls (norm
// statistics, activations of dense layers, adds that feed more than one
// consumer) is 2-D linalg.generic ops: elementwise maps and row sums such
// as the sum of squares of an RMSNorm. They run as vectorized kernels over
// blocks of rows, instead of the scalar loops linalg would give them.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuPatterns.h"
#include "Common/ElementwiseStage.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace seqc;

namespace {

/// Rows per task: enough work per task to amortize its dispatch.
constexpr int64_t kRowsPerTask = 16;

/// The kernel arguments for a stage's inputs.
static SmallVector<Value> inputBuffers(ImplicitLocOpBuilder &b,
                                       const ElementwiseStage &stage) {
  SmallVector<Value> args;
  linalg::GenericOp op = stage.op;
  for (Value in : op.getDpsInputs())
    args.push_back(readBuffer(b, in));
  return args;
}

/// Whether a matmul's kernel will apply `op` (see CpuMatmul): as the
/// producer of its A, or as the consumer of its result.
static bool fusesIntoMatmul(linalg::GenericOp op) {
  if (auto mm =
          dyn_cast_or_null<linalg::MatmulOp>(soleComputeUser(op->getResult(0))))
    if (mm.getDpsInputs()[0] == op->getResult(0))
      return true;
  for (Value in : op.getDpsInputs())
    if (auto mm = in.getDefiningOp<linalg::MatmulOp>())
      if (soleComputeUser(mm->getResult(0)) == op.getOperation())
        return true;
  return false;
}

/// out[m, n] = f(inputs at (m, n)).
struct CpuElementwiseMap : OpRewritePattern<linalg::GenericOp> {
  CpuElementwiseMap(MLIRContext *ctx, const CpuTarget &target, bool fuse)
      : OpRewritePattern(ctx, /*benefit=*/1), target(target), fuse(fuse) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<ElementwiseStage> stage = ElementwiseStage::match(op);
    if (!stage || (fuse && fusesIntoMatmul(op)))
      return rewriter.notifyMatchFailure(
          op, "not a 2-D elementwise map, or fused into a matmul");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value init = op.getDpsInits()[0];
    Value M = kb.dim(init, 0), N = kb.dim(init, 1);
    Value out = allocBuffer(b, type, {M, N});
    SmallVector<Value> args = inputBuffers(b, *stage);
    args.push_back(out);
    const int64_t lanes = target.vectorWidth;
    unsigned numInputs = stage->access.size();
    Value tasks =
        kb.divs(kb.add(M, kb.idx(kRowsPerTask - 1)), kb.idx(kRowsPerTask));
    emitParallelKernel(
        b, "elementwise", tasks, args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value o = in[numInputs];
          Value rows = k.mdim(o, 0), cols = k.mdim(o, 1);
          Value r0 = k.mul(task, k.idx(kRowsPerTask));
          Value r1 = k.mins(rows, k.add(r0, k.idx(kRowsPerTask)));
          k.forEach(r0, r1, k.idx(1), [&](Value r) {
            k.forEach(k.idx(0), cols, k.idx(lanes), [&](Value c) {
              Value mask = k.vmask(k.sub(cols, c), lanes);
              Value v = stage->emit(k, lanes, r, c, in.take_front(numInputs),
                                    -1, Value(), mask);
              k.vstoreMasked(v, o, {r, c}, mask);
            });
          });
        });
    rewriter.replaceOp(op, asTensor(b, out, type));
    return success();
  }

  CpuTarget target;
  bool fuse;
};

/// out[m] = init[m] + sum_n f(inputs at (m, n)).
struct CpuRowSum : OpRewritePattern<linalg::GenericOp> {
  CpuRowSum(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/1), target(target) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<ElementwiseStage> stage = ElementwiseStage::matchRowSum(op);
    if (!stage)
      return rewriter.notifyMatchFailure(op, "not a row sum");
    // The column count comes from an input read at (m, n).
    auto fullIt = llvm::find(stage->access, ElementwiseStage::Access::Full);
    if (fullIt == stage->access.end())
      return rewriter.notifyMatchFailure(op, "no input read at (m, n)");
    unsigned fullInput = fullIt - stage->access.begin();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value init = op.getDpsInits()[0];
    Value M = kb.dim(init, 0);
    Value out = allocBuffer(b, type, {M});
    SmallVector<Value> args = inputBuffers(b, *stage);
    args.push_back(readBuffer(b, init));
    args.push_back(out);
    const int64_t lanes = target.vectorWidth;
    unsigned numInputs = stage->access.size();
    Value tasks =
        kb.divs(kb.add(M, kb.idx(kRowsPerTask - 1)), kb.idx(kRowsPerTask));
    emitParallelKernel(
        b, "row_sum", tasks, args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value initBuf = in[numInputs], o = in[numInputs + 1];
          Value rows = k.mdim(o, 0), cols = k.mdim(in[fullInput], 1);
          Value r0 = k.mul(task, k.idx(kRowsPerTask));
          Value r1 = k.mins(rows, k.add(r0, k.idx(kRowsPerTask)));
          Value zero = k.vconst(0.0, lanes);
          k.forEach(r0, r1, k.idx(1), [&](Value r) {
            Value steps = k.divs(k.add(cols, k.idx(lanes - 1)), k.idx(lanes));
            SmallVector<Value> sum =
                k.loop(steps, {zero},
                       [&](Value step, ValueRange acc) -> SmallVector<Value> {
                         Value c = k.mul(step, k.idx(lanes));
                         Value mask = k.vmask(k.sub(cols, c), lanes);
                         Value v = stage->emit(k, lanes, r, c,
                                               in.take_front(numInputs), -1,
                                               Value(), mask);
                         // Lanes past the row's end add nothing.
                         v = k.select(mask, v, zero);
                         return {k.fadd(acc[0], v)};
                       });
            Value total = k.fadd(k.mload(initBuf, {r}), k.hsum(sum[0]));
            k.mstore(total, o, {r});
          });
        });
    rewriter.replaceOp(op, asTensor(b, out, type));
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuElementwisePatterns(RewritePatternSet &patterns,
                                          const CpuTarget &target, bool fuse) {
  patterns.add<CpuElementwiseMap>(patterns.getContext(), target, fuse);
  patterns.add<CpuRowSum>(patterns.getContext(), target);
}

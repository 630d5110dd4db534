//===- CpuMatmul.cpp - the graph's matmuls as parallel blocked GEMMs ------===//
//
// Projections around the seq ops (in/out projections, x-projections, expert
// weights of dense layers) are linalg.matmul / linalg.batch_matmul on
// tensors. They take the same register-blocked micro-kernel as the chunked
// algorithms, parallel over blocks of rows and columns of the result.
//
//===----------------------------------------------------------------------===//

#include "CpuPatterns.h"
#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace seqc;

namespace {

/// Whether `init` is a linalg.fill of 0 (the product then overwrites).
static bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

static bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// C[batch] = init + A[batch] B[batch] with row-major operands (the default
/// indexing maps of linalg.matmul and linalg.batch_matmul).
template <typename OpTy>
struct CpuMatmul : OpRewritePattern<OpTy> {
  CpuMatmul(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(target) {}

  static constexpr int64_t RowBlock = 64, ColBlock = 256;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    constexpr bool batched = std::is_same_v<OpTy, linalg::BatchMatmulOp>;
    if (!op.hasPureTensorSemantics() || op->getNumResults() != 1)
      return failure();
    // Only the default (row-major, untransposed) indexing maps.
    SmallVector<AffineMap> defaults(
        OpTy::getDefaultIndexingMaps(op->getContext()));
    if (op.getIndexingMapsArray() != defaults)
      return failure();
    Value A = op.getDpsInputs()[0], B = op.getDpsInputs()[1];
    Value init = op.getDpsInits()[0];
    if (!isF32Tensor(A) || !isF32Tensor(B) || !isF32Tensor(init))
      return failure();

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    int64_t off = batched ? 1 : 0;
    Value batch = batched ? kb.dim(A, 0) : kb.idx(1);
    Value M = kb.dim(A, off), K = kb.dim(A, off + 1), N = kb.dim(B, off + 1);
    // The shapes must agree (upstream run-time verification reports a
    // mismatch first; this keeps the kernel memory-safe regardless).
    kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(B, off), K),
             "matmul: the reduction sizes of the operands differ ({0} vs {1})",
             {kb.dim(B, off), K});
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < resultType.getRank(); ++i)
      sizes.push_back(kb.dim(init, i));
    Value cBuf = allocBuffer(b, resultType, sizes);
    bool overwrite = isZeroFill(init);
    SmallVector<Value> args{readBuffer(b, A), readBuffer(b, B), cBuf};
    if (!overwrite)
      args.push_back(readBuffer(b, init));

    Value rowBlocks = kb.divs(kb.add(M, kb.idx(RowBlock - 1)), kb.idx(RowBlock));
    Value colBlocks = kb.divs(kb.add(N, kb.idx(ColBlock - 1)), kb.idx(ColBlock));
    emitParallelKernel(
        b, batched ? "batch_matmul" : "matmul",
        kb.mul(batch, kb.mul(rowBlocks, colBlocks)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value Am = in[0], Bm = in[1], Cm = in[2];
          Value nM = k.mdim(Am, off), nK = k.mdim(Am, off + 1);
          Value nN = k.mdim(Bm, off + 1);
          Value rb = k.divs(k.add(nM, k.idx(RowBlock - 1)), k.idx(RowBlock));
          Value cb = k.divs(k.add(nN, k.idx(ColBlock - 1)), k.idx(ColBlock));
          Value col = k.rems(task, cb), rest = k.divs(task, cb);
          Value row = k.rems(rest, rb), bi = k.divs(rest, rb);
          Value i0 = k.mul(row, k.idx(RowBlock)), j0 = k.mul(col, k.idx(ColBlock));
          Value rows = k.mins(k.idx(RowBlock), k.sub(nM, i0));
          Value cols = k.mins(k.idx(ColBlock), k.sub(nN, j0));
          auto at = [&, bi](Value r0, Value c0) {
            return [&, bi, r0, c0](Value r, Value c) {
              SmallVector<Value> ivs;
              if (batched)
                ivs.push_back(bi);
              ivs.push_back(k.add(r0, r));
              ivs.push_back(k.add(c0, c));
              return ivs;
            };
          };
          MatrixRef a{Am, at(i0, k.idx(0))}, bMat{Bm, at(k.idx(0), j0)};
          MatrixRef c{Cm, at(i0, j0)};
          if (!overwrite) {
            // C starts from the init tile; the product accumulates.
            k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
              k.forEach(k.idx(0), cols, k.idx(1), [&](Value cc) {
                k.mstore(k.mload(in[3], c.at(r, cc)), Cm, c.at(r, cc));
              });
            });
          }
          emitGemm(k, target, {rows, cols, nK}, a, bMat, c,
                   overwrite ? GemmMode::Overwrite : GemmMode::Accumulate);
        });
    rewriter.replaceOp(op, asTensor(b, cBuf, resultType));
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuMatmulPatterns(RewritePatternSet &patterns,
                                     const CpuTarget &target) {
  patterns.add<CpuMatmul<linalg::MatmulOp>, CpuMatmul<linalg::BatchMatmulOp>>(
      patterns.getContext(), target);
}

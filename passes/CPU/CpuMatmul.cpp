//===- CpuMatmul.cpp - the graph's matmuls as parallel blocked GEMMs ------===//
//
// Projections around the seq ops (in/out projections, x-projections, expert
// weights of dense layers) are linalg.matmul / linalg.batch_matmul on
// tensors. They take the same register-blocked micro-kernel as the chunked
// algorithms, parallel over blocks of rows and columns of the result.
//
// Elementwise neighbours fuse into a matmul's kernel (ElementwiseStage):
// a producer of A (the normalization of an RMSNorm before a projection) is
// computed while each task packs its rows of A, and a consumer of the result
// (a residual add, a scale, an activation) is applied to each finished tile
// while it is in cache. Neither intermediate is materialized.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"
#include "Common/ElementwiseStage.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace seqc;

namespace {

/// Whether `init` is a linalg.fill of 0 (the product then overwrites).
static bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// f32, bf16 and f16 operands: loads widen to f32, and the product
/// accumulates in f32 whatever the result's type.
static bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t)
    return false;
  Type elt = t.getElementType();
  return elt.isF32() || elt.isBF16() || elt.isF16();
}

/// Points the tensor.dim users of `from` at `to` (a tensor of its shape).
static void redirectDims(PatternRewriter &rewriter, Value from, Value to) {
  for (OpOperand &use : llvm::make_early_inc_range(from.getUses()))
    if (isa<tensor::DimOp>(use.getOwner()))
      rewriter.modifyOpInPlace(use.getOwner(), [&] { use.set(to); });
}

/// C[batch] = init + A[batch] B[batch] with row-major operands (the default
/// indexing maps of linalg.matmul and linalg.batch_matmul).
template <typename OpTy> struct CpuMatmul : OpRewritePattern<OpTy> {
  CpuMatmul(MLIRContext *ctx, const CpuTarget &target, bool fuse)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(target), fuse(fuse) {
  }

  static constexpr int64_t RowBlock = 64, ColBlock = 256;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    constexpr bool batched = std::is_same_v<OpTy, linalg::BatchMatmulOp>;
    if (!op.hasPureTensorSemantics() || op->getNumResults() != 1)
      return rewriter.notifyMatchFailure(
          op, "needs tensor operands and one result");
    // Only the default (row-major, untransposed) indexing maps.
    SmallVector<AffineMap> defaults(
        OpTy::getDefaultIndexingMaps(op->getContext()));
    if (op.getIndexingMapsArray() != defaults)
      return rewriter.notifyMatchFailure(
          op, "needs the default indexing maps (no transposed operands)");
    Value A = op.getDpsInputs()[0], B = op.getDpsInputs()[1];
    Value init = op.getDpsInits()[0];
    if (!isFloatTensor(A) || !isFloatTensor(B) || !isFloatTensor(init))
      return rewriter.notifyMatchFailure(op, "takes f32, bf16 or f16 operands");

    // Elementwise producer of A and consumer of the result, fused when
    // nothing else needs the intermediate (2-D matmuls).
    std::optional<ElementwiseStage> prologue, epilogue;
    int epilogueInput = -1;
    if (!batched && fuse) {
      // Only as A: matmul(p, p) or p as the init still needs p itself.
      if (auto p = A.getDefiningOp<linalg::GenericOp>();
          p && B != A && init != A &&
          soleComputeUser(p->getResult(0)) == op.getOperation())
        prologue = ElementwiseStage::match(p);
      Value result = op->getResult(0);
      if (Operation *user = soleComputeUser(result))
        if (auto g = dyn_cast<linalg::GenericOp>(user)) {
          epilogue = ElementwiseStage::match(g);
          if (epilogue) {
            for (OpOperand *in : g.getDpsInputOperands())
              if (in->get() == result) {
                if (epilogueInput >= 0 ||
                    epilogue->access[in->getOperandNumber()] !=
                        ElementwiseStage::Access::Full)
                  epilogueInput = -2; // read twice, or broadcast: not fused
                else
                  epilogueInput = in->getOperandNumber();
              }
            if (epilogueInput < 0)
              epilogue.reset();
          }
        }
    }

    // With an epilogue, the kernel runs where the consumer did: its other
    // inputs may be computed after the matmul.
    if (epilogue)
      rewriter.setInsertionPoint(epilogue->op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    kb.checksFor(op);
    int64_t off = batched ? 1 : 0;
    // A's sizes; a fused prologue's A is never built, its init has them.
    Value aShape = prologue ? prologue->op.getDpsInits()[0] : A;
    Value batch = batched ? kb.dim(A, 0) : kb.idx(1);
    Value M = kb.dim(aShape, off), K = kb.dim(aShape, off + 1);
    Value N = kb.dim(B, off + 1);
    // The shapes must agree (upstream run-time verification reports a
    // mismatch first; this keeps the kernel memory-safe regardless).
    kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(B, off), K),
             "the reduction sizes of the operands differ ({0} vs {1})",
             {kb.dim(B, off), K});
    // The kernel takes M and N (and the batch) from the init.
    kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(init, off), M),
             "the init has {0} rows but A has {1}", {kb.dim(init, off), M});
    kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(init, off + 1), N),
             "the init has {0} columns but B has {1}",
             {kb.dim(init, off + 1), N});
    if (batched) {
      kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(B, 0), batch),
               "the batch sizes of the operands differ ({0} vs {1})",
               {kb.dim(B, 0), batch});
      kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(init, 0), batch),
               "the init's batch size is {0} but A's is {1}",
               {kb.dim(init, 0), batch});
    }
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < resultType.getRank(); ++i)
      sizes.push_back(kb.dim(init, i));
    // A narrower result accumulates in an f32 buffer, rounded once at the
    // end (the reduction blocks of a long K would otherwise round each
    // partial sum).
    bool roundResult = !resultType.getElementType().isF32();
    Value cBuf = allocBuffer(
        b, roundResult ? resultType.clone(b.getF32Type()) : resultType, sizes);
    bool overwrite = isZeroFill(init);
    // Kernel arguments: A (or the prologue's inputs), B, C, the init when
    // accumulating, then the epilogue's other inputs.
    SmallVector<Value> args;
    unsigned aArgs = 1;
    if (prologue) {
      aArgs = prologue->op.getNumDpsInputs();
      for (Value in : prologue->op.getDpsInputs())
        args.push_back(readBuffer(b, in));
    } else {
      args.push_back(readBuffer(b, A));
    }
    unsigned bArg = args.size();
    args.push_back(readBuffer(b, B));
    args.push_back(cBuf);
    unsigned initArg = args.size();
    if (!overwrite)
      args.push_back(readBuffer(b, init));
    unsigned epiArgs = args.size();
    if (epilogue)
      for (auto [i, in] : llvm::enumerate(epilogue->op.getDpsInputs()))
        args.push_back(
            static_cast<int>(i) == epilogueInput ? cBuf : readBuffer(b, in));

    Value rowBlocks =
        kb.divs(kb.add(M, kb.idx(RowBlock - 1)), kb.idx(RowBlock));
    Value colBlocks =
        kb.divs(kb.add(N, kb.idx(ColBlock - 1)), kb.idx(ColBlock));
    std::string name = batched ? "batch_matmul" : "matmul";
    if (prologue)
      name += "_prologue";
    if (epilogue)
      name += "_epilogue";
    const int64_t lanes = target.vectorWidth;
    emitParallelKernel(
        b, name, kb.mul(batch, kb.mul(rowBlocks, colBlocks)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          ValueRange aIns = in.take_front(aArgs);
          Value Bm = in[bArg], Cm = in[bArg + 1];
          Value nM = k.mdim(Cm, off), nN = k.mdim(Cm, off + 1);
          Value nK = k.mdim(Bm, off);
          Value rb = k.divs(k.add(nM, k.idx(RowBlock - 1)), k.idx(RowBlock));
          Value cb = k.divs(k.add(nN, k.idx(ColBlock - 1)), k.idx(ColBlock));
          Value col = k.rems(task, cb), rest = k.divs(task, cb);
          Value row = k.rems(rest, rb), bi = k.divs(rest, rb);
          Value i0 = k.mul(row, k.idx(RowBlock)),
                j0 = k.mul(col, k.idx(ColBlock));
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
          MatrixRef a{aIns.empty() ? Value() : aIns[0], at(i0, k.idx(0))};
          MatrixRef bMat{Bm, at(k.idx(0), j0)};
          MatrixRef c{Cm, at(i0, j0)};
          if (!overwrite) {
            // C starts from the init tile; the product accumulates.
            k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
              k.forEach(k.idx(0), cols, k.idx(1), [&](Value cc) {
                k.mstore(k.mload(in[initArg], c.at(r, cc)), Cm, c.at(r, cc));
              });
            });
          }
          PrepareA prepareA;
          if (prologue) {
            // Each reduction block of this task's rows of A, computed from
            // the prologue's inputs into a packed stack buffer.
            Value packed = k.stackBuffer({RowBlock, gemmReductionBlock});
            prepareA = [&, packed](Value k0, Value k1) {
              Value len = k.sub(k1, k0);
              k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
                k.forEach(k.idx(0), len, k.idx(lanes), [&](Value kk) {
                  Value mask = k.vmask(k.sub(len, kk), lanes);
                  Value v =
                      prologue->emit(k, lanes, k.add(i0, r), k.add(k0, kk),
                                     aIns, /*givenInput=*/-1, Value(), mask);
                  k.vstoreMasked(v, packed, {r, kk}, mask);
                });
              });
              return MatrixRef{packed, [&, k0](Value r, Value kk) {
                                 return SmallVector<Value>{r, k.sub(kk, k0)};
                               }};
            };
          }
          emitGemm(k, target, {rows, cols, nK}, a, bMat, c,
                   overwrite ? GemmMode::Overwrite : GemmMode::Accumulate,
                   prepareA);
          if (epilogue) {
            // The consumer on the finished tile, in place.
            ValueRange eIns = in.drop_front(epiArgs);
            k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
              k.forEach(k.idx(0), cols, k.idx(lanes), [&](Value cc) {
                Value mask = k.vmask(k.sub(cols, cc), lanes);
                Value v = k.vloadMasked(Cm, c.at(r, cc), lanes, mask);
                Value out =
                    epilogue->emit(k, lanes, k.add(i0, r), k.add(j0, cc), eIns,
                                   epilogueInput, v, mask);
                k.vstoreMasked(out, Cm, c.at(r, cc), mask);
              });
            });
          }
        });
    Value product = asTensor(
        b, roundResult ? emitRounding(b, kb, cBuf, resultType, sizes) : cBuf,
        resultType);
    if (prologue)
      redirectDims(rewriter, prologue->op->getResult(0),
                   prologue->op.getDpsInits()[0]);
    if (epilogue) {
      redirectDims(rewriter, op->getResult(0), init);
      rewriter.replaceOp(epilogue->op, product);
      rewriter.eraseOp(op);
      if (prologue)
        rewriter.eraseOp(prologue->op);
      return success();
    }
    if (prologue) {
      rewriter.replaceOp(op, product);
      rewriter.eraseOp(prologue->op);
      return success();
    }
    rewriter.replaceOp(op, product);
    return success();
  }

  /// The f32 product `cBuf` rounded into a new buffer of `type`, a task
  /// per row.
  Value emitRounding(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value cBuf,
                     RankedTensorType type, ArrayRef<Value> sizes) const {
    Value out = allocBuffer(b, type, sizes);
    int64_t rank = type.getRank();
    Value rows = kb.idx(1);
    for (int64_t d = 0; d + 1 < rank; ++d)
      rows = kb.mul(rows, sizes[d]);
    const int64_t lanes = target.vectorWidth;
    emitParallelKernel(b, "matmul_round", rows, {cBuf, out},
                       [&](KernelBuilder &k, Value task, ValueRange in) {
                         Value product = in[0], rounded = in[1];
                         Value n = k.mdim(product, rank - 1);
                         SmallVector<Value> lead;
                         if (rank == 3) {
                           Value m = k.mdim(product, 1);
                           lead = {k.divs(task, m), k.rems(task, m)};
                         } else {
                           lead = {task};
                         }
                         k.forEach(k.idx(0), n, k.idx(lanes), [&](Value c) {
                           Value mask = k.vmask(k.sub(n, c), lanes);
                           SmallVector<Value> at(lead);
                           at.push_back(c);
                           k.vstoreMasked(
                               k.vloadMasked(product, at, lanes, mask), rounded,
                               at, mask);
                         });
                       });
    return out;
  }

  CpuTarget target;
  bool fuse;
};

} // namespace

void seqc::populateCpuMatmulPatterns(RewritePatternSet &patterns,
                                     const CpuTarget &target, bool fuse) {
  patterns.add<CpuMatmul<linalg::MatmulOp>, CpuMatmul<linalg::BatchMatmulOp>>(
      patterns.getContext(), target, fuse);
}

//===- GpuLinalg.cpp - the graph's linalg ops as GPU kernels --------------===//
//
// Projections, norms and elementwise glue (every linalg op, named ones
// generalized first) become one kernel each: a thread per element of the
// outputs' parallel index space, adjacent threads on adjacent elements of the
// innermost dimension (coalesced), the reduction dimensions looped in order
// by that thread, the op's body inlined. Operands are read through their
// indexing maps in their own element types, exactly as linalg defines the
// op. Row-major float matmuls and batch matmuls get a tiled kernel instead
// (64 x 64 output tiles, A and B tiles staged in shared memory): bf16 and
// f16 products on tensor cores (mma.sync, f32 accumulators), others with
// f32 FMAs.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuGemm.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace seqc;

namespace {

struct GpuGeneric : OpRewritePattern<linalg::GenericOp> {
  GpuGeneric(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/1), target(target) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumResults() == 0 ||
        !RegionCaptures::of(op.getRegion()).scalarOnly())
      return rewriter.notifyMatchFailure(
          op, "needs tensor operands and a body that captures no tensors");
    SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
    // Outputs must be indexed by parallel dimensions only (linalg's rule for
    // reductions); their maps must be projected permutations to give each
    // thread its own elements.
    size_t numParallel = llvm::count(iters, utils::IteratorType::parallel);
    for (OpOperand &init : op.getDpsInitsMutable()) {
      AffineMap map = op.getMatchingIndexingMap(&init);
      // Each thread owns the output elements of its parallel indices: every
      // parallel dimension must index each output (else threads would share
      // an element).
      if (!map.isProjectedPermutation() || map.getNumResults() != numParallel)
        return rewriter.notifyMatchFailure(
            op, "an output is not indexed by every parallel dimension");
      for (AffineExpr e : map.getResults())
        if (iters[cast<AffineDimExpr>(e).getPosition()] !=
            utils::IteratorType::parallel)
          return rewriter.notifyMatchFailure(
              op, "an output is indexed by a reduction dimension");
    }
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    SmallVector<Range> ranges = cast<linalg::LinalgOp>(op.getOperation())
                                    .createLoopRanges(rewriter, op.getLoc());
    SmallVector<Value> sizes;
    for (Range &r : ranges)
      sizes.push_back(getValueOrCreateConstantIndexOp(b, op.getLoc(), r.size));
    SmallVector<int64_t> parallel, reduction;
    for (auto [i, it] : llvm::enumerate(iters))
      (it == utils::IteratorType::parallel ? parallel : reduction).push_back(i);
    Value count = kb.idx(1);
    for (int64_t d : parallel)
      count = kb.mul(count, sizes[d]);

    SmallVector<Value> args;
    for (Value in : op.getDpsInputs())
      args.push_back(isa<RankedTensorType>(in.getType()) ? readBuffer(b, in)
                                                         : in);
    SmallVector<Value> results;
    for (auto [init, res] : llvm::zip(op.getDpsInits(), op.getResults())) {
      auto type = cast<RankedTensorType>(res.getType());
      SmallVector<Value> dims;
      for (int64_t d = 0; d < type.getRank(); ++d)
        dims.push_back(kb.dim(init, d));
      args.push_back(readBuffer(b, init));
      results.push_back(allocBuffer(b, type, dims));
    }
    size_t numIn = op.getNumDpsInputs(), numOut = op.getNumDpsInits();
    args.append(results);
    // Values the body uses from above: constants are recreated in the
    // kernel, anything else travels as an argument (after the sizes).
    RegionCaptures captures = RegionCaptures::of(op.getRegion());
    SmallVector<Value> &captured = captures.values;
    args.append(sizes);
    args.append(captured);
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    Block &body = op.getRegion().front();

    emitItemKernel(
        b, target, "linalg", kb, count, args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          ImplicitLocOpBuilder &kbld = k.builder();
          ValueRange loopSizes =
              in.drop_back(captured.size()).take_back(sizes.size());
          IRMapping outside = captures.map(kbld, in.take_back(captured.size()));
          SmallVector<Value> parallelSizes;
          for (int64_t d : parallel)
            parallelSizes.push_back(loopSizes[d]);
          SmallVector<Value> pIdx = delinearize(k, item, parallelSizes);
          SmallVector<Value> loopIdx(sizes.size());
          for (auto [d, v] : llvm::zip(parallel, pIdx))
            loopIdx[d] = v;
          auto access = [&](unsigned operand) {
            auto idx = affine::expandAffineMap(kbld, kbld.getLoc(),
                                               maps[operand], loopIdx);
            return *idx;
          };
          auto element = [&](unsigned operand, Value source) -> Value {
            if (!isa<MemRefType>(source.getType()))
              return source; // a scalar operand
            return memref::LoadOp::create(kbld, source, access(operand));
          };
          // Outputs start from their inits (read once, at the first
          // reduction step's indices: outputs use parallel dims only).
          SmallVector<Value> acc;
          for (size_t o = 0; o < numOut; ++o) {
            for (int64_t d : reduction)
              loopIdx[d] = k.idx(0);
            acc.push_back(element(numIn + o, in[numIn + o]));
          }
          SmallVector<Value> reductionSizes;
          for (int64_t d : reduction)
            reductionSizes.push_back(loopSizes[d]);
          auto step = [&](ValueRange current) {
            SmallVector<Value> blockArgs;
            for (size_t i = 0; i < numIn; ++i)
              blockArgs.push_back(element(i, in[i]));
            blockArgs.append(current.begin(), current.end());
            IRMapping map = outside;
            for (auto [arg, v] : llvm::zip(body.getArguments(), blockArgs))
              map.map(arg, v);
            for (Operation &inner : body.without_terminator()) {
              if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
                map.map(index.getResult(), loopIdx[index.getDim()]);
                continue;
              }
              kbld.clone(inner, map);
            }
            SmallVector<Value> next;
            for (Value v : body.getTerminator()->getOperands())
              next.push_back(map.lookupOrDefault(v));
            return next;
          };
          SmallVector<Value> out =
              reduction.empty()
                  ? step(acc)
                  : k.nest(reductionSizes, acc,
                           [&](ValueRange rIdx, ValueRange current) {
                             for (auto [d, v] : llvm::zip(reduction, rIdx))
                               loopIdx[d] = v;
                             return step(current);
                           });
          for (int64_t d : reduction)
            loopIdx[d] = k.idx(0);
          for (size_t o = 0; o < numOut; ++o)
            memref::StoreOp::create(kbld, out[o], in[numIn + numOut + o],
                                    access(numIn + o));
        });

    SmallVector<Value> tensors;
    for (auto [buf, res] : llvm::zip(results, op.getResults()))
      tensors.push_back(
          asTensor(b, buf, cast<RankedTensorType>(res.getType())));
    rewriter.replaceOp(op, tensors);
    return success();
  }

  GpuTarget target;
};

/// linalg.matmul / batch_matmul (row-major, float): a block per 64 x 64
/// output tile; 16-deep tiles of A and B staged in shared memory, the tile's
/// f32 accumulator in shared memory from the init's values.
template <typename OpTy> struct GpuMatmul : OpRewritePattern<OpTy> {
  GpuMatmul(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(target) {}

  static constexpr int64_t TM = 64, TN = 64, TK = 16;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    constexpr bool batched = std::is_same_v<OpTy, linalg::BatchMatmulOp>;
    if (!op.hasPureTensorSemantics() || op->getNumResults() != 1)
      return rewriter.notifyMatchFailure(
          op, "needs tensor operands and one result");
    SmallVector<AffineMap> defaults(
        OpTy::getDefaultIndexingMaps(op->getContext()));
    if (op.getIndexingMapsArray() != defaults)
      return rewriter.notifyMatchFailure(
          op, "needs the default indexing maps (no transposed operands)");
    Value A = op.getDpsInputs()[0], B = op.getDpsInputs()[1];
    Value init = op.getDpsInits()[0];
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<Value> dims;
    for (int64_t d = 0; d < type.getRank(); ++d)
      dims.push_back(kb.dim(init, d));
    int64_t r = batched ? 1 : 0; // the rank offset of M, N
    Value M = dims[r], N = dims[r + 1];
    Value batch = batched ? dims[0] : kb.idx(1);
    // Dynamic sizes that disagree were caught before the op by
    // generate-runtime-verification.
    Value out = allocBuffer(b, type, dims);
    Value tilesM = kb.divs(kb.add(M, kb.idx(TM - 1)), kb.idx(TM));
    Value tilesN = kb.divs(kb.add(N, kb.idx(TN - 1)), kb.idx(TN));
    Value blocks = kb.mul(kb.mul(batch, tilesM), tilesN);
    SmallVector<Value> args = {readBuffer(b, A), readBuffer(b, B),
                               readBuffer(b, init), out};
    // A and B are the graph's own operands (nothing rounded): f16 is safe.
    if (Type mmaType = target.tensorCoreType({A, B}, /*allowF16=*/true)) {
      emitMmaMatmul(b, batched, mmaType, blocks, args);
      rewriter.replaceOp(op, asTensor(b, out, type));
      return success();
    }
    emitGpuKernel(
        b, target, "matmul", blocks, args, {{TM * TK}, {TK * TN}, {TM * TN}},
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          Value a = in[0], bm = in[1], c = in[2], o = in[3];
          Value nM = k.mdim(o, r), nN = k.mdim(o, r + 1), nK = k.mdim(a, r + 1);
          Value nTN = k.divs(k.add(nN, k.idx(TN - 1)), k.idx(TN));
          Value nTM = k.divs(k.add(nM, k.idx(TM - 1)), k.idx(TM));
          Value tn = k.rems(blk.blockId, nTN), rest = k.divs(blk.blockId, nTN);
          Value tm = k.rems(rest, nTM), bi = k.divs(rest, nTM);
          Value m0 = k.mul(tm, k.idx(TM)), n0 = k.mul(tn, k.idx(TN));
          auto lt = [&](Value x, Value y) {
            return k.cmp(arith::CmpIPredicate::slt, x, y);
          };
          auto idx = [&](Value row, Value col) {
            SmallVector<Value> i;
            if (batched)
              i.push_back(bi);
            i.append({row, col});
            return i;
          };
          auto at = [&](Value row, int64_t ld, Value col) {
            return k.add(k.mul(row, k.idx(ld)), col);
          };
          blk.phase2(k.idx(TM), k.idx(TN), [&](Value i, Value j) {
            Value m = k.add(m0, i), n = k.add(n0, j);
            k.mstore(k.loadIf(k.andi(lt(m, nM), lt(n, nN)), c, idx(m, n),
                              k.f32(0.0)),
                     sh[2], {at(i, TN, j)});
          });
          k.forEach(k.idx(0), nK, k.idx(TK), [&](Value k0) {
            blk.phase2(k.idx(TM), k.idx(TK), [&](Value i, Value kk) {
              Value m = k.add(m0, i), kc = k.add(k0, kk);
              k.mstore(k.loadIf(k.andi(lt(m, nM), lt(kc, nK)), a, idx(m, kc),
                                k.f32(0.0)),
                       sh[0], {at(i, TK, kk)});
            });
            blk.phase2(k.idx(TK), k.idx(TN), [&](Value kk, Value j) {
              Value n = k.add(n0, j), kc = k.add(k0, kk);
              k.mstore(k.loadIf(k.andi(lt(kc, nK), lt(n, nN)), bm, idx(kc, n),
                                k.f32(0.0)),
                       sh[1], {at(kk, TN, j)});
            });
            blk.phase2(k.idx(TM), k.idx(TN), [&](Value i, Value j) {
              auto dot =
                  k.loop(k.idx(TK), {k.mload(sh[2], {at(i, TN, j)})},
                         [&](Value kk, ValueRange it) {
                           return SmallVector<Value>{k.fadd(
                               it[0], k.fmul(k.mload(sh[0], {at(i, TK, kk)}),
                                             k.mload(sh[1], {at(kk, TN, j)})))};
                         });
              k.mstore(dot[0], sh[2], {at(i, TN, j)});
            });
          });
          blk.phase2(
              k.idx(TM), k.idx(TN),
              [&](Value i, Value j) {
                Value m = k.add(m0, i), n = k.add(n0, j);
                k.ifThen(k.andi(lt(m, nM), lt(n, nN)), [&] {
                  k.mstore(k.mload(sh[2], {at(i, TN, j)}), o, idx(m, n));
                });
              },
              /*barrier=*/false);
        });
    rewriter.replaceOp(op, asTensor(b, out, type));
    return success();
  }

  /// The same tiles on tensor cores (GpuGemm.h): the accumulators start
  /// from the init's values.
  void emitMmaMatmul(ImplicitLocOpBuilder &b, bool batched, Type multiplicand,
                     Value blocks, ValueRange args) const {
    int64_t r = batched ? 1 : 0;
    MmaTileGemm gemm;
    gemm.multiplicand = multiplicand;
    emitGpuKernel(
        b, target, "matmul_mma", blocks, args, MmaTileGemm::sharedShapes(1),
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          Value a = in[0], bm = in[1], c = in[2], o = in[3];
          Value nM = k.mdim(o, r), nN = k.mdim(o, r + 1), nK = k.mdim(a, r + 1);
          constexpr int64_t TM = MmaTileGemm::tileM, TN = MmaTileGemm::tileN;
          Value nTN = k.divs(k.add(nN, k.idx(TN - 1)), k.idx(TN));
          Value nTM = k.divs(k.add(nM, k.idx(TM - 1)), k.idx(TM));
          Value tn = k.rems(blk.blockId, nTN), rest = k.divs(blk.blockId, nTN);
          Value tm = k.rems(rest, nTM), bi = k.divs(rest, nTM);
          Value m0 = k.mul(tm, k.idx(TM)), n0 = k.mul(tn, k.idx(TN));
          auto lt = [&](Value x, Value y) {
            return k.cmp(arith::CmpIPredicate::slt, x, y);
          };
          auto idx = [&](Value row, Value col) {
            SmallVector<Value> i;
            if (batched)
              i.push_back(bi);
            i.append({row, col});
            return i;
          };
          auto inC = [&](Value m, Value n) {
            return k.andi(lt(m, nM), lt(n, nN));
          };
          gemm.depth = nK;
          gemm.a = [&](Value i, Value kc) {
            Value m = k.add(m0, i);
            return k.loadIf(k.andi(lt(m, nM), lt(kc, nK)), a, idx(m, kc),
                            k.f32(0.0));
          };
          gemm.b = {[&](Value kc, Value j) {
            Value n = k.add(n0, j);
            return k.loadIf(k.andi(lt(kc, nK), lt(n, nN)), bm, idx(kc, n),
                            k.f32(0.0));
          }};
          gemm.init = [&](int64_t, Value i, Value j) {
            Value m = k.add(m0, i), n = k.add(n0, j);
            return k.loadIf(inC(m, n), c, idx(m, n), k.f32(0.0));
          };
          gemm.finish = [&](Value i, Value j, ArrayRef<Value> sums) {
            Value m = k.add(m0, i), n = k.add(n0, j);
            k.ifThen(inC(m, n), [&] { k.mstore(sums[0], o, idx(m, n)); });
          };
          gemm.emit(blk, sh);
        });
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuLinalgPatterns(RewritePatternSet &patterns,
                                     const GpuTarget &target) {
  linalg::populateLinalgNamedOpsGeneralizationPatterns(patterns);
  patterns.add<GpuGeneric>(patterns.getContext(), target);
  patterns.add<GpuMatmul<linalg::MatmulOp>, GpuMatmul<linalg::BatchMatmulOp>>(
      patterns.getContext(), target);
}

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

/// Why a generic op cannot run as a thread per output element, or null if it
/// can: each thread owns the output elements of its parallel indices, so
/// every output must be indexed by every parallel dimension and by nothing
/// else (linalg's rule for reductions).
const char *threadPerElementRefusal(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumResults() == 0 ||
      !RegionCaptures::of(op.getRegion()).scalarOnly())
    return "needs tensor operands and a body that captures no tensors";
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  size_t numParallel = llvm::count(iters, utils::IteratorType::parallel);
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (!map.isProjectedPermutation() || map.getNumResults() != numParallel)
      return "an output is not indexed by every parallel dimension";
    for (AffineExpr e : map.getResults())
      if (iters[cast<AffineDimExpr>(e).getPosition()] !=
          utils::IteratorType::parallel)
        return "an output is indexed by a reduction dimension";
  }
  return nullptr;
}

/// The kernel arguments of a generic op, in the order they travel: its
/// inputs, its inits, the result buffers, the loop sizes, the body's
/// captured values.
struct GenericArgs {
  GenericArgs(ValueRange all, linalg::GenericOp op, size_t numLoops,
              size_t numCaptured)
      : all(all), numIn(op.getNumDpsInputs()), numOut(op.getNumDpsInits()),
        numLoops(numLoops), numCaptured(numCaptured) {}

  ValueRange all;
  size_t numIn, numOut, numLoops, numCaptured;

  ValueRange inputs() const { return all.take_front(numIn); }
  ValueRange inits() const { return all.slice(numIn, numOut); }
  ValueRange results() const { return all.slice(numIn + numOut, numOut); }
  ValueRange loopSizes() const {
    return all.slice(numIn + 2 * numOut, numLoops);
  }
  ValueRange captured() const { return all.take_back(numCaptured); }
};

/// One thread's elements of a generic op's outputs: the op's loop indices,
/// its operands read through their indexing maps, the body inlined once per
/// step of the reduction loops (in order), the outputs stored at the end.
class GenericElement {
public:
  GenericElement(linalg::GenericOp op, KernelBuilder &k, GenericArgs args,
                 IRMapping captures)
      : op(op), k(k), args(args), captures(std::move(captures)),
        maps(op.getIndexingMapsArray()), loopIdx(args.numLoops) {
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
      (it == utils::IteratorType::parallel ? parallel : reduction).push_back(d);
  }

  /// Emits the thread of output element `item` (row-major over the
  /// parallel dimensions).
  void emit(Value item) {
    SmallVector<Value> parallelSizes, reductionSizes;
    for (int64_t d : parallel)
      parallelSizes.push_back(args.loopSizes()[d]);
    for (int64_t d : reduction)
      reductionSizes.push_back(args.loopSizes()[d]);
    for (auto [d, v] : llvm::zip(parallel, delinearize(k, item, parallelSizes)))
      loopIdx[d] = v;
    SmallVector<Value> out =
        reduction.empty()
            ? applyBody(readInits())
            : k.nest(reductionSizes, readInits(),
                     [&](ValueRange rIdx, ValueRange current) {
                       for (auto [d, v] : llvm::zip(reduction, rIdx))
                         loopIdx[d] = v;
                       return applyBody(current);
                     });
    // Outputs use parallel dimensions only: any reduction index will do.
    resetReductionIndices();
    for (auto [o, value] : llvm::enumerate(out))
      memref::StoreOp::create(k.builder(), value, args.results()[o],
                              indicesOf(args.numIn + o));
  }

private:
  /// The outputs' starting values, the inits' elements of this thread.
  SmallVector<Value> readInits() {
    resetReductionIndices();
    SmallVector<Value> inits;
    for (auto [o, init] : llvm::enumerate(args.inits()))
      inits.push_back(read(args.numIn + o, init));
    return inits;
  }

  void resetReductionIndices() {
    for (int64_t d : reduction)
      loopIdx[d] = k.idx(0);
  }

  /// The indices of operand `operand` at the current loop indices.
  SmallVector<Value> indicesOf(unsigned operand) {
    ImplicitLocOpBuilder &b = k.builder();
    return *affine::expandAffineMap(b, b.getLoc(), maps[operand], loopIdx);
  }

  /// Operand `operand`'s element at the current loop indices (a scalar
  /// operand is its own element).
  Value read(unsigned operand, Value source) {
    if (!isa<MemRefType>(source.getType()))
      return source;
    return memref::LoadOp::create(k.builder(), source, indicesOf(operand));
  }

  /// One step of the body from the outputs' current values: the inputs'
  /// elements and `current` as its arguments, linalg.index as the loop
  /// indices; returns the values it yields.
  SmallVector<Value> applyBody(ValueRange current) {
    Block &body = op.getRegion().front();
    IRMapping map = captures;
    for (auto [i, input] : llvm::enumerate(args.inputs()))
      map.map(body.getArgument(i), read(i, input));
    for (auto [arg, value] :
         llvm::zip(body.getArguments().drop_front(args.numIn), current))
      map.map(arg, value);
    for (Operation &inner : body.without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(inner))
        map.map(index.getResult(), loopIdx[index.getDim()]);
      else
        k.builder().clone(inner, map);
    }
    return llvm::map_to_vector(body.getTerminator()->getOperands(),
                               [&](Value v) { return map.lookupOrDefault(v); });
  }

  linalg::GenericOp op;
  KernelBuilder &k;
  GenericArgs args;
  IRMapping captures;
  SmallVector<AffineMap> maps;
  SmallVector<int64_t> parallel, reduction;
  SmallVector<Value> loopIdx;
};

struct GpuGeneric : OpRewritePattern<linalg::GenericOp> {
  GpuGeneric(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/1), target(target) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (const char *refusal = threadPerElementRefusal(op))
      return rewriter.notifyMatchFailure(op, refusal);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    SmallVector<Value> sizes = llvm::map_to_vector(
        cast<linalg::LinalgOp>(op.getOperation())
            .createLoopRanges(rewriter, op.getLoc()),
        [&](Range &r) {
          return getValueOrCreateConstantIndexOp(b, op.getLoc(), r.size);
        });
    Value count = kb.idx(1);
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
      if (it == utils::IteratorType::parallel)
        count = kb.mul(count, sizes[d]);

    SmallVector<Value> args, results;
    for (Value in : op.getDpsInputs())
      args.push_back(isa<RankedTensorType>(in.getType()) ? readBuffer(b, in)
                                                         : in);
    for (auto [init, res] : llvm::zip(op.getDpsInits(), op.getResults())) {
      auto type = cast<RankedTensorType>(res.getType());
      SmallVector<Value> dims;
      for (int64_t d = 0; d < type.getRank(); ++d)
        dims.push_back(kb.dim(init, d));
      args.push_back(readBuffer(b, init));
      results.push_back(allocBuffer(b, type, dims));
    }
    args.append(results);
    args.append(sizes);
    // Values the body uses from above: constants are recreated in the
    // kernel, anything else travels as an argument (after the sizes).
    RegionCaptures captures = RegionCaptures::of(op.getRegion());
    args.append(captures.values);

    emitItemKernel(
        b, target, "linalg", kb, count, args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          GenericArgs named(in, op, sizes.size(), captures.values.size());
          GenericElement element(op, k, named,
                                 captures.map(k.builder(), named.captured()));
          element.emit(item);
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

/// The operands of a matmul kernel, in the order they travel.
struct MatmulArgs {
  Value a, b, init, out;
  explicit MatmulArgs(ValueRange in)
      : a(in[0]), b(in[1]), init(in[2]), out(in[3]) {}
};

/// The output tile one block computes of a row-major (batch) matmul: its
/// batch and origin, and the operands' elements read with the matrices'
/// edges guarded (zero outside), as both the FMA and the tensor-core
/// kernels take them.
class MatmulTile {
public:
  MatmulTile(KernelBuilder &k, Value blockId, bool batched, int64_t tileM,
             int64_t tileN, const MatmulArgs &args)
      : k(k), args(args), batched(batched) {
    int64_t r = batched ? 1 : 0; // the rank offset of M, N
    rows = k.mdim(args.out, r);
    cols = k.mdim(args.out, r + 1);
    depthK = k.mdim(args.a, r + 1);
    Value tilesN = k.divs(k.add(cols, k.idx(tileN - 1)), k.idx(tileN));
    Value tilesM = k.divs(k.add(rows, k.idx(tileM - 1)), k.idx(tileM));
    Value rest = k.divs(blockId, tilesN);
    n0 = k.mul(k.rems(blockId, tilesN), k.idx(tileN));
    m0 = k.mul(k.rems(rest, tilesM), k.idx(tileM));
    batch = k.divs(rest, tilesM);
  }

  /// The depth K of the product.
  Value depth() const { return depthK; }

  /// A's element at row i of the tile and depth kc.
  Value readA(Value i, Value kc) {
    Value m = k.add(m0, i);
    return k.loadIf(k.andi(below(m, rows), below(kc, depthK)), args.a,
                    index(m, kc), k.f32(0.0));
  }
  /// B's element at depth kc and column j of the tile.
  Value readB(Value kc, Value j) {
    Value n = k.add(n0, j);
    return k.loadIf(k.andi(below(kc, depthK), below(n, cols)), args.b,
                    index(kc, n), k.f32(0.0));
  }
  /// The init's element at (i, j) of the tile.
  Value readInit(Value i, Value j) {
    Value m = k.add(m0, i), n = k.add(n0, j);
    return k.loadIf(inside(m, n), args.init, index(m, n), k.f32(0.0));
  }
  /// Stores the result at (i, j) of the tile, `value()` emitted where
  /// (i, j) is inside the output.
  void write(Value i, Value j, llvm::function_ref<Value()> value) {
    Value m = k.add(m0, i), n = k.add(n0, j);
    k.ifThen(inside(m, n), [&] { k.mstore(value(), args.out, index(m, n)); });
  }

private:
  Value below(Value x, Value limit) {
    return k.cmp(arith::CmpIPredicate::slt, x, limit);
  }
  Value inside(Value m, Value n) {
    return k.andi(below(m, rows), below(n, cols));
  }
  SmallVector<Value> index(Value row, Value col) {
    SmallVector<Value> i;
    if (batched)
      i.push_back(batch);
    i.append({row, col});
    return i;
  }

  KernelBuilder &k;
  MatmulArgs args;
  bool batched;
  Value rows, cols, depthK, batch, m0, n0;
};

/// linalg.matmul / batch_matmul (row-major, float): a block per output tile;
/// bf16 and f16 products on tensor cores (GpuGemm.h), others with f32 FMAs
/// on 64 x 64 tiles whose 16-deep slices of A and B are staged in shared
/// memory, the tile's f32 accumulators in shared memory from the init's
/// values.
template <typename OpTy> struct GpuMatmul : OpRewritePattern<OpTy> {
  GpuMatmul(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(target) {}

  static constexpr bool batched = std::is_same_v<OpTy, linalg::BatchMatmulOp>;
  static constexpr int64_t TM = 64, TN = 64, TK = 16;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op->getNumResults() != 1)
      return rewriter.notifyMatchFailure(
          op, "needs tensor operands and one result");
    SmallVector<AffineMap> defaults(
        OpTy::getDefaultIndexingMaps(op->getContext()));
    if (op.getIndexingMapsArray() != defaults)
      return rewriter.notifyMatchFailure(
          op, "needs the default indexing maps (no transposed operands)");
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    Value A = op.getDpsInputs()[0], B = op.getDpsInputs()[1];
    Value init = op.getDpsInits()[0];
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<Value> dims;
    for (int64_t d = 0; d < type.getRank(); ++d)
      dims.push_back(kb.dim(init, d));
    // Dynamic sizes that disagree were caught before the op by
    // generate-runtime-verification.
    Value out = allocBuffer(b, type, dims);
    SmallVector<Value> args = {readBuffer(b, A), readBuffer(b, B),
                               readBuffer(b, init), out};
    // A and B are the graph's own operands (nothing rounded): f16 is safe.
    if (Type mmaType = target.tensorCoreType({A, B}, /*allowF16=*/true))
      emitMmaMatmul(b, mmaType, dims, args);
    else
      emitFmaMatmul(b, dims, args);
    rewriter.replaceOp(op, asTensor(b, out, type));
    return success();
  }

  /// The number of blocks: one per tile of the output (dims) of every batch.
  static Value tileCount(KernelBuilder &kb, ArrayRef<Value> dims, int64_t tileM,
                         int64_t tileN) {
    int64_t r = batched ? 1 : 0;
    Value tilesM = kb.divs(kb.add(dims[r], kb.idx(tileM - 1)), kb.idx(tileM));
    Value tilesN =
        kb.divs(kb.add(dims[r + 1], kb.idx(tileN - 1)), kb.idx(tileN));
    Value batch = batched ? dims[0] : kb.idx(1);
    return kb.mul(kb.mul(batch, tilesM), tilesN);
  }

  /// The FMA kernel: the accumulators from the init, then for every TK-deep
  /// slice of K: stage A's and B's slices, add their products; then store.
  void emitFmaMatmul(ImplicitLocOpBuilder &b, ArrayRef<Value> dims,
                     ValueRange args) const {
    KernelBuilder kb(b);
    emitGpuKernel(
        b, target, "matmul", tileCount(kb, dims, TM, TN), args,
        {{TM * TK}, {TK * TN}, {TM * TN}},
        [&](GpuBlock &blk, ValueRange in, ValueRange shared) {
          KernelBuilder &k = blk.kb;
          Value aSlice = shared[0], bSlice = shared[1], acc = shared[2];
          MatmulTile tile(k, blk.blockId, batched, TM, TN, MatmulArgs(in));
          auto at = [&](Value row, int64_t ld, Value col) {
            return k.add(k.mul(row, k.idx(ld)), col);
          };
          blk.phase2(k.idx(TM), k.idx(TN), [&](Value i, Value j) {
            k.mstore(tile.readInit(i, j), acc, {at(i, TN, j)});
          });
          k.forEach(k.idx(0), tile.depth(), k.idx(TK), [&](Value k0) {
            blk.phase2(k.idx(TM), k.idx(TK), [&](Value i, Value kk) {
              k.mstore(tile.readA(i, k.add(k0, kk)), aSlice, {at(i, TK, kk)});
            });
            blk.phase2(k.idx(TK), k.idx(TN), [&](Value kk, Value j) {
              k.mstore(tile.readB(k.add(k0, kk), j), bSlice, {at(kk, TN, j)});
            });
            blk.phase2(k.idx(TM), k.idx(TN), [&](Value i, Value j) {
              auto sum = k.loop(
                  k.idx(TK), {k.mload(acc, {at(i, TN, j)})},
                  [&](Value kk, ValueRange partial) {
                    Value product = k.fmul(k.mload(aSlice, {at(i, TK, kk)}),
                                           k.mload(bSlice, {at(kk, TN, j)}));
                    return SmallVector<Value>{k.fadd(partial[0], product)};
                  });
              k.mstore(sum[0], acc, {at(i, TN, j)});
            });
          });
          blk.phase2(
              k.idx(TM), k.idx(TN),
              [&](Value i, Value j) {
                tile.write(i, j, [&] { return k.mload(acc, {at(i, TN, j)}); });
              },
              /*barrier=*/false);
        });
  }

  /// The same tiles on tensor cores (GpuGemm.h): the accumulators start
  /// from the init's values.
  void emitMmaMatmul(ImplicitLocOpBuilder &b, Type multiplicand,
                     ArrayRef<Value> dims, ValueRange args) const {
    KernelBuilder kb(b);
    constexpr int64_t tileM = MmaTileGemm::tileM, tileN = MmaTileGemm::tileN;
    emitGpuKernel(
        b, target, "matmul_mma", tileCount(kb, dims, tileM, tileN), args,
        MmaTileGemm::sharedShapes(1),
        [&](GpuBlock &blk, ValueRange in, ValueRange shared) {
          MatmulTile tile(blk.kb, blk.blockId, batched, tileM, tileN,
                          MatmulArgs(in));
          MmaTileGemm gemm;
          gemm.multiplicand = multiplicand;
          gemm.depth = tile.depth();
          gemm.a = [&](Value i, Value kc) { return tile.readA(i, kc); };
          gemm.b = {[&](Value kc, Value j) { return tile.readB(kc, j); }};
          gemm.init = [&](int64_t, Value i, Value j) {
            return tile.readInit(i, j);
          };
          gemm.finish = [&](Value i, Value j, ArrayRef<Value> sums) {
            tile.write(i, j, [&] { return sums[0]; });
          };
          gemm.emit(blk, shared);
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

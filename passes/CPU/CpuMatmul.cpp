//===- CpuMatmul.cpp - the graph's matmuls as parallel blocked GEMMs ------===//
//
// Projections around the seq ops (in/out projections, x-projections, expert
// weights of dense layers) are linalg.matmul / linalg.batch_matmul on
// tensors. They take the same register-blocked micro-kernel as the chunked
// algorithms, parallel over blocks of rows and columns of the result, with
// both operands packed as BLIS does (Gemm.h, GemmBlocking): each task packs
// its rows of A per reduction block into L2, and B is packed into the
// micro-kernel's panels once per call when several row blocks read it (by
// each task for its own columns when one does). A B that is a function
// constant (a weight in the module) is packed once, at compile time, into a
// constant global of panels that every call reads.
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
#include "mlir/Dialect/MemRef/IR/MemRef.h"
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

/// The elementwise neighbours a 2-D matmul's kernel absorbs: a producer of
/// A and a consumer of the result that nothing else needs.
struct Fusion {
  std::optional<ElementwiseStage> prologue, epilogue;
  /// The epilogue's operand that reads the product.
  int epilogueInput = -1;

  static Fusion match(Operation *op, Value A, Value B, Value init) {
    Fusion f;
    // Only as A: matmul(p, p) or p as the init still needs p itself.
    if (auto p = A.getDefiningOp<linalg::GenericOp>();
        p && B != A && init != A && soleComputeUser(p->getResult(0)) == op)
      f.prologue = ElementwiseStage::match(p);
    Value result = op->getResult(0);
    auto g = dyn_cast_or_null<linalg::GenericOp>(soleComputeUser(result));
    if (!g || !(f.epilogue = ElementwiseStage::match(g)))
      return f;
    for (OpOperand *in : g.getDpsInputOperands()) {
      if (in->get() != result)
        continue;
      // Read twice, or broadcast: not fused.
      if (f.epilogueInput >= 0 || f.epilogue->access[in->getOperandNumber()] !=
                                      ElementwiseStage::Access::Full) {
        f.epilogue.reset();
        f.epilogueInput = -1;
        return f;
      }
      f.epilogueInput = in->getOperandNumber();
    }
    if (f.epilogueInput < 0)
      f.epilogue.reset();
    return f;
  }
};

/// Positions of the matmul kernel's arguments: A (or the prologue's
/// inputs), B (not when its panels were packed at compile time), C, B's
/// panels, A's packed rows, the init when accumulating, then the
/// epilogue's other inputs.
struct KernelArgs {
  SmallVector<Value> values;
  unsigned aCount = 1, c = 0, panels = 0, rowsOfA = 0, init = 0, epilogue = 0;
  std::optional<unsigned> b;
};

/// The number of blocks of `size` elements that cover `n`.
static Value blocksOf(KernelBuilder &k, Value n, Value size) {
  return k.divs(k.add(n, k.sub(size, k.idx(1))), size);
}
static Value blocksOf(KernelBuilder &k, Value n, int64_t size) {
  return blocksOf(k, n, k.idx(size));
}

/// The size of the blocks a matmul's tasks take along a dimension of `n`:
/// as many blocks as `largest` ones need, made as even as whole multiples
/// of `multiple` allow (2048 rows in 252-row blocks would leave a ninth of
/// 32 rows; in 228-row blocks the two threads' halves are equal).
static Value evenBlock(KernelBuilder &k, Value n, int64_t largest,
                       int64_t multiple) {
  Value count = blocksOf(k, n, largest);
  Value even =
      blocksOf(k, n, arith::MaxSIOp::create(k.builder(), count, k.idx(1)));
  Value size = k.mul(blocksOf(k, even, multiple), k.idx(multiple));
  return arith::MaxSIOp::create(k.builder(), size, k.idx(multiple));
}

/// One matmul or batch_matmul lowered to kernels: B's panels, the blocked
/// product (with its fused neighbours), the rounding of a narrow result.
class MatmulLowering {
public:
  MatmulLowering(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                 const CpuTarget &target, GemmProducts products, bool batched,
                 Fusion fusion)
      : b(b), kb(kb), target(target),
        blocking(GemmBlocking::forTarget(target, products)), batched(batched),
        off(batched ? 1 : 0), fusion(std::move(fusion)) {}

  /// Checks the shapes and emits every kernel; the product as a tensor.
  Value emit(Value A, Value B, Value init, RankedTensorType resultType);

private:
  /// The reduction size K in a kernel: B's rows, or the constant B's.
  Value reductionSize(KernelBuilder &k, Value Bm) const {
    return Bm ? k.mdim(Bm, off) : k.idx(staticK);
  }
  void checkShapes(Value aShape, Value B, Value init);
  KernelArgs collectArgs(Value A, Value B, Value cBuf, Value panels,
                         Value rowsOfA, Value init);
  Value allocPanels(Value packOnce);
  Value allocRowsOfA(Value packOnce);
  Value reductionSlots(Value packOnce);
  Value allocPacked(ValueRange lead, int64_t rows, int64_t cols);
  void emitPackB(StringRef productName, Value bBuf, Value panels);
  void emitPackA(StringRef productName, const KernelArgs &args);
  void emitProductTask(KernelBuilder &k, Value task, ValueRange in,
                       const KernelArgs &args);
  void copyRowsOfA(KernelBuilder &k, ValueRange aIns, const MatrixRef &a,
                   Value i0, Value rows, Value k0, Value k1,
                   const MatrixRef &dst);
  /// The view of A's batch `bi` whose row 0 is row `i0`.
  MatrixRef viewOfA(KernelBuilder &k, ValueRange aIns, Value bi, Value i0);
  Value emitRounding(Value cBuf, RankedTensorType type, ArrayRef<Value> sizes);
  /// The rows and columns of C a task computes (at most the blocking's
  /// packed rows and columns; the columns whole panels).
  Value rowBlockSize(KernelBuilder &k, Value m) const {
    return evenBlock(k, m, blocking.packedRows, blocking.rows);
  }
  Value colBlockSize(KernelBuilder &k, Value n) const {
    return evenBlock(k, n, blocking.packedColumns, blocking.columns());
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const CpuTarget &target;
  const GemmBlocking blocking;
  const bool batched;
  /// Index of the row dimension (after the batch).
  const int64_t off;
  Fusion fusion;
  bool overwrite = false;
  /// B's panels come packed from a constant global (B is a constant of
  /// reduction size staticK).
  bool prepacked = false;
  int64_t staticK = 0;
  Value batch, M, N, K;
};

void MatmulLowering::checkShapes(Value aShape, Value B, Value init) {
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
  if (!batched)
    return;
  kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(B, 0), batch),
           "the batch sizes of the operands differ ({0} vs {1})",
           {kb.dim(B, 0), batch});
  kb.check(kb.cmp(arith::CmpIPredicate::eq, kb.dim(init, 0), batch),
           "the init's batch size is {0} but A's is {1}",
           {kb.dim(init, 0), batch});
}

/// B's panels: [batch][reduction block][panel][kc][nr]. When a single row
/// block reads B (packOnce false), each task packs its own columns block by
/// block into the first reduction slot (a footprint that stays in L2);
/// otherwise all of B is packed before the product.
Value MatmulLowering::allocPanels(Value packOnce) {
  return allocPacked(
      {batch, reductionSlots(packOnce), blocksOf(kb, N, blocking.columns())},
      blocking.panelRows(), blocking.panelColumns());
}

/// The reduction blocks a packed operand holds: all of them when it is
/// packed once for the product, else one (the slot its task repacks).
Value MatmulLowering::reductionSlots(Value packOnce) {
  Value kBlocks =
      arith::MaxSIOp::create(b, blocksOf(kb, K, blocking.reduction), kb.idx(1));
  return kb.select(packOnce, kBlocks, kb.idx(1));
}

/// A 64-byte aligned buffer [lead...][rows][cols] of the packed type (f32,
/// or bf16 for pairs).
Value MatmulLowering::allocPacked(ValueRange lead, int64_t rows, int64_t cols) {
  SmallVector<int64_t> shape(lead.size(), ShapedType::kDynamic);
  shape.append({rows, cols});
  return memref::AllocOp::create(
      b, MemRefType::get(shape, blocking.packedType(b.getContext())), lead,
      b.getI64IntegerAttr(64));
}

/// All of B into its panels, a task per (batch, reduction block).
void MatmulLowering::emitPackB(StringRef productName, Value bBuf,
                               Value panels) {
  Value kBlocks = kb.mdim(panels, 1);
  emitParallelKernel(
      b, (productName + "_pack_b").str(), kb.mul(batch, kBlocks),
      {bBuf, panels}, [&](KernelBuilder &k, Value task, ValueRange in) {
        Value Bm = in[0], P = in[1];
        Value slots = k.mdim(P, 1);
        Value bi = k.divs(task, slots), slot = k.rems(task, slots);
        Value k0 = k.mul(slot, k.idx(blocking.reduction));
        Value k1 =
            k.mins(k.mdim(Bm, off), k.add(k0, k.idx(blocking.reduction)));
        MatrixRef src{Bm, [&, bi](Value r, Value c) {
                        SmallVector<Value> ivs;
                        if (batched)
                          ivs.push_back(bi);
                        ivs.append({r, c});
                        return ivs;
                      }};
        PanelRef dst{P, [bi, slot](Value panel, Value kk, Value lane) {
                       return SmallVector<Value>{bi, slot, panel, kk, lane};
                     }};
        packBPanels(k, blocking, src, k.mdim(Bm, off + 1), k0, k1, dst);
      });
}

KernelArgs MatmulLowering::collectArgs(Value A, Value B, Value cBuf,
                                       Value panels, Value rowsOfA,
                                       Value init) {
  KernelArgs args;
  if (fusion.prologue) {
    args.aCount = fusion.prologue->op.getNumDpsInputs();
    for (Value in : fusion.prologue->op.getDpsInputs())
      args.values.push_back(readBuffer(b, in));
  } else {
    args.values.push_back(readBuffer(b, A));
  }
  if (!prepacked) {
    args.b = args.values.size();
    args.values.push_back(readBuffer(b, B));
  }
  args.c = args.values.size();
  args.values.push_back(cBuf);
  args.panels = args.values.size();
  args.values.push_back(panels);
  args.rowsOfA = args.values.size();
  args.values.push_back(rowsOfA);
  args.init = args.values.size();
  if (!overwrite)
    args.values.push_back(readBuffer(b, init));
  args.epilogue = args.values.size();
  if (fusion.epilogue)
    for (auto [i, in] : llvm::enumerate(fusion.epilogue->op.getDpsInputs()))
      args.values.push_back(static_cast<int>(i) == fusion.epilogueInput
                                ? cBuf
                                : readBuffer(b, in));
  return args;
}

/// A's rows, packed: [batch][row block][reduction block][mc][kc], row-major
/// blocks in the packed type (bf16 pairs: an odd block's pad step zero),
/// computed there from a fused prologue's inputs or copied (rows K elements
/// apart would put the micro-kernel's rows in one L1 set and as many pages).
/// When several column blocks read A (packOnce), all of it is packed before the
/// product, so that neither the copy nor the prologue is repeated per column
/// block; otherwise each task packs its rows block by block into the first
/// reduction slot, which stays in L2.
Value MatmulLowering::allocRowsOfA(Value packOnce) {
  return allocPacked(
      {batch, blocksOf(kb, M, rowBlockSize(kb, M)), reductionSlots(packOnce)},
      blocking.packedRows, blocking.reduction);
}

MatrixRef MatmulLowering::viewOfA(KernelBuilder &k, ValueRange aIns, Value bi,
                                  Value i0) {
  return MatrixRef{aIns.empty() ? Value() : aIns[0],
                   [&k, this, bi, i0](Value r, Value c) {
                     SmallVector<Value> ivs;
                     if (batched)
                       ivs.push_back(bi);
                     ivs.append({k.add(i0, r), c});
                     return ivs;
                   }};
}

/// Rows [i0, i0 + rows) x columns [k0, k1) of A into `dst` (element (r, kk)
/// at dst.at(r, kk), kk from 0).
void MatmulLowering::copyRowsOfA(KernelBuilder &k, ValueRange aIns,
                                 const MatrixRef &a, Value i0, Value rows,
                                 Value k0, Value k1, const MatrixRef &dst) {
  const int64_t lanes = target.vectorWidth;
  copyRows(
      k, lanes, rows, k.sub(k1, k0),
      [&](Value r, Value kk, Value mask) {
        if (fusion.prologue)
          return fusion.prologue->emit(k, lanes, k.add(i0, r), k.add(k0, kk),
                                       aIns, /*givenInput=*/-1, Value(), mask);
        return k.vloadMasked(a.memref, a.at(r, k.add(k0, kk)), lanes, mask);
      },
      dst);
  padReduction(k, blocking, rows, k.sub(k1, k0), dst);
}

/// All of A's rows packed, a task per (batch, row block, reduction block).
void MatmulLowering::emitPackA(StringRef productName, const KernelArgs &args) {
  SmallVector<Value> ins(args.values.begin(),
                         args.values.begin() + args.aCount);
  ins.append({args.values[args.c], args.values[args.rowsOfA]});
  std::optional<unsigned> bSlot;
  if (args.b) {
    bSlot = ins.size();
    ins.push_back(args.values[*args.b]);
  }
  Value packed = args.values[args.rowsOfA];
  Value tasks = kb.mul(kb.mdim(packed, 0),
                       kb.mul(kb.mdim(packed, 1), kb.mdim(packed, 2)));
  emitParallelKernel(
      b, (productName + "_pack_a").str(), tasks, ins,
      [&](KernelBuilder &k, Value task, ValueRange in) {
        ValueRange aIns = in.take_front(args.aCount);
        Value Cm = in[args.aCount], PA = in[args.aCount + 1];
        Value nM = k.mdim(Cm, off);
        Value nK = reductionSize(k, bSlot ? in[*bSlot] : Value());
        Value slots = k.mdim(PA, 2), rowBlocks = k.mdim(PA, 1);
        Value slot = k.rems(task, slots), rest = k.divs(task, slots);
        Value row = k.rems(rest, rowBlocks), bi = k.divs(rest, rowBlocks);
        Value rowBlock = rowBlockSize(k, nM);
        Value i0 = k.mul(row, rowBlock);
        Value rows = k.mins(rowBlock, k.sub(nM, i0));
        Value k0 = k.mul(slot, k.idx(blocking.reduction));
        Value k1 = k.mins(nK, k.add(k0, k.idx(blocking.reduction)));
        MatrixRef dst{PA, [bi, row, slot](Value r, Value kk) {
                        return SmallVector<Value>{bi, row, slot, r, kk};
                      }};
        copyRowsOfA(k, aIns, viewOfA(k, aIns, bi, i0), i0, rows, k0, k1, dst);
      });
}

/// The task's block of C: [i0, i0 + rows) x [j0, j0 + cols) of batch bi.
void MatmulLowering::emitProductTask(KernelBuilder &k, Value task,
                                     ValueRange in, const KernelArgs &args) {
  const int64_t lanes = target.vectorWidth;
  ValueRange aIns = in.take_front(args.aCount);
  Value Bm = args.b ? in[*args.b] : Value();
  Value Cm = in[args.c], P = in[args.panels];
  Value nM = k.mdim(Cm, off), nN = k.mdim(Cm, off + 1);
  Value nK = reductionSize(k, Bm);
  Value rowBlock = rowBlockSize(k, nM), colBlock = colBlockSize(k, nN);
  Value rb = blocksOf(k, nM, rowBlock), cb = blocksOf(k, nN, colBlock);
  Value col = k.rems(task, cb), rest = k.divs(task, cb);
  Value row = k.rems(rest, rb), bi = k.divs(rest, rb);
  Value i0 = k.mul(row, rowBlock), j0 = k.mul(col, colBlock);
  Value rows = k.mins(rowBlock, k.sub(nM, i0));
  Value cols = k.mins(colBlock, k.sub(nN, j0));
  auto at = [&k, this, bi](Value r0, Value c0) {
    return [&k, this, bi, r0, c0](Value r, Value c) {
      SmallVector<Value> ivs;
      if (batched)
        ivs.push_back(bi);
      ivs.push_back(k.add(r0, r));
      ivs.push_back(k.add(c0, c));
      return ivs;
    };
  };
  MatrixRef a = viewOfA(k, aIns, bi, i0);
  MatrixRef bMat{Bm, at(k.idx(0), j0)};
  MatrixRef c{Cm, at(i0, j0)};
  if (!overwrite) {
    // C starts from the init tile; the product accumulates.
    k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
      k.forEach(k.idx(0), cols, k.idx(1), [&](Value cc) {
        k.mstore(k.mload(in[args.init], c.at(r, cc)), Cm, c.at(r, cc));
      });
    });
  }
  // B's panels for this task's columns: packed when compiled (a constant
  // B), packed already (several row blocks), or packed here block by block
  // into the first slot. The same test as the host's packOnce (emit).
  PrepareB prepareB;
  if (prepacked) {
    prepareB = readConstantPanels(k, blocking, P, bi, j0);
  } else {
    Value packHere = k.cmp(arith::CmpIPredicate::eq, rb, k.idx(1));
    Value firstPanel = k.divs(j0, k.idx(blocking.columns()));
    prepareB = [&, bi, firstPanel, packHere](Value k0, Value k1) {
      Value slot =
          k.select(packHere, k.idx(0), k.divs(k0, k.idx(blocking.reduction)));
      PanelRef panels{
          P, [&k, bi, slot, firstPanel](Value p, Value kk, Value lane) {
            return SmallVector<Value>{bi, slot, k.add(firstPanel, p), kk, lane};
          }};
      k.ifThen(packHere,
               [&] { packBPanels(k, blocking, bMat, cols, k0, k1, panels); });
      return panelsAsMatrix(k, blocking, panels, k0, k.idx(0));
    };
  }
  // A's rows the same way: packed already (several column blocks), or
  // here (the same test as the host's).
  Value packAHere = k.cmp(arith::CmpIPredicate::eq, cb, k.idx(1));
  Value PA = in[args.rowsOfA];
  PrepareA prepareA = [&, bi, row, i0, rows, packAHere](Value k0, Value k1) {
    Value slot =
        k.select(packAHere, k.idx(0), k.divs(k0, k.idx(blocking.reduction)));
    MatrixRef packed{PA, [bi, row, slot](Value r, Value kk) {
                       return SmallVector<Value>{bi, row, slot, r, kk};
                     }};
    k.ifThen(packAHere,
             [&] { copyRowsOfA(k, aIns, a, i0, rows, k0, k1, packed); });
    return MatrixRef{
        PA, [&k, bi, row, slot, k0](Value r, Value kk) {
          return SmallVector<Value>{bi, row, slot, r, k.sub(kk, k0)};
        }};
  };
  emitGemm(k, blocking, {rows, cols, nK}, a, bMat, c,
           overwrite ? GemmMode::Overwrite : GemmMode::Accumulate, prepareA,
           prepareB);
  if (!fusion.epilogue)
    return;
  // The consumer on the finished tile, in place.
  ValueRange eIns = in.drop_front(args.epilogue);
  k.forEach(k.idx(0), rows, k.idx(1), [&](Value r) {
    k.forEach(k.idx(0), cols, k.idx(lanes), [&](Value cc) {
      Value mask = k.vmask(k.sub(cols, cc), lanes);
      Value v = k.vloadMasked(Cm, c.at(r, cc), lanes, mask);
      Value out = fusion.epilogue->emit(k, lanes, k.add(i0, r), k.add(j0, cc),
                                        eIns, fusion.epilogueInput, v, mask);
      k.vstoreMasked(out, Cm, c.at(r, cc), mask);
    });
  });
}

Value MatmulLowering::emit(Value A, Value B, Value init,
                           RankedTensorType resultType) {
  // A's sizes; a fused prologue's A is never built, its init has them.
  Value aShape = fusion.prologue ? fusion.prologue->op.getDpsInits()[0] : A;
  batch = batched ? kb.dim(A, 0) : kb.idx(1);
  M = kb.dim(aShape, off);
  K = kb.dim(aShape, off + 1);
  N = kb.dim(B, off + 1);
  checkShapes(aShape, B, init);
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < resultType.getRank(); ++i)
    sizes.push_back(kb.dim(init, i));
  // A narrower result accumulates in an f32 buffer, rounded once at the
  // end (the reduction blocks of a long K would otherwise round each
  // partial sum).
  bool roundResult = !resultType.getElementType().isF32();
  Value cBuf = allocBuffer(
      b, roundResult ? resultType.clone(b.getF32Type()) : resultType, sizes);
  overwrite = isZeroFill(init);
  // Several row blocks read every block of B, several column blocks every
  // block of A: such an operand is packed once for all.
  Value rowBlocks = blocksOf(kb, M, rowBlockSize(kb, M));
  Value colBlocks = blocksOf(kb, N, colBlockSize(kb, N));
  Value packBOnce = kb.cmp(arith::CmpIPredicate::sgt, rowBlocks, kb.idx(1));
  Value packAOnce = kb.cmp(arith::CmpIPredicate::sgt, colBlocks, kb.idx(1));
  DenseElementsAttr constantB;
  prepacked = matchPattern(B, m_Constant(&constantB));
  if (prepacked)
    staticK = cast<ShapedType>(constantB.getType()).getDimSize(off);
  Value panels = prepacked ? constantPanels(b, blocking, constantB, batched)
                           : allocPanels(packBOnce);
  KernelArgs args =
      collectArgs(A, B, cBuf, panels, allocRowsOfA(packAOnce), init);
  std::string name = batched ? "batch_matmul" : "matmul";
  if (fusion.prologue)
    name += "_prologue";
  if (fusion.epilogue)
    name += "_epilogue";
  if (!prepacked)
    kb.ifThen(packBOnce, [&] {
      emitPackB(name, args.values[*args.b], args.values[args.panels]);
    });
  kb.ifThen(packAOnce, [&] { emitPackA(name, args); });
  Value tasks = kb.mul(batch, kb.mul(rowBlocks, colBlocks));
  emitParallelKernel(b, name, tasks, args.values,
                     [&](KernelBuilder &k, Value task, ValueRange in) {
                       emitProductTask(k, task, in, args);
                     });
  return asTensor(b, roundResult ? emitRounding(cBuf, resultType, sizes) : cBuf,
                  resultType);
}

/// The f32 product `cBuf` rounded into a new buffer of `type`, a task per
/// row.
Value MatmulLowering::emitRounding(Value cBuf, RankedTensorType type,
                                   ArrayRef<Value> sizes) {
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
                         k.vstoreMasked(k.vloadMasked(product, at, lanes, mask),
                                        rounded, at, mask);
                       });
                     });
  return out;
}

/// C[batch] = init + A[batch] B[batch] with row-major operands (the default
/// indexing maps of linalg.matmul and linalg.batch_matmul).
template <typename OpTy> struct CpuMatmul : OpRewritePattern<OpTy> {
  CpuMatmul(MLIRContext *ctx, const CpuTarget &target, bool fuse)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(target), fuse(fuse) {
  }

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

    Fusion fusion;
    if (!batched && fuse)
      fusion = Fusion::match(op, A, B, init);
    // With an epilogue, the kernel runs where the consumer did: its other
    // inputs may be computed after the matmul.
    if (fusion.epilogue)
      rewriter.setInsertionPoint(fusion.epilogue->op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    kb.checksFor(op);
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    // bf16 pairs when A (as materialized: a fused prologue's result type)
    // and B are bf16 and the target has the dot product.
    Type aType = fusion.prologue ? fusion.prologue->op->getResult(0).getType()
                                 : A.getType();
    GemmProducts products = gemmProductsFor(target, getElementTypeOrSelf(aType),
                                            getElementTypeOrSelf(B.getType()));
    MatmulLowering lowering(b, kb, target, products, batched, fusion);
    Value product = lowering.emit(A, B, init, resultType);

    if (fusion.prologue)
      redirectDims(rewriter, fusion.prologue->op->getResult(0),
                   fusion.prologue->op.getDpsInits()[0]);
    if (fusion.epilogue) {
      redirectDims(rewriter, op->getResult(0), init);
      rewriter.replaceOp(fusion.epilogue->op, product);
      rewriter.eraseOp(op);
    } else {
      rewriter.replaceOp(op, product);
    }
    if (fusion.prologue)
      rewriter.eraseOp(fusion.prologue->op);
    return success();
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

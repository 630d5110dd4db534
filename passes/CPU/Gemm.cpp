//===- Gemm.cpp - register-blocked matrix products in CPU kernels ---------===//

#include "CPU/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

MatrixRef seqc::rowMajor(Value memref) {
  return MatrixRef{memref, [](Value r, Value c) {
                     return SmallVector<Value>{r, c};
                   }};
}

MatrixRef seqc::transposed(Value memref) {
  return MatrixRef{memref, [](Value r, Value c) {
                     return SmallVector<Value>{c, r};
                   }};
}

void seqc::packRows(KernelBuilder &kb, const CpuTarget &target,
                    const MatrixRef &src, Value rows, int64_t cols, Value dst,
                    const std::function<Value(Value, Value)> &transform) {
  packRows(kb, target, src, rows, cols, rowMajor(dst), transform);
}

void seqc::packRows(KernelBuilder &kb, const CpuTarget &target,
                    const MatrixRef &src, Value rows, int64_t cols,
                    const MatrixRef &dst,
                    const std::function<Value(Value, Value)> &transform) {
  const int64_t lanes = target.vectorWidth;
  kb.forEach(kb.idx(0), rows, kb.idx(1), [&](Value r) {
    for (int64_t c0 = 0; c0 < cols; c0 += lanes) {
      Value c = kb.idx(c0);
      bool whole = c0 + lanes <= cols;
      Value mask = whole ? Value() : kb.vmask(kb.idx(cols - c0), lanes);
      Value v = whole ? kb.vload(src.memref, src.at(r, c), lanes)
                      : kb.vloadMasked(src.memref, src.at(r, c), lanes, mask);
      if (transform)
        v = transform(v, r);
      if (whole)
        kb.vstore(v, dst.memref, dst.at(r, c));
      else
        kb.vstoreMasked(v, dst.memref, dst.at(r, c), mask);
    }
  });
}

void seqc::transposeInto(KernelBuilder &kb, const CpuTarget &target,
                         const MatrixRef &src, Value rows, int64_t cols,
                         Value dst) {
  const int64_t lanes = target.vectorWidth;
  kb.forEach(kb.idx(0), rows, kb.idx(1), [&](Value r) {
    for (int64_t c0 = 0; c0 < cols; c0 += lanes) {
      int64_t n = std::min(lanes, cols - c0);
      SmallVector<Value> at = src.at(r, kb.idx(c0));
      Value v = n == lanes ? kb.vload(src.memref, at, lanes)
                           : kb.vloadMasked(src.memref, at, lanes,
                                            kb.vmask(kb.idx(n), lanes));
      for (int64_t l = 0; l < n; ++l) {
        Value x = vector::ExtractOp::create(kb.builder(), v, l);
        kb.mstore(x, dst, {kb.idx(c0 + l), r});
      }
    }
  });
}

namespace {

/// The micro-kernel: `rows` rows starting at i0, `vecs` vectors of columns
/// starting at j0, reduction range [k0, k1). C's tile starts from C itself
/// when `addToC` (an i1) is true, from zero otherwise.
struct MicroKernel {
  KernelBuilder &kb;
  int64_t lanes;
  const MatrixRef &A, &B, &C;
  Value k0, k1, addToC;

  void emit(Value i0, Value j0, int64_t rows, int64_t vecs,
            ArrayRef<Value> masks) {
    auto col = [&](int64_t v) { return kb.add(j0, kb.idx(v * lanes)); };
    auto row = [&](int64_t r) { return kb.add(i0, kb.idx(r)); };
    auto load = [&](const MatrixRef &m, Value r, int64_t v) {
      SmallVector<Value> ivs = m.at(r, col(v));
      return masks.empty() ? kb.vload(m.memref, ivs, lanes)
                           : kb.vloadMasked(m.memref, ivs, lanes, masks[v]);
    };
    SmallVector<Value> acc;
    Value zero = kb.vconst(0.0, lanes);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < vecs; ++v)
        acc.push_back(kb.select(addToC, load(C, row(r), v), zero));
    SmallVector<Value> done = kb.loop(k0, k1, acc, [&](Value k, ValueRange c) {
      SmallVector<Value> bv;
      for (int64_t v = 0; v < vecs; ++v)
        bv.push_back(load(B, k, v));
      SmallVector<Value> next;
      for (int64_t r = 0; r < rows; ++r) {
        Value a = kb.splat(kb.mload(A.memref, A.at(row(r), k)), lanes);
        for (int64_t v = 0; v < vecs; ++v)
          next.push_back(kb.vfma(a, bv[v], c[r * vecs + v]));
      }
      return next;
    });
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < vecs; ++v) {
        SmallVector<Value> ivs = C.at(row(r), col(v));
        if (masks.empty())
          kb.vstore(done[r * vecs + v], C.memref, ivs);
        else
          kb.vstoreMasked(done[r * vecs + v], C.memref, ivs, masks[v]);
      }
  }
};

/// One pass of the micro-kernel over every block of C.
void emitPass(KernelBuilder &kb, MicroKernel &mk, Value M, Value N,
              int64_t rows, int64_t vecs, int64_t nr, int64_t lanes) {
  Value fullRowEnd = kb.mul(kb.divs(M, kb.idx(rows)), kb.idx(rows));
  // Every rows x nr block of columns j0.
  auto columnBlock = [&](Value j0, ArrayRef<Value> masks) {
    kb.forEach(kb.idx(0), fullRowEnd, kb.idx(rows),
               [&](Value i0) { mk.emit(i0, j0, rows, vecs, masks); });
    kb.forEach(fullRowEnd, M, kb.idx(1),
               [&](Value i0) { mk.emit(i0, j0, 1, vecs, masks); });
  };
  Value fullColEnd = kb.mul(kb.divs(N, kb.idx(nr)), kb.idx(nr));
  kb.forEach(kb.idx(0), fullColEnd, kb.idx(nr),
             [&](Value j0) { columnBlock(j0, {}); });
  // The last, partial block of columns, with lane masks.
  kb.ifThen(kb.cmp(CmpIPredicate::slt, fullColEnd, N), [&] {
    SmallVector<Value> masks;
    for (int64_t v = 0; v < vecs; ++v)
      masks.push_back(
          kb.vmask(kb.sub(N, kb.add(fullColEnd, kb.idx(v * lanes))), lanes));
    columnBlock(fullColEnd, masks);
  });
}

} // namespace

void seqc::emitGemm(KernelBuilder &kb, const CpuTarget &target, GemmShape shape,
                    const MatrixRef &A, const MatrixRef &B, const MatrixRef &C,
                    GemmMode mode, const PrepareA &prepareA) {
  const int64_t lanes = target.vectorWidth;
  const int64_t vecs = 2;
  // Accumulators + B vectors + a broadcast must fit the register file:
  // 32 vector registers with AVX-512, 16 otherwise.
  const int64_t rows = lanes >= 16 ? 8 : 6;
  const int64_t nr = vecs * lanes;
  // The reduction is cut in blocks of kc so that a block of B's panel
  // (kc x nr) and the A rows stay in L1 while the row blocks pass over
  // them; C accumulates over the blocks.
  const int64_t kc = gemmReductionBlock;

  Value M = shape.M, N = shape.N, K = shape.K;
  // At least one pass, so an empty reduction still writes C = 0.
  Value passes = kb.divs(kb.add(K, kb.idx(kc - 1)), kb.idx(kc));
  passes = arith::MaxSIOp::create(kb.builder(), passes, kb.idx(1));
  kb.forEach(kb.idx(0), passes, kb.idx(1), [&](Value p) {
    Value k0 = kb.mul(p, kb.idx(kc));
    Value k1 = kb.mins(K, kb.add(k0, kb.idx(kc)));
    Value addToC = mode == GemmMode::Accumulate
                       ? kb.i1(true)
                       : kb.cmp(CmpIPredicate::sgt, p, kb.idx(0));
    MatrixRef passA = prepareA ? prepareA(k0, k1) : A;
    MicroKernel mk{kb, lanes, passA, B, C, k0, k1, addToC};
    emitPass(kb, mk, M, N, rows, vecs, nr, lanes);
  });
}

//===- EmulateAmx.cpp - AMX tile ops as vector code -----------------------===//
//
// The GEMM engine's AMX products (Gemm.h, GemmProducts::AmxTiles) are
// `amx` dialect ops. On a host without AMX they run emulated: every tile
// becomes a 2-D vector of its shape and each op the vector code of its
// definition, so the packing, the VNNI layout of B, the zero padding and
// the tails of the AMX kernels are tested on any machine, as the GPU
// kernels are under `--target cuda-emulated`.
//
//   tile_zero           a zero vector
//   tile_load, _store   one vector load or store per row, rows one memref
//                       row apart (the implicit stride; explicit strides are
//                       not emitted by seqc and are refused)
//   tile_mulf           acc[m][n] += sum_p lhs[m][2p] rhs[p][2n]
//                                        + lhs[m][2p+1] rhs[p][2n+1]
//                       in f32 FMAs on the operands widened from bf16
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace seqc {
#define GEN_PASS_DEF_SEQEMULATEAMX
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {

VectorType vectorOf(amx::TileType tile) {
  return VectorType::get(tile.getShape(), tile.getElementType());
}

Value zeros(OpBuilder &b, Location loc, VectorType type) {
  return arith::ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
}

/// The memref indices of row `r` of a tile whose row 0 starts at `indices`:
/// one memref row further per tile row.
SmallVector<Value> rowIndices(OpBuilder &b, Location loc, ValueRange indices,
                              int64_t r) {
  SmallVector<Value> at(indices);
  Value &row = at[at.size() - 2];
  row = arith::AddIOp::create(b, loc, row,
                              arith::ConstantIndexOp::create(b, loc, r));
  return at;
}

struct EmulateTileZero : OpConversionPattern<amx::TileZeroOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(amx::TileZeroOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, zeros(rewriter, op.getLoc(), vectorOf(op.getTileType())));
    return success();
  }
};

struct EmulateTileLoad : OpConversionPattern<amx::TileLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(amx::TileLoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getStride())
      return rewriter.notifyMatchFailure(op, "an explicit stride");
    Location loc = op.getLoc();
    VectorType type = vectorOf(op.getTileType());
    auto rowType = VectorType::get({type.getDimSize(1)}, type.getElementType());
    Value tile = zeros(rewriter, loc, type);
    for (int64_t r = 0; r < type.getDimSize(0); ++r) {
      Value row = vector::LoadOp::create(
          rewriter, loc, rowType, adaptor.getBase(),
          rowIndices(rewriter, loc, adaptor.getIndices(), r));
      tile = vector::InsertOp::create(rewriter, loc, row, tile, r);
    }
    rewriter.replaceOp(op, tile);
    return success();
  }
};

struct EmulateTileStore : OpConversionPattern<amx::TileStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(amx::TileStoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getStride())
      return rewriter.notifyMatchFailure(op, "an explicit stride");
    Location loc = op.getLoc();
    int64_t rows = op.getTileType().getShape()[0];
    for (int64_t r = 0; r < rows; ++r) {
      Value row = vector::ExtractOp::create(rewriter, loc, adaptor.getVal(), r);
      vector::StoreOp::create(
          rewriter, loc, row, adaptor.getBase(),
          rowIndices(rewriter, loc, adaptor.getIndices(), r));
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// tdpbf16ps: row p of rhs holds steps 2p and 2p + 1 of each column side
/// by side; row m of lhs holds steps 0..2P-1 of row m.
struct EmulateTileMulF : OpConversionPattern<amx::TileMulFOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(amx::TileMulFOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    auto widen = [&](Value tile) {
      auto type = cast<VectorType>(tile.getType());
      return arith::ExtFOp::create(rewriter, loc, type.clone(f32), tile)
          .getResult();
    };
    Value lhs = widen(adaptor.getLhs()), rhs = widen(adaptor.getRhs());
    auto accType = cast<VectorType>(adaptor.getAcc().getType());
    int64_t rows = accType.getDimSize(0), cols = accType.getDimSize(1);
    int64_t pairRows = cast<VectorType>(rhs.getType()).getDimSize(0);
    auto rowType = VectorType::get({cols}, f32);
    // The even and odd steps of each row of rhs, as rows of columns.
    SmallVector<Value> even, odd;
    for (int64_t p = 0; p < pairRows; ++p) {
      Value row = vector::ExtractOp::create(rewriter, loc, rhs, p);
      auto halves = vector::DeinterleaveOp::create(rewriter, loc, row);
      even.push_back(halves.getRes1());
      odd.push_back(halves.getRes2());
    }
    Value acc = adaptor.getAcc();
    for (int64_t m = 0; m < rows; ++m) {
      Value sum = vector::ExtractOp::create(rewriter, loc, acc, m);
      Value lhsRow = vector::ExtractOp::create(rewriter, loc, lhs, m);
      for (int64_t p = 0; p < pairRows; ++p) {
        for (auto [step, columns] :
             {std::pair{2 * p, even[p]}, std::pair{2 * p + 1, odd[p]}}) {
          Value a = vector::BroadcastOp::create(
              rewriter, loc, rowType,
              vector::ExtractOp::create(rewriter, loc, lhsRow, step));
          sum = math::FmaOp::create(rewriter, loc, a, columns, sum);
        }
      }
      acc = vector::InsertOp::create(rewriter, loc, sum, acc, m);
    }
    rewriter.replaceOp(op, acc);
    return success();
  }
};

struct SeqEmulateAmx : seqc::impl::SeqEmulateAmxBase<SeqEmulateAmx> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    TypeConverter types;
    types.addConversion([](Type t) { return t; });
    types.addConversion([](amx::TileType t) -> Type { return vectorOf(t); });
    ConversionTarget target(*ctx);
    target.addIllegalDialect<amx::AMXDialect>();
    target.addLegalDialect<arith::ArithDialect, math::MathDialect,
                           vector::VectorDialect>();
    RewritePatternSet patterns(ctx);
    patterns.add<EmulateTileZero, EmulateTileLoad, EmulateTileStore,
                 EmulateTileMulF>(types, ctx);
    // Tiles carried by loops (the micro-kernel's accumulators).
    scf::populateSCFStructuralTypeConversionsAndLegality(types, patterns,
                                                         target);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

//===- ShapeSignatureTest.cpp - named-dimension shape contracts -----------===//

#include "Seq/SeqDialect.h"
#include "seqc/InitSeqc.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace seqc::seq;

namespace {

class ShapeSignatureTest : public ::testing::Test {
protected:
  ShapeSignatureTest() {
    DialectRegistry registry;
    seqc::registerDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Parses `src` without verifying and returns the first seq op.
  Operation *firstSeqOp(StringRef src) {
    ParserConfig config(&ctx, /*verifyAfterParse=*/false);
    module = parseSourceString<ModuleOp>(src, config);
    EXPECT_TRUE(module);
    Operation *found = nullptr;
    module->walk([&](Operation *op) {
      if (!found && isa<ShapeSignatureOpInterface>(op))
        found = op;
    });
    return found;
  }

  /// The diagnostic verifyShapeSignature emits for `op` (empty on success).
  std::string diagnose(Operation *op) {
    std::string msg;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      msg = d.str();
      return success();
    });
    (void)verifyShapeSignature(op);
    return msg;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ShapeSignatureTest, DimExprSpelling) {
  EXPECT_EQ(DimExpr("T").str(), "T");
  EXPECT_EQ(DimExpr("W", 1, -1).str(), "W-1");
  EXPECT_EQ(DimExpr("M", 2, 0).str(), "2M");
  EXPECT_EQ(DimExpr("X", 3, 2).str(), "3X+2");
  EXPECT_EQ(DimExpr("W", 1, -1).apply(4), 3);
}

TEST_F(ShapeSignatureTest, SymbolsComeFromTheirFirstOccurrence) {
  Operation *op = firstSeqOp(R"(
    func.func @f(%x: tensor<2x?x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                 %B: tensor<2x8x1x32xf32>) {
      %y, %l = seq.ssd %x, %dt, %A, %B, %B
        : (tensor<2x?x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x1x32xf32>,
           tensor<2x8x1x32xf32>) -> (tensor<2x?x4x16xf32>, tensor<2x4x16x32xf32>)
      return
    })");
  ASSERT_TRUE(op);
  ShapeSignature sig;
  cast<ShapeSignatureOpInterface>(op).buildShapeSignature(sig);
  std::optional<SymbolSource> t = sig.source("T");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->tensor, 0); // x, even though its T is dynamic
  EXPECT_EQ(t->dim, 1u);
  std::optional<SymbolSource> n = sig.source("N");
  ASSERT_TRUE(n);
  EXPECT_EQ(sig.tensors()[n->tensor].name, "B");
  EXPECT_EQ(sig.describe(1, 1), "dimension 1 (T) of dt");
  EXPECT_EQ(sig.mismatchMessage(1, 1),
            "dimension 1 (T) of dt is {0} but x has {1}");
  EXPECT_EQ(diagnose(op), "");
}

TEST_F(ShapeSignatureTest, StaticMismatchAmongDynamicOnes) {
  // x's T is dynamic; dt and B disagree statically: the first static
  // occurrence (dt) is what B is compared against.
  Operation *op = firstSeqOp(R"(
    func.func @f(%x: tensor<2x?x4x16xf32>, %dt: tensor<2x8x4xf32>, %A: tensor<4xf32>,
                 %B: tensor<2x9x1x32xf32>) {
      %y, %l = seq.ssd %x, %dt, %A, %B, %B
        : (tensor<2x?x4x16xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x9x1x32xf32>,
           tensor<2x9x1x32xf32>) -> (tensor<2x?x4x16xf32>, tensor<2x4x16x32xf32>)
      return
    })");
  ASSERT_TRUE(op);
  EXPECT_EQ(diagnose(op),
            "'seq.ssd' op dimension 1 (T) of B is 9 but dt has 8");
}

TEST_F(ShapeSignatureTest, OffsetDimensions) {
  Operation *op = firstSeqOp(R"(
    func.func @f(%x: tensor<2x8x6xf32>, %w: tensor<6x4xf32>, %s: tensor<2x6x2xf32>) {
      %y, %l = seq.causal_conv1d %x, %w init(%s)
        : (tensor<2x8x6xf32>, tensor<6x4xf32>, tensor<2x6x2xf32>) -> (tensor<2x8x6xf32>, tensor<2x6x3xf32>)
      return
    })");
  ASSERT_TRUE(op);
  EXPECT_EQ(diagnose(op),
            "'seq.causal_conv1d' op dimension 2 (W-1) of init is 2 but w "
            "has W = 4, so it must be 3");
  ShapeSignature sig;
  cast<ShapeSignatureOpInterface>(op).buildShapeSignature(sig);
  EXPECT_EQ(sig.mismatchMessage(2, 2),
            "dimension 2 (W-1) of init is {0} but w has W = {1}");
}

TEST_F(ShapeSignatureTest, AttributeBindings) {
  Operation *op = firstSeqOp(R"(
    func.func @f(%l: tensor<4x8xf32>) {
      %w, %i, %a = seq.route %l {k = 2 : i64}
        : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>, tensor<f32>)
      return
    })");
  ASSERT_TRUE(op);
  ShapeSignature sig;
  cast<ShapeSignatureOpInterface>(op).buildShapeSignature(sig);
  std::optional<SymbolSource> k = sig.source("k");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->tensor, -1);
  EXPECT_EQ(k->constant, 2);
  EXPECT_EQ(diagnose(op), "");
}

TEST_F(ShapeSignatureTest, DivisibilityNeedsAPositiveDivisor) {
  Operation *op = firstSeqOp(R"(
    func.func @f(%q: tensor<1x4x6x8xf32>, %k: tensor<1x4x0x8xf32>) {
      %o = seq.attention %q, %k, %k
        : (tensor<1x4x6x8xf32>, tensor<1x4x0x8xf32>, tensor<1x4x0x8xf32>) -> (tensor<1x4x6x8xf32>)
      return
    })");
  ASSERT_TRUE(op);
  EXPECT_EQ(diagnose(op),
            "'seq.attention' op Hkv must be at least 1, but dimension 2 "
            "(Hkv) of k gives Hkv = 0");
}

} // namespace

//===- LowerChecks.cpp - seq_rt.check to calls into the runtime
//--------------===//

#include "EntryPoints.h"
#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace seqc {
#define GEN_PASS_DEF_SEQLOWERCHECKS
#include "passes/RuntimeABI/Passes.h.inc"
} // namespace seqc

using namespace mlir;

/// The runtime entry point (runtime/Errors.cpp).
static constexpr StringLiteral kCheckFailed = seqc::rt::entry::kCheckFailed;
/// seq_rt.check carries at most this many values (the runtime's signature).
static constexpr unsigned kMaxArgs = 4;

/// Upstream run-time verification writes multi-line messages:
///   ERROR: Runtime op verification failed
///   %c = tensor.cast %a : tensor<?x4xf32> to tensor<3x4xf32>
///   ^ size mismatch of dim 0
///   Location: loc("graph.mlir":2:8)
/// seqc reports errors on one line: "tensor.cast at graph.mlir:2:8: size
/// mismatch of dim 0".
static std::string oneLineMessage(StringRef msg) {
  SmallVector<StringRef> lines;
  msg.split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::string opName, reason, where;
  for (StringRef line : lines) {
    line = line.trim();
    if (line.consume_front("^ ")) {
      reason = line.str();
    } else if (line.consume_front("Location: loc(")) {
      line.consume_back(")");
      std::string loc;
      for (char c : line)
        if (c != '"')
          loc.push_back(c);
      where = loc;
    } else if (!line.starts_with("ERROR:") && opName.empty()) {
      // "%x = dialect.op ..." or "dialect.op ..."
      StringRef rest = line;
      if (rest.starts_with("%"))
        rest = rest.split(" = ").second;
      opName = rest.split(' ').first.str();
    }
  }
  if (reason.empty()) {
    std::string flat;
    for (StringRef line : lines)
      flat += (flat.empty() ? "" : "; ") + line.trim().str();
    return flat;
  }
  std::string out = opName.empty() ? "run-time check" : opName;
  if (!where.empty())
    out += " at " + where;
  return out + ": " + reason;
}

namespace {
struct SeqLowerChecks : seqc::impl::SeqLowerChecksBase<SeqLowerChecks> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<seqc::seq_rt::CheckOp> checks;
    module.walk([&](seqc::seq_rt::CheckOp op) { checks.push_back(op); });
    // Upstream run-time verification (cf.assert) reports through the same
    // path instead of aborting the process.
    SmallVector<cf::AssertOp> asserts;
    module.walk([&](cf::AssertOp op) { asserts.push_back(op); });
    for (cf::AssertOp op : asserts) {
      OpBuilder b(op);
      checks.push_back(seqc::seq_rt::CheckOp::create(
          b, op.getLoc(), op.getArg(),
          b.getStringAttr(oneLineMessage(op.getMsg())), ValueRange{}));
      op.erase();
    }
    if (checks.empty())
      return;

    MLIRContext *ctx = &getContext();
    OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    FailureOr<LLVM::LLVMFuncOp> fn = LLVM::lookupOrCreateFn(
        top, module, kCheckFailed, {ptr, i64, i64, i64, i64, i64},
        LLVM::LLVMVoidType::get(ctx));
    if (failed(fn)) {
      module.emitError() << kCheckFailed << " is declared with another type";
      return signalPassFailure();
    }

    // One constant string per distinct message.
    llvm::StringMap<LLVM::GlobalOp> globals;
    auto globalFor = [&](StringRef msg) {
      LLVM::GlobalOp &g = globals[msg];
      if (g)
        return g;
      std::string text = msg.str();
      text.push_back('\0');
      auto type =
          LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), text.size());
      g = LLVM::GlobalOp::create(
          top, module.getLoc(), type, /*isConstant=*/true,
          LLVM::Linkage::Internal,
          ("__seqc_check_msg_" + Twine(globals.size() - 1)).str(),
          top.getStringAttr(text));
      return g;
    };

    for (seqc::seq_rt::CheckOp op : checks) {
      if (op.getArgs().size() > kMaxArgs) {
        op.emitOpError() << "carries more than " << kMaxArgs << " values";
        return signalPassFailure();
      }
      ImplicitLocOpBuilder b(op.getLoc(), op);
      Value failedCond = arith::XOrIOp::create(
          b, op.getCondition(),
          arith::ConstantOp::create(b, b.getBoolAttr(true)));
      auto ifOp = scf::IfOp::create(b, failedCond, /*withElseRegion=*/false);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      SmallVector<Value> args{
          LLVM::AddressOfOp::create(b, globalFor(op.getMessage())),
          arith::ConstantOp::create(b,
                                    b.getI64IntegerAttr(op.getArgs().size()))};
      for (Value v : op.getArgs()) {
        if (v.getType().isIndex())
          args.push_back(arith::IndexCastOp::create(b, i64, v));
        else if (v.getType().getIntOrFloatBitWidth() < 64)
          args.push_back(arith::ExtSIOp::create(b, i64, v));
        else
          args.push_back(v);
      }
      while (args.size() < kMaxArgs + 2)
        args.push_back(arith::ConstantOp::create(b, b.getI64IntegerAttr(0)));
      LLVM::CallOp::create(b, *fn, args);
      op.erase();
    }
  }
};
} // namespace

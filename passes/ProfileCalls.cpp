//===- ProfileCalls.cpp - per-call timing regions in public functions -----===//
//
// A layer of a model graph is a func.call; timing each call from the host
// thread gives a per-layer profile. The enter/exit calls are external
// functions (side effects), so nothing moves across them.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace seqc {
#define GEN_PASS_DEF_SEQPROFILECALLS
#include "passes/Passes.h.inc"
} // namespace seqc

using namespace mlir;

static constexpr StringLiteral kEnter = "seqc_rt_profile_enter";
static constexpr StringLiteral kExit = "seqc_rt_profile_exit";

/// The private declaration `@name(i64)`, created once.
static func::FuncOp declare(ModuleOp module, StringRef name) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto fn = func::FuncOp::create(
      b, module.getLoc(), name,
      b.getFunctionType({b.getI64Type()}, {}));
  fn.setPrivate();
  return fn;
}

namespace {
struct SeqProfileCalls : seqc::impl::SeqProfileCallsBase<SeqProfileCalls> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp enter = declare(module, kEnter);
    func::FuncOp exit = declare(module, kExit);
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!fn.isPublic() || fn.isDeclaration())
        continue;
      SmallVector<func::CallOp> calls;
      fn.walk([&](func::CallOp call) {
        if (call.getCallee() != kEnter && call.getCallee() != kExit)
          calls.push_back(call);
      });
      SmallVector<Attribute> names;
      for (func::CallOp call : calls) {
        OpBuilder b(call);
        auto label = call->getAttrOfType<StringAttr>("seq.name");
        names.push_back(label ? label : b.getStringAttr(call.getCallee()));
        Value id = arith::ConstantIntOp::create(b, call.getLoc(),
                                                names.size() - 1, 64);
        func::CallOp::create(b, call.getLoc(), enter, ValueRange{id});
        b.setInsertionPointAfter(call);
        func::CallOp::create(b, call.getLoc(), exit, ValueRange{id});
      }
      fn->setAttr("seq.profile_regions", ArrayAttr::get(&getContext(), names));
    }
  }
};
} // namespace

//===- ProfileCalls.cpp - per-call timing regions in public functions -----===//
//
// A layer of a model graph is a func.call; timing each call from the host
// thread gives a per-layer profile. The enter/exit calls are external
// functions (side effects), so nothing moves across them.
//
//===----------------------------------------------------------------------===//

#include "EntryPoints.h"
#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace seqc {
#define GEN_PASS_DEF_SEQPROFILECALLS
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;

static constexpr StringLiteral kEnter = seqc::rt::entry::kProfileEnter;
static constexpr StringLiteral kExit = seqc::rt::entry::kProfileExit;

/// The private declaration `@name(i64)`, created once.
static func::FuncOp declare(ModuleOp module, StringRef name) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto fn = func::FuncOp::create(b, module.getLoc(), name,
                                 b.getFunctionType({b.getI64Type()}, {}));
  fn.setPrivate();
  return fn;
}

namespace {
struct SeqProfileCalls : seqc::impl::SeqProfileCallsBase<SeqProfileCalls> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp enter = declare(module, kEnter);
    func::FuncOp exit = declare(module, kExit);
    // Region ids are unique in the module; every public function lists all
    // the regions its calls can reach (with all-functions, the module's).
    SmallVector<Attribute> names;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isDeclaration() || (!fn.isPublic() && !allFunctions))
        continue;
      size_t first = names.size();
      SmallVector<func::CallOp> calls;
      fn.walk([&](func::CallOp call) {
        if (call.getCallee() != kEnter && call.getCallee() != kExit)
          calls.push_back(call);
      });
      for (func::CallOp call : calls) {
        OpBuilder b(call);
        auto label = call->getAttrOfType<StringAttr>("seq.name");
        names.push_back(label ? label : b.getStringAttr(call.getCallee()));
        int64_t id = names.size() - 1 - (allFunctions ? 0 : first);
        Value idValue = arith::ConstantIntOp::create(b, call.getLoc(), id, 64);
        func::CallOp::create(b, call.getLoc(), enter, ValueRange{idValue});
        b.setInsertionPointAfter(call);
        func::CallOp::create(b, call.getLoc(), exit, ValueRange{idValue});
      }
      if (!allFunctions)
        fn->setAttr(
            "seq.profile_regions",
            ArrayAttr::get(&getContext(), ArrayRef(names).drop_front(first)));
    }
    if (allFunctions)
      for (auto fn : module.getOps<func::FuncOp>())
        if (fn.isPublic() && !fn.isDeclaration())
          fn->setAttr("seq.profile_regions",
                      ArrayAttr::get(&getContext(), names));
  }
};
} // namespace

//===- ResultsInPlace.cpp - kernels write straight into result slices ----===//
//
// seq-expand-sequences runs each sequence of a packed batch (each piece of a
// checkpointed op) as a plain op and inserts its results into the packed
// result. After bufferization that is: the kernels write a fresh buffer,
// which is then copied into a slice of the packed buffer. The kernels write
// through a strided view of their result (allocResult), so the view can be
// of the slice instead: the allocation and the copy go away.
//
//   %m = memref.alloc(%n)                    %s = memref.subview %P[%o] [%n]
//   %v = memref.cast %m                      %v = memref.cast %s
//   <kernels writing %v>               =>    <kernels writing %v>
//   %s = memref.subview %P[%o] [%n]
//   memref.copy %m, %s
//
// It is sound when nothing between the allocation and the copy touches the
// packed buffer: the kernels never read what they have not written (the
// allocation is uninitialized), and the copy would have overwritten the
// slice at that point anyway.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace seqc {
#define GEN_PASS_DEF_SEQWRITERESULTSINPLACE
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {

/// The view ops from an allocation to the copy's target, outermost first.
struct SliceChain {
  Value root;
  SmallVector<Operation *> views;
};

/// `target` as views (subview, cast) of a buffer allocated in this function;
/// nullopt for anything else (an argument may alias another).
std::optional<SliceChain> sliceChainOf(Value target) {
  SliceChain chain;
  Value v = target;
  while (Operation *def = v.getDefiningOp()) {
    if (isa<memref::AllocOp, memref::AllocaOp>(def)) {
      chain.root = v;
      std::reverse(chain.views.begin(), chain.views.end());
      return chain;
    }
    if (!isa<memref::SubViewOp, memref::CastOp>(def))
      return std::nullopt;
    chain.views.push_back(def);
    v = cast<ViewLikeOpInterface>(def).getViewSource();
  }
  return std::nullopt;
}

/// Whether a view of `from` can stand for `to`'s values without a run-time
/// assumption: same shape, and `to`'s offset and strides dynamic or equal.
bool viewFits(MemRefType from, MemRefType to) {
  if (from.getShape() != to.getShape() ||
      from.getElementType() != to.getElementType() ||
      from.getMemorySpace() != to.getMemorySpace())
    return false;
  SmallVector<int64_t> fromStrides, toStrides;
  int64_t fromOffset, toOffset;
  if (failed(from.getStridesAndOffset(fromStrides, fromOffset)) ||
      failed(to.getStridesAndOffset(toStrides, toOffset)))
    return false;
  auto fits = [](int64_t have, int64_t want) {
    return ShapedType::isDynamic(want) || have == want;
  };
  if (!fits(fromOffset, toOffset))
    return false;
  for (auto [have, want] : llvm::zip(fromStrides, toStrides))
    if (!fits(have, want))
      return false;
  return true;
}

/// Every value that is `root` or a view of it.
llvm::SetVector<Value> aliasesOf(Value root) {
  llvm::SetVector<Value> aliases;
  aliases.insert(root);
  for (size_t i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers())
      if (auto view = dyn_cast<ViewLikeOpInterface>(user))
        if (view.getViewSource() == aliases[i])
          aliases.insert(user->getResults().begin(), user->getResults().end());
  return aliases;
}

/// The op of `block` that holds `op` lies strictly between `first` and
/// `last`.
bool liesBetween(Operation *op, Operation *first, Operation *last) {
  Operation *inBlock = first->getBlock()->findAncestorOpInBlock(*op);
  return inBlock && first->isBeforeInBlock(inBlock) &&
         inBlock->isBeforeInBlock(last);
}

class ResultForwarding {
public:
  ResultForwarding(memref::CopyOp copy, DominanceInfo &dominance)
      : copy(copy), dominance(dominance) {}

  /// Points the kernels' views at the copy's target; false (and nothing
  /// changed) when that would not be sound.
  bool run() {
    alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != copy->getBlock())
      return false;
    std::optional<SliceChain> chain = sliceChainOf(copy.getTarget());
    if (!chain || !collectViews() || !packedBufferUntouched(*chain) ||
        !canHoist(*chain))
      return false;
    hoist(*chain);
    rewrite();
    return true;
  }

private:
  /// The alloc's users are the copy and the kernels' views, whose users all
  /// come before the copy.
  bool collectViews() {
    auto target = cast<MemRefType>(copy.getTarget().getType());
    for (Operation *user : alloc->getUsers()) {
      if (user == copy.getOperation())
        continue;
      auto view = dyn_cast<memref::CastOp>(user);
      auto viewType =
          view ? dyn_cast<MemRefType>(view.getType()) : MemRefType();
      if (!viewType || !viewFits(target, viewType))
        return false;
      for (Operation *reader : view->getUsers())
        if (!liesBetween(reader, alloc, copy))
          return false;
      views.push_back(view);
    }
    return !views.empty();
  }

  /// Nothing between the allocation and the copy uses the packed buffer
  /// (but the views that lead to the copy's target).
  bool packedBufferUntouched(const SliceChain &chain) {
    for (Value alias : aliasesOf(chain.root))
      for (Operation *user : alias.getUsers())
        if (user != copy.getOperation() &&
            !llvm::is_contained(chain.views, user) &&
            liesBetween(user, alloc, copy))
          return false;
    return true;
  }

  /// Each view of the chain already dominates the allocation, or can move
  /// before it (its operands do).
  bool canHoist(const SliceChain &chain) {
    llvm::SmallPtrSet<Operation *, 4> moved;
    for (Operation *view : chain.views) {
      if (dominance.properlyDominates(view, alloc))
        continue;
      if (view->getBlock() != alloc->getBlock())
        return false;
      for (Value operand : view->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!(def && moved.contains(def)) &&
            !dominance.properlyDominates(operand, alloc))
          return false;
      }
      moved.insert(view);
    }
    return true;
  }

  void hoist(const SliceChain &chain) {
    for (Operation *view : chain.views)
      if (!dominance.properlyDominates(view, alloc))
        view->moveBefore(alloc);
  }

  void rewrite() {
    for (memref::CastOp view : views) {
      OpBuilder b(view);
      view.replaceAllUsesWith(memref::CastOp::create(b, view.getLoc(),
                                                     view.getType(),
                                                     copy.getTarget())
                                  .getResult());
      view.erase();
    }
    copy.erase();
    alloc.erase();
  }

  memref::CopyOp copy;
  DominanceInfo &dominance;
  memref::AllocOp alloc;
  SmallVector<memref::CastOp> views;
};

struct SeqWriteResultsInPlace
    : seqc::impl::SeqWriteResultsInPlaceBase<SeqWriteResultsInPlace> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    DominanceInfo dominance(getOperation());
    for (memref::CopyOp copy : copies) {
      // Moving views invalidates no dominance query of a later copy: a view
      // only moves up within its block, before an op it did not dominate.
      ResultForwarding(copy, dominance).run();
    }
  }
};

} // namespace

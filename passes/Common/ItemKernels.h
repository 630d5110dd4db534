//===- ItemKernels.h - independent-item ops for every target ---*- C++ -*-===//
//
// semiseparable_mask, associative_scan, random_features and route are
// written once (ItemKernels.cpp) as bodies over independent items; a target
// supplies the one primitive they need, an ItemDispatch (as Triton's
// TargetInfoBase supplies a scan's hardware primitives): how to run a body
// for every item in parallel, and which element types its kernels take.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_COMMON_ITEMKERNELS_H
#define SEQC_PASSES_COMMON_ITEMKERNELS_H

#include "Common/Kernels.h"

#include "mlir/IR/PatternMatch.h"

#include <string>

namespace seqc {

/// body(kb, item, args) for one item in [0, count): `args` are the
/// kernel's view of the values passed to ItemDispatch::emit.
using ItemBody =
    std::function<void(KernelBuilder &kb, Value item, ValueRange args)>;

/// What a target supplies to the item kernels.
class ItemDispatch {
public:
  virtual ~ItemDispatch();
  /// Emits a kernel named `name` running `body` for every item in
  /// [0, count), at the builder's insertion point.
  virtual void emit(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
                    KernelBuilder &kb, Value count, ValueRange args,
                    const ItemBody &body) const = 0;
  /// Whether items next to each other run side by side and share memory
  /// lines (GPU threads of a warp: adjacent items should touch adjacent
  /// addresses), rather than each item running alone (a CPU task: an item
  /// should touch contiguous memory).
  virtual bool adjacentItemsShareLines() const = 0;
  /// Why the target's kernels do not take `op`'s element types, or "".
  virtual std::string unsupportedTypes(mlir::Operation *op) const = 0;
};

/// The item-kernel lowerings (benefit 2, over the reference lowering) of
/// semiseparable_mask, associative_scan, random_features and route.
/// `dispatch` must outlive the patterns' application.
void populateItemKernelPatterns(mlir::RewritePatternSet &patterns,
                                const ItemDispatch &dispatch);

} // namespace seqc

#endif // SEQC_PASSES_COMMON_ITEMKERNELS_H

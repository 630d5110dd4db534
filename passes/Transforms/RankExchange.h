//===- RankExchange.h - gathers the distribution passes share ---*- C++ -*-===//
//
// seq-distribute-steps and seq-distribute-experts give every rank a slice
// of the steps (or tokens) and then gather: the ranks' states and
// transitions (LASP-2's one all-gather before the fold), and each op's
// results, which every rank returns whole. Both are a `shard.all_gather`
// along dimension 0 on @seq_ranks, which each target lowers to its engine's
// all-gather (CollectiveLowering.h): every rank receives the other ranks'
// bytes once, where the all-reduce of zero-padded wholes they replace moved
// and summed the whole tensor.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_RANKEXCHANGE_H
#define SEQC_PASSES_TRANSFORMS_RANKEXCHANGE_H

#include "Common/KernelBuilder.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace seqc {

/// `tensor`'s [from, from + size) along `axis`, whole along the others: a
/// rank's steps or tokens, a tail.
mlir::Value sliceAlong(mlir::ImplicitLocOpBuilder &b, mlir::Value tensor,
                       int64_t axis, mlir::OpFoldResult from,
                       mlir::OpFoldResult size);

/// scale * v + extra, a constant where v is (so that tables sized by it,
/// the experts' counts, have static types).
mlir::Value affineIndex(KernelBuilder &kb, mlir::Value v, int64_t scale,
                        int64_t extra);

/// Rank r's slice of `total` steps (or tokens) over R ranks: [r total / R,
/// (r + 1) total / R), as its start and length. The split every
/// distribution pass and gather uses.
struct RankSlice {
  mlir::Value start, length;
};
RankSlice rankSlice(KernelBuilder &kb, mlir::Value r, mlir::Value total,
                    int64_t ranks);

/// [R, local...] on every rank, row r rank r's `local` (of the same shape
/// on every rank).
mlir::Value gatherRows(mlir::ImplicitLocOpBuilder &b, mlir::Value local,
                       int64_t ranks);

/// The whole of a tensor split along `axis` over the ranks, on every rank:
/// rank r holds `local`, steps [r total / R, (r + 1) total / R) of the
/// whole (the split of the distribution passes, whose slices differ by at
/// most one step). Slices travel padded to ceil(total / R) steps and are
/// copied into place, unless every slice is the same length and they lie
/// one after another in memory (the dimensions before `axis` are 1): then
/// the gathered rows are the whole. `wholeSizes` holds every dimension's
/// size of `wholeType`.
mlir::Value gatherSlices(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                         mlir::Value local, int64_t axis, mlir::Value total,
                         int64_t ranks, mlir::RankedTensorType wholeType,
                         mlir::ValueRange wholeSizes);

/// Under rank-local steps each rank holds its own number of steps, known
/// to the others only through an exchange: every rank's `count` (an index),
/// as [R, 1] i64 on every rank.
mlir::Value gatherCounts(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                         mlir::Value count, int64_t ranks);
/// Rank r's count from gatherCounts, as an index.
mlir::Value countOf(mlir::ImplicitLocOpBuilder &b, mlir::Value counts,
                    mlir::Value r);
/// The counts of ranks [from, to).
mlir::Value sumOfCounts(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                        mlir::Value counts, mlir::Value from, mlir::Value to);
/// Rank r's steps of the whole: after the counts of the ranks before it.
RankSlice countedSlice(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                       mlir::Value counts, mlir::Value r);
/// The whole of a tensor whose rank r holds `local`, countOf(r) steps
/// along `axis` (any numbers), on every rank: slices travel padded to the
/// longest and are copied into place. The whole is dynamic along `axis`.
mlir::Value gatherCountedSlices(mlir::ImplicitLocOpBuilder &b,
                                KernelBuilder &kb, mlir::Value local,
                                int64_t axis, mlir::Value counts,
                                int64_t ranks);

/// A MoE layer's counts over the ranks, on every rank: R x (E + 2) i64,
/// row p rank p's choices per expert of its `T` x `K` `indices`, then its
/// indices outside [0, E) and its tokens (one all-gather).
mlir::Value gatherExpertCounts(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                               mlir::Value indices, mlir::Value T,
                               mlir::Value K, mlir::Value E, int64_t ranks);
/// Column `column` of such a table summed over ranks [0, to), an index.
mlir::Value sumColumnToRank(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                            mlir::Value table, mlir::Value column,
                            mlir::Value to);

/// What a causal window of `window` steps carries from each rank into the
/// ranks after it under rank-local steps: every rank's last
/// min(steps, window) steps of `local` along `axis`, gathered as rows
/// [R, ...] (each padded to max(window, 1) steps: a gather of empty rows
/// gives back none), with their counts.
struct RankTails {
  mlir::Value rows, counts;
  int64_t axis;
};
RankTails gatherTails(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                      mlir::Value local, int64_t axis, mlir::Value window,
                      int64_t ranks);
/// `state` carried over the tails of ranks [from, to): `step(state, tail)`
/// for each rank's tail (its counted steps, without the rank dimension) in
/// turn, the result cast back to the state's type.
mlir::Value foldTails(
    mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb, const RankTails &tails,
    mlir::Value state, mlir::Value from, mlir::Value to,
    llvm::function_ref<mlir::Value(mlir::Value state, mlir::Value tail)> step);

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_RANKEXCHANGE_H

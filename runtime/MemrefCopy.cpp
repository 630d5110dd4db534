//===- MemrefCopy.cpp - strided memref copies for generated code ----------===//
//
// MLIR lowers memref.copy of non-contiguous memrefs to a call of
// `memrefCopy(elementSize, src, dst)` on unranked descriptors. MLIR's own
// implementation lives in libmlir_c_runner_utils; seqc provides it so that
// generated code needs nothing but seqc's runtime.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"

#include <cstring>
#include <vector>

/// An unranked memref: the rank and a pointer to a ranked descriptor
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

namespace {
struct View {
  char *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

View viewOf(const UnrankedMemRef *m) {
  auto *words = static_cast<int64_t *>(m->descriptor);
  View v;
  v.aligned = reinterpret_cast<char *>(words[1]);
  v.offset = words[2];
  v.sizes = words + 3;
  v.strides = words + 3 + m->rank;
  return v;
}
} // namespace

extern "C" void memrefCopy(int64_t elementSize, UnrankedMemRef *src,
                           UnrankedMemRef *dst) {
  int64_t rank = src->rank;
  View s = viewOf(src), d = viewOf(dst);
  char *sp = s.aligned + s.offset * elementSize;
  char *dp = d.aligned + d.offset * elementSize;
  if (rank == 0) {
    std::memcpy(dp, sp, elementSize);
    return;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (s.sizes[i] == 0)
      return;
  std::vector<int64_t> idx(rank, 0);
  for (;;) {
    std::memcpy(dp, sp, elementSize);
    // Advance the innermost index, carrying outwards.
    int64_t axis = rank - 1;
    for (; axis >= 0; --axis) {
      sp += s.strides[axis] * elementSize;
      dp += d.strides[axis] * elementSize;
      if (++idx[axis] < s.sizes[axis])
        break;
      sp -= s.strides[axis] * s.sizes[axis] * elementSize;
      dp -= d.strides[axis] * s.sizes[axis] * elementSize;
      idx[axis] = 0;
    }
    if (axis < 0)
      return;
  }
}

//===- BlockCache.h - reuse of large allocations ----------------*- C++ -*-===//
//
// Buffers of a compiled function are usually the same sizes call after call.
// Large freed blocks are kept (up to a bound) and handed out again, so a
// repeated call does not pay the page faults of fresh memory each time.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_BLOCKCACHE_H
#define SEQC_RUNTIME_BLOCKCACHE_H

#include <cstddef>

namespace seqc::rt {

/// `size` bytes aligned to at least `alignment` (and 64), or null.
void *acquireBlock(size_t size, size_t alignment);
/// Returns a block from acquireBlock; `size` is its size when known (0:
/// unknown, the block is freed, not cached).
void releaseBlock(void *ptr, size_t size);
/// Frees every cached block.
void trimBlockCache();

} // namespace seqc::rt

#endif // SEQC_RUNTIME_BLOCKCACHE_H

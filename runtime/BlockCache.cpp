//===- BlockCache.cpp - reuse of large allocations ------------------------===//

#include "BlockCache.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace {

/// Blocks below this size are cheap to get from malloc: not cached. (glibc
/// serves larger ones with fresh mmaps, whose page faults cost more than
/// small kernels take.)
constexpr size_t kMinCached = size_t(64) << 10;
/// The most bytes kept in the cache.
constexpr size_t kMaxCachedBytes = size_t(2) << 30;

struct Cache {
  std::mutex mutex;
  std::multimap<size_t, void *> blocks; // size -> block
  size_t bytes = 0;
  /// The real size of every cacheable block handed out: a block reused for
  /// a smaller request goes back under its own size, not the request's
  /// (cached sizes would otherwise drift down).
  std::unordered_map<void *, size_t> capacity;
};

Cache &cache() {
  static Cache *c = new Cache(); // never destroyed: used at exit by tensors
  return *c;
}

} // namespace

void *seqc::rt::acquireBlock(size_t size, size_t alignment) {
  if (alignment < 64)
    alignment = 64;
  if (size >= kMinCached && alignment <= 64) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    // The smallest cached block that fits without wasting over half of it.
    auto it = c.blocks.lower_bound(size);
    if (it != c.blocks.end() && it->first <= 2 * size) {
      void *p = it->second;
      c.bytes -= it->first;
      c.capacity[p] = it->first;
      c.blocks.erase(it);
      return p;
    }
  }
  void *ptr = nullptr;
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  if (posix_memalign(&ptr, alignment, rounded ? rounded : alignment) != 0)
    return nullptr;
  if (size >= kMinCached && alignment <= 64) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.capacity[ptr] = rounded;
  }
  return ptr;
}

void seqc::rt::releaseBlock(void *ptr, size_t size) {
  if (!ptr)
    return;
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  // Whatever size the caller names (0: unknown), the block's own size wins,
  // and its entry goes (a later block at this address must not inherit it).
  auto known = c.capacity.find(ptr);
  if (known != c.capacity.end()) {
    size = std::max(size, known->second);
    c.capacity.erase(known);
  }
  if (size >= kMinCached) {
    if (c.bytes + size <= kMaxCachedBytes) {
      c.blocks.emplace(size, ptr);
      c.bytes += size;
      return;
    }
  }
  std::free(ptr);
}

void seqc::rt::trimBlockCache() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto &entry : c.blocks)
    std::free(entry.second);
  c.blocks.clear();
  c.bytes = 0;
}

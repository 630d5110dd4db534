//===- CallScope.cpp - errors and tracked allocations of a call -----------===//

#include "CallScope.h"
#include "BlockCache.h"
#include "CudaDriver.h"
#include "Runtime.h"

#include <algorithm>
#include <chrono>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace seqc::rt {

struct CallState {
  std::jmp_buf jump;
  bool canJump = false;
  std::thread::id owner;
  std::string error;
  std::mutex mutex;
  std::unordered_map<void *, size_t> live;
  size_t bytes = 0;
  size_t peak = 0;
  size_t limit = 0;
  size_t allocated = 0;
  bool cudaMemory = false;
  // Profile regions: accumulated time and count per region, and the start
  // times of the regions entered (only the owner thread enters them).
  bool profiling = false;
  std::vector<uint64_t> regionNanos;
  std::vector<int64_t> regionCalls;
  std::vector<std::pair<int64_t, uint64_t>> open;
};

static thread_local CallState *current = nullptr;

CallState *enterCall(CallState *state) {
  CallState *prev = current;
  current = state;
  return prev;
}

CallState *currentCall() { return current; }

/// Frees a block of `state`'s call (managed memory for CUDA calls).
static void freeBlock(const CallState *state, void *ptr, size_t size) {
  if (state && state->cudaMemory)
    cudaManagedFree(ptr);
  else
    releaseBlock(ptr, size);
}

CallScope::CallScope(size_t memoryLimit, bool cudaMemory)
    : state(new CallState) {
  state->limit = memoryLimit;
  state->cudaMemory = cudaMemory;
  state->owner = std::this_thread::get_id();
}

CallScope::~CallScope() {
  for (auto &entry : state->live)
    freeBlock(state.get(), entry.first, entry.second);
}

void *CallScope::release(void *ptr) {
  std::lock_guard<std::mutex> lock(state->mutex);
  auto it = state->live.find(ptr);
  if (it == state->live.end())
    return nullptr;
  state->bytes -= it->second;
  state->live.erase(it);
  return ptr;
}

size_t CallScope::sizeOf(const void *ptr) const {
  std::lock_guard<std::mutex> lock(state->mutex);
  auto it = state->live.find(const_cast<void *>(ptr));
  return it == state->live.end() ? 0 : it->second;
}

bool CallScope::run(void (*fn)(void **), void **args) {
  CallState *prev = enterCall(state.get());
  state->canJump = true;
  if (setjmp(state->jump) == 0) {
    fn(args);
    state->canJump = false;
    enterCall(prev);
    return true;
  }
  state->canJump = false;
  enterCall(prev);
  return false;
}

const std::string &CallScope::error() const { return state->error; }

bool CallScope::owns(const void *ptr) const {
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->live.count(const_cast<void *>(ptr)) != 0;
}

size_t CallScope::peakBytes() const { return state->peak; }

size_t CallScope::allocatedBytes() const { return state->allocated; }

void CallScope::enableProfile(size_t regions) {
  state->profiling = true;
  state->regionNanos.assign(regions, 0);
  state->regionCalls.assign(regions, 0);
}

const std::vector<uint64_t> &CallScope::regionNanos() const {
  return state->regionNanos;
}

const std::vector<int64_t> &CallScope::regionCalls() const {
  return state->regionCalls;
}

static uint64_t nowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Formats `fmt`, replacing `{i}` by args[i], into `out`.
static void formatInto(std::string &out, const char *fmt, int64_t nargs,
                       const int64_t *args) {
  out.clear();
  for (const char *p = fmt; *p; ++p) {
    if (*p == '{' && p[1] >= '0' && p[1] <= '9' && p[2] == '}') {
      int i = p[1] - '0';
      if (i < nargs)
        out += std::to_string(args[i]);
      p += 2;
      continue;
    }
    out.push_back(*p);
  }
}

/// Ends the running call with the error already stored in `state->error`.
/// Only trivially destructible locals may be alive in callers up to run().
[[noreturn]] static void unwind(CallState *state) {
  // Not from inside a parallel loop's task, even on the owner thread: the
  // jump would leave the loop's job open on an unwound stack and the pool
  // held. The lowerings emit every check in host code, outside the loops.
  if (state && state->canJump && state->owner == std::this_thread::get_id() &&
      !insideParallelTask())
    std::longjmp(state->jump, 1);
  // A worker thread, a task, or no running call: nothing can be unwound
  // safely.
  std::fprintf(stderr, "error: %s\n",
               state ? state->error.c_str() : "run-time check failed");
  std::abort();
}

} // namespace seqc::rt

using namespace seqc::rt;

void seqc::rt::recordCallError(const std::string &message) {
  CallState *state = current;
  if (!state) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::abort();
  }
  std::lock_guard<std::mutex> lock(state->mutex);
  if (state->error.empty())
    state->error = message;
}

void seqc::rt::unwindCall() { unwind(current); }

extern "C" void seqc_rt_check_failed(const char *fmt, int64_t nargs, int64_t a0,
                                     int64_t a1, int64_t a2, int64_t a3) {
  CallState *state = current;
  int64_t args[4] = {a0, a1, a2, a3};
  if (!state) {
    std::string msg;
    formatInto(msg, fmt, nargs, args);
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    std::abort();
  }
  formatInto(state->error, fmt, nargs, args);
  unwind(state);
}

/// Reserves `size` bytes of `state`'s memory limit (false, with the error
/// recorded, when the call would exceed it). The check and the accounting
/// are one step: two threads of a call cannot both pass the limit with the
/// room for one buffer.
static bool reserve(CallState *state, size_t size) {
  std::lock_guard<std::mutex> lock(state->mutex);
  if (state->limit &&
      (size > state->limit || state->bytes > state->limit - size)) {
    if (state->error.empty())
      state->error = "out of memory: a buffer of " + std::to_string(size) +
                     " bytes exceeds the memory limit of " +
                     std::to_string(state->limit) + " bytes (" +
                     std::to_string(state->bytes) + " in use)";
    return false;
  }
  if (!state->error.empty())
    return false;
  state->bytes += size;
  state->allocated += size;
  state->peak = std::max(state->peak, state->bytes);
  return true;
}

/// A tracked allocation of `size` bytes aligned to `alignment`.
static void *trackedAlloc(size_t alignment, size_t size) {
  CallState *state = current;
  if (size == 0)
    size = 1;
  if (state && !reserve(state, size))
    unwind(state); // the lock is released: unwinding skips destructors
  void *ptr = nullptr;
  // No string may be alive when unwind() jumps: the failure is recorded in
  // this block, which ends before.
  {
    std::string why;
    if (state && state->cudaMemory) // managed memory: 256-byte aligned
      ptr = cudaManagedAlloc(size, why);
    else
      ptr = acquireBlock(size, alignment);
    if (!state) {
      if (!ptr) {
        std::fprintf(stderr, "error: out of memory allocating %zu bytes\n",
                     size);
        std::abort();
      }
      return ptr;
    }
    std::lock_guard<std::mutex> lock(state->mutex);
    if (ptr) {
      state->live.emplace(ptr, size);
      return ptr;
    }
    state->bytes -= size;
    state->allocated -= size;
    if (state->error.empty())
      state->error = !why.empty() ? why
                                  : "out of memory: allocating " +
                                        std::to_string(size) + " bytes failed";
  }
  unwind(state);
}

extern "C" void *_mlir_memref_to_llvm_alloc(size_t size) {
  return trackedAlloc(alignof(std::max_align_t), size);
}

extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                    size_t size) {
  return trackedAlloc(alignment, size);
}

extern "C" void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  size_t size = 0;
  CallState *state = current;
  if (state) {
    std::lock_guard<std::mutex> lock(state->mutex);
    auto it = state->live.find(ptr);
    if (it != state->live.end()) {
      size = it->second;
      state->bytes -= it->second;
      state->live.erase(it);
    }
  }
  freeBlock(state, ptr, size);
}

extern "C" void seqc_rt_profile_enter(int64_t region) {
  CallState *state = current;
  if (state && state->profiling)
    state->open.emplace_back(region, nowNanos());
}

extern "C" void seqc_rt_profile_exit(int64_t region) {
  CallState *state = current;
  if (!state || !state->profiling || state->open.empty())
    return;
  auto [id, start] = state->open.back();
  state->open.pop_back();
  if (id != region || region < 0 ||
      static_cast<size_t>(region) >= state->regionNanos.size())
    return;
  state->regionNanos[region] += nowNanos() - start;
  state->regionCalls[region] += 1;
}

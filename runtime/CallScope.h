//===- CallScope.h - host side of a call into compiled code -----*- C++ -*-===//

#ifndef SEQC_RUNTIME_CALLSCOPE_H
#define SEQC_RUNTIME_CALLSCOPE_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace seqc::rt {

struct CallState;

/// One call into compiled code. While it runs, the allocations the code makes
/// are tracked and a failed run-time check unwinds back to run(). When the
/// scope ends, every allocation still live (temporaries the code leaked,
/// results already copied out) is released.
class CallScope {
public:
  /// `memoryLimit`: the most bytes the call may hold at once (0: no limit).
  /// `cudaMemory`: the call's buffers are CUDA managed memory (a call of
  /// code compiled for the CUDA target).
  explicit CallScope(size_t memoryLimit = 0, bool cudaMemory = false);
  ~CallScope();
  CallScope(const CallScope &) = delete;
  CallScope &operator=(const CallScope &) = delete;

  /// Runs `fn(args)` (an MLIR packed entry point). Returns false when a
  /// run-time check failed; error() then says why.
  bool run(void (*fn)(void **), void **args);
  const std::string &error() const;
  /// Whether `ptr` is an allocation made during this call.
  bool owns(const void *ptr) const;
  /// Hands an allocation of this call over to the caller (a result it keeps
  /// without copying); it must later be freed with releaseBlock(). Returns
  /// null when `ptr` is not this call's.
  void *release(void *ptr);
  /// The size of an allocation of this call (0 when it is not one).
  size_t sizeOf(const void *ptr) const;
  /// Peak bytes held at once during the call.
  size_t peakBytes() const;
  /// The sum of the sizes of every allocation of the call.
  size_t allocatedBytes() const;
  /// Times the call's profile regions 0..regions-1 (seqc_rt_profile_enter /
  /// _exit); call before run().
  void enableProfile(size_t regions);
  const std::vector<uint64_t> &regionNanos() const;
  const std::vector<int64_t> &regionCalls() const;

private:
  std::unique_ptr<CallState> state;
};

/// Ending the call running on this thread with an error (as a failed
/// run-time check does; without a call, the message is printed and the
/// process aborts) takes two steps, so that no std::string is alive when the
/// call unwinds (longjmp skips destructors): record the message, which
/// returns, then unwindCall() from a frame without such locals. Use
/// SEQC_FAIL_CALL(message), which does both.
void recordCallError(const std::string &message);
[[noreturn]] void unwindCall();

#define SEQC_FAIL_CALL(message)                                                \
  do {                                                                         \
    ::seqc::rt::recordCallError(message);                                      \
    ::seqc::rt::unwindCall();                                                  \
  } while (0)

/// Runs `attempt(error)` (returning whether it succeeded) and, when it
/// fails, ends the running call with the message it left in `error`: the
/// string is gone before the call unwinds.
template <typename Attempt> void endCallUnless(Attempt attempt) {
  bool ok;
  {
    std::string error;
    ok = attempt(error);
    if (!ok)
      recordCallError(error);
  }
  if (!ok)
    unwindCall();
}

/// Lets a worker thread of the thread pool act on behalf of a call (its
/// allocations are tracked there). Returns the previous state.
CallState *enterCall(CallState *state);
/// The call running on this thread, or null.
CallState *currentCall();
/// True while this thread runs a task of a parallel loop (ThreadPool.cpp).
bool insideParallelTask();

} // namespace seqc::rt

#endif // SEQC_RUNTIME_CALLSCOPE_H

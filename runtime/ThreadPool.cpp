//===- ThreadPool.cpp - the parallel-for that generated code calls --------===//
//
// One process-wide pool of workers. Generated code calls
// seqc_rt_parallel_for(count, fn, ctx); the calling thread takes part, work
// is handed out dynamically in grains, and the call returns when every index
// is done. Workers act on behalf of the caller's call scope (tracked
// allocations). A pool already busy with another caller's loop (concurrent
// calls from several host threads) is waited for when the pool spans the
// whole machine and bypassed by running inline otherwise; nested loops run
// inline. Only host threads outside any task wait, and a pool's owner never
// waits on another caller, so nothing can deadlock.
//
//===----------------------------------------------------------------------===//

#include "CallScope.h"
#include "Runtime.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct Job {
  seqc_rt_task_fn fn = nullptr;
  void *ctx = nullptr;
  int64_t count = 0;
  int64_t grain = 1;
  // Every grain takes from `next`: its own cache line, apart from the
  // fields every thread reads.
  alignas(64) std::atomic<int64_t> next{0};
  seqc::rt::CallState *call = nullptr;
};

/// The pool's state word: the job's generation in the high 32 bits, an
/// "open" bit, and the number of helpers inside the job. Helpers join an
/// open job with a compare-and-swap, so the caller waits only for helpers
/// that actually joined: a worker still asleep, or descheduled on a loaded
/// machine, can never make a loop wait for it.
constexpr uint64_t kOpen = uint64_t(1) << 31;
constexpr uint64_t kInsideMask = kOpen - 1;
inline uint64_t generationOf(uint64_t state) { return state >> 32; }

thread_local bool insideTask = false;

class Pool {
public:
  static Pool &get() {
    static Pool *pool = new Pool(); // never destroyed: workers may outlive main
    return *pool;
  }

  int64_t threads() const { return numThreads.load(); }

  void setThreads(int64_t n) {
    std::lock_guard<std::mutex> busy(submitMutex);
    n = std::max<int64_t>(1, std::min<int64_t>(n, 1024));
    numThreads = n;
    ensureWorkers(n - 1);
  }

  void run(int64_t count, seqc_rt_task_fn fn, void *ctx) {
    if (count <= 0)
      return;
    int64_t n = threads();
    if (n <= 1 || count == 1 || insideTask) {
      fn(ctx, 0, count);
      return;
    }
    // Another host thread's loop holds the pool. When the pool already
    // spans every hardware thread, running this loop inline beside it would
    // only oversubscribe the cores (two callers on a 2-core pool lost a
    // quarter of their throughput that way), so wait for the pool; when
    // cores are left over, use them inline.
    std::unique_lock<std::mutex> busy(submitMutex, std::defer_lock);
    if (n >= hardwareThreads)
      busy.lock();
    else if (!busy.try_lock()) {
      fn(ctx, 0, count);
      return;
    }
    ensureWorkers(n - 1);
    // The job is closed and empty here (the previous run waited for its
    // helpers), so its fields can be written.
    // Small grains balance uneven tasks (causal attention rows) without
    // making the shared counter hot.
    job.fn = fn;
    job.ctx = ctx;
    job.count = count;
    job.grain = std::max<int64_t>(1, count / (n * 8));
    job.next.store(0, std::memory_order_relaxed);
    job.call = seqc::rt::currentCall();
    wanted.store(static_cast<int>(std::min<int64_t>(n - 1, count - 1)),
                 std::memory_order_relaxed);
    uint64_t generation = generationOf(state.load()) + 1;
    // Sequentially consistent with the sleepers count (a store then a load
    // on each side): a worker going to sleep either sees the job or is
    // counted here and woken. A missed wake-up would only cost parallelism,
    // never a hang: nobody waits for a helper that did not join.
    state.store(generation << 32 | kOpen);
    if (sleepers.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex);
      wake.notify_all();
    }
    work();
    // Close the job to latecomers, then wait for the helpers inside it to
    // finish their last grains (they are running, so this is short).
    uint64_t s = state.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
    while ((s & kInsideMask) != 0) {
      std::this_thread::yield();
      s = state.load(std::memory_order_acquire);
    }
  }

private:
  Pool() {
    int64_t n = hardwareThreads;
    if (const char *env = std::getenv("SEQC_NUM_THREADS")) {
      char *end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && v > 0)
        n = v;
    }
    numThreads = std::max<int64_t>(1, std::min<int64_t>(n, 1024));
  }

  void ensureWorkers(int64_t n) {
    if (spawned.load(std::memory_order_acquire) >= n)
      return; // the common case: no lock on the way into a loop
    std::lock_guard<std::mutex> lock(mutex);
    while (static_cast<int64_t>(workers.size()) < n) {
      int index = static_cast<int>(workers.size());
      // The worker takes part in jobs published after this point, however
      // late its thread starts.
      uint64_t start = generationOf(state.load(std::memory_order_acquire));
      workers.emplace_back([this, index, start] { loop(index, start); });
      workers.back().detach();
    }
    spawned.store(static_cast<int64_t>(workers.size()),
                  std::memory_order_release);
  }

  /// Takes grains until none are left.
  void work() {
    // A task cannot end its call from here (CallScope refuses to jump out
    // of a parallel loop; see insideParallelTask).
    insideTask = true;
    for (;;) {
      int64_t begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
      if (begin >= job.count)
        break;
      job.fn(job.ctx, begin, std::min(job.count, begin + job.grain));
    }
    insideTask = false;
  }

  /// The generation of an open job newer than `seen` that wants worker
  /// `index`, or `seen` when there is none.
  uint64_t jobFor(int index, uint64_t seen) const {
    uint64_t s = state.load();
    bool wants = generationOf(s) != seen && (s & kOpen) &&
                 index < wanted.load(std::memory_order_relaxed);
    return wants ? generationOf(s) : seen;
  }

  /// Waits for a job this worker may take part in and returns its
  /// generation: spins for a while (a decode step's kernels follow each
  /// other within microseconds), then sleeps.
  uint64_t waitForJob(int index, uint64_t seen) {
    for (int spin = 0; spin < 20000; ++spin) {
      if (uint64_t g = jobFor(index, seen); g != seen)
        return g;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex);
    sleepers.fetch_add(1);
    uint64_t g = seen;
    wake.wait(lock, [&] { return (g = jobFor(index, seen)) != seen; });
    sleepers.fetch_sub(1);
    return g;
  }

  /// Joins the open job of generation `generation`, if it still is.
  bool join(uint64_t generation) {
    uint64_t s = state.load(std::memory_order_acquire);
    while (generationOf(s) == generation && (s & kOpen))
      if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel))
        return true;
    return false;
  }

  void loop(int index, uint64_t seen) {
    for (;;) {
      // Join exactly the job that wanted this worker; if it closed
      // meanwhile, wait for the next one.
      seen = waitForJob(index, seen);
      if (!join(seen))
        continue; // closed before this worker got to it
      seqc::rt::CallState *prev = seqc::rt::enterCall(job.call);
      work();
      seqc::rt::enterCall(prev);
      state.fetch_sub(1, std::memory_order_release);
    }
  }

  const int64_t hardwareThreads =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::atomic<int64_t> numThreads{1};
  std::mutex submitMutex; // one parallel loop on the pool at a time
  std::mutex mutex;
  std::condition_variable wake;
  alignas(64) std::atomic<uint64_t> state{0};
  std::atomic<int64_t> spawned{0};
  std::atomic<int> wanted{0};
  std::atomic<int> sleepers{0};
  Job job;
  std::vector<std::thread> workers;
};

} // namespace

bool seqc::rt::insideParallelTask() { return insideTask; }

extern "C" void seqc_rt_parallel_for(int64_t count, seqc_rt_task_fn fn,
                                     void *ctx) {
  Pool::get().run(count, fn, ctx);
}

extern "C" int64_t seqc_rt_get_num_threads(void) {
  return Pool::get().threads();
}

extern "C" int64_t seqc_rt_parallel_width(void) {
  return insideTask ? 1 : Pool::get().threads();
}

extern "C" void seqc_rt_set_num_threads(int64_t n) {
  Pool::get().setThreads(n);
}

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
  std::atomic<int64_t> next{0};
  std::atomic<int> active{0};
  seqc::rt::CallState *call = nullptr;
};

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
    // Small grains balance uneven tasks (causal attention rows) without
    // making the shared counter hot.
    int64_t grain = std::max<int64_t>(1, count / (n * 8));
    job.fn = fn;
    job.ctx = ctx;
    job.count = count;
    job.grain = grain;
    job.next.store(0, std::memory_order_relaxed);
    job.call = seqc::rt::currentCall();
    int helpers = static_cast<int>(std::min<int64_t>(n - 1, count - 1));
    job.active.store(helpers, std::memory_order_relaxed);
    wanted.store(helpers, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
    if (sleepers.load(std::memory_order_acquire) > 0) {
      std::lock_guard<std::mutex> lock(mutex);
      wake.notify_all();
    }
    work();
    // The helpers finish their last grains.
    while (job.active.load(std::memory_order_acquire) != 0)
      std::this_thread::yield();
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
    std::lock_guard<std::mutex> lock(mutex);
    while (static_cast<int64_t>(workers.size()) < n) {
      int index = static_cast<int>(workers.size());
      // The worker waits for the first job after this point, however late
      // its thread starts.
      uint64_t start = generation.load(std::memory_order_acquire);
      workers.emplace_back([this, index, start] { loop(index, start); });
      workers.back().detach();
    }
  }

  /// Takes grains until none are left.
  void work() {
    insideTask = true;
    for (;;) {
      int64_t begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
      if (begin >= job.count)
        break;
      job.fn(job.ctx, begin, std::min(job.count, begin + job.grain));
    }
    insideTask = false;
  }

  /// Waits for a job this worker takes part in: spins for a while (a decode
  /// step's kernels follow each other within microseconds), then sleeps.
  void waitForJob(int index, uint64_t &seen) {
    auto ready = [&] {
      return generation.load(std::memory_order_acquire) != seen &&
             index < wanted.load(std::memory_order_relaxed);
    };
    for (int spin = 0; spin < 20000; ++spin) {
      if (ready()) {
        seen = generation.load(std::memory_order_acquire);
        return;
      }
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex);
    sleepers.fetch_add(1, std::memory_order_acq_rel);
    wake.wait(lock, ready);
    sleepers.fetch_sub(1, std::memory_order_acq_rel);
    seen = generation.load(std::memory_order_acquire);
  }

  void loop(int index, uint64_t seen) {
    for (;;) {
      waitForJob(index, seen);
      seqc::rt::CallState *prev = seqc::rt::enterCall(job.call);
      work();
      seqc::rt::enterCall(prev);
      job.active.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const int64_t hardwareThreads =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::atomic<int64_t> numThreads{1};
  std::mutex submitMutex; // one parallel loop on the pool at a time
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> wanted{0};
  std::atomic<int> sleepers{0};
  Job job;
  std::vector<std::thread> workers;
};

} // namespace

extern "C" void seqc_rt_parallel_for(int64_t count, seqc_rt_task_fn fn,
                                     void *ctx) {
  Pool::get().run(count, fn, ctx);
}

extern "C" int64_t seqc_rt_get_num_threads(void) {
  return Pool::get().threads();
}

extern "C" void seqc_rt_set_num_threads(int64_t n) { Pool::get().setThreads(n); }

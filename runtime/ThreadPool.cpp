//===- ThreadPool.cpp - the parallel-for that generated code calls --------===//
//
// One process-wide pool of workers. Generated code calls
// seqc_rt_parallel_for(count, fn, ctx); the calling thread takes part, work
// is handed out dynamically in grains, and the call returns when every index
// is done. Workers act on behalf of the caller's call scope (tracked
// allocations). A pool already busy with another caller's loop (concurrent
// calls from several host threads) and nested loops run inline instead of
// waiting, so nothing can deadlock.
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
    std::unique_lock<std::mutex> busy(submitMutex, std::try_to_lock);
    if (n <= 1 || count == 1 || insideTask || !busy.owns_lock()) {
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
    job.next = 0;
    job.call = seqc::rt::currentCall();
    int helpers = static_cast<int>(std::min<int64_t>(n - 1, count - 1));
    job.active = helpers;
    {
      std::lock_guard<std::mutex> lock(mutex);
      wanted = helpers;
      ++generation;
    }
    wake.notify_all();
    work();
    // Wait for the helpers to finish their last grains.
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [&] { return job.active.load() == 0; });
  }

private:
  Pool() {
    int64_t n = static_cast<int64_t>(std::thread::hardware_concurrency());
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
      workers.emplace_back([this, index] { loop(index); });
      workers.back().detach();
    }
  }

  /// Takes grains until none are left.
  void work() {
    insideTask = true;
    for (;;) {
      int64_t begin = job.next.fetch_add(job.grain);
      if (begin >= job.count)
        break;
      job.fn(job.ctx, begin, std::min(job.count, begin + job.grain));
    }
    insideTask = false;
  }

  void loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return generation != seen && index < wanted; });
        seen = generation;
      }
      seqc::rt::CallState *prev = seqc::rt::enterCall(job.call);
      work();
      seqc::rt::enterCall(prev);
      if (job.active.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  }

  std::atomic<int64_t> numThreads{1};
  std::mutex submitMutex; // one parallel loop on the pool at a time
  std::mutex mutex;
  std::condition_variable wake, finished;
  uint64_t generation = 0;
  int wanted = 0;
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

//===- ThreadPoolTest.cpp - the runtime's parallel-for --------------------===//
//
// Every index runs exactly once, whatever the pool size, the loop size, the
// number of host threads sharing the pool, or nesting; workers that are
// asleep or slow to start never lose or repeat work.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(int64_t n) : hits(n) {}
};

void countRange(void *ctx, int64_t begin, int64_t end) {
  auto *counts = static_cast<Counts *>(ctx);
  for (int64_t i = begin; i < end; ++i)
    counts->hits[i].fetch_add(1, std::memory_order_relaxed);
}

void expectEachOnce(const Counts &counts) {
  for (size_t i = 0; i < counts.hits.size(); ++i)
    ASSERT_EQ(counts.hits[i].load(), 1) << "index " << i;
}

/// Restores the pool size a test changed.
struct PoolSize {
  int64_t saved = seqc_rt_get_num_threads();
  explicit PoolSize(int64_t n) { seqc_rt_set_num_threads(n); }
  ~PoolSize() { seqc_rt_set_num_threads(saved); }
};

TEST(ThreadPool, EveryIndexOnceForAnyPoolAndLoopSize) {
  for (int64_t threads : {1, 2, 3, 8}) {
    PoolSize pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 100003}) {
      Counts counts(n);
      seqc_rt_parallel_for(n, countRange, &counts);
      expectEachOnce(counts);
    }
  }
}

TEST(ThreadPool, ManyShortLoopsInARow) {
  // Back-to-back loops (a decode step's kernels): workers that are still
  // finishing one job, or waking for it, must not leak into the next.
  PoolSize pool(4);
  for (int round = 0; round < 2000; ++round) {
    Counts counts(1 + round % 37);
    seqc_rt_parallel_for(static_cast<int64_t>(counts.hits.size()), countRange,
                         &counts);
    expectEachOnce(counts);
  }
}

struct Nested {
  Counts *counts;
  int64_t inner;
  std::atomic<int> offThread{0};
};

struct InnerRun {
  Counts counts;
  std::thread::id outer;
  std::atomic<int> *offThread;
};

void innerRange(void *ctx, int64_t begin, int64_t end) {
  auto *run = static_cast<InnerRun *>(ctx);
  if (std::this_thread::get_id() != run->outer)
    run->offThread->fetch_add(1);
  countRange(&run->counts, begin, end);
}

void nestedRange(void *ctx, int64_t begin, int64_t end) {
  auto *nested = static_cast<Nested *>(ctx);
  for (int64_t i = begin; i < end; ++i) {
    // An inner loop runs inline on the task's thread.
    InnerRun inner{Counts(nested->inner), std::this_thread::get_id(),
                   &nested->offThread};
    seqc_rt_parallel_for(nested->inner, innerRange, &inner);
    for (int64_t j = 0; j < nested->inner; ++j)
      if (inner.counts.hits[j].load() == 1)
        nested->counts->hits[i * nested->inner + j].fetch_add(1);
  }
}

TEST(ThreadPool, NestedLoopsRunInline) {
  PoolSize pool(3);
  Counts counts(50 * 9);
  Nested nested{&counts, 9};
  seqc_rt_parallel_for(50, nestedRange, &nested);
  expectEachOnce(counts);
  EXPECT_EQ(nested.offThread.load(), 0)
      << "inner tasks ran on another thread than their outer task";
}

/// Records the parallel width seen inside each task.
void widthInside(void *ctx, int64_t begin, int64_t end) {
  auto *widths = static_cast<Counts *>(ctx);
  for (int64_t i = begin; i < end; ++i)
    widths->hits[i].store(static_cast<int>(seqc_rt_parallel_width()));
}

// Kernels size their task split from the width: the pool's threads where a
// loop would spread, 1 inside a task, where loops run inline.
TEST(ThreadPool, ParallelWidthIsThePoolsOrOneInsideATask) {
  for (int64_t n : {1, 3, 8}) {
    PoolSize pool(n);
    EXPECT_EQ(seqc_rt_parallel_width(), n);
    Counts widths(40);
    seqc_rt_parallel_for(40, widthInside, &widths);
    for (size_t i = 0; i < widths.hits.size(); ++i)
      ASSERT_EQ(widths.hits[i].load(), 1) << "task " << i << ", pool " << n;
  }
}

TEST(ThreadPool, LoopsAfterTheWorkersFellAsleep) {
  // Workers spin briefly after a loop, then sleep on a condition variable;
  // a loop after a pause must wake them (or run without them), never hang
  // or lose indices.
  PoolSize pool(3);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Counts counts(10000);
    seqc_rt_parallel_for(10000, countRange, &counts);
    expectEachOnce(counts);
  }
}

TEST(ThreadPool, HostThreadsShareThePool) {
  // More host threads than cores. A pool spanning the machine makes busy
  // callers wait their turn; on a machine with more hardware threads than
  // the pool they run inline beside it instead.
  for (int64_t threads : {1, 2, 64}) {
    PoolSize pool(threads);
    std::atomic<int> failures{0};
    std::vector<std::thread> hosts;
    for (int h = 0; h < 4; ++h)
      hosts.emplace_back([&, h] {
        for (int round = 0; round < 200; ++round) {
          Counts counts(1 + (round * 7 + h) % 500);
          seqc_rt_parallel_for(static_cast<int64_t>(counts.hits.size()),
                               countRange, &counts);
          for (auto &hit : counts.hits)
            if (hit.load() != 1)
              ++failures;
        }
      });
    for (auto &host : hosts)
      host.join();
    EXPECT_EQ(failures.load(), 0) << "pool of " << threads;
  }
}

} // namespace

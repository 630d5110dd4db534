//===- CallDeadline.cpp - distributed calls that outlive their time ------===//

#include "CallDeadline.h"

#include "Mpi.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

using namespace seqc::rt;

namespace {

using Clock = std::chrono::steady_clock;

/// What a deadline says when it passes.
struct Armed {
  Clock::time_point deadline;
  std::string message;
};

/// The armed deadlines of the process, and the thread that watches them
/// (started with the first, detached: it lives as long as the process).
class Watchdog {
public:
  static Watchdog &get() {
    static Watchdog *watchdog = new Watchdog(); // never destroyed: see above
    return *watchdog;
  }

  uint64_t arm(Armed armed) {
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t id = ++lastId;
    deadlines.emplace(id, std::move(armed));
    if (!started) {
      started = true;
      std::thread([this] { watch(); }).detach();
    }
    changed.notify_one();
    return id;
  }

  void disarm(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    deadlines.erase(id);
  }

private:
  /// Sleeps until the earliest deadline; one that passes ends the job.
  [[noreturn]] void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (deadlines.empty()) {
        changed.wait(lock);
        continue;
      }
      auto earliest = deadlines.begin();
      for (auto it = deadlines.begin(); it != deadlines.end(); ++it)
        if (it->second.deadline < earliest->second.deadline)
          earliest = it;
      if (Clock::now() < earliest->second.deadline) {
        changed.wait_until(lock, earliest->second.deadline);
        continue;
      }
      std::string message = earliest->second.message;
      lock.unlock(); // the job ends: nothing is armed or disarmed any more
      std::fprintf(stderr, "error: %s\n", message.c_str());
      std::fflush(nullptr);
      mpiAbort(1);
    }
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, Armed> deadlines;
  uint64_t lastId = 0;
  bool started = false;
};

/// "1.5" for 1.5 s, "31536000" for a year.
std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", s);
  return text;
}

} // namespace

CallDeadline::CallDeadline(void *communicator, double limit,
                           const std::string &function) {
  if (!(limit > 0) || !(limit <= kLongestCallTimeout)) // NaN and infinity too
    return;
  std::string error;
  int rank = mpiCommunicatorRank(communicator, error);
  int ranks = mpiCommunicatorSize(communicator, error);
  std::string who = rank < 0 || ranks < 0 ? "this rank"
                                          : "rank " + std::to_string(rank) +
                                                " of " + std::to_string(ranks);
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(limit));
  id = Watchdog::get().arm(
      {deadline, who + ": @" + function + " did not return within " +
                     seconds(limit) +
                     " s (the call timeout): a rank stopped or is stuck in "
                     "the call, or left it early; ending every rank"});
}

CallDeadline::~CallDeadline() {
  if (id)
    Watchdog::get().disarm(id);
}

//===- BenchSupport.h - timing helpers shared by seqc's benchmarks -*- C++
//-*-===//

#ifndef SEQC_BENCH_BENCHSUPPORT_H
#define SEQC_BENCH_BENCHSUPPORT_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace seqc::bench {

/// Seconds on a monotonic clock.
inline double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

[[noreturn]] inline void die(const std::string &msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::exit(1);
}

} // namespace seqc::bench

#endif // SEQC_BENCH_BENCHSUPPORT_H

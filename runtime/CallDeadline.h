//===- CallDeadline.h - distributed calls that outlive their time -*-C++-*-===//
//
// The ranks of a distributed call wait for each other in its exchanges. A
// rank that stops inside the call (killed, stuck, or one whose call failed
// alone after the first exchange and returned) leaves the others waiting
// forever, and MPI offers no way to leave a collective. So a host may give
// distributed calls a deadline (CompileOptions::callTimeout): a call that
// has not returned by then prints an error naming the rank and the function
// and ends every process of the job (MPI_Abort), as seqc-run's --timeout
// ends a run. One watchdog thread serves every call of the process.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_CALLDEADLINE_H
#define SEQC_RUNTIME_CALLDEADLINE_H

#include <cstdint>
#include <string>

namespace seqc::rt {

/// The longest call timeout: a year (a longer one would pass the clock's
/// range, and is none in practice).
inline constexpr double kLongestCallTimeout = 365 * 86400.0;

/// Armed while it lives: if not destroyed within `limit` seconds, the process
/// prints `error: rank r of R: @function did not return within S s ...`
/// and aborts the job. A `limit` of 0 or less, or past a year, arms
/// nothing.
class CallDeadline {
public:
  CallDeadline(void *communicator, double limit, const std::string &function);
  ~CallDeadline();
  CallDeadline(const CallDeadline &) = delete;
  CallDeadline &operator=(const CallDeadline &) = delete;

private:
  uint64_t id = 0; // 0: not armed
};

} // namespace seqc::rt

#endif // SEQC_RUNTIME_CALLDEADLINE_H

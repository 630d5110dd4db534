//===- CallAgreement.cpp - the ranks agree to make a distributed call ----===//

#include "CallAgreement.h"

#include "Mpi.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace seqc::rt;

namespace {

/// What every call exchanges: 24 bytes a rank.
struct Summary {
  uint64_t module;
  uint64_t function; // the name's FNV-1a digest
  uint64_t failed;   // a bool, as wide as the rest: 24 bytes, no padding
};

/// What the ranks exchange when they do not agree: the function's name and
/// the failure, each cut to its room.
struct Reasons {
  static constexpr size_t kFunctionBytes = 128;
  static constexpr size_t kFailureBytes = 896;
  char function[kFunctionBytes];
  char failure[kFailureBytes];
};

/// A digest that is the same in every process (std::hash and LLVM's need
/// not be).
uint64_t fnv1a(const std::string &text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

/// `text` into `room` bytes, NUL-terminated; a text that does not fit ends
/// in "...".
void copyCut(char *room, size_t bytes, const std::string &text) {
  std::memset(room, 0, bytes);
  if (text.size() < bytes) {
    std::memcpy(room, text.data(), text.size());
    return;
  }
  std::memcpy(room, text.data(), bytes - 4);
  std::memcpy(room + bytes - 4, "...", 3);
}

/// The lowest rank for which `differs` holds, or -1.
template <typename Pred> int firstRank(int ranks, Pred differs) {
  for (int r = 0; r < ranks; ++r)
    if (differs(r))
      return r;
  return -1;
}

/// The one message every rank gives for `summaries` that do not agree.
std::string disagreement(const std::vector<Summary> &summaries,
                         const std::vector<Reasons> &reasons) {
  int ranks = static_cast<int>(summaries.size());
  std::string of = " of " + std::to_string(ranks);
  int other = firstRank(
      ranks, [&](int r) { return summaries[r].module != summaries[0].module; });
  if (other >= 0)
    return "rank " + std::to_string(other) + of +
           " compiled another module than rank 0 (its source, or its ranks, "
           "parallel, local steps, target, reference lowering, fusion or "
           "bound weights, differ): every rank compiles the same module";
  other = firstRank(ranks, [&](int r) {
    return summaries[r].function != summaries[0].function;
  });
  if (other >= 0)
    return std::string("the ranks call different functions: @") +
           reasons[other].function + " on rank " + std::to_string(other) +
           ", @" + reasons[0].function +
           " on rank 0 (every rank calls the same function)";
  int failed = firstRank(ranks, [&](int r) { return summaries[r].failed; });
  return "rank " + std::to_string(failed) + of +
         " cannot make the call: " + reasons[failed].failure;
}

} // namespace

std::string seqc::rt::agreeOnCall(void *communicator, const CallIntent &mine) {
  std::string error;
  int ranks = mpiCommunicatorSize(communicator, error);
  if (ranks < 0)
    return error;
  Summary own{mine.module, fnv1a(mine.function), mine.failed};
  std::vector<Summary> summaries(ranks);
  if (!mpiAllGather(communicator, &own, summaries.data(), sizeof(Summary),
                    error))
    return error;
  bool agree = std::all_of(summaries.begin(), summaries.end(), [&](auto &s) {
    return s.module == summaries[0].module &&
           s.function == summaries[0].function && !s.failed;
  });
  if (agree)
    return "";
  // Every rank saw the same summaries, so every rank takes this exchange.
  Reasons ownReasons;
  copyCut(ownReasons.function, Reasons::kFunctionBytes, mine.function);
  copyCut(ownReasons.failure, Reasons::kFailureBytes, mine.failure);
  std::vector<Reasons> reasons(ranks);
  if (!mpiAllGather(communicator, &ownReasons, reasons.data(), sizeof(Reasons),
                    error))
    return error;
  return disagreement(summaries, reasons);
}

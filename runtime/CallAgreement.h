//===- CallAgreement.h - the ranks agree to make a distributed call ------===//
//
// A distributed call is collective: every rank of the module's communicator
// calls the same function of the same module, and the call's exchanges pair
// the ranks' data by position. A rank that cannot make its call (the host
// refuses one of its arguments) or calls something else would stop alone or
// exchange mismatched data while the others wait in an exchange. So before
// the call the ranks agree on it: one all-gather of what each is about to
// call and whether it can; where any rank cannot, or they differ, a second
// all-gather of the reasons, so that every rank returns the same error.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_CALLAGREEMENT_H
#define SEQC_RUNTIME_CALLAGREEMENT_H

#include <cstdint>
#include <string>

namespace seqc::rt {

/// What one rank is about to call, and whether it can.
struct CallIntent {
  /// The module's identity: equal on ranks that compiled the same module
  /// (the host's digest of its source and of the options that shape its
  /// exchanges).
  uint64_t module = 0;
  /// The function's name.
  std::string function;
  /// Whether this rank cannot make the call, and why.
  bool failed = false;
  std::string failure;
};

/// Collective over `communicator`: "" when every rank calls the same
/// function of the same module and none has failed, else one message, the
/// same on every rank, naming the lowest rank that compiled another module
/// than rank 0, else the lowest that calls another function, else the
/// lowest that failed.
std::string agreeOnCall(void *communicator, const CallIntent &mine);

} // namespace seqc::rt

#endif // SEQC_RUNTIME_CALLAGREEMENT_H

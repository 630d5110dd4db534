//===- CApiSupport.h - shared pieces of seqc's C APIs -----------*- C++ -*-===//

#ifndef SEQC_RUNTIME_CAPISUPPORT_H
#define SEQC_RUNTIME_CAPISUPPORT_H

#include "seqc/Tensor.h"
#include "seqc/seqc_runtime.h"

#include <functional>
#include <string>
#include <vector>

struct seqc_tensor {
  seqc::Tensor tensor;
};

namespace seqc::capi {

/// Records `message` as this thread's last error and returns `status`.
seqc_status fail(seqc_status status, const std::string &message);
void clearError();
seqc_tensor *wrap(Tensor t);
/// A C view as a C++ view, checked (input `index` in messages).
Expected<TensorView> toView(const seqc_view &v, size_t index);
/// What a call does with arguments it refuses before calling: for a
/// distributed function, the other ranks' agreement (Function::refuseCall)
/// gives the error every rank returns; empty, or ok, keeps the reason.
using RefuseFn = std::function<Status(const std::string &reason)>;

/// Fails a call for `reason` before making it: SEQC_ERROR_INVALID_ARGUMENT
/// with the reason, or, where `refuse` has the ranks agree on the error,
/// SEQC_ERROR_CALL with theirs (what every rank returns).
seqc_status refuseCall(const RefuseFn &refuse, const std::string &reason);

/// Converts the inputs, calls `fn` and hands the results out as handles;
/// arguments it refuses go to `refuse`.
seqc_status call(const std::function<Expected<std::vector<Tensor>>(
                     const std::vector<TensorView> &)> &fn,
                 size_t expectedOutputs, const seqc_view *inputs,
                 size_t numInputs, seqc_tensor **outputs, size_t numOutputs,
                 const RefuseFn &refuse = {});

} // namespace seqc::capi

#endif // SEQC_RUNTIME_CAPISUPPORT_H

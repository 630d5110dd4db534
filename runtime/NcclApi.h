//===- NcclApi.h - NCCL entry points found by dlsym -------------*- C++ -*-===//
//
// The few NCCL types and functions seqc uses, declared with NCCL 2's ABI so
// that no NCCL header is needed to build seqc (unittests/NcclTest.cpp checks
// them against nccl.h where the toolkit has it).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_NCCLAPI_H
#define SEQC_RUNTIME_NCCLAPI_H

#include <cstddef>
#include <string>

namespace seqc::rt {

/// ncclResult_t (0: success).
enum NcclResult : int { NcclSuccess = 0 };
using NcclComm = struct ncclComm *;
using NcclStream = struct CUstream_st *;
/// ncclUniqueId: NCCL_UNIQUE_ID_BYTES opaque bytes.
struct NcclUniqueId {
  char internal[128];
};

/// ncclDataType_t and ncclRedOp_t values seqc uses.
enum NcclDataType : int {
  NcclUint8 = 1,
  NcclInt32 = 2,
  NcclInt64 = 4,
  NcclFloat32 = 7,
  NcclFloat64 = 8
};
enum NcclRedOp : int { NcclSum = 0, NcclProd = 1, NcclMax = 2, NcclMin = 3 };

struct NcclApi {
  void *handle = nullptr;
  /// Why NCCL cannot be used ("" once opened).
  std::string failure;
  /// ncclGetVersion's code (major * 10000 + minor * 100 + patch).
  int version = 0;

  NcclResult (*getVersion)(int *) = nullptr;
  const char *(*getErrorString)(NcclResult) = nullptr;
  NcclResult (*getUniqueId)(NcclUniqueId *) = nullptr;
  NcclResult (*commInitRank)(NcclComm *, int, NcclUniqueId, int) = nullptr;
  NcclResult (*allReduce)(const void *, void *, size_t, NcclDataType, NcclRedOp,
                          NcclComm, NcclStream) = nullptr;
  NcclResult (*allGather)(const void *, void *, size_t, NcclDataType, NcclComm,
                          NcclStream) = nullptr;
  NcclResult (*send)(const void *, size_t, NcclDataType, int, NcclComm,
                     NcclStream) = nullptr;
  NcclResult (*recv)(void *, size_t, NcclDataType, int, NcclComm,
                     NcclStream) = nullptr;

  std::string errorString(NcclResult r) const;
};

/// NCCL (SEQC_LIBNCCL, else libnccl.so.2), opened on first use; `failure`
/// says why when it cannot be.
const NcclApi &ncclApi();

} // namespace seqc::rt

#endif // SEQC_RUNTIME_NCCLAPI_H

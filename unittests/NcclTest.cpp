//===- NcclTest.cpp - NCCL as the runtime opens it, without a GPU ---------===//
//
// The runtime declares the NCCL functions it calls itself (NcclApi.h), so
// that nothing needs NCCL to build: where the toolkit has nccl.h, those
// declarations are checked against it here, parameter by parameter; where
// the library is installed, the runtime opens it and finds every function.
// (The collectives themselves need a GPU per rank: the device check runs
// them; test/Integration/distributed*.py run the same code's emulation.)
//
//===----------------------------------------------------------------------===//

#include "NcclApi.h"

#include <gtest/gtest.h>

#include <type_traits>

#ifdef SEQC_HAVE_NCCL_H
#include <nccl.h>
#endif

using namespace seqc::rt;

namespace {

#ifdef SEQC_HAVE_NCCL_H
/// A type of NcclApi.h as nccl.h spells it.
template <typename T> struct InNccl { using type = T; };
template <> struct InNccl<NcclResult> { using type = ncclResult_t; };
template <> struct InNccl<NcclDataType> { using type = ncclDataType_t; };
template <> struct InNccl<NcclRedOp> { using type = ncclRedOp_t; };
template <> struct InNccl<NcclUniqueId> { using type = ncclUniqueId; };
template <> struct InNccl<NcclComm> { using type = ncclComm_t; };
template <> struct InNccl<NcclStream> { using type = cudaStream_t; };
template <typename T> struct InNccl<T *> {
  using type = typename InNccl<T>::type *;
};
template <typename R, typename... Args> struct InNccl<R (*)(Args...)> {
  using type = typename InNccl<R>::type (*)(typename InNccl<Args>::type...);
};

/// Whether NcclApi's member `Ours` is the declaration `theirs` of nccl.h.
template <typename Ours, typename Theirs> constexpr bool same(Theirs) {
  return std::is_same_v<typename InNccl<Ours>::type, Theirs>;
}

static_assert(same<decltype(NcclApi::getVersion)>(&ncclGetVersion));
static_assert(same<decltype(NcclApi::getErrorString)>(&ncclGetErrorString));
static_assert(same<decltype(NcclApi::getUniqueId)>(&ncclGetUniqueId));
static_assert(same<decltype(NcclApi::commInitRank)>(&ncclCommInitRank));
static_assert(same<decltype(NcclApi::allReduce)>(&ncclAllReduce));
static_assert(same<decltype(NcclApi::allGather)>(&ncclAllGather));
static_assert(same<decltype(NcclApi::send)>(&ncclSend));
static_assert(same<decltype(NcclApi::recv)>(&ncclRecv));
static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId));
static_assert(sizeof(NcclDataType) == sizeof(ncclDataType_t));
/// Whether a value of NcclApi.h is nccl.h's.
template <typename Ours, typename Theirs>
constexpr bool sameValue(Ours ours, Theirs theirs) {
  return static_cast<int>(ours) == static_cast<int>(theirs);
}
static_assert(sameValue(NcclUint8, ncclUint8) &&
              sameValue(NcclInt32, ncclInt32) &&
              sameValue(NcclInt64, ncclInt64) &&
              sameValue(NcclFloat32, ncclFloat32) &&
              sameValue(NcclFloat64, ncclFloat64));
static_assert(sameValue(NcclSum, ncclSum) && sameValue(NcclProd, ncclProd) &&
              sameValue(NcclMax, ncclMax) && sameValue(NcclMin, ncclMin) &&
              sameValue(NcclSuccess, ncclSuccess));
#endif

TEST(Nccl, DeclarationsMatchTheHeader) {
#ifndef SEQC_HAVE_NCCL_H
  GTEST_SKIP() << "no nccl.h in the CUDA toolkit";
#endif
  // The static_asserts above are the test.
}

TEST(Nccl, RuntimeOpensTheLibrary) {
  const NcclApi &api = ncclApi();
  if (!api.handle)
    GTEST_SKIP() << api.failure;
  EXPECT_EQ(api.failure, "");
  EXPECT_GE(api.version, 20700);
  EXPECT_TRUE(api.getUniqueId && api.commInitRank && api.allReduce &&
              api.allGather && api.send && api.recv);
  EXPECT_NE(api.errorString(NcclResult(2)).find("(2)"), std::string::npos);
}

} // namespace

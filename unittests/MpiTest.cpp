//===- MpiTest.cpp - the MPICH ABI's handles against MPICH's mpi.h --------===//
//
// The runtime calls libraries of MPICH's ABI with the handle values of
// MpichAbi.h (MPI is opened at run time, so nothing includes an mpi.h to
// build): where MPICH's mpi.h is installed (libmpich-dev), they are checked
// against it here. (The calls themselves run in test/Integration's
// distributed tests under MPICH's launcher.)
//
//===----------------------------------------------------------------------===//

#include "MpichAbi.h"

#include <gtest/gtest.h>

#ifdef SEQC_HAVE_MPICH_H
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace {

#ifdef SEQC_HAVE_MPICH_H
using namespace seqc::rt;

TEST(MpichAbiTest, HandlesAreMpichs) {
  static_assert(sizeof(MPI_Comm) == sizeof(int) &&
                    sizeof(MPI_Datatype) == sizeof(int) &&
                    sizeof(MPI_Op) == sizeof(int),
                "MPICH's handles are ints");
  EXPECT_EQ(mpich::kCommWorld, MPI_COMM_WORLD);
  EXPECT_EQ(mpich::kByte, MPI_BYTE);
  EXPECT_EQ(mpich::kFloat, MPI_FLOAT);
  EXPECT_EQ(mpich::kDouble, MPI_DOUBLE);
  EXPECT_EQ(mpich::kInt32, MPI_INT32_T);
  EXPECT_EQ(mpich::kInt64, MPI_INT64_T);
  EXPECT_EQ(mpich::kUint64, MPI_UINT64_T);
  EXPECT_EQ(mpich::kMax, MPI_MAX);
  EXPECT_EQ(mpich::kMin, MPI_MIN);
  EXPECT_EQ(mpich::kSum, MPI_SUM);
  EXPECT_EQ(mpich::kProd, MPI_PROD);
  EXPECT_EQ(reinterpret_cast<void *>(mpich::kInPlace), MPI_IN_PLACE);
  EXPECT_EQ(reinterpret_cast<MPI_Status *>(mpich::kStatusIgnore),
            MPI_STATUS_IGNORE);
}

// The runtime's other constants are the same in both ABIs.
TEST(MpichAbiTest, SharedConstantsAreMpichs) {
  EXPECT_EQ(MPI_THREAD_FUNNELED, 1);
  EXPECT_EQ(MPI_IDENT, 0);
  EXPECT_EQ(MPI_CONGRUENT, 1);
}
#else
TEST(MpichAbiTest, HandlesAreMpichs) {
  GTEST_SKIP() << "no MPICH mpi.h (libmpich-dev)";
}
#endif

} // namespace

//===- MpichAbi.h - the predefined handles of MPICH's ABI -----------------===//
//
// MPICH's handles are ints of fixed values, the same in every library of
// its ABI (MPICH, Intel MPI, Cray MPICH, MVAPICH): the runtime calls such a
// library with these (Mpi.cpp), as MLIR's MPIToLLVM writes them into the
// code; unittests/MpiTest.cpp checks them against MPICH's mpi.h.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_MPICHABI_H
#define SEQC_RUNTIME_MPICHABI_H

#include <cstdint>

namespace seqc::rt::mpich {

inline constexpr int kCommWorld = 0x44000000;

// Datatypes.
inline constexpr int kByte = 0x4c00010d;
inline constexpr int kFloat = 0x4c00040a;
inline constexpr int kDouble = 0x4c00080b;
inline constexpr int kInt32 = 0x4c000439;
inline constexpr int kInt64 = 0x4c00083a;
inline constexpr int kUint64 = 0x4c00083e;

// Reductions.
inline constexpr int kMax = 0x58000001;
inline constexpr int kMin = 0x58000002;
inline constexpr int kSum = 0x58000003;
inline constexpr int kProd = 0x58000004;

// MPI_IN_PLACE and MPI_STATUS_IGNORE, as addresses.
inline constexpr intptr_t kInPlace = -1;
inline constexpr intptr_t kStatusIgnore = 1;

} // namespace seqc::rt::mpich

#endif // SEQC_RUNTIME_MPICHABI_H

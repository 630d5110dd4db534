//===- CallScopeTest.cpp - run-time errors and tracked allocations --------===//

#include "CallScope.h"
#include "Runtime.h"
#include "StridedCopy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace seqc::rt;

namespace {

void failingCheck(void **args) {
  int64_t *value = static_cast<int64_t *>(args[0]);
  seqc_rt_check_failed("dimension 1 (T) of dt is {0} but x has {1}", 2, *value,
                       8, 0, 0);
}

void leakyAllocations(void **) {
  for (int i = 0; i < 10; ++i)
    (void)_mlir_memref_to_llvm_alloc(1000);
  void *p = _mlir_memref_to_llvm_aligned_alloc(64, 4096);
  _mlir_memref_to_llvm_free(p);
}

void hugeAllocation(void **) {
  (void)_mlir_memref_to_llvm_alloc(size_t(1) << 40);
}

TEST(CallScope, FailedCheckUnwindsWithTheFormattedMessage) {
  CallScope scope;
  int64_t nine = 9;
  void *args[] = {&nine};
  EXPECT_FALSE(scope.run(failingCheck, args));
  EXPECT_EQ(scope.error(), "dimension 1 (T) of dt is 9 but x has 8");
}

TEST(CallScope, TracksAndReleasesAllocations) {
  CallScope scope;
  EXPECT_TRUE(scope.run(leakyAllocations, nullptr));
  // 10 x 1000 bytes leaked by the "generated code", 4096 freed by it.
  EXPECT_GE(scope.peakBytes(), 10000u);
  EXPECT_TRUE(scope.error().empty());
}

TEST(CallScope, MemoryLimitIsAnError) {
  CallScope scope(size_t(1) << 30);
  EXPECT_FALSE(scope.run(hugeAllocation, nullptr));
  EXPECT_NE(scope.error().find("exceeds the memory limit"), std::string::npos)
      << scope.error();
}

TEST(CallScope, ScopesAreIndependent) {
  CallScope a, b;
  int64_t three = 3;
  void *args[] = {&three};
  EXPECT_FALSE(a.run(failingCheck, args));
  EXPECT_TRUE(b.run(leakyAllocations, nullptr));
  EXPECT_TRUE(b.error().empty());
  EXPECT_EQ(currentCall(), nullptr);
}

} // namespace

namespace {

struct Unranked {
  int64_t rank;
  void *descriptor;
};

TEST(StridedCopy, TransposesByTilesAndHandlesEveryElementSize) {
  // A 70 x 37 matrix read as its transpose: several 32 x 32 tiles and
  // partial ones, 4-byte elements.
  const int64_t rows = 70, cols = 37;
  std::vector<uint32_t> src(rows * cols), dst(rows * cols);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint32_t>(i);
  seqc::stridedCopy(reinterpret_cast<char *>(dst.data()),
                    reinterpret_cast<const char *>(src.data()), 4, {cols, rows},
                    {1, cols});
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(dst[c * rows + r], src[r * cols + c]) << r << "," << c;

  // Reversed rows (a negative stride), 3 dimensions, 2-byte elements.
  std::vector<uint16_t> s16(2 * 3 * 4), d16(s16.size());
  for (size_t i = 0; i < s16.size(); ++i)
    s16[i] = static_cast<uint16_t>(i);
  seqc::stridedCopy(reinterpret_cast<char *>(d16.data()),
                    reinterpret_cast<const char *>(s16.data() + 8), 2,
                    {2, 3, 4}, {12, -4, 1});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ(d16[(a * 3 + b) * 4 + c], s16[a * 12 + (2 - b) * 4 + c]);

  // An element size with no integer type (3 bytes): its bytes as a unit-
  // stride dimension of their own.
  const char bytes[] = "abcdefghijklmnopqr"; // 6 elements of 3 bytes, 2 x 3
  char out[18];
  seqc::stridedCopy(out, bytes, 3, {3, 2}, {1, 3});
  EXPECT_EQ(std::string(out, 18), "abcjkldefmnoghipqr");
}

TEST(MemrefCopy, StridedToContiguous) {
  // A 3x4 source viewed as its transpose (4x3, strides 1, 4) copied into a
  // contiguous 4x3 buffer.
  float src[12];
  for (int i = 0; i < 12; ++i)
    src[i] = static_cast<float>(i);
  float dst[12] = {};
  int64_t srcDesc[7] = {reinterpret_cast<intptr_t>(src),
                        reinterpret_cast<intptr_t>(src),
                        0,
                        4,
                        3,
                        1,
                        4};
  int64_t dstDesc[7] = {reinterpret_cast<intptr_t>(dst),
                        reinterpret_cast<intptr_t>(dst),
                        0,
                        4,
                        3,
                        3,
                        1};
  Unranked s{2, srcDesc}, d{2, dstDesc};
  memrefCopy(sizeof(float), reinterpret_cast<UnrankedMemRef *>(&s),
             reinterpret_cast<UnrankedMemRef *>(&d));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(dst[r * 3 + c], src[c * 4 + r]);
}

TEST(MemrefCopy, OffsetsAndEmptyShapes) {
  double src[6] = {0, 1, 2, 3, 4, 5};
  double dst[2] = {-1, -1};
  int64_t srcDesc[5] = {reinterpret_cast<intptr_t>(src),
                        reinterpret_cast<intptr_t>(src), 3, 2, 2};
  int64_t dstDesc[5] = {reinterpret_cast<intptr_t>(dst),
                        reinterpret_cast<intptr_t>(dst), 0, 2, 1};
  Unranked s{1, srcDesc}, d{1, dstDesc};
  memrefCopy(sizeof(double), reinterpret_cast<UnrankedMemRef *>(&s),
             reinterpret_cast<UnrankedMemRef *>(&d));
  EXPECT_EQ(dst[0], 3.0);
  EXPECT_EQ(dst[1], 5.0);
  srcDesc[3] = 0; // an empty source copies nothing
  dst[0] = -1;
  memrefCopy(sizeof(double), reinterpret_cast<UnrankedMemRef *>(&s),
             reinterpret_cast<UnrankedMemRef *>(&d));
  EXPECT_EQ(dst[0], -1.0);
}

} // namespace

//===- CallScopeTest.cpp - run-time errors and tracked allocations --------===//

#include "CallScope.h"
#include "Runtime.h"

#include <gtest/gtest.h>

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

void hugeAllocation(void **) { (void)_mlir_memref_to_llvm_alloc(size_t(1) << 40); }

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

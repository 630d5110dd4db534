//===- TensorTest.cpp - host tensors and conversions ----------------------===//

#include "seqc/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace seqc;

namespace {

TEST(Tensor, ZerosAndViews) {
  Expected<Tensor> t = Tensor::zeros(DType::F32, {2, 3, 4});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->numel(), 24);
  EXPECT_EQ(t->byteSize(), 96u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
  EXPECT_EQ(t->typeString(), "tensor<2x3x4xf32>");
  TensorView v = t->view();
  EXPECT_EQ(v.effectiveStrides(), (std::vector<int64_t>{12, 4, 1}));
}

TEST(Tensor, CopiesShareStorageAndClonesDoNot) {
  Expected<Tensor> t = Tensor::zeros(DType::F32, {2, 3});
  ASSERT_TRUE(t);
  Tensor shared = *t;
  Expected<Tensor> cloned = t->clone();
  ASSERT_TRUE(cloned);
  t->dataAs<float>()[4] = 7.0f;
  EXPECT_EQ(shared.dataAs<float>()[4], 7.0f);
  EXPECT_EQ(cloned->dataAs<float>()[4], 0.0f);
  EXPECT_NE(cloned->data(), t->data());
  EXPECT_EQ(cloned->shape(), t->shape());
  EXPECT_EQ(cloned->dtype(), t->dtype());
  Expected<Tensor> empty = Tensor::zeros(DType::BF16, {0, 5});
  ASSERT_TRUE(empty);
  Expected<Tensor> emptyClone = empty->clone();
  ASSERT_TRUE(emptyClone);
  EXPECT_EQ(emptyClone->typeString(), "tensor<0x5xbf16>");
}

TEST(Tensor, OverflowingShapesAreErrors) {
  EXPECT_FALSE(Tensor::zeros(DType::F32, {int64_t(1) << 40, int64_t(1) << 40}));
  EXPECT_FALSE(checkedNumel({-1, 4}));
  EXPECT_EQ(checkedNumel({0, int64_t(1) << 62}), 0);
}

TEST(Tensor, RandomIsDeterministic) {
  Expected<Tensor> a = randomTensor(DType::F32, {100}, 5);
  Expected<Tensor> b = randomTensor(DType::F32, {100}, 5);
  Expected<Tensor> c = randomTensor(DType::F32, {100}, 6);
  ASSERT_TRUE(a && b && c);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a->dataAs<float>()[i], b->dataAs<float>()[i]);
    EXPECT_GE(a->dataAs<float>()[i], -1.0f);
    EXPECT_LT(a->dataAs<float>()[i], 1.0f);
    differs |= a->dataAs<float>()[i] != c->dataAs<float>()[i];
  }
  EXPECT_TRUE(differs);
  Expected<Tensor> ints = randomTensor(DType::I32, {50}, 1, 3);
  for (int i = 0; i < 50; ++i) {
    EXPECT_GE(ints->dataAs<int32_t>()[i], 0);
    EXPECT_LT(ints->dataAs<int32_t>()[i], 3);
  }
}

TEST(Tensor, HalfAndBF16Conversions) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(halfToFloat(floatToHalf(f)), f) << f;
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + 0x1p-11f)), 1.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  for (float f : {0.0f, 1.0f, -3.0f, 1.5f, 256.0f})
    EXPECT_EQ(bf16ToFloat(floatToBF16(f)), f) << f;
  EXPECT_EQ(bf16ToFloat(floatToBF16(1.0f + 0x1p-8f)), 1.0f); // ties to even
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(std::nanf("")))));
}

TEST(Tensor, Formatting) {
  Expected<Tensor> t = Tensor::zeros(DType::I32, {2, 3});
  for (int i = 0; i < 6; ++i)
    t->dataAs<int32_t>()[i] = i;
  EXPECT_EQ(formatTensor(*t), "[[0, 1, 2],\n [3, 4, 5]]");
  Expected<Tensor> big = Tensor::zeros(DType::F32, {2000});
  std::string s = formatTensor(*big);
  EXPECT_NE(s.find("..."), std::string::npos);
  EXPECT_LT(s.size(), 100u);
}

} // namespace

//===- NpyTest.cpp - .npy reading and writing -----------------------------===//

#include "seqc/Npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

using namespace seqc;

namespace {

std::string header(const std::string &dict, int version = 1) {
  std::string h = dict;
  size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64)
    h.push_back(' ');
  h.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(version));
  out.push_back(0);
  uint32_t n = static_cast<uint32_t>(h.size());
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  if (version != 1) {
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    out.push_back(static_cast<char>((n >> 24) & 0xff));
  }
  return out + h;
}

Expected<Tensor> parse(const std::string &bytes) {
  return npy::parse(bytes.data(), bytes.size(), "test.npy");
}

TEST(Npy, RoundTripEveryType) {
  for (DType d : {DType::F32, DType::F16, DType::I32, DType::I64}) {
    Expected<Tensor> t = randomTensor(d, {3, 5, 2}, 7);
    ASSERT_TRUE(t);
    std::string bytes = npy::serialize(*t);
    EXPECT_EQ(bytes.find("\x93NUMPY"), 0u);
    Expected<Tensor> back = parse(bytes);
    ASSERT_TRUE(back) << back.message();
    EXPECT_EQ(back->dtype(), d);
    EXPECT_EQ(back->shape(), t->shape());
    EXPECT_EQ(std::memcmp(back->data(), t->data(), t->byteSize()), 0);
  }
}

TEST(Npy, ScalarsAndEmptyArrays) {
  Expected<Tensor> s = Tensor::zeros(DType::F32, {});
  ASSERT_TRUE(s);
  s->dataAs<float>()[0] = 2.5f;
  Expected<Tensor> back = parse(npy::serialize(*s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank(), 0);
  EXPECT_EQ(back->dataAs<float>()[0], 2.5f);

  Expected<Tensor> e = Tensor::zeros(DType::I32, {4, 0});
  ASSERT_TRUE(e);
  Expected<Tensor> eback = parse(npy::serialize(*e));
  ASSERT_TRUE(eback);
  EXPECT_EQ(eback->shape(), (std::vector<int64_t>{4, 0}));
}

TEST(Npy, Version2And3Headers) {
  for (int v : {2, 3}) {
    std::string bytes =
        header("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", v);
    bytes.append("\x01\0\0\0\x02\0\0\0", 8);
    Expected<Tensor> t = parse(bytes);
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ(t->dataAs<int32_t>()[1], 2);
  }
}

TEST(Npy, KeysInAnyOrder) {
  std::string bytes =
      header("{'shape': (1, 1), 'fortran_order': False, 'descr': '<f4'}");
  bytes.append(4, '\0');
  EXPECT_TRUE(parse(bytes));
}

struct BadCase {
  const char *name;
  std::string bytes;
  const char *fragment;
};

TEST(Npy, MalformedFilesAreErrors) {
  std::string ok =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string data(24, '\0');
  std::vector<BadCase> cases = {
      {"empty", "", "bad magic"},
      {"magic",
       "NUMPY\x01\x00"
       "abcd",
       "bad magic"},
      {"version", header(ok).replace(6, 1, "\x05") + data,
       "unsupported .npy version 5.0"},
      {"header length", std::string("\x93NUMPY\x01\x00\xff\x7f", 10) + "{}",
       "truncated"},
      {"not a dict", header("['descr']") + data, "expected '{'"},
      {"descr",
       header("{'descr': 7, 'fortran_order': False, 'shape': (2, 3), }") + data,
       "descr must be a string"},
      {"order",
       header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }") +
           data,
       "fortran_order must be True or False"},
      {"shape",
       header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }") +
           data,
       "non-negative integers"},
      {"shape overflow",
       header(
           "{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999, "
           "999999999999), }") +
           data,
       "too large"},
      {"missing key", header("{'descr': '<f4', 'shape': (2, 3), }") + data,
       "needs descr, fortran_order and shape"},
      {"unknown key",
       header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
              "'extra': 1}") +
           data,
       "unexpected key 'extra'"},
      {"dtype",
       header("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }") +
           data,
       "unsupported element type '<c8'"},
      {"big endian",
       header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }") +
           data,
       "unsupported element type '>f4'"},
      {"fortran",
       header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }") +
           data,
       "Fortran-order"},
      {"short data", header(ok) + std::string(23, '\0'), "expected 24 bytes"},
      {"long data", header(ok) + std::string(25, '\0'), "found 25"},
      {"unterminated string", header("{'descr: '<f4'}"),
       "malformed .npy header"},
  };
  for (const BadCase &c : cases) {
    Expected<Tensor> t = parse(c.bytes);
    ASSERT_FALSE(t) << c.name;
    EXPECT_NE(t.message().find(c.fragment), std::string::npos)
        << c.name << ": " << t.message();
    EXPECT_EQ(t.message().rfind("test.npy: ", 0), 0u) << c.name;
  }
}

TEST(Npy, WriteIsAtomicAndReadable) {
  std::string path = ::testing::TempDir() + "/seqc-npy-test.npy";
  Expected<Tensor> t = randomTensor(DType::F32, {4, 4}, 3);
  ASSERT_TRUE(t);
  ASSERT_TRUE(npy::write(path, *t));
  Expected<Tensor> back = npy::read(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(std::memcmp(back->data(), t->data(), t->byteSize()), 0);
  std::remove(path.c_str());
  EXPECT_FALSE(npy::write("/nonexistent-dir/x.npy", *t));
  Expected<Tensor> missing = npy::read("/nonexistent-dir/x.npy");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos);
}

} // namespace

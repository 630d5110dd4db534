//===- WeightsTest.cpp - .safetensors and .npz reading
//---------------------===//

#include "seqc/Weights.h"
#include "seqc/Npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <zlib.h>

using namespace seqc;
using namespace seqc::weights;

namespace {

Tensor iota(DType dtype, std::vector<int64_t> shape) {
  Tensor t = *Tensor::zeros(dtype, shape);
  auto *bytes = static_cast<uint8_t *>(t.data());
  for (size_t i = 0; i < t.byteSize(); ++i)
    bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  return t;
}

std::string safetensors(const std::string &json, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string parseError(const std::string &bytes) {
  auto r = parseSafetensors(bytes.data(), bytes.size(), "'w.safetensors'");
  EXPECT_FALSE(r);
  return r ? "" : r.message();
}

TEST(Safetensors, RoundTripEveryType) {
  std::vector<NamedTensor> in;
  in.push_back({"a.weight", iota(DType::F32, {3, 5})});
  in.push_back({"b", iota(DType::F16, {7})});
  in.push_back({"c", iota(DType::BF16, {2, 2, 2})});
  in.push_back({"d\"quoted\\", iota(DType::I32, {4})});
  in.push_back({"tab\there\nnewline", iota(DType::F32, {1})});
  in.push_back({"scalar", iota(DType::I64, {})});
  in.push_back({"empty", iota(DType::F32, {0, 3})});
  auto bytes = serializeSafetensors(in);
  ASSERT_TRUE(bytes) << bytes.message();
  auto out = parseSafetensors(bytes->data(), bytes->size(), "x");
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].name, in[i].name);
    EXPECT_EQ((*out)[i].tensor.dtype(), in[i].tensor.dtype());
    EXPECT_EQ((*out)[i].tensor.shape(), in[i].tensor.shape());
    EXPECT_EQ(std::memcmp((*out)[i].tensor.data(), in[i].tensor.data(),
                          in[i].tensor.byteSize()),
              0);
  }
}

TEST(Safetensors, MetadataAndEscapesAreAccepted) {
  std::string json = R"({"__metadata__": {"format": "pt"},
    "w\u00e9": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  auto r =
      parseSafetensors(safetensors(json, std::string(8, '\0')).data(),
                       safetensors(json, std::string(8, '\0')).size(), "x");
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ((*r)[0].name, "w\xc3\xa9");
}

TEST(Safetensors, MalformedFilesAreErrors) {
  EXPECT_EQ(parseError("abc"),
            "'w.safetensors': malformed .safetensors file: shorter than its "
            "8-byte header length");
  EXPECT_NE(parseError(safetensors("{", "")).find("header is not JSON"),
            std::string::npos);
  EXPECT_NE(parseError(safetensors("[1]", "")).find("not a JSON object"),
            std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(parseError(huge + "{}").find("exceeds the file size"),
            std::string::npos);
  auto entry = [](const std::string &dtype, const std::string &shape,
                  const std::string &offsets) {
    return R"({"w": {"dtype": ")" + dtype + R"(", "shape": )" + shape +
           R"(, "data_offsets": )" + offsets + "}}";
  };
  EXPECT_EQ(
      parseError(safetensors(entry("F64", "[1]", "[0, 8]"), std::string(8, 0))),
      "'w.safetensors': tensor 'w' has element type F64, which seqc "
      "does not take (F32, F16, BF16, I32, I64)");
  EXPECT_NE(
      parseError(safetensors(entry("F32", "[2]", "[0, 4]"), std::string(4, 0)))
          .find("has 4 bytes of data but its shape needs 8"),
      std::string::npos);
  EXPECT_NE(
      parseError(safetensors(entry("F32", "[2]", "[0, 8]"), std::string(4, 0)))
          .find("ends at byte 8 of the data, which has 4"),
      std::string::npos);
  EXPECT_NE(
      parseError(safetensors(entry("F32", "[-2]", "[0, 8]"), std::string(8, 0)))
          .find("not a non-negative integer"),
      std::string::npos);
  EXPECT_NE(
      parseError(safetensors(entry("F32", "[2]", "[8, 0]"), std::string(8, 0)))
          .find("invalid data_offsets"),
      std::string::npos);
  EXPECT_NE(parseError(safetensors(
                           entry("F32", "[99999999999, 99999999999]", "[0, 8]"),
                           std::string(8, 0)))
                .find("too large"),
            std::string::npos);
  std::string twoOverlapping =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  EXPECT_NE(parseError(safetensors(twoOverlapping, std::string(12, 0)))
                .find("overlap"),
            std::string::npos);
  std::string duplicate =
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
          "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  EXPECT_NE(parseError(safetensors(duplicate, std::string(8, 0)))
                .find("appears twice"),
            std::string::npos);
}

/// A zip archive of `members` (name, bytes), each stored or deflated.
std::string zip(const std::vector<std::pair<std::string, std::string>> &members,
                bool compress, bool corruptCrc = false) {
  auto le = [](std::string &s, uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  std::string out, dir;
  for (const auto &[name, data] : members) {
    std::string body = data;
    if (compress) {
      z_stream zs{};
      deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
      body.resize(deflateBound(&zs, data.size()));
      zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
      zs.avail_in = data.size();
      zs.next_out = (Bytef *)body.data();
      zs.avail_out = body.size();
      deflate(&zs, Z_FINISH);
      body.resize(zs.total_out);
      deflateEnd(&zs);
    }
    uint32_t crc = crc32(0, (const Bytef *)data.data(), data.size()) ^
                   (corruptCrc ? 1 : 0);
    uint64_t offset = out.size();
    le(out, 0x04034b50, 4), le(out, 20, 2), le(out, 0, 2),
        le(out, compress ? 8 : 0, 2);
    le(out, 0, 4), le(out, crc, 4), le(out, body.size(), 4),
        le(out, data.size(), 4);
    le(out, name.size(), 2), le(out, 0, 2);
    out += name + body;
    le(dir, 0x02014b50, 4), le(dir, 20, 2), le(dir, 20, 2), le(dir, 0, 2);
    le(dir, compress ? 8 : 0, 2), le(dir, 0, 4), le(dir, crc, 4),
        le(dir, body.size(), 4);
    le(dir, data.size(), 4), le(dir, name.size(), 2), le(dir, 0, 2),
        le(dir, 0, 2);
    le(dir, 0, 2), le(dir, 0, 2), le(dir, 0, 4), le(dir, offset, 4);
    dir += name;
  }
  uint64_t dirOffset = out.size();
  out += dir;
  le(out, 0x06054b50, 4), le(out, 0, 2), le(out, 0, 2),
      le(out, members.size(), 2);
  le(out, members.size(), 2), le(out, dir.size(), 4), le(out, dirOffset, 4),
      le(out, 0, 2);
  return out;
}

TEST(Npz, StoredAndDeflatedMembers) {
  Tensor a = iota(DType::F32, {4, 3}), b = iota(DType::I64, {5});
  for (bool compress : {false, true}) {
    std::string bytes = zip(
        {{"layer.0.w.npy", npy::serialize(a)}, {"b.npy", npy::serialize(b)}},
        compress);
    auto r = parseNpz(bytes.data(), bytes.size(), "'w.npz'");
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].name, "layer.0.w");
    EXPECT_EQ((*r)[0].tensor.shape(), a.shape());
    EXPECT_EQ(std::memcmp((*r)[0].tensor.data(), a.data(), a.byteSize()), 0);
    EXPECT_EQ((*r)[1].tensor.dtype(), DType::I64);
  }
}

TEST(Npz, MalformedArchivesAreErrors) {
  Tensor a = iota(DType::F32, {4});
  auto error = [](const std::string &bytes) {
    auto r = parseNpz(bytes.data(), bytes.size(), "'w.npz'");
    EXPECT_FALSE(r);
    return r ? std::string() : r.message();
  };
  EXPECT_NE(error("PK\x03\x04 is not really a zip archive")
                .find("end-of-central-directory"),
            std::string::npos);
  std::string bad =
      zip({{"a.npy", npy::serialize(a)}}, true, /*corruptCrc=*/true);
  EXPECT_EQ(
      error(bad),
      "'w.npz': malformed .npz file: member 'a.npy' fails its CRC-32 check");
  std::string good = zip({{"a.npy", npy::serialize(a)}}, true);
  std::string truncated = good.substr(0, 40) + good.substr(good.size() - 80);
  EXPECT_FALSE(error(truncated).empty());
  EXPECT_NE(
      error(zip({{"notes.txt", "hello"}}, false)).find("is not a .npy array"),
      std::string::npos);
  EXPECT_NE(
      error(zip({{"a.npy", "garbage"}}, false)).find("'a.npy' in 'w.npz'"),
      std::string::npos);
  EXPECT_NE(
      error(zip({{"a.npy", npy::serialize(a)}, {"a.npy", npy::serialize(a)}},
                false))
          .find("appears twice"),
      std::string::npos);
}

} // namespace

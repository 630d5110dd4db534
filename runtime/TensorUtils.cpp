//===- TensorUtils.cpp - random tensors and printing ----------------------===//

#include "seqc/Tensor.h"

#include <cinttypes>
#include <cstdio>

using namespace seqc;

namespace {
/// splitmix64: a small, well-mixed, portable generator.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  float symmetric() {
    return static_cast<float>(
        static_cast<double>(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
};
} // namespace

Expected<Tensor> seqc::randomTensor(DType dtype,
                                    const std::vector<int64_t> &shape,
                                    uint64_t seed, int64_t intRange) {
  Expected<Tensor> t = Tensor::zeros(dtype, shape);
  if (!t)
    return t;
  SplitMix64 rng{seed};
  int64_t n = t->numel();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case DType::F32:
      t->dataAs<float>()[i] = rng.symmetric();
      break;
    case DType::F16:
      t->dataAs<uint16_t>()[i] = floatToHalf(rng.symmetric());
      break;
    case DType::BF16:
      t->dataAs<uint16_t>()[i] = floatToBF16(rng.symmetric());
      break;
    case DType::I32:
      t->dataAs<int32_t>()[i] =
          static_cast<int32_t>(rng.next() % static_cast<uint64_t>(intRange));
      break;
    case DType::I64:
      t->dataAs<int64_t>()[i] =
          static_cast<int64_t>(rng.next() % static_cast<uint64_t>(intRange));
      break;
    }
  }
  return t;
}

static std::string formatElement(const Tensor &t, int64_t i) {
  char buf[64];
  switch (t.dtype()) {
  case DType::F32:
    std::snprintf(buf, sizeof buf, "%.6g", t.dataAs<float>()[i]);
    break;
  case DType::F16:
    std::snprintf(buf, sizeof buf, "%.4g",
                  halfToFloat(t.dataAs<uint16_t>()[i]));
    break;
  case DType::BF16:
    std::snprintf(buf, sizeof buf, "%.3g",
                  bf16ToFloat(t.dataAs<uint16_t>()[i]));
    break;
  case DType::I32:
    std::snprintf(buf, sizeof buf, "%" PRId32, t.dataAs<int32_t>()[i]);
    break;
  case DType::I64:
    std::snprintf(buf, sizeof buf, "%" PRId64, t.dataAs<int64_t>()[i]);
    break;
  }
  return buf;
}

static void formatAxis(const Tensor &t, size_t axis, int64_t offset,
                       bool summarize, int indent, std::string &out) {
  const std::vector<int64_t> &shape = t.shape();
  int64_t n = shape[axis];
  int64_t stride = 1;
  for (size_t i = axis + 1; i < shape.size(); ++i)
    stride *= shape[i];
  const int64_t edge = 3;
  out += "[";
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * edge && i == edge) {
      out += axis + 1 == shape.size() ? "..., "
                                      : "...,\n" + std::string(indent + 1, ' ');
      i = n - edge - 1;
      continue;
    }
    if (axis + 1 == shape.size())
      out += formatElement(t, offset + i);
    else
      formatAxis(t, axis + 1, offset + i * stride, summarize, indent + 1, out);
    if (i + 1 < n) {
      if (axis + 1 == shape.size())
        out += ", ";
      else
        out += ",\n" + std::string(shape.size() - axis - 2, '\n') +
               std::string(indent + 1, ' ');
    }
  }
  out += "]";
}

std::string seqc::formatTensor(const Tensor &t) {
  if (t.rank() == 0)
    return formatElement(t, 0);
  std::string out;
  formatAxis(t, 0, 0, t.numel() > 1000, 0, out);
  return out;
}

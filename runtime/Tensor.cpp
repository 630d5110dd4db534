//===- Tensor.cpp - host tensors and element types ------------------------===//

#include "seqc/Tensor.h"

#include "Runtime.h"

#include <cstdlib>
#include <cstring>

using namespace seqc;

size_t seqc::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

const char *seqc::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

std::optional<DType> seqc::dtypeFromName(const std::string &name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
    if (name == dtypeName(d))
      return d;
  return std::nullopt;
}

std::optional<int64_t> seqc::checkedNumel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > INT64_MAX / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

int64_t TensorView::numel() const { return checkedNumel(shape).value_or(0); }

std::vector<int64_t> TensorView::effectiveStrides() const {
  if (!strides.empty())
    return strides;
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Expected<Tensor> Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  std::optional<int64_t> n = checkedNumel(shape);
  size_t elt = dtypeSize(dtype);
  if (!n || static_cast<uint64_t>(*n) > SIZE_MAX / elt / 2)
    return Status::error("tensor shape is too large");
  Tensor t;
  t.type = dtype;
  t.dims = std::move(shape);
  size_t bytes = static_cast<size_t>(*n) * elt;
  // 64-byte aligned (cache line / AVX-512), rounded up for aligned_alloc.
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p)
    return Status::error("out of memory allocating " + std::to_string(bytes) +
                         " bytes for a tensor");
  std::memset(p, 0, rounded ? rounded : 64);
  t.storage = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), std::free);
  return t;
}

Tensor Tensor::adopt(DType dtype, std::vector<int64_t> shape, void *data,
                     std::shared_ptr<void> owner) {
  Tensor t;
  t.type = dtype;
  t.dims = std::move(shape);
  t.storage =
      std::shared_ptr<uint8_t>(std::move(owner), static_cast<uint8_t *>(data));
  return t;
}

Expected<Tensor> Tensor::clone() const {
  Expected<Tensor> copy = zeros(type, dims);
  if (copy && byteSize() > 0)
    std::memcpy(copy->data(), data(), byteSize());
  return copy;
}

int64_t Tensor::numel() const { return checkedNumel(dims).value_or(0); }

TensorView Tensor::view() const {
  TensorView v;
  v.dtype = type;
  v.data = storage.get();
  v.shape = dims;
  return v;
}

std::string Tensor::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : dims)
    s += std::to_string(d) + "x";
  return s + dtypeName(type) + ">";
}

uint16_t seqc::floatToBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) // NaN: keep it quiet
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float seqc::bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t seqc::floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t mant = x & 0x7fffff;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) // Inf / NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10)
      return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = static_cast<uint32_t>(e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is still correct
  return static_cast<uint16_t>(sign | half);
}

float seqc::halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 |
             (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000 | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

extern "C" float seqc_rt_truncsfbf2(float value) {
  uint32_t bits = seqc::floatToBF16(value);
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

// Weak: a C library or libgcc that has it wins.
extern "C" __attribute__((weak)) float __truncsfbf2(float value) {
  return seqc_rt_truncsfbf2(value);
}

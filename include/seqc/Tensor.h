//===- Tensor.h - host tensors, element types, errors -----------*- C++ -*-===//
//
// The vocabulary of seqc's public C++ API. No MLIR or LLVM types appear here,
// so host applications build against seqc without LLVM headers.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_TENSOR_H
#define SEQC_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace seqc {

/// Element types a function argument or result may have.
enum class DType : uint8_t { F32, F16, BF16, I32, I64 };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The MLIR spelling: "f32", "f16", "bf16", "i32", "i64".
const char *dtypeName(DType dtype);
std::optional<DType> dtypeFromName(const std::string &name);

/// An error: a message naming the problem. Success carries no message.
class Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.msg = std::move(message);
    return s;
  }
  explicit operator bool() const { return !failed; }
  bool isOk() const { return !failed; }
  const std::string &message() const { return msg; }

private:
  bool failed = false;
  std::string msg;
};

/// A value or the error that prevented it.
template <typename T> class Expected {
public:
  Expected(T value) : storage(std::move(value)) {}
  Expected(Status error) : storage(std::move(error)) {}
  explicit operator bool() const { return storage.index() == 0; }
  T &operator*() { return std::get<0>(storage); }
  const T &operator*() const { return std::get<0>(storage); }
  T *operator->() { return &std::get<0>(storage); }
  const T *operator->() const { return &std::get<0>(storage); }
  /// The error (only when there is no value).
  const Status &status() const { return std::get<1>(storage); }
  const std::string &message() const { return status().message(); }
  T take() { return std::move(std::get<0>(storage)); }

private:
  std::variant<T, Status> storage;
};

/// A non-owning view of host memory: element type, shape and strides in
/// elements (row-major contiguous when strides are empty).
struct TensorView {
  DType dtype = DType::F32;
  void *data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  int64_t numel() const;
  /// The strides, computing row-major ones when none are given.
  std::vector<int64_t> effectiveStrides() const;
};

/// An owning, contiguous, row-major host tensor (64-byte aligned storage).
/// Copies share storage, as a shared_ptr does (a copy is cheap, and writes
/// through one are seen by all); clone() makes an independent copy.
class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor. Fails when the byte size overflows.
  static Expected<Tensor> zeros(DType dtype, std::vector<int64_t> shape);
  /// A tensor over existing contiguous row-major memory at `data`, kept alive
  /// (and released) by `owner`.
  static Tensor adopt(DType dtype, std::vector<int64_t> shape, void *data,
                      std::shared_ptr<void> owner);

  DType dtype() const { return type; }
  const std::vector<int64_t> &shape() const { return dims; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  size_t byteSize() const {
    return static_cast<size_t>(numel()) * dtypeSize(type);
  }
  void *data() { return storage.get(); }
  const void *data() const { return storage.get(); }
  template <typename T> T *dataAs() { return static_cast<T *>(data()); }
  template <typename T> const T *dataAs() const {
    return static_cast<const T *>(data());
  }
  TensorView view() const;
  /// A tensor with the same type and values in storage of its own.
  Expected<Tensor> clone() const;
  /// "tensor<2x3xf32>".
  std::string typeString() const;

private:
  DType type = DType::F32;
  std::vector<int64_t> dims;
  std::shared_ptr<uint8_t> storage;
};

/// The element count of `shape`, or nothing when it overflows int64 or a
/// dimension is negative.
std::optional<int64_t> checkedNumel(const std::vector<int64_t> &shape);

/// A deterministic pseudo-random tensor: floats uniform in [-1, 1), integers
/// uniform in [0, intRange). The same seed always gives the same values.
Expected<Tensor> randomTensor(DType dtype, const std::vector<int64_t> &shape,
                              uint64_t seed, int64_t intRange = 4);

/// Formats `tensor` the way NumPy prints arrays (nested brackets, 6
/// significant digits), eliding the middle of long axes.
std::string formatTensor(const Tensor &tensor);

/// f32 <-> bf16 / f16 conversions (round to nearest even).
uint16_t floatToBF16(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);

} // namespace seqc

#endif // SEQC_TENSOR_H

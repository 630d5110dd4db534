//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads and writes .npy files (format versions 1.0, 2.0 and 3.0), little-endian
// and C order, with element types f32 (<f4), f16 (<f2), i32 (<i4) and i64
// (<i8). Every malformed file is an error naming the problem; nothing is
// trusted before it is checked (magic, header length, dictionary, shape,
// overflow, data size).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_NPY_H
#define SEQC_NPY_H

#include "seqc/Tensor.h"

#include <string>

namespace seqc::npy {

/// Parses the bytes of a .npy file; `what` names it in error messages.
Expected<Tensor> parse(const void *data, size_t size, const std::string &what);
/// Reads and parses a .npy file.
Expected<Tensor> read(const std::string &path);
/// The bytes of a version 1.0 .npy file holding `tensor` (bf16 is written as
/// its f32 widening: NumPy has no bf16).
std::string serialize(const Tensor &tensor);
/// Writes `tensor` to `path` atomically (a temporary file renamed into place).
Status write(const std::string &path, const Tensor &tensor);

} // namespace seqc::npy

#endif // SEQC_NPY_H

//===- Weights.h - named tensors from .safetensors and .npz files -*- C++
//-*-===//
//
// Model weights arrive as files of named tensors: `.safetensors` (what model
// hubs ship: an 8-byte header length, a JSON header of name -> dtype, shape
// and data offsets, then the raw little-endian data) and NumPy's `.npz` (a
// zip archive of `.npy` members, stored or deflated). Both are read with
// every field checked: a malformed, truncated or inconsistent file is an
// error naming the file and the problem, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_WEIGHTS_H
#define SEQC_WEIGHTS_H

#include "seqc/Tensor.h"

#include <string>
#include <vector>

namespace seqc::weights {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

/// The tensors of a .safetensors file's bytes, in data-offset order.
/// Element types F32, F16, BF16, I32 and I64.
Expected<std::vector<NamedTensor>>
parseSafetensors(const void *data, size_t size, const std::string &what);
/// The arrays of a .npz file's bytes (member "w.npy" is tensor "w"), in
/// archive order.
Expected<std::vector<NamedTensor>> parseNpz(const void *data, size_t size,
                                            const std::string &what);
/// Reads a .safetensors or .npz file (told apart by their first bytes).
Expected<std::vector<NamedTensor>> read(const std::string &path);

/// The bytes of a .safetensors file holding `tensors` (names must be
/// distinct and not "__metadata__").
Expected<std::string>
serializeSafetensors(const std::vector<NamedTensor> &tensors);
/// Writes a .safetensors file atomically.
Status writeSafetensors(const std::string &path,
                        const std::vector<NamedTensor> &tensors);

} // namespace seqc::weights

#endif // SEQC_WEIGHTS_H

//===- StridedCopy.h - a strided view's elements in C order -----*- C++ -*-===//

#ifndef SEQC_RUNTIME_STRIDEDCOPY_H
#define SEQC_RUNTIME_STRIDEDCOPY_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace seqc {

/// Copies a strided source (strides in elements) into contiguous `dst`
/// (elements of `elt` bytes), in C order.
void stridedCopy(char *dst, const char *src, size_t elt,
                 const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &strides);

} // namespace seqc

#endif // SEQC_RUNTIME_STRIDEDCOPY_H

//===- FuzzNpy.cpp - the .npy reader
//---------------------------------------===//

#include "seqc/Npy.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  seqc::Expected<seqc::Tensor> t = seqc::npy::parse(data, size, "fuzz.npy");
  // A tensor that parses must round-trip.
  if (t) {
    std::string again = seqc::npy::serialize(*t);
    seqc::Expected<seqc::Tensor> back =
        seqc::npy::parse(again.data(), again.size(), "again.npy");
    if (!back || back->byteSize() != t->byteSize())
      __builtin_trap();
  }
  return 0;
}

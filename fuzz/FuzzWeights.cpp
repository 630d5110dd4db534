//===- FuzzWeights.cpp - the .safetensors and .npz readers
//-----------------===//

#include "seqc/Weights.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace seqc::weights;
  auto st = parseSafetensors(data, size, "fuzz.safetensors");
  if (st) {
    // What parses must serialize and parse back to the same tensors.
    auto bytes = serializeSafetensors(*st);
    if (bytes) {
      auto back = parseSafetensors(bytes->data(), bytes->size(), "again");
      if (!back || back->size() != st->size())
        __builtin_trap();
    }
  }
  (void)parseNpz(data, size, "fuzz.npz");
  return 0;
}

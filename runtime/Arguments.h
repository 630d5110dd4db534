//===- Arguments.h - a function's arguments from files or random data -*- C++
//-*-===//
//
// How seqc-run and seqc-aot-run bind a function's arguments: tensors of
// .safetensors / .npz files by the argument's name (its seq.name), then .npy
// files in order for the rest, or deterministic random data. Files are read
// first (loadArguments), so a bad one is reported before a long compile;
// binding needs the function's signature (bindArguments). Every mismatch is
// an error naming the argument, the tensor and the file.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_ARGUMENTS_H
#define SEQC_RUNTIME_ARGUMENTS_H

#include "seqc/Signature.h"
#include "seqc/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace seqc {

struct ArgumentSources {
  /// .safetensors / .npz files: each tensor binds the argument of its name.
  std::vector<std::string> weightFiles;
  /// .npy files for the arguments the weights leave, in order.
  std::vector<std::string> inputFiles;
  /// Random data (uniform in [-1, 1), integers in [0, 4)) for the arguments
  /// the weights leave; dynamic dimensions take `dynamicSize`.
  bool random = false;
  uint64_t seed = 0;
  int64_t dynamicSize = 32;
};

/// The tensors of the files, read and checked.
struct LoadedArguments {
  struct Weight {
    Tensor tensor;
    std::string file;
  };
  std::map<std::string, Weight> weights;
  std::vector<std::string> weightOrder; ///< file order, for messages
  std::vector<Tensor> inputs;
  ArgumentSources sources;
};

Expected<LoadedArguments> loadArguments(const ArgumentSources &sources);

/// One tensor per argument of `sig`, in order (copies share the loaded
/// tensors' storage).
Expected<std::vector<Tensor>> bindArguments(const FunctionSignature &sig,
                                            const LoadedArguments &loaded);

} // namespace seqc

#endif // SEQC_RUNTIME_ARGUMENTS_H

//===- Arguments.cpp - a function's arguments from files or random data ---===//

#include "Arguments.h"

#include "seqc/Npy.h"
#include "seqc/Weights.h"

#include <set>

using namespace seqc;

Expected<LoadedArguments> seqc::loadArguments(const ArgumentSources &sources) {
  if (sources.random && !sources.inputFiles.empty())
    return Status::error("--random-inputs and --input cannot be combined");
  if (sources.dynamicSize < 0)
    return Status::error("the size of dynamic dimensions must be >= 0");
  LoadedArguments loaded;
  loaded.sources = sources;
  for (const std::string &path : sources.inputFiles) {
    Expected<Tensor> t = npy::read(path);
    if (!t)
      return t.status();
    loaded.inputs.push_back(t.take());
  }
  for (const std::string &file : sources.weightFiles) {
    Expected<std::vector<weights::NamedTensor>> tensors = weights::read(file);
    if (!tensors)
      return tensors.status();
    for (weights::NamedTensor &t : *tensors) {
      auto [it, fresh] = loaded.weights.emplace(
          t.name, LoadedArguments::Weight{std::move(t.tensor), file});
      if (!fresh)
        return Status::error("tensor '" + it->first + "' is in both '" +
                             it->second.file + "' and '" + file + "'");
      loaded.weightOrder.push_back(it->first);
    }
  }
  return loaded;
}

static std::string plural(size_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

/// "argument 3 of @main ('w_in', tensor<128x256xf32>)".
static std::string describeArgument(const FunctionSignature &sig, size_t i) {
  const TensorSpec &spec = sig.inputs[i];
  return "argument " + std::to_string(i) + " of @" + sig.name + " (" +
         (spec.name.empty() ? std::string("unnamed") : "'" + spec.name + "'") +
         ", " + spec.typeString() + ")";
}

/// Why the .npy files do not fit the arguments the weights left: the first
/// argument nothing binds (and where its name was looked for), or how many
/// files are too many.
static Status unboundArguments(const FunctionSignature &sig,
                               const std::vector<size_t> &unbound,
                               const LoadedArguments &loaded) {
  const ArgumentSources &src = loaded.sources;
  size_t given = loaded.inputs.size();
  if (given > unbound.size())
    return Status::error(
        "@" + sig.name + " has " +
        plural(unbound.size(), "argument", "arguments") +
        (src.weightFiles.empty() ? "" : " not bound by --weights") + " but " +
        plural(given, "--input file was", "--input files were") + " given");
  size_t missing = unbound[given];
  std::string bound =
      given == 0 ? "no --input file is given"
                 : plural(given, "--input file binds", "--input files bind") +
                       " the arguments before it";
  if (src.weightFiles.empty())
    return Status::error(
        describeArgument(sig, missing) + " is not bound: " + bound + " (@" +
        sig.name + " takes " +
        plural(sig.inputs.size(), "argument", "arguments") + ")");
  std::string files;
  for (const std::string &w : src.weightFiles)
    files += (files.empty() ? "'" : ", '") + w + "'";
  return Status::error(
      describeArgument(sig, missing) + " is in none of the --weights files (" +
      files + ") and " + bound + " (weights bind by the argument's seq.name)");
}

Expected<std::vector<Tensor>>
seqc::bindArguments(const FunctionSignature &sig,
                    const LoadedArguments &loaded) {
  std::vector<Tensor> bound(sig.inputs.size());
  std::vector<bool> isBound(sig.inputs.size(), false);
  std::set<std::string> used;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const TensorSpec &spec = sig.inputs[i];
    auto it = loaded.weights.find(spec.name);
    if (spec.name.empty() || it == loaded.weights.end())
      continue;
    const LoadedArguments::Weight &w = it->second;
    bool fits = w.tensor.dtype() == spec.dtype &&
                w.tensor.rank() == static_cast<int64_t>(spec.shape.size());
    for (size_t d = 0; fits && d < spec.shape.size(); ++d)
      fits = spec.shape[d] < 0 || spec.shape[d] == w.tensor.shape()[d];
    if (!fits)
      return Status::error("tensor '" + spec.name + "' of '" + w.file +
                           "' is " + w.tensor.typeString() + " but argument " +
                           std::to_string(i) + " of @" + sig.name + " is " +
                           spec.typeString());
    bound[i] = w.tensor;
    isBound[i] = true;
    used.insert(spec.name);
  }
  for (const std::string &name : loaded.weightOrder)
    if (!used.count(name))
      return Status::error("tensor '" + name + "' of '" +
                           loaded.weights.at(name).file +
                           "' names no argument of @" + sig.name +
                           " (arguments are named by their seq.name "
                           "attribute)");

  std::vector<size_t> unbound;
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (!isBound[i])
      unbound.push_back(i);
  const ArgumentSources &src = loaded.sources;
  if (src.random) {
    for (size_t i : unbound) {
      std::vector<int64_t> shape = sig.inputs[i].shape;
      for (int64_t &d : shape)
        if (d < 0)
          d = src.dynamicSize;
      Expected<Tensor> t =
          randomTensor(sig.inputs[i].dtype, shape, src.seed * 1000003ULL + i);
      if (!t)
        return Status::error(describeArgument(sig, i) + ": " + t.message());
      bound[i] = t.take();
    }
    return bound;
  }
  if (loaded.inputs.size() != unbound.size())
    return unboundArguments(sig, unbound, loaded);
  for (size_t j = 0; j < unbound.size(); ++j)
    bound[unbound[j]] = loaded.inputs[j];
  return bound;
}

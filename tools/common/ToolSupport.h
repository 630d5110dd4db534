//===- ToolSupport.h - what seqc's command-line tools share -----*- C++ -*-===//
//
// seqc-run, seqc-aot-run and seqc-compile read their options, numbers and
// sizes, stage inputs in CUDA managed memory and write result files the same
// way. This library links only seqc's runtime (seqc-aot-run runs where MLIR
// and LLVM are not installed).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_TOOLS_TOOLSUPPORT_H
#define SEQC_TOOLS_TOOLSUPPORT_H

#include "seqc/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace seqc::tools {

/// A tool's arguments, one at a time: `--name=value` or `--name value` for
/// long options, `-x value` for short ones. `fail` reports a bad argument
/// and ends the tool.
class CommandLine {
public:
  using Fail = void (*)(const std::string &message);
  CommandLine(int argc, char **argv, Fail fail)
      : argc(argc), argv(argv), fail(fail) {}

  /// Moves to the next argument; false after the last.
  bool next();
  /// The argument, without a long option's `=value`.
  const std::string &arg() const { return current; }
  /// The argument as given (with its `=value`), for messages.
  std::string given() const { return argv[index]; }
  /// Whether the argument carried its value (`--name=value`).
  bool hasInlineValue() const { return inlineValue; }
  /// The option's value: the inline one, else the next argument.
  std::string value();
  /// Whether the argument is the flag `name` (an option without a value;
  /// one attached to it is an error).
  bool flag(const char *name) const;

private:
  int argc;
  char **argv;
  Fail fail;
  int index = 0;
  std::string current, attached;
  bool inlineValue = false;
};

/// A decimal number of at most 19 digits, nothing else.
bool parseUnsigned(const std::string &text, uint64_t &out);
/// A byte count, with an optional K, M or G suffix (powers of 1024).
bool parseSize(const std::string &text, size_t &out);

/// The median of `values` (not empty).
double median(std::vector<double> values);

/// `dir` and its missing parents (several processes may create them at
/// once); an error when `dir` cannot be made or is not a directory.
Status makeDirectories(const std::string &dir);

/// result0.npy, result1.npy, ... in `dir` (made if missing), every one or
/// none: files written before a failure are removed.
Status writeResultFiles(const std::string &dir,
                        const std::vector<Tensor> &results);

/// A buffer of CUDA managed memory (freed with the driver's call).
using ManagedBuffer = std::unique_ptr<void, void (*)(void *)>;

/// A copy of `tensor`'s bytes in CUDA managed memory (not empty tensors:
/// they need no copy), so that timed calls run kernels, not staging.
Expected<ManagedBuffer> copyToManagedMemory(const Tensor &tensor);

} // namespace seqc::tools

#endif // SEQC_TOOLS_TOOLSUPPORT_H

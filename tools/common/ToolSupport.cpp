//===- ToolSupport.cpp - what seqc's command-line tools share -------------===//

#include "ToolSupport.h"

#include "CudaDriver.h" // runtime/
#include "seqc/Npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

using namespace seqc;
using namespace seqc::tools;

bool CommandLine::next() {
  if (++index >= argc)
    return false;
  current = argv[index];
  attached.clear();
  inlineValue = false;
  if (current.rfind("--", 0) == 0) {
    size_t eq = current.find('=');
    if (eq != std::string::npos) {
      attached = current.substr(eq + 1);
      current.resize(eq);
      inlineValue = true;
    }
  }
  return true;
}

std::string CommandLine::value() {
  if (inlineValue)
    return attached;
  if (index + 1 >= argc) {
    fail("option " + current + " needs a value");
    return "";
  }
  return argv[++index];
}

bool CommandLine::flag(const char *name) const {
  if (current != name)
    return false;
  if (inlineValue)
    fail("option " + current + " takes no value (not '" + given() + "')");
  return true;
}

bool seqc::tools::parseUnsigned(const std::string &text, uint64_t &out) {
  if (text.empty() || text.size() > 19 ||
      !std::all_of(text.begin(), text.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = std::stoull(text);
  return true;
}

bool seqc::tools::parseSize(const std::string &text, size_t &out) {
  if (text.empty())
    return false;
  std::string digits = text;
  int shift = 0;
  switch (text.back()) {
  case 'K':
  case 'k':
    shift = 10;
    break;
  case 'M':
  case 'm':
    shift = 20;
    break;
  case 'G':
  case 'g':
    shift = 30;
    break;
  default:
    break;
  }
  if (shift)
    digits.pop_back();
  uint64_t n;
  if (!parseUnsigned(digits, n) || n > (UINT64_MAX >> 30))
    return false;
  out = static_cast<size_t>(n << shift);
  return true;
}

double seqc::tools::median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

Status seqc::tools::makeDirectories(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0)
    return S_ISDIR(st.st_mode)
               ? Status::ok()
               : Status::error("'" + dir + "' is not a directory");
  for (size_t at = dir.find('/', 1); at != std::string::npos;
       at = dir.find('/', at + 1))
    mkdir(dir.substr(0, at).c_str(), 0755);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::error("cannot create output directory '" + dir +
                         "': " + std::strerror(errno));
  return Status::ok();
}

Status seqc::tools::writeResultFiles(const std::string &dir,
                                     const std::vector<Tensor> &results) {
  if (Status made = makeDirectories(dir); !made)
    return made;
  std::vector<std::string> written;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string path = dir + "/result" + std::to_string(i) + ".npy";
    if (Status s = npy::write(path, results[i]); !s) {
      for (const std::string &w : written)
        std::remove(w.c_str());
      return s;
    }
    written.push_back(path);
  }
  return Status::ok();
}

Expected<ManagedBuffer> seqc::tools::copyToManagedMemory(const Tensor &tensor) {
  std::string error;
  void *copy = rt::cudaManagedAlloc(tensor.byteSize(), error);
  if (!copy)
    return Status::error(error);
  ManagedBuffer buffer(copy, &rt::cudaManagedFree);
  std::memcpy(copy, tensor.data(), tensor.byteSize());
  return Expected<ManagedBuffer>(std::move(buffer));
}

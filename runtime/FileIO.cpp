//===- FileIO.cpp - whole-file reads and atomic writes --------------------===//

#include "FileIO.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace seqc;

Expected<std::string> seqc::readFile(const std::string &path) {
  // A directory opens and reads as empty with ifstream; say what it is.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error("cannot read '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad())
    return Status::error("cannot read '" + path + "'");
  return buf.str();
}

Status seqc::writeFileAtomically(const std::string &path,
                                 const std::string &bytes) {
  // Unique per process and per call, so concurrent writers of one path (two
  // threads filling the same cache entry) never share a temporary.
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::error("cannot write '" + path +
                           "': " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error("cannot write '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return Status::error("cannot write '" + path + "': " + std::strerror(err));
  }
  return Status::ok();
}

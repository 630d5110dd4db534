//===- FileIO.cpp - whole-file reads and atomic writes --------------------===//

#include "FileIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace seqc;

Expected<std::string> seqc::readFile(const std::string &path) {
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
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::error("cannot write '" + path + "': " +
                           std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error("cannot write '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot write '" + path + "': " + std::strerror(errno));
  }
  return Status::ok();
}

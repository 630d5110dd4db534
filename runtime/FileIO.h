//===- FileIO.h - whole-file reads and atomic writes -------------*- C++
//-*-===//

#ifndef SEQC_RUNTIME_FILEIO_H
#define SEQC_RUNTIME_FILEIO_H

#include "seqc/Tensor.h"

#include <string>

namespace seqc {

/// The bytes of the file at `path`.
Expected<std::string> readFile(const std::string &path);
/// Writes `bytes` to a temporary file beside `path` and renames it into
/// place, so readers never see a partial file.
Status writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace seqc

#endif // SEQC_RUNTIME_FILEIO_H

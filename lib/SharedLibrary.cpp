//===- SharedLibrary.cpp - libseqc ----------------------------------------===//
//
// libseqc.so is the engine and the runtime linked whole (see
// cmake/Install.cmake); this file only gives the library a translation unit
// of its own.
//
//===----------------------------------------------------------------------===//

#include "seqc/Engine.h"

namespace seqc {
/// The library's version, for `nm`-level identification.
extern "C" const char *seqc_library_version() { return "0.1.0"; }
} // namespace seqc

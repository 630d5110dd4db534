//===- DynamicLibrary.h - functions of a library opened with dlopen -*- C++
//-*-//
//
// The runtime opens the libraries only some runs need (the CUDA driver,
// NCCL, MPI) with dlopen, so that nothing links them.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_DYNAMICLIBRARY_H
#define SEQC_RUNTIME_DYNAMICLIBRARY_H

#include <dlfcn.h>

namespace seqc::rt {

/// Sets `fn` to the function `symbol` of library `handle` (dlopen's);
/// false, `fn` null, when the library has none.
template <typename Fn>
bool findFunction(void *handle, Fn &fn, const char *symbol) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return fn != nullptr;
}

} // namespace seqc::rt

#endif // SEQC_RUNTIME_DYNAMICLIBRARY_H

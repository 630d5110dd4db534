//===- CompileCache.h - compiled objects on disk ----------------*- C++ -*-===//
//
// One file per compiled module, <dir>/<key>.seqc, where the key is a SHA-256
// of everything that determines the object: seqc's and LLVM's versions, the
// target triple, CPU and features, the compile options, the source and its
// buffer name (run-time messages quote source locations). The
// file holds the object, its size and SHA-256 and the function signatures;
// an entry that fails any check is reported and rebuilt, never loaded.
// Entries are written to a temporary file and renamed into place; the
// directory is bounded ($SEQC_CACHE_MAX_MB), least recently used out first.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_LIB_COMPILECACHE_H
#define SEQC_LIB_COMPILECACHE_H

#include "Compiler.h"

namespace seqc {

struct CacheEntry {
  std::string object;
  std::vector<FunctionSignature> functions;
  std::vector<UnsupportedFunction> unsupported;
};

std::string cacheKey(std::string_view source, std::string_view bufferName,
                     const CompileOptions &options,
                     const llvm::TargetMachine &tm);
/// What cacheKey digests: every input the compiled code depends on, as
/// text, then the source.
std::string cacheKeyMaterial(std::string_view source,
                             std::string_view bufferName,
                             const CompileOptions &options,
                             const llvm::TargetMachine &tm);

/// What the ranks of a distributed module compare before each call
/// (CallOptions::moduleIdentity): a digest of the source and of the options
/// that shape the module's exchanges (ranks, parallelism, local steps,
/// target, the reference lowering, fusion, the bound weights' names, types
/// and shapes; not their values, which would take a second pass over their
/// bytes).
uint64_t distributedModuleIdentity(std::string_view source,
                                   const CompileOptions &options);

/// The cache directory: `configured`, else $SEQC_CACHE_DIR, else
/// $XDG_CACHE_HOME/seqc, else $HOME/.cache/seqc.
std::string cacheDirectory(const std::string &configured);

/// The entry of `key`. A missing entry is an error with an empty message; a
/// present but unusable one (corrupt, stale, unreadable) has a message.
Expected<CacheEntry> readCacheEntry(const std::string &configuredDir,
                                    const std::string &key);
Status writeCacheEntry(const std::string &configuredDir, const std::string &key,
                       const CacheEntry &entry);

/// The most bytes the cache directory may hold: $SEQC_CACHE_MAX_MB
/// megabytes (default 512). Past it, writing an entry removes the least
/// recently used ones (a read counts as a use).
Expected<uint64_t> cacheSizeLimit();
/// Removes the least recently used entries of `dir` until its entries
/// total at most `limitBytes`, never the entry named `keep`.
void evictLeastRecentlyUsed(const std::string &dir, uint64_t limitBytes,
                            const std::string &keep);

} // namespace seqc

#endif // SEQC_LIB_COMPILECACHE_H

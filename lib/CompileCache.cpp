//===- CompileCache.cpp - compiled objects on disk ------------------------===//

#include "CompileCache.h"
#include "Compiler.h"
#include "FileIO.h"
#include "Mpi.h"
#include "PerfMap.h"
#include "seqc/Passes.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace seqc;

static std::string hex(llvm::ArrayRef<uint8_t> bytes) {
  static const char *digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

/// A bound weight's name, element type and shape, as cache keys and
/// identities spell them.
static void describeBoundWeight(llvm::raw_ostream &os, const BoundWeight &w) {
  os << "bound " << w.name.size() << " " << w.name << " "
     << dtypeName(w.value.dtype);
  for (int64_t d : w.value.shape)
    os << " " << d;
}

static std::string sha256(std::string_view data) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(data.data(), data.size()));
  auto digest = h.final();
  return hex(digest);
}

/// The file that holds the code at `address`: the shared library it is in,
/// or, for the main program (whose dladdr name is argv[0], which names no
/// file when the tool was started through $PATH), /proc/self/exe.
static std::string objectFileContaining(const void *address) {
  struct Search {
    uintptr_t address;
    std::string path;
    bool found = false;
  } search{reinterpret_cast<uintptr_t>(address), "", false};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *s = static_cast<Search *>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD)
            continue;
          uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (s->address >= start && s->address < start + ph.p_memsz) {
            s->found = true;
            s->path = info->dlpi_name ? info->dlpi_name : "";
            return 1;
          }
        }
        return 0;
      },
      &search);
  if (!search.found)
    return "";
  // The main program is listed with an empty name.
  return search.path.empty() ? "/proc/self/exe" : search.path;
}

/// A digest of the code that compiles (the executable or shared library this
/// function is in): any change to seqc's passes changes the keys, so a
/// rebuilt seqc never loads objects an older build made.
static const std::string &buildIdentity() {
  static const std::string id = [] {
    std::string file =
        objectFileContaining(reinterpret_cast<const void *>(&buildIdentity));
    if (!file.empty())
      if (Expected<std::string> bytes = readFile(file))
        return sha256(*bytes);
    // Unidentifiable: a key no other process shares (the disk cache then
    // never hits, rather than risk loading another build's code).
    return "unidentified " + std::to_string(getpid());
  }();
  return id;
}

std::string seqc::cacheKey(std::string_view source, std::string_view bufferName,
                           const CompileOptions &options,
                           const llvm::TargetMachine &tm) {
  return sha256(cacheKeyMaterial(source, bufferName, options, tm));
}

std::string seqc::cacheKeyMaterial(std::string_view source,
                                   std::string_view bufferName,
                                   const CompileOptions &options,
                                   const llvm::TargetMachine &tm) {
  // The products bf16 operands take (SEQC_CPU_BF16 may change them); a
  // value the compile will reject keys as itself.
  Expected<std::string> resolved = resolveBf16Products(options, tm);
  std::string bf16Products = resolved ? *resolved : resolved.message();
  std::string material;
  llvm::raw_string_ostream os(material);
  os << "seqc-cache-key 1\nseqc " << seqcVersion() << "\nbuild "
     << buildIdentity() << "\nllvm " << LLVM_VERSION_STRING << "\ntriple "
     << tm.getTargetTriple().str() << "\ncpu " << tm.getTargetCPU()
     << "\nfeatures " << tm.getTargetFeatureString() << "\ntuning "
     << cpuHostTuning() << "\nreference " << options.reference << "\nopt "
     << options.optLevel << "\nprofile " << static_cast<int>(options.profile)
     << "\nfuse " << options.fuse << "\nstrict " << options.strict << "\nranks "
     << options.ranks << "\nparallel " << static_cast<int>(options.parallel)
     << "\nlocal-steps "
     << options.localSteps
     // Distributed code is compiled for the ABI of the MPI library opened.
     << "\nmpi " << (options.ranks > 0 ? rt::mpiImplementation() : "")
     << "\nbf16 " << bf16Products << "\nperf-map " << perfMapRequested()
     << "\ntarget " << static_cast<int>(options.target) << "\nchip "
     << options.cudaChip << "\nblock-threads "
     << options.cudaBlockThreads
     // The CUDA object embeds a cubin or, without ptxas, PTX: installing
     // the toolkit must not keep serving the PTX build.
     << "\nptxas "
     << (options.target == Target::CUDA && cudaHasPtxas(CudaPipelineOptions()))
     // The buffer's name is part of the code: run-time error messages quote
     // source locations.
     << "\nname " << bufferName.size() << " " << bufferName << "\n";
  // Bound weights are part of the code (constants of the module).
  for (const BoundWeight &w : options.boundWeights) {
    size_t bytes =
        static_cast<size_t>(w.value.numel()) * dtypeSize(w.value.dtype);
    describeBoundWeight(os, w);
    os << " "
       << sha256(
              std::string_view(static_cast<const char *>(w.value.data), bytes))
       << "\n";
  }
  os << "\n";
  os.flush();
  material.append(source.data(), source.size());
  return material;
}

uint64_t seqc::distributedModuleIdentity(std::string_view source,
                                         const CompileOptions &options) {
  // Not the cache key: that holds the buffer's name (one source read from
  // two paths is one module) and the host's CPU (ranks may run on
  // different machines).
  std::string material;
  llvm::raw_string_ostream os(material);
  // What changes the graph the exchanges are made in: the options the
  // distribution reads, and those that shape the graph before it.
  os << "ranks " << options.ranks << "\nparallel "
     << static_cast<int>(options.parallel) << "\nlocal-steps "
     << options.localSteps << "\ntarget " << static_cast<int>(options.target)
     << "\nreference " << options.reference << "\nfuse " << options.fuse
     << "\n";
  for (const BoundWeight &w : options.boundWeights) {
    describeBoundWeight(os, w);
    os << "\n";
  }
  os.flush();
  material.append(source.data(), source.size());
  std::array<uint8_t, 32> digest =
      llvm::SHA256::hash(llvm::arrayRefFromStringRef(material));
  uint64_t identity = 0;
  for (int i = 0; i < 8; ++i)
    identity = identity << 8 | digest[i];
  return identity;
}

std::string seqc::cacheDirectory(const std::string &configured) {
  if (!configured.empty())
    return configured;
  if (const char *dir = std::getenv("SEQC_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/seqc";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/seqc";
  return ".seqc-cache";
}

static std::string entryPath(const std::string &dir, const std::string &key) {
  return dir + "/" + key + ".seqc";
}

// An entry: four header lines, then the content the header's digest covers
// (signatures, unsupported functions, the object), so that no byte a load
// trusts -- a signature's shapes included -- can change unnoticed.
//   seqc-cache 2 / seqc VERSION / key KEY / content SIZE SHA256
//   signatures N \n <N bytes> unsupported COUNT \n <COUNT lines> data \n
//   <object>

Expected<CacheEntry> seqc::readCacheEntry(const std::string &configuredDir,
                                          const std::string &key) {
  std::string path = entryPath(cacheDirectory(configuredDir), key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(""); // a plain miss
  // Eviction is least recently used first: a read is a use. (Access times
  // are unreliable under relatime, so the modification time records it.)
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  Expected<std::string> bytes = readFile(path);
  auto corrupt = [&](const std::string &why) {
    return Status::error("cache entry " + path + " is " + why + "; rebuilt");
  };
  if (!bytes)
    return corrupt("unreadable (" + bytes.message() + ")");
  const std::string &data = *bytes;

  std::istringstream hs(data);
  std::string line;
  auto next = [&](const std::string &expect) -> std::optional<std::string> {
    if (!std::getline(hs, line) || line.rfind(expect, 0) != 0)
      return std::nullopt;
    return line.substr(expect.size());
  };
  auto magic = next("seqc-cache 2");
  auto version = next("seqc ");
  if (magic && version && *version != seqcVersion())
    return corrupt("from seqc " + *version);
  auto storedKey = next("key ");
  auto content = next("content ");
  if (!magic || !version || !storedKey || !content)
    return corrupt("malformed");
  if (*storedKey != key)
    return corrupt("for another key");
  size_t contentSize = 0;
  char digest[65] = {0};
  if (std::sscanf(content->c_str(), "%zu %64s", &contentSize, digest) != 2)
    return corrupt("malformed");
  size_t at = static_cast<size_t>(hs.tellg());
  if (hs.fail() || data.size() - at != contentSize)
    return corrupt("truncated");
  if (sha256(std::string_view(data).substr(at)) != digest)
    return corrupt("corrupt (checksum mismatch)");

  // The content is intact; parse it.
  size_t sigBytes = 0;
  auto sigSize = next("signatures ");
  if (!sigSize || std::sscanf(sigSize->c_str(), "%zu", &sigBytes) != 1)
    return corrupt("malformed");
  at = static_cast<size_t>(hs.tellg());
  if (hs.fail() || at + sigBytes > data.size())
    return corrupt("malformed");
  CacheEntry entry;
  Expected<std::vector<FunctionSignature>> sigs =
      parseSignatures(data.substr(at, sigBytes));
  if (!sigs)
    return corrupt("malformed (" + sigs.message() + ")");
  entry.functions = sigs.take();
  hs.seekg(static_cast<std::streamoff>(at + sigBytes));
  auto unsupported = next("unsupported ");
  size_t count = 0;
  if (!unsupported || std::sscanf(unsupported->c_str(), "%zu", &count) != 1 ||
      count > 100000)
    return corrupt("malformed");
  for (size_t i = 0; i < count; ++i) {
    if (!std::getline(hs, line))
      return corrupt("malformed");
    size_t tab = line.find('\t');
    if (tab == std::string::npos)
      return corrupt("malformed");
    entry.unsupported.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  if (!next("data"))
    return corrupt("malformed");
  at = static_cast<size_t>(hs.tellg());
  if (hs.fail())
    return corrupt("malformed");
  entry.object = data.substr(at);
  return entry;
}

/// Creates `dir` and its parents.
static bool makeDirs(const std::string &dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      path = dir.substr(0, i);
      if (!path.empty() && mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
        return false;
    }
  }
  return true;
}

Status seqc::writeCacheEntry(const std::string &configuredDir,
                             const std::string &key, const CacheEntry &entry) {
  std::string dir = cacheDirectory(configuredDir);
  if (!makeDirs(dir))
    return Status::error("cannot create " + dir + ": " + std::strerror(errno));
  std::string sigs = serializeSignatures(entry.functions);
  std::ostringstream content;
  content << "signatures " << sigs.size() << '\n'
          << sigs << "unsupported " << entry.unsupported.size() << '\n';
  for (const UnsupportedFunction &u : entry.unsupported) {
    std::string reason = u.reason;
    for (char &c : reason)
      if (c == '\n')
        c = ' ';
    content << u.name << '\t' << reason << '\n';
  }
  content << "data\n" << entry.object;
  std::string body = content.str();
  std::ostringstream header;
  header << "seqc-cache 2\nseqc " << seqcVersion() << "\nkey " << key
         << "\ncontent " << body.size() << ' ' << sha256(body) << '\n';
  Expected<uint64_t> limit = cacheSizeLimit();
  if (!limit)
    return limit.status();
  Status written =
      writeFileAtomically(entryPath(dir, key), header.str() + body);
  if (!written)
    return written;
  evictLeastRecentlyUsed(dir, *limit, key + ".seqc");
  return Status::ok();
}

Expected<uint64_t> seqc::cacheSizeLimit() {
  constexpr uint64_t kDefaultMB = 512;
  const char *env = std::getenv("SEQC_CACHE_MAX_MB");
  if (!env || !*env)
    return kDefaultMB << 20;
  char *end = nullptr;
  errno = 0;
  double mb = std::strtod(env, &end);
  if (errno != 0 || end == env || *end != '\0' || !(mb >= 0) || mb > 1e12)
    return Status::error("SEQC_CACHE_MAX_MB must be a size in megabytes "
                         "(a number >= 0), not '" +
                         std::string(env) + "'");
  return static_cast<uint64_t>(mb * 1048576.0);
}

void seqc::evictLeastRecentlyUsed(const std::string &dir, uint64_t limitBytes,
                                  const std::string &keep) {
  struct Entry {
    std::string path;
    uint64_t bytes;
    struct timespec used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".seqc") != 0)
      continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    total += static_cast<uint64_t>(st.st_size);
    if (name != keep)
      entries.push_back({path, static_cast<uint64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec
                                          : a.used.tv_nsec < b.used.tv_nsec;
  });
  // Another process may evict the same entries at once: a failed remove
  // just means the file is gone.
  for (const Entry &e : entries) {
    if (total <= limitBytes)
      break;
    ::unlink(e.path.c_str());
    total -= std::min(total, e.bytes);
  }
}

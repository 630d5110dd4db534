//===- CacheTest.cpp - the engine's memory and disk compile caches -------===//

#include "CompileCache.h"
#include "seqc/Engine.h"
#include "seqc/Passes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace seqc;
namespace fs = std::filesystem;

namespace {

const char *kScale = R"(
func.func @scale(%x: tensor<?xf32>) -> tensor<?xf32> {
  %y = arith.addf %x, %x : tensor<?xf32>
  %z = arith.addf %y, %x : tensor<?xf32>
  return %z : tensor<?xf32>
}
)";

/// A fresh, empty directory per test, removed afterwards.
class CacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("seqc-cache-test-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    options.cacheDir = dir.string();
  }
  void TearDown() override { fs::remove_all(dir); }

  /// The single entry file of the cache directory.
  fs::path entry() {
    std::vector<fs::path> files;
    for (auto &e : fs::directory_iterator(dir))
      files.push_back(e.path());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? fs::path() : files[0];
  }

  /// Compiles kScale in a new engine (so only the disk cache can hit) and
  /// checks that it computes 3x.
  std::shared_ptr<CompiledModule> compileFresh() {
    Engine engine;
    auto m = engine.compile(kScale, options);
    EXPECT_TRUE(m) << m.message();
    if (!m)
      return nullptr;
    checkWorks(**m);
    return *m;
  }

  static void checkWorks(const CompiledModule &m) {
    Expected<Tensor> x = Tensor::zeros(DType::F32, {5});
    for (int i = 0; i < 5; ++i)
      x->dataAs<float>()[i] = float(i);
    auto r = m.function("scale")->call({x->view()});
    ASSERT_TRUE(r) << r.message();
    EXPECT_EQ((*r)[0].dataAs<float>()[4], 12.0f);
  }

  fs::path dir;
  CompileOptions options;
};

TEST_F(CacheTest, CompiledThenMemoryThenDisk) {
  Engine engine;
  auto first = engine.compile(kScale, options);
  ASSERT_TRUE(first) << first.message();
  EXPECT_EQ((*first)->cacheStatus(), CacheStatus::Compiled);
  EXPECT_EQ((*first)->cacheNote(), "");
  auto again = engine.compile(kScale, options);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->cacheStatus(), CacheStatus::MemoryHit);
  checkWorks(**again);
  auto fresh = compileFresh();
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->cacheStatus(), CacheStatus::DiskHit);
}

TEST_F(CacheTest, OptionsAndSourceAreInTheKey) {
  compileFresh();
  options.optLevel = 1;
  EXPECT_EQ(compileFresh()->cacheStatus(), CacheStatus::Compiled);
  options.reference = true;
  EXPECT_EQ(compileFresh()->cacheStatus(), CacheStatus::Compiled);
  Engine engine;
  auto other = engine.compile(std::string(kScale) + "\n// changed\n", options);
  ASSERT_TRUE(other);
  EXPECT_EQ((*other)->cacheStatus(), CacheStatus::Compiled);
  // Run-time messages quote source locations, so the file name counts too.
  auto renamed = engine.compile(kScale, options, "elsewhere.mlir");
  ASSERT_TRUE(renamed);
  EXPECT_EQ((*renamed)->cacheStatus(), CacheStatus::Compiled);
  EXPECT_EQ(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 5);
}

// The kernels are tuned from the host's caches (the GEMM's blocks): a cache
// shared by hosts of one CPU model must not hand one's code to another. The
// cores are not in the key: kernels read the threads they run on when they
// run, so hosts of other core counts share entries.
TEST_F(CacheTest, HostTuningIsInTheKey) {
  std::string tuning = cpuHostTuning();
  EXPECT_EQ(tuning.rfind("l1 ", 0), 0u) << tuning;
  EXPECT_NE(tuning.find(" l2 "), std::string::npos) << tuning;
  EXPECT_EQ(tuning.find("cores"), std::string::npos) << tuning;
  auto tm = hostTargetMachine(options.optLevel);
  ASSERT_TRUE(bool(tm));
  std::string material = cacheKeyMaterial(kScale, "main.mlir", options, **tm);
  EXPECT_NE(material.find("\ntuning " + tuning + "\n"), std::string::npos);
}

// Distributed code is compiled for the ABI of the MPI library the engine
// opened (OpenMPI's before any is: nothing here starts MPI), so the key
// names it; one process's code calls no MPI, and its key names none.
TEST_F(CacheTest, MpiAbiIsInTheKeyOfDistributedCode) {
  auto tm = hostTargetMachine(options.optLevel);
  ASSERT_TRUE(bool(tm));
  std::string single = cacheKeyMaterial(kScale, "main.mlir", options, **tm);
  EXPECT_NE(single.find("\nmpi \n"), std::string::npos) << single;
  CompileOptions split = options;
  split.ranks = 2;
  std::string material = cacheKeyMaterial(kScale, "main.mlir", split, **tm);
  EXPECT_NE(material.find("\nmpi OpenMPI\n"), std::string::npos) << material;
}

TEST_F(CacheTest, FlippedObjectByteIsRebuilt) {
  compileFresh();
  fs::path file = entry();
  std::string data;
  {
    std::ifstream in(file, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), {});
  }
  data[data.size() - 100] ^= 0x40; // inside the object
  std::ofstream(file, std::ios::binary | std::ios::trunc) << data;

  auto rebuilt = compileFresh();
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(rebuilt->cacheStatus(), CacheStatus::Compiled);
  EXPECT_NE(
      rebuilt->cacheNote().find("is corrupt (checksum mismatch); rebuilt"),
      std::string::npos)
      << rebuilt->cacheNote();
  // The rebuilt entry replaced the corrupt one.
  EXPECT_EQ(compileFresh()->cacheStatus(), CacheStatus::DiskHit);
}

TEST_F(CacheTest, EditedSignatureIsRebuilt) {
  // The signatures decide which shapes a call accepts: an entry whose
  // signature text changed (here a static dimension) must not load, or a
  // call could pass a buffer of the wrong size to the compiled code.
  compileFresh();
  fs::path file = entry();
  std::string data;
  {
    std::ifstream in(file, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t sig = data.find("\nsignatures ");
  ASSERT_NE(sig, std::string::npos);
  size_t digit = data.find_first_of("123456789", data.find('\n', sig + 1));
  ASSERT_LT(digit, data.find("\ndata\n"));
  data[digit] = data[digit] == '9' ? '8' : '9';
  std::ofstream(file, std::ios::binary | std::ios::trunc) << data;

  auto rebuilt = compileFresh();
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(rebuilt->cacheStatus(), CacheStatus::Compiled);
  EXPECT_NE(
      rebuilt->cacheNote().find("is corrupt (checksum mismatch); rebuilt"),
      std::string::npos)
      << rebuilt->cacheNote();
}

TEST_F(CacheTest, TruncatedAndForeignEntriesAreRebuilt) {
  compileFresh();
  fs::path file = entry();
  fs::resize_file(file, fs::file_size(file) / 2);
  auto rebuilt = compileFresh();
  EXPECT_EQ(rebuilt->cacheStatus(), CacheStatus::Compiled);
  EXPECT_NE(rebuilt->cacheNote().find("truncated"), std::string::npos)
      << rebuilt->cacheNote();

  std::ofstream(file, std::ios::trunc) << "seqc-cache 2\nseqc 0.0.0-other\n";
  rebuilt = compileFresh();
  EXPECT_EQ(rebuilt->cacheStatus(), CacheStatus::Compiled);
  EXPECT_NE(rebuilt->cacheNote().find("from seqc 0.0.0-other"),
            std::string::npos)
      << rebuilt->cacheNote();

  std::ofstream(file, std::ios::trunc) << "not a cache entry";
  rebuilt = compileFresh();
  EXPECT_EQ(rebuilt->cacheStatus(), CacheStatus::Compiled);
  EXPECT_NE(rebuilt->cacheNote().find("malformed"), std::string::npos)
      << rebuilt->cacheNote();
  EXPECT_EQ(compileFresh()->cacheStatus(), CacheStatus::DiskHit);
}

TEST_F(CacheTest, UnwritableDirectoryIsANoteNotAnError) {
  // A path under a regular file can never be created, even by root.
  std::ofstream(dir / "file") << "x";
  options.cacheDir = (dir / "file" / "cache").string();
  auto m = compileFresh();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->cacheStatus(), CacheStatus::Compiled);
  EXPECT_NE(m->cacheNote().find("not stored in the cache"), std::string::npos)
      << m->cacheNote();
}

TEST_F(CacheTest, DisabledCacheWritesNothing) {
  options.useCache = false;
  Engine engine;
  auto a = engine.compile(kScale, options);
  auto b = engine.compile(kScale, options);
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*b)->cacheStatus(), CacheStatus::Compiled);
  EXPECT_TRUE(fs::is_empty(dir));
}

// Compiling in one thread while others call an already compiled function.
TEST_F(CacheTest, CompileWhileCalling) {
  Engine engine;
  auto m = engine.compile(kScale, options);
  ASSERT_TRUE(m);
  Function fn = *(*m)->function("scale");
  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t)
    callers.emplace_back([&, t] {
      Expected<Tensor> x = Tensor::zeros(DType::F32, {64});
      while (!done || calls < 100) {
        for (int i = 0; i < 64; ++i)
          x->dataAs<float>()[i] = float(t * 100 + i);
        auto r = fn.call({x->view()});
        if (!r || (*r)[0].dataAs<float>()[63] != 3.0f * (t * 100 + 63))
          ++failures;
        ++calls;
      }
    });
  for (int i = 0; i < 3; ++i) {
    std::string src = std::string(kScale) + "// variant " + std::to_string(i);
    auto other = engine.compile(src, options);
    EXPECT_TRUE(other) << other.message();
    if (other)
      checkWorks(**other);
  }
  done = true;
  for (auto &th : callers)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(calls.load(), 100);
}

} // namespace

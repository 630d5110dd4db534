//===- CApiTest.cpp - seqc's C API, and its misuse -------------------------===//

#include "seqc/seqc.h"

#include "TestModules.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <list>
#include <string>
#include <thread>
#include <vector>

namespace {

const char *kSource = seqc::test::kScanModule;

std::string lastError() { return seqc_last_error(); }

class CApiTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(seqc_engine_create(&engine), SEQC_OK);
    ASSERT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), "test.mlir",
                           nullptr, &module),
              SEQC_OK)
        << lastError();
    ASSERT_EQ(seqc_module_function(module, "main", &scan), SEQC_OK);
    ASSERT_EQ(seqc_module_function(module, "twice", &twice), SEQC_OK);
  }
  void TearDown() override {
    seqc_function_destroy(scan);
    seqc_function_destroy(twice);
    seqc_module_destroy(module);
    seqc_engine_destroy(engine);
  }

  /// A view whose shape lives as long as the test.
  seqc_view view(float *data, std::vector<int64_t> shape,
                 seqc_dtype dtype = SEQC_F32) {
    shapes.push_back(std::move(shape));
    const std::vector<int64_t> &s = shapes.back();
    return seqc_view{dtype, data, static_cast<int32_t>(s.size()), s.data(),
                     nullptr};
  }

  std::list<std::vector<int64_t>> shapes;
  seqc_engine *engine = nullptr;
  seqc_module *module = nullptr;
  seqc_function *scan = nullptr, *twice = nullptr;
};

TEST_F(CApiTest, Introspection) {
  ASSERT_EQ(seqc_module_num_functions(module), 2u);
  EXPECT_STREQ(seqc_module_function_name(module, 0), "main");
  EXPECT_STREQ(seqc_module_function_name(module, 1), "twice");
  EXPECT_EQ(seqc_module_function_name(module, 2), nullptr);
  EXPECT_EQ(seqc_function_num_inputs(scan), 2u);
  EXPECT_EQ(seqc_function_num_outputs(scan), 2u);
  seqc_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const char *name;
  ASSERT_EQ(seqc_function_tensor(scan, 0, 1, &dtype, &rank, &shape, &name), SEQC_OK);
  EXPECT_EQ(dtype, SEQC_F32);
  ASSERT_EQ(rank, 3);
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[1], -1);
  EXPECT_STREQ(name, "arg1");
  ASSERT_EQ(seqc_function_tensor(twice, 0, 0, nullptr, nullptr, nullptr, &name), SEQC_OK);
  EXPECT_STREQ(name, "x");
  ASSERT_EQ(seqc_function_tensor(scan, 1, 2, &dtype, &rank, &shape, &name),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "output index 2 is out of range (@main has 2)");
}

TEST_F(CApiTest, CallAndChainResults) {
  std::vector<float> a(2 * 7 * 3, 0.5f), b(2 * 7 * 3, 1.0f);
  seqc_view in[2] = {view(a.data(), {2, 7, 3}), view(b.data(), {2, 7, 3})};
  seqc_tensor *out[2] = {nullptr, nullptr};
  ASSERT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_OK) << lastError();
  EXPECT_EQ(lastError(), "");
  ASSERT_EQ(seqc_tensor_rank(out[0]), 3);
  EXPECT_EQ(seqc_tensor_shape(out[0])[1], 7);
  EXPECT_EQ(seqc_tensor_numel(out[1]), 6);
  // h_t = 0.5 h_{t-1} + 1 from 0: h_7 = 2 (1 - 0.5^7).
  float last = static_cast<float *>(seqc_tensor_data(out[1]))[0];
  EXPECT_NEAR(last, 2.0f * (1.0f - 1.0f / 128), 1e-6);
  // A result is an input of the next call.
  seqc_view again[2] = {seqc_tensor_view(out[0]), seqc_tensor_view(out[0])};
  seqc_tensor *out2[2] = {nullptr, nullptr};
  ASSERT_EQ(seqc_function_call(scan, again, 2, out2, 2), SEQC_OK) << lastError();
  for (seqc_tensor *t : {out[0], out[1], out2[0], out2[1]})
    seqc_tensor_destroy(t);
}

TEST_F(CApiTest, NullPointersAreInvalidArguments) {
  seqc_engine *e = nullptr;
  seqc_module *m = nullptr;
  seqc_function *f = nullptr;
  seqc_tensor *t = nullptr;
  EXPECT_EQ(seqc_engine_create(nullptr), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "engine is NULL");
  EXPECT_EQ(seqc_compile(nullptr, "", 0, nullptr, nullptr, &m), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "engine is NULL");
  EXPECT_EQ(seqc_compile(engine, nullptr, 0, nullptr, nullptr, &m), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "source is NULL");
  EXPECT_EQ(seqc_compile(engine, kSource, 3, nullptr, nullptr, nullptr),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "module is NULL");
  EXPECT_EQ(seqc_compile_file(engine, nullptr, nullptr, &m), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_module_function(nullptr, "scan", &f), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_module_function(module, nullptr, &f), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_module_function(module, "scan", nullptr), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_function_tensor(nullptr, 0, 0, nullptr, nullptr, nullptr, nullptr),
            SEQC_ERROR_INVALID_ARGUMENT);
  seqc_tensor *out[2];
  EXPECT_EQ(seqc_function_call(nullptr, nullptr, 0, out, 2), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "f is NULL");
  EXPECT_EQ(seqc_function_call(scan, nullptr, 2, out, 2), SEQC_ERROR_INVALID_ARGUMENT);
  std::vector<float> a(6);
  seqc_view in[2] = {view(a.data(), {2, 1, 3}), view(a.data(), {2, 1, 3})};
  EXPECT_EQ(seqc_function_call(scan, in, 2, nullptr, 2), SEQC_ERROR_INVALID_ARGUMENT);
  in[1].data = nullptr;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "argument 1 (arg1) has no data");
  in[1] = view(a.data(), {2, 1, 3});
  in[1].shape = nullptr;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 1 has no shape");
  EXPECT_EQ(seqc_tensor_read_npy(nullptr, &t), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_tensor_read_npy("x.npy", nullptr), SEQC_ERROR_INVALID_ARGUMENT);
  // Queries and destroys of NULL are harmless.
  EXPECT_EQ(seqc_module_num_functions(nullptr), 0u);
  EXPECT_EQ(seqc_function_num_inputs(nullptr), 0u);
  EXPECT_EQ(seqc_tensor_data(nullptr), nullptr);
  EXPECT_STREQ(seqc_module_cache_note(nullptr), "");
  seqc_engine_destroy(e);
  seqc_module_destroy(m);
  seqc_function_destroy(f);
  seqc_tensor_destroy(t);
}

TEST_F(CApiTest, ArgumentMismatchesAreCallErrors) {
  std::vector<float> a(2 * 5 * 3), b(2 * 6 * 3);
  seqc_tensor *out[2] = {nullptr, nullptr};
  seqc_view in[2] = {view(a.data(), {2, 5, 3}), view(a.data(), {2, 5, 3})};

  EXPECT_EQ(seqc_function_call(scan, in, 1, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "@main takes 2 arguments but was given 1");
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 1), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("2 results"), std::string::npos) << lastError();

  in[1] = view(a.data(), {30});
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "argument 1 (arg1) must have rank 3 (tensor<2x?x3xf32>) but has rank 1");
  in[1] = view(a.data(), {2, 5, 3}, SEQC_I32);
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "argument 1 (arg1) must have element type f32 but has i32");
  in[1] = view(a.data(), {2, 5, 4});
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "argument 1 (arg1) must be tensor<2x?x3xf32> but dimension 2 is 4");
  in[1] = view(b.data(), {2, 6, 3});
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "dimension 1 (T) of b is 6 but a has 5");
  // What a C caller may store in the enum field (C++ may not even form it).
  in[1] = view(a.data(), {2, 5, 3});
  int bogus = 42;
  std::memcpy(&in[1].dtype, &bogus, sizeof(bogus));
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 1 has an invalid element type");
  in[1] = view(a.data(), {2, 5, 3});
  in[1].rank = -1;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 1 has an invalid rank -1");
  int64_t negative[3] = {2, -5, 3};
  in[1] = view(a.data(), {2, 5, 3});
  in[1].shape = negative;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "argument 1 (arg1) has negative size -5 in dimension 1");
}

TEST_F(CApiTest, CompileErrors) {
  seqc_module *m = nullptr;
  const char *bad = "func.func @f( {";
  EXPECT_EQ(seqc_compile(engine, bad, std::strlen(bad), "bad.mlir", nullptr, &m),
            SEQC_ERROR_COMPILE);
  EXPECT_EQ(lastError().rfind("bad.mlir:1:", 0), 0u) << lastError();
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(seqc_compile_file(engine, "/nonexistent.mlir", nullptr, &m), SEQC_ERROR_COMPILE);
  EXPECT_NE(lastError().find("cannot read '/nonexistent.mlir'"), std::string::npos);
  seqc_compile_options options;
  seqc_compile_options_init(&options);
  options.opt_level = 7;
  EXPECT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), nullptr, &options, &m),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "opt_level must be 0 to 3");
  seqc_function *f = nullptr;
  EXPECT_EQ(seqc_module_function(module, "nope", &f), SEQC_ERROR_NOT_FOUND);
  EXPECT_EQ(lastError(), "no public function @nope in the module (it has @main, @twice)");
  EXPECT_EQ(f, nullptr);
  seqc_tensor *t = nullptr;
  EXPECT_EQ(seqc_tensor_read_npy("/nonexistent.npy", &t), SEQC_ERROR_IO);
  EXPECT_NE(lastError().find("/nonexistent.npy"), std::string::npos) << lastError();
}

TEST_F(CApiTest, FunctionsOutliveTheirModule) {
  seqc_module_destroy(module);
  module = nullptr;
  float x[4] = {1, 2, 3, 4};
  seqc_view in = view(x, {4});
  seqc_tensor *out = nullptr;
  ASSERT_EQ(seqc_function_call(twice, &in, 1, &out, 1), SEQC_OK) << lastError();
  EXPECT_EQ(static_cast<float *>(seqc_tensor_data(out))[3], 8.0f);
  seqc_tensor_destroy(out);
}

TEST_F(CApiTest, ConcurrentCallsWithPerThreadErrors) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 200; ++iter) {
        float x[4] = {float(t), float(iter), 1, 2};
        const int64_t shape[1] = {4};
        seqc_view in = {SEQC_F32, x, 1, shape, nullptr};
        seqc_tensor *out = nullptr;
        if (t == 3) { // this thread only makes bad calls
          in.dtype = SEQC_I32;
          if (seqc_function_call(twice, &in, 1, &out, 1) != SEQC_ERROR_CALL ||
              lastError().find("element type") == std::string::npos)
            ++failures;
          continue;
        }
        if (seqc_function_call(twice, &in, 1, &out, 1) != SEQC_OK ||
            static_cast<float *>(seqc_tensor_data(out))[1] != 2.0f * iter ||
            !lastError().empty())
          ++failures;
        seqc_tensor_destroy(out);
      }
    });
  for (auto &th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
}

} // namespace

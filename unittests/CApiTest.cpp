//===- CApiTest.cpp - seqc's C API, and its misuse
//-------------------------===//

#include "seqc/seqc.h"

#include "TestModules.h"
#include "seqc/Weights.h"

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
  ASSERT_EQ(seqc_function_tensor(scan, 0, 1, &dtype, &rank, &shape, &name),
            SEQC_OK);
  EXPECT_EQ(dtype, SEQC_F32);
  ASSERT_EQ(rank, 3);
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[1], -1);
  EXPECT_STREQ(name, "arg1");
  ASSERT_EQ(seqc_function_tensor(twice, 0, 0, nullptr, nullptr, nullptr, &name),
            SEQC_OK);
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
  ASSERT_EQ(seqc_function_call(scan, again, 2, out2, 2), SEQC_OK)
      << lastError();
  for (seqc_tensor *t : {out[0], out[1], out2[0], out2[1]})
    seqc_tensor_destroy(t);
}

TEST_F(CApiTest, StridedViewsAreCopiedNotMisread) {
  // @twice on every other element of an 8-element buffer (stride 2): the
  // compiled code takes a row-major buffer, so the call copies the view.
  std::vector<float> buffer{0, -1, 1, -1, 2, -1, 3, -1};
  int64_t shape[1] = {4}, strides[1] = {2};
  seqc_view strided{SEQC_F32, buffer.data(), 1, shape, strides};
  seqc_tensor *out = nullptr;
  ASSERT_EQ(seqc_function_call(twice, &strided, 1, &out, 1), SEQC_OK)
      << lastError();
  auto *y = static_cast<float *>(seqc_tensor_data(out));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y[i], 2.0f * i);
  seqc_tensor_destroy(out);

  // A [2, T = 2, 3] view of a [3, 2, 2] buffer (its transpose): strides
  // (1, 6, 2) with no unit-stride dimension.
  std::vector<float> a(12, 1.0f), b(12);
  for (int i = 0; i < 12; ++i)
    b[i] = static_cast<float>(i);
  int64_t shape3[3] = {2, 2, 3}, transposed[3] = {1, 6, 2};
  seqc_view in[2] = {view(a.data(), {2, 2, 3}),
                     seqc_view{SEQC_F32, b.data(), 3, shape3, transposed}};
  seqc_tensor *outs[2] = {nullptr, nullptr};
  ASSERT_EQ(seqc_function_call(scan, in, 2, outs, 2), SEQC_OK) << lastError();
  auto *last = static_cast<float *>(seqc_tensor_data(outs[1]));
  // last[n, c] = b[n, 0, c] + b[n, 1, c] (a = 1), b[n, t, c] at n + 6t + 2c.
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(last[n * 3 + c], b[n + 2 * c] + b[n + 6 + 2 * c]);
  seqc_tensor_destroy(outs[0]);
  seqc_tensor_destroy(outs[1]);
}

TEST_F(CApiTest, NullPointersAreInvalidArguments) {
  seqc_engine *e = nullptr;
  seqc_module *m = nullptr;
  seqc_function *f = nullptr;
  seqc_tensor *t = nullptr;
  EXPECT_EQ(seqc_engine_create(nullptr), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "engine is NULL");
  EXPECT_EQ(seqc_compile(nullptr, "", 0, nullptr, nullptr, &m),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "engine is NULL");
  EXPECT_EQ(seqc_compile(engine, nullptr, 0, nullptr, nullptr, &m),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "source is NULL");
  EXPECT_EQ(seqc_compile(engine, kSource, 3, nullptr, nullptr, nullptr),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "module is NULL");
  EXPECT_EQ(seqc_compile_file(engine, nullptr, nullptr, &m),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_module_function(nullptr, "scan", &f),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_module_function(module, nullptr, &f),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_module_function(module, "scan", nullptr),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(
      seqc_function_tensor(nullptr, 0, 0, nullptr, nullptr, nullptr, nullptr),
      SEQC_ERROR_INVALID_ARGUMENT);
  seqc_tensor *out[2];
  EXPECT_EQ(seqc_function_call(nullptr, nullptr, 0, out, 2),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "f is NULL");
  EXPECT_EQ(seqc_function_call(scan, nullptr, 2, out, 2),
            SEQC_ERROR_INVALID_ARGUMENT);
  std::vector<float> a(6);
  seqc_view in[2] = {view(a.data(), {2, 1, 3}), view(a.data(), {2, 1, 3})};
  EXPECT_EQ(seqc_function_call(scan, in, 2, nullptr, 2),
            SEQC_ERROR_INVALID_ARGUMENT);
  in[1].data = nullptr;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(), "argument 1 (arg1) has no data");
  in[1] = view(a.data(), {2, 1, 3});
  in[1].shape = nullptr;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 1 has no shape");
  EXPECT_EQ(seqc_tensor_read_npy(nullptr, &t), SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seqc_tensor_read_npy("x.npy", nullptr),
            SEQC_ERROR_INVALID_ARGUMENT);
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
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 1),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("2 results"), std::string::npos) << lastError();

  in[1] = view(a.data(), {30});
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(
      lastError(),
      "argument 1 (arg1) must have rank 3 (tensor<2x?x3xf32>) but has rank 1");
  in[1] = view(a.data(), {2, 5, 3}, SEQC_I32);
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(),
            "argument 1 (arg1) must have element type f32 but has i32");
  in[1] = view(a.data(), {2, 5, 4});
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(),
            "argument 1 (arg1) must be tensor<2x?x3xf32> but dimension 2 is 4");
  in[1] = view(b.data(), {2, 6, 3});
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(
      lastError(),
      "seq.linear_scan at test.mlir:3:12: dimension 1 (T) of b is 6 but a "
      "has 5");
  // What a C caller may store in the enum field (C++ may not even form it).
  in[1] = view(a.data(), {2, 5, 3});
  int bogus = 42;
  std::memcpy(&in[1].dtype, &bogus, sizeof(bogus));
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 1 has an invalid element type");
  in[1] = view(a.data(), {2, 5, 3});
  in[1].rank = -1;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 1 has an invalid rank -1");
  int64_t negative[3] = {2, -5, 3};
  in[1] = view(a.data(), {2, 5, 3});
  in[1].shape = negative;
  EXPECT_EQ(seqc_function_call(scan, in, 2, out, 2), SEQC_ERROR_CALL);
  EXPECT_EQ(lastError(),
            "argument 1 (arg1) has negative size -5 in dimension 1");
}

TEST_F(CApiTest, CompileErrors) {
  seqc_module *m = nullptr;
  const char *bad = "func.func @f( {";
  EXPECT_EQ(
      seqc_compile(engine, bad, std::strlen(bad), "bad.mlir", nullptr, &m),
      SEQC_ERROR_COMPILE);
  EXPECT_EQ(lastError().rfind("bad.mlir:1:", 0), 0u) << lastError();
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(seqc_compile_file(engine, "/nonexistent.mlir", nullptr, &m),
            SEQC_ERROR_COMPILE);
  EXPECT_NE(lastError().find("cannot read '/nonexistent.mlir'"),
            std::string::npos);
  seqc_compile_options options;
  seqc_compile_options_init(&options);
  options.opt_level = 7;
  EXPECT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), nullptr,
                         &options, &m),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "opt_level must be 0 to 3");
  seqc_compile_options_init(&options);
  options.bf16_products = static_cast<seqc_bf16_products>(5);
  EXPECT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), nullptr,
                         &options, &m),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "unknown bf16_products 5");
  // The emulated AMX kernels compile on any host.
  options.bf16_products = SEQC_BF16_AMX_EMULATED;
  ASSERT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), nullptr,
                         &options, &m),
            SEQC_OK)
      << lastError();
  seqc_module_destroy(m);
  m = nullptr;
  seqc_function *f = nullptr;
  EXPECT_EQ(seqc_module_function(module, "nope", &f), SEQC_ERROR_NOT_FOUND);
  EXPECT_EQ(lastError(),
            "no public function @nope in the module (it has @main, @twice)");
  EXPECT_EQ(f, nullptr);
  seqc_tensor *t = nullptr;
  EXPECT_EQ(seqc_tensor_read_npy("/nonexistent.npy", &t), SEQC_ERROR_IO);
  EXPECT_NE(lastError().find("/nonexistent.npy"), std::string::npos)
      << lastError();
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

namespace {

TEST_F(CApiTest, ProfiledCallsReportTheirRegions) {
  seqc_compile_options options;
  seqc_compile_options_init(&options);
  EXPECT_EQ(options.fuse, 1);
  EXPECT_EQ(options.profile, SEQC_PROFILE_NONE);
  options.profile = SEQC_PROFILE_OPS;
  options.fuse = 0;
  seqc_module *profiled = nullptr;
  ASSERT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), "test.mlir",
                         &options, &profiled),
            SEQC_OK)
      << lastError();
  seqc_function *fn = nullptr;
  ASSERT_EQ(seqc_module_function(profiled, "main", &fn), SEQC_OK);
  size_t regions = seqc_function_num_regions(fn);
  ASSERT_GE(regions, 1u);
  EXPECT_NE(
      std::string(seqc_function_region_name(fn, 0)).find("seq.linear_scan"),
      std::string::npos)
      << seqc_function_region_name(fn, 0);
  EXPECT_EQ(seqc_function_region_name(fn, regions), nullptr);
  EXPECT_EQ(seqc_function_num_regions(scan), 0u);

  std::vector<float> a(2 * 5 * 3, 0.5f), b(2 * 5 * 3, 1.0f);
  seqc_view in[2] = {view(a.data(), {2, 5, 3}), view(b.data(), {2, 5, 3})};
  seqc_tensor *out[2] = {nullptr, nullptr};
  std::vector<double> seconds(regions, -1);
  std::vector<int64_t> calls(regions, -1);
  seqc_call_stats stats{0, 0, seconds.data(), calls.data()};
  ASSERT_EQ(seqc_function_call_stats(fn, in, 2, out, 2, &stats), SEQC_OK)
      << lastError();
  EXPECT_GT(stats.allocated_bytes, 0u);
  EXPECT_GT(stats.peak_bytes, 0u);
  EXPECT_EQ(calls[0], 1);
  EXPECT_GE(seconds[0], 0.0);
  seqc_tensor_destroy(out[0]);
  seqc_tensor_destroy(out[1]);

  // What a C caller may store (C++ may not hold 7 in the enum).
  int bogus = 7;
  std::memcpy(&options.profile, &bogus, sizeof(bogus));
  seqc_module *bad = nullptr;
  EXPECT_EQ(seqc_compile(engine, kSource, std::strlen(kSource), nullptr,
                         &options, &bad),
            SEQC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "unknown profile 7");
  seqc_function_destroy(fn);
  seqc_module_destroy(profiled);
}

/// The runtime's C API reads weights and .npy files by itself (what an
/// ahead-of-time host links).
// A scan whose coefficient `a` is bound when compiling: the function then
// takes b alone, and h_t = a_t h_{t-1} + b_t uses the file's a.
TEST(CApi, BoundWeightsBecomeConstants) {
  const char *source = R"(
func.func @main(%a: tensor<1x4x2xf32> {seq.name = "decay"},
                %b: tensor<1x4x2xf32>) -> tensor<1x2xf32> {
  %h, %last = seq.linear_scan %a, %b
      : (tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> (tensor<1x4x2xf32>, tensor<1x2xf32>)
  return %last : tensor<1x2xf32>
}
)";
  std::string path = ::testing::TempDir() + "/capi-bound.safetensors";
  seqc::Expected<seqc::Tensor> decay =
      seqc::Tensor::zeros(seqc::DType::F32, {1, 4, 2});
  ASSERT_TRUE(decay);
  for (int i = 0; i < 8; ++i)
    decay->dataAs<float>()[i] = 0.5f;
  ASSERT_TRUE(seqc::weights::writeSafetensors(path, {{"decay", *decay}}));
  seqc_weights *weights = nullptr;
  ASSERT_EQ(seqc_weights_read(path.c_str(), &weights), SEQC_OK) << lastError();

  seqc_engine *engine = nullptr;
  ASSERT_EQ(seqc_engine_create(&engine), SEQC_OK);
  seqc_compile_options options;
  seqc_compile_options_init(&options);
  EXPECT_EQ(options.bound_weights, nullptr);
  options.bound_weights = weights;
  seqc_module *module = nullptr;
  ASSERT_EQ(seqc_compile(engine, source, std::strlen(source), "bound.mlir",
                         &options, &module),
            SEQC_OK)
      << lastError();
  // The file need not outlive the compile.
  seqc_weights_destroy(weights);
  seqc_function *fn = nullptr;
  ASSERT_EQ(seqc_module_function(module, "main", &fn), SEQC_OK);
  ASSERT_EQ(seqc_function_num_inputs(fn), 1u);
  std::vector<float> b(8, 1.0f);
  int64_t shape[3] = {1, 4, 2};
  seqc_view in{SEQC_F32, b.data(), 3, shape, nullptr};
  seqc_tensor *out = nullptr;
  ASSERT_EQ(seqc_function_call(fn, &in, 1, &out, 1), SEQC_OK) << lastError();
  // 4 steps of h = 0.5 h + 1 from 0: 2 (1 - 0.5^4).
  EXPECT_FLOAT_EQ(static_cast<float *>(seqc_tensor_data(out))[1], 1.875f);
  seqc_tensor_destroy(out);
  seqc_function_destroy(fn);
  seqc_module_destroy(module);

  // A weight of another shape is the compile's error.
  seqc::Expected<seqc::Tensor> wrong =
      seqc::Tensor::zeros(seqc::DType::F32, {1, 5, 2});
  ASSERT_TRUE(wrong);
  ASSERT_TRUE(seqc::weights::writeSafetensors(path, {{"decay", *wrong}}));
  ASSERT_EQ(seqc_weights_read(path.c_str(), &weights), SEQC_OK);
  options.bound_weights = weights;
  EXPECT_EQ(seqc_compile(engine, source, std::strlen(source), "bound.mlir",
                         &options, &module),
            SEQC_ERROR_COMPILE);
  EXPECT_EQ(lastError(), "bound weight 'decay' is f32 [1, 5, 2] but argument "
                         "0 of @main is tensor<1x4x2xf32>");
  seqc_weights_destroy(weights);
  seqc_engine_destroy(engine);
}

TEST(CRuntime, WeightsByNameAndNpyFiles) {
  std::string dir = ::testing::TempDir();
  std::string safetensors = dir + "/capi-weights.safetensors";
  seqc::Expected<seqc::Tensor> w =
      seqc::Tensor::zeros(seqc::DType::F32, {2, 3});
  seqc::Expected<seqc::Tensor> b = seqc::Tensor::zeros(seqc::DType::BF16, {3});
  ASSERT_TRUE(w && b);
  for (int i = 0; i < 6; ++i)
    w->dataAs<float>()[i] = float(i);
  ASSERT_TRUE(seqc::weights::writeSafetensors(
      safetensors, {{"proj.w", *w}, {"proj.b", *b}}));

  seqc_weights *weights = nullptr;
  ASSERT_EQ(seqc_weights_read(safetensors.c_str(), &weights), SEQC_OK)
      << lastError();
  ASSERT_EQ(seqc_weights_count(weights), 2u);
  EXPECT_EQ(seqc_weights_name(weights, 2), nullptr);
  seqc_view v;
  ASSERT_EQ(seqc_weights_find(weights, "proj.w", &v), SEQC_OK);
  EXPECT_EQ(v.dtype, SEQC_F32);
  ASSERT_EQ(v.rank, 2);
  EXPECT_EQ(v.shape[1], 3);
  EXPECT_EQ(static_cast<float *>(v.data)[5], 5.0f);
  ASSERT_EQ(seqc_weights_find(weights, "proj.b", &v), SEQC_OK);
  EXPECT_EQ(v.dtype, SEQC_BF16);
  EXPECT_EQ(seqc_weights_find(weights, "proj.c", &v), SEQC_ERROR_NOT_FOUND);
  EXPECT_EQ(lastError(), "'" + safetensors + "' has no tensor named 'proj.c'");
  EXPECT_EQ(seqc_weights_view(weights, 9, &v), SEQC_ERROR_INVALID_ARGUMENT);

  // A strided view (every other column) written and read back.
  std::string npy = dir + "/capi-strided.npy";
  ASSERT_EQ(seqc_weights_find(weights, "proj.w", &v), SEQC_OK);
  int64_t shape[2] = {2, 2}, strides[2] = {3, 2};
  seqc_view strided{SEQC_F32, v.data, 2, shape, strides};
  ASSERT_EQ(seqc_tensor_write_npy(npy.c_str(), &strided), SEQC_OK)
      << lastError();
  seqc_tensor *back = nullptr;
  ASSERT_EQ(seqc_tensor_read_npy(npy.c_str(), &back), SEQC_OK);
  auto *data = static_cast<float *>(seqc_tensor_data(back));
  EXPECT_EQ(data[0], 0.0f);
  EXPECT_EQ(data[1], 2.0f);
  EXPECT_EQ(data[2], 3.0f);
  EXPECT_EQ(data[3], 5.0f);
  seqc_tensor_destroy(back);

  // A .npy is not a weights file, and says so.
  seqc_weights *wrong = nullptr;
  EXPECT_EQ(seqc_weights_read(npy.c_str(), &wrong), SEQC_ERROR_IO);
  EXPECT_NE(lastError().find("is a .npy file (one unnamed array)"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(seqc_weights_read(nullptr, &wrong), SEQC_ERROR_INVALID_ARGUMENT);
  seqc_weights_destroy(weights);
  seqc_weights_destroy(nullptr);
}

} // namespace

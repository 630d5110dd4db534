//===- EngineTest.cpp - the JIT engine's C++ API --------------------------===//

#include "seqc/Engine.h"

#include "TestModules.h"

#include <gtest/gtest.h>

#include <thread>

using namespace seqc;

namespace {

const char *kScan = test::kScanModule;

std::shared_ptr<CompiledModule> compileOrDie(const char *src) {
  Engine engine;
  auto m = engine.compile(src, {});
  EXPECT_TRUE(m) << m.message();
  return m ? *m : nullptr;
}

TEST(Engine, SignaturesAndLookup) {
  auto m = compileOrDie(kScan);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->functionNames(), (std::vector<std::string>{"main", "twice"}));
  Expected<Function> fn = m->function("main");
  ASSERT_TRUE(fn);
  EXPECT_EQ(fn->signature().inputs[0].typeString(), "tensor<2x?x3xf32>");
  EXPECT_EQ(fn->signature().outputs[1].typeString(), "tensor<2x3xf32>");
  Expected<Function> twice = m->function("twice");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->signature().inputs[0].name, "x");
  Expected<Function> missing = m->function("hidden");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.message(),
            "no public function @hidden in the module (it has @main, @twice)");
}

TEST(Engine, CallsWithDynamicShapes) {
  auto m = compileOrDie(kScan);
  Expected<Function> fn = m->function("main");
  ASSERT_TRUE(fn);
  Expected<Tensor> a = Tensor::zeros(DType::F32, {2, 5, 3});
  Expected<Tensor> b = Tensor::zeros(DType::F32, {2, 5, 3});
  for (int i = 0; i < 30; ++i) {
    a->dataAs<float>()[i] = 1.0f;
    b->dataAs<float>()[i] = 1.0f;
  }
  Expected<std::vector<Tensor>> r = fn->call({a->view(), b->view()});
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{2, 5, 3}));
  // h_t = h_{t-1} + 1: the last step is 5.
  EXPECT_EQ((*r)[1].dataAs<float>()[0], 5.0f);
  EXPECT_EQ((*r)[0].dataAs<float>()[3 * 2], 3.0f);
}

TEST(Engine, ArgumentErrors) {
  auto m = compileOrDie(kScan);
  Function fn = *m->function("main");
  Expected<Tensor> ok = Tensor::zeros(DType::F32, {2, 5, 3});
  Expected<Tensor> other = Tensor::zeros(DType::F32, {2, 6, 3});
  Expected<Tensor> ints = Tensor::zeros(DType::I32, {2, 5, 3});
  Expected<Tensor> wrong = Tensor::zeros(DType::F32, {3, 5, 3});

  auto r = fn.call({ok->view()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "@main takes 2 arguments but was given 1");
  r = fn.call({ok->view(), ints->view()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(),
            "argument 1 (arg1) must have element type f32 but has i32");
  r = fn.call({wrong->view(), ok->view()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(),
            "argument 0 (arg0) must be tensor<2x?x3xf32> but dimension 0 is 3");
  // The dynamic T of a and b disagree: caught by the run-time check, which
  // names the op and its source location.
  r = fn.call({ok->view(), other->view()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(),
            "seq.linear_scan at <input>:3:12: dimension 1 (T) of b is 6 but a "
            "has 5");
  TensorView null = ok->view();
  null.data = nullptr;
  r = fn.call({null, ok->view()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "argument 0 (arg0) has no data");
}

TEST(Engine, CompileErrorsAreValues) {
  Engine engine;
  auto bad = engine.compile("func.func @f( {", {}, "bad.mlir");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message().rfind("bad.mlir:1:", 0), 0u) << bad.message();
  auto invalid = engine.compile(R"(
    func.func @f(%a: tensor<2x8xf32>) -> (tensor<2x7xf32>, tensor<2xf32>) {
      %h, %l = seq.linear_scan %a, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x7xf32>, tensor<2xf32>)
      return %h, %l : tensor<2x7xf32>, tensor<2xf32>
    })",
                                {}, "invalid.mlir");
  ASSERT_FALSE(invalid);
  EXPECT_NE(invalid.message().find("dimension 1 (T) of h is 7 but a has 8"),
            std::string::npos)
      << invalid.message();
  auto missing = engine.compileFile("/nonexistent.mlir", {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("cannot read '/nonexistent.mlir'"),
            std::string::npos);
}

// A bound weight is checked before anything reads its bytes (the cache
// key hashes them): a strided view of a smaller buffer, a negative size or
// a name given twice is an error, not a read past the buffer.
TEST(Engine, BadBoundWeightsAreErrors) {
  Engine engine;
  std::vector<float> data(8, 1.0f);
  auto compileWith = [&](std::vector<BoundWeight> bound) {
    CompileOptions options;
    options.boundWeights = std::move(bound);
    return engine.compile(kScan, options, "bound.mlir");
  };
  // Every other element of 8: 4 x 4 would read 16 elements from 8.
  TensorView strided{DType::F32, data.data(), {4, 4}, {2, 0}};
  auto r = compileWith({{"w", strided}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(),
            "bound weight 'w' is not contiguous (row-major data is bound)");
  TensorView negative{DType::F32, data.data(), {-1, 8}, {}};
  r = compileWith({{"w", negative}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "bound weight 'w' has a negative dimension");
  TensorView row{DType::F32, data.data(), {8}, {}};
  r = compileWith({{"w", row}, {"w", row}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "bound weight 'w' is given twice");
  r = compileWith({{"w", row}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "bound weight 'w' names no argument of a public "
                         "function (an argument's name is its seq.name)");
}

TEST(Engine, ConcurrentCalls) {
  auto m = compileOrDie(kScan);
  Function fn = *m->function("twice");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Expected<Tensor> x = Tensor::zeros(DType::F32, {4});
      for (int iter = 0; iter < 200; ++iter) {
        for (int i = 0; i < 4; ++i)
          x->dataAs<float>()[i] = static_cast<float>(t * 1000 + iter + i);
        auto r = fn.call({x->view()});
        if (!r || (*r)[0].dataAs<float>()[3] != 2.0f * (t * 1000 + iter + 3))
          ++failures;
      }
    });
  for (auto &th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
}

} // namespace

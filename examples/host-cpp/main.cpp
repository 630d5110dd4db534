// Streaming decode with seqc's C++ API: a host that compiles a Mamba-2 layer
// once, then feeds a 32-token sequence one token at a time, carrying the
// conv and SSM states between calls, and checks that the outputs and final
// states equal one whole-sequence call.
#include "seqc/Engine.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace seqc;

static Tensor random(DType dtype, std::vector<int64_t> shape, uint64_t seed,
                     float scale) {
  Tensor t = randomTensor(dtype, shape, seed).take();
  for (int64_t i = 0; i < t.numel(); ++i)
    t.dataAs<float>()[i] *= scale;
  return t;
}

static int check(const char *what, const float *got, const float *want,
                 int64_t n) {
  double err = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    err = std::fmax(err, std::fabs(got[i] - want[i]));
    scale = std::fmax(scale, std::fabs(want[i]));
  }
  bool ok = err <= 1e-4 * scale;
  std::printf("%-24s max |step - whole| = %.3g  %s\n", what, err,
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

int main() {
  Engine engine;
  auto module = engine.compileFile(LAYER_MLIR, {});
  if (!module) {
    std::fprintf(stderr, "error: %s\n", module.message().c_str());
    return 1;
  }
  auto prefill = (*module)->function("prefill");
  auto step = (*module)->function("step");
  if (!prefill || !step) {
    std::fprintf(stderr, "error: %s\n",
                 (!prefill ? prefill : step).message().c_str());
    return 1;
  }

  // Weights (scaled so activations stay O(1)) and a 32-token prompt.
  std::vector<Tensor> weights = {random(DType::F32, {32, 164}, 1, 0.2f),
                                 random(DType::F32, {96, 4}, 2, 0.5f),
                                 random(DType::F32, {4}, 3, 1.0f),
                                 random(DType::F32, {4}, 4, 1.0f),
                                 random(DType::F32, {4}, 5, 1.0f),
                                 random(DType::F32, {64, 32}, 6, 0.2f)};
  for (int64_t i = 0; i < 4; ++i) // A < 0: decaying states
    weights[3].dataAs<float>()[i] = -std::exp(weights[3].dataAs<float>()[i]);
  Tensor prompt = random(DType::F32, {1, 32, 32}, 7, 1.0f);
  Tensor conv0 = Tensor::zeros(DType::F32, {1, 96, 3}).take();
  Tensor ssm0 = Tensor::zeros(DType::F32, {1, 4, 16, 16}).take();

  std::vector<TensorView> args = {prompt.view(), conv0.view(), ssm0.view()};
  for (const Tensor &w : weights)
    args.push_back(w.view());
  auto whole = prefill->call(args);
  if (!whole) {
    std::fprintf(stderr, "error: %s\n", whole.message().c_str());
    return 1;
  }

  // Token by token, the states of one call feeding the next.
  Tensor conv = conv0, ssm = ssm0;
  std::vector<float> streamed;
  for (int64_t t = 0; t < 32; ++t) {
    Tensor token = Tensor::zeros(DType::F32, {1, 1, 32}).take();
    std::memcpy(token.data(), prompt.dataAs<float>() + t * 32,
                32 * sizeof(float));
    std::vector<TensorView> stepArgs = {token.view(), conv.view(), ssm.view()};
    for (const Tensor &w : weights)
      stepArgs.push_back(w.view());
    auto out = step->call(stepArgs);
    if (!out) {
      std::fprintf(stderr, "error: %s\n", out.message().c_str());
      return 1;
    }
    streamed.insert(streamed.end(), (*out)[0].dataAs<float>(),
                    (*out)[0].dataAs<float>() + 32);
    conv = (*out)[1];
    ssm = (*out)[2];
  }

  // Equal outputs must also be real ones: finite and not all zero.
  double norm = 0;
  for (float x : streamed)
    norm += double(x) * x;
  std::printf("output norm %.4f\n", std::sqrt(norm));
  int failures = !(norm > 0 && std::isfinite(norm));
  failures +=
      check("outputs", streamed.data(), (*whole)[0].dataAs<float>(), 32 * 32);
  failures += check("conv state", conv.dataAs<float>(),
                    (*whole)[1].dataAs<float>(), conv.numel());
  failures += check("ssm state", ssm.dataAs<float>(),
                    (*whole)[2].dataAs<float>(), ssm.numel());
  return failures ? 1 : 0;
}

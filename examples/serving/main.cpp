// Continuous batching with seqc's C++ API: a server's two phases for a
// Mamba-2 layer (layer.mlir).
//
//   prefill  the prompts of several new requests, of different lengths, in
//            ONE call: packed back to back along T with their offsets `cu`
//            (B = 1, no padding). It returns each request's conv and SSM
//            states as one row of a batched state.
//   decode   every running request advances by one token per call
//            (B = S, T = 1), its states carried from call to call.
//
// A server would also drop the rows of finished requests from the batch
// and append the prefilled rows of new ones between steps; the functions'
// dynamic batch and sequence sizes allow that without recompiling.
//
// Packing must not change any result, so the program then serves every
// request alone (a B = 1 prefill and B = 1 steps, and once more as one call
// over its prompt and decoded tokens) and checks that its outputs and final
// states agree with the batched ones. Exits 1 on a mismatch.
#include "seqc/Engine.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace seqc;

namespace {

constexpr int64_t kModel = 32;       // d_model: the layer's input and output
constexpr int64_t kConvRow = 96 * 3; // one sequence's conv state (xBC x W-1)
constexpr int64_t kSsmRow = 4 * 16 * 16; // one sequence's SSM state (H x P x N)
constexpr int64_t kDecodeSteps = 8;

// The prompt lengths of the requests that arrive together: a single token,
// whole chunks of the SSD lowering (64) and lengths that end inside a chunk.
const std::vector<int64_t> kLengths = {37, 1, 64, 13, 100};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(1);
}

Tensor random(std::vector<int64_t> shape, uint64_t seed, float scale) {
  Tensor t = randomTensor(DType::F32, shape, seed).take();
  for (int64_t i = 0; i < t.numel(); ++i)
    t.dataAs<float>()[i] *= scale;
  return t;
}

Tensor zeros(DType dtype, std::vector<int64_t> shape) {
  return Tensor::zeros(dtype, shape).take();
}

// The `n` floats from row `r` on of a row-major tensor whose first dimension
// indexes sequences (a state) or steps (T x d_model outputs).
std::vector<float> rows(const Tensor &t, int64_t r, int64_t n, int64_t width) {
  const float *p = t.dataAs<float>() + r * width;
  return std::vector<float>(p, p + n * width);
}

void append(std::vector<float> &to, const std::vector<float> &from) {
  to.insert(to.end(), from.begin(), from.end());
}

// One request: its prompt, the inputs of its decode steps, and what the
// batched calls returned for it.
struct Request {
  int64_t length = 0;
  Tensor prompt;              // 1 x length x d_model
  std::vector<Tensor> tokens; // kDecodeSteps of 1 x 1 x d_model
  std::vector<float> outputs; // (length + kDecodeSteps) x d_model
  std::vector<float> conv, ssm;
};

// The largest |got - want|; infinite when the sizes differ.
double maxError(const std::vector<float> &got, const std::vector<float> &want) {
  if (got.size() != want.size())
    return INFINITY;
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i)
    err = std::fmax(err, std::fabs(got[i] - want[i]));
  return err;
}

// Agreement to 1e-4 relative, with both references: max |packed - ref| at
// most 1e-4 of the largest |ref| (a bound per element would fail on values
// near 0, which round differently along different paths).
bool check(int64_t seq, const char *what, const std::vector<float> &packed,
           const std::vector<float> &alone, const std::vector<float> &whole) {
  double scale = 0;
  for (float x : alone)
    scale = std::fmax(scale, std::fabs(x));
  double errAlone = maxError(packed, alone), errWhole = maxError(packed, whole);
  // scale > 0: all zeros would mean nothing was computed.
  bool ok = scale > 0 && errAlone <= 1e-4 * scale && errWhole <= 1e-4 * scale;
  std::printf("sequence %lld %-10s max|packed - alone| = %-9.3g "
              "max|packed - whole| = %-9.3g (max|alone| %.3g)  %s\n",
              static_cast<long long>(seq), what, errAlone, errWhole, scale,
              ok ? "ok" : "MISMATCH");
  return ok;
}

// The layer's three functions and its weights (every function of
// layer.mlir takes them last).
struct Layer {
  Function prefillPacked, step, prefill;
  std::vector<Tensor> weights;

  // Calls `fn` on `args` followed by the weights.
  std::vector<Tensor> call(const Function &fn,
                           std::vector<TensorView> args) const {
    for (const Tensor &w : weights)
      args.push_back(w.view());
    auto results = fn.call(args);
    if (!results)
      fail(results.message());
    return results.take();
  }
};

Function lookUp(const CompiledModule &module, const char *name) {
  auto fn = module.function(name);
  if (!fn)
    fail(fn.message());
  return fn.take();
}

Layer loadLayer(Engine &engine) {
  auto module = engine.compileFile(LAYER_MLIR, {});
  if (!module)
    fail(module.message());
  Layer layer{lookUp(**module, "prefill_packed"),
              lookUp(**module, "step"),
              lookUp(**module, "prefill"),
              // Weights as in examples/host-cpp (scaled so activations stay
              // O(1)).
              {random({32, 164}, 1, 0.2f), random({96, 4}, 2, 0.5f),
               random({4}, 3, 1.0f), random({4}, 4, 1.0f), random({4}, 5, 1.0f),
               random({64, 32}, 6, 0.2f)}};
  for (int64_t i = 0; i < 4; ++i) // A < 0: decaying states
    layer.weights[3].dataAs<float>()[i] =
        -std::exp(layer.weights[3].dataAs<float>()[i]);
  return layer;
}

// The requests. In a real server each decode input is the embedding of the
// token sampled from the previous output; this layer stands alone, so they
// are fixed random vectors, the same for the batched and the alone runs.
std::vector<Request> makeRequests() {
  std::vector<Request> requests(kLengths.size());
  for (size_t s = 0; s < requests.size(); ++s) {
    Request &r = requests[s];
    r.length = kLengths[s];
    r.prompt = random({1, r.length, kModel}, 100 + s, 1.0f);
    for (int64_t k = 0; k < kDecodeSteps; ++k)
      r.tokens.push_back(random({1, 1, kModel}, 1000 + 100 * s + k, 1.0f));
  }
  return requests;
}

// The batch's conv and SSM states, row s sequence s's.
struct BatchStates {
  Tensor conv, ssm;
};

// Prefill: the prompts back to back in one 1 x T x d_model tensor; cu[s] ..
// cu[s+1]-1 are sequence s's steps. New requests start from zero states,
// one row each. Returns the states, which are already the decode batch's.
BatchStates prefillBatch(const Layer &layer, std::vector<Request> &requests) {
  const int64_t S = static_cast<int64_t>(requests.size());
  Tensor cu = zeros(DType::I32, {S + 1});
  int32_t *offsets = cu.dataAs<int32_t>();
  for (int64_t s = 0; s < S; ++s)
    offsets[s + 1] = offsets[s] + static_cast<int32_t>(requests[s].length);
  const int64_t T = offsets[S];
  Tensor packed = zeros(DType::F32, {1, T, kModel});
  for (int64_t s = 0; s < S; ++s)
    std::memcpy(packed.dataAs<float>() + offsets[s] * kModel,
                requests[s].prompt.data(), requests[s].prompt.byteSize());
  Tensor conv0 = zeros(DType::F32, {S, 96, 3});
  Tensor ssm0 = zeros(DType::F32, {S, 4, 16, 16});
  std::vector<Tensor> out =
      layer.call(layer.prefillPacked,
                 {packed.view(), cu.view(), conv0.view(), ssm0.view()});
  for (int64_t s = 0; s < S; ++s)
    requests[s].outputs = rows(out[0], offsets[s], requests[s].length, kModel);
  std::printf("prefill: %lld sequences, %lld tokens (lengths",
              static_cast<long long>(S), static_cast<long long>(T));
  for (const Request &r : requests)
    std::printf(" %lld", static_cast<long long>(r.length));
  std::printf(") in one packed call\n");
  return {out[1], out[2]};
}

// Decode: every request advances by one token per call, each step's states
// going into the next; the last ones become each request's final states.
void decode(const Layer &layer, std::vector<Request> &requests,
            BatchStates states) {
  const int64_t S = static_cast<int64_t>(requests.size());
  for (int64_t k = 0; k < kDecodeSteps; ++k) {
    Tensor batch = zeros(DType::F32, {S, 1, kModel});
    for (int64_t s = 0; s < S; ++s)
      std::memcpy(batch.dataAs<float>() + s * kModel,
                  requests[s].tokens[k].data(), kModel * sizeof(float));
    std::vector<Tensor> next = layer.call(
        layer.step, {batch.view(), states.conv.view(), states.ssm.view()});
    for (int64_t s = 0; s < S; ++s)
      append(requests[s].outputs, rows(next[0], s, 1, kModel));
    states = {next[1], next[2]};
  }
  for (int64_t s = 0; s < S; ++s) {
    requests[s].conv = rows(states.conv, s, 1, kConvRow);
    requests[s].ssm = rows(states.ssm, s, 1, kSsmRow);
  }
  std::printf("decode: %lld steps of %lld sequences (B = %lld, T = 1)\n",
              static_cast<long long>(kDecodeSteps), static_cast<long long>(S),
              static_cast<long long>(S));
}

// Request `s` served alone (no segments, B = 1: a prefill, then steps) and
// once more as one call over its prompt and decoded tokens (decoding must
// continue a sequence exactly as a longer prefill would), both against what
// the batched calls returned for it.
bool checkAlone(const Layer &layer, const Request &r, int64_t s) {
  Tensor conv = zeros(DType::F32, {1, 96, 3});
  Tensor ssm = zeros(DType::F32, {1, 4, 16, 16});
  std::vector<Tensor> alone =
      layer.call(layer.prefill, {r.prompt.view(), conv.view(), ssm.view()});
  std::vector<float> outputs = rows(alone[0], 0, r.length, kModel);
  conv = alone[1];
  ssm = alone[2];
  for (const Tensor &token : r.tokens) {
    std::vector<Tensor> next =
        layer.call(layer.step, {token.view(), conv.view(), ssm.view()});
    append(outputs, rows(next[0], 0, 1, kModel));
    conv = next[1];
    ssm = next[2];
  }
  Tensor whole = zeros(DType::F32, {1, r.length + kDecodeSteps, kModel});
  std::memcpy(whole.data(), r.prompt.data(), r.prompt.byteSize());
  for (int64_t k = 0; k < kDecodeSteps; ++k)
    std::memcpy(whole.dataAs<float>() + (r.length + k) * kModel,
                r.tokens[k].data(), kModel * sizeof(float));
  Tensor conv1 = zeros(DType::F32, {1, 96, 3});
  Tensor ssm1 = zeros(DType::F32, {1, 4, 16, 16});
  std::vector<Tensor> once =
      layer.call(layer.prefill, {whole.view(), conv1.view(), ssm1.view()});
  bool ok = check(s, "outputs", r.outputs, outputs,
                  rows(once[0], 0, r.length + kDecodeSteps, kModel));
  ok &= check(s, "conv state", r.conv, rows(conv, 0, 1, kConvRow),
              rows(once[1], 0, 1, kConvRow));
  ok &= check(s, "ssm state", r.ssm, rows(ssm, 0, 1, kSsmRow),
              rows(once[2], 0, 1, kSsmRow));
  return ok;
}

} // namespace

int main() {
  Engine engine;
  Layer layer = loadLayer(engine);
  std::vector<Request> requests = makeRequests();
  decode(layer, requests, prefillBatch(layer, requests));

  // Equal outputs must also be real ones: finite and not all zero.
  double norm = 0;
  for (const Request &r : requests)
    for (float x : r.outputs)
      norm += double(x) * x;
  std::printf("output norm %.4f\n", std::sqrt(norm));
  bool ok = norm > 0 && std::isfinite(norm);
  for (size_t s = 0; s < requests.size(); ++s)
    ok &= checkAlone(layer, requests[s], static_cast<int64_t>(s));
  std::printf("%s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}

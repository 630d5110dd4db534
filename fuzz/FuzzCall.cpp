//===- FuzzCall.cpp - the JIT call path with hostile arguments
//-------------===//
//
// A module of seq ops with dynamic shapes is compiled once; each input picks
// a function and describes its arguments (element type, rank, sizes, data
// bytes), so the signature checks, the run-time shape checks of the kernels,
// the expert-index checks and the memory limit all see mutated calls. The
// module is also compiled for the emulated CUDA target (the GPU kernels run
// on the host), and the first byte's top bit picks which one runs. Every
// call must return a result or an error; none may crash.
//
//===----------------------------------------------------------------------===//

#include "seqc/Engine.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace seqc;

static const char *kModule = R"(
func.func @scan(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>, %h: tensor<?x?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?x?xf32>) {
  %y, %l = seq.linear_scan %a, %b init(%h)
    : (tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?xf32>)
  return %y, %l : tensor<?x?x?xf32>, tensor<?x?xf32>
}
func.func @ssd(%x: tensor<?x?x?x?xf32>, %dt: tensor<?x?x?xf32>, %A: tensor<?xf32>,
               %B: tensor<?x?x?x?xf32>, %C: tensor<?x?x?x?xf32>, %h: tensor<?x?x?x?xf32>)
    -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %y, %l = seq.ssd %x, %dt, %A, %B, %C init(%h) {dt_softplus = true}
    : (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, tensor<?x?x?x?xf32>,
       tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
  return %y, %l : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}
func.func @selective(%u: tensor<?x?x?xf32>, %d: tensor<?x?x?xf32>, %A: tensor<?x?xf32>,
                     %B: tensor<?x?x?x?xf32>, %C: tensor<?x?x?x?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>) {
  %y, %l = seq.selective_scan %u, %d, %A, %B, %C {delta_softplus = true}
    : (tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return %y, %l : tensor<?x?x?xf32>, tensor<?x?x?xf32>
}
func.func @gla(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>,
               %g: tensor<?x?x?x?xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %o, %s = seq.linear_attention %q, %k, %v decay(%g)
    : (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
  return %o, %s : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}
func.func @delta(%q: tensor<?x?x?x8xf32>, %k: tensor<?x?x?x8xf32>, %v: tensor<?x?x?x8xf32>,
                 %beta: tensor<?x?x?xf32>, %g: tensor<?x?x?xf32>)
    -> (tensor<?x?x?x8xf32>, tensor<?x?x8x8xf32>) {
  %o, %s = seq.delta_rule %q, %k, %v, %beta decay(%g) {qk_l2norm = true}
    : (tensor<?x?x?x8xf32>, tensor<?x?x?x8xf32>, tensor<?x?x?x8xf32>, tensor<?x?x?xf32>,
       tensor<?x?x?xf32>) -> (tensor<?x?x?x8xf32>, tensor<?x?x8x8xf32>)
  return %o, %s : tensor<?x?x?x8xf32>, tensor<?x?x8x8xf32>
}
func.func @packed_scan(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>, %h: tensor<?x?xf32>,
                       %cu: tensor<?xi32>)
    -> (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>) {
  %y, %l, %c = seq.linear_scan %a, %b init(%h) segments(%cu) {checkpoint_every = 3 : i64}
    : (tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?xi32>)
      -> (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>)
  return %y, %l, %c : tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>
}
func.func @packed_attention(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>,
                            %v: tensor<?x?x?x?xf32>, %cu: tensor<?xi32>, %cuk: tensor<?xi32>)
    -> tensor<?x?x?x?xf32> {
  %o = seq.attention %q, %k, %v segments(%cu) kv_segments(%cuk)
    : (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xi32>, tensor<?xi32>)
      -> tensor<?x?x?x?xf32>
  return %o : tensor<?x?x?x?xf32>
}
func.func @attention(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>)
    -> tensor<?x?x?x?xf32> {
  %o = seq.attention %q, %k, %v {causal = true, window = 3 : i64}
    : (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  return %o : tensor<?x?x?x?xf32>
}
func.func @conv(%x: tensor<?x?x?xf32>, %w: tensor<?x?xf32>, %s: tensor<?x?x?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>) {
  %y, %l = seq.causal_conv1d %x, %w init(%s) {activation = #seq.activation<silu>}
    : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return %y, %l : tensor<?x?x?xf32>, tensor<?x?x?xf32>
}
func.func @moe(%x: tensor<?x?xf32>, %logits: tensor<?x?xf32>, %up: tensor<?x?x?xf32>,
               %down: tensor<?x?x?xf32>) -> (tensor<?x?xf32>, tensor<?xi64>, tensor<f32>) {
  %w, %idx, %aux = seq.route %logits {k = 2 : i64, aux_loss_coef = 0.01 : f32}
    : (tensor<?x?xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<f32>)
  %y, %load = seq.moe_ffn %x, %w, %idx, %up, %down {capacity_factor = 1.0 : f32}
    : (tensor<?x?xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
      -> (tensor<?x?xf32>, tensor<?xi64>)
  return %y, %load, %aux : tensor<?x?xf32>, tensor<?xi64>, tensor<f32>
}
func.func @experts(%x: tensor<?x?xf32>, %w: tensor<?x2xf32>, %idx: tensor<?x2xi32>,
                   %up: tensor<?x?x?xf32>, %down: tensor<?x?x?xf32>) -> tensor<?x?xf32> {
  %y, %load = seq.moe_ffn %x, %w, %idx, %up, %down
    : (tensor<?x?xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
      -> (tensor<?x?xf32>, tensor<?xi64>)
  return %y : tensor<?x?xf32>
}
func.func @matmul(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %p = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %p : tensor<?x?xf32>
}
)";

namespace {
/// Reads bytes from the input, cycling to zeros when it runs out.
struct Reader {
  const uint8_t *data;
  size_t size, pos = 0;
  uint8_t byte() { return pos < size ? data[pos++] : 0; }
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto compile = [](Target target) {
    Engine engine;
    CompileOptions opts;
    opts.useCache = false;
    opts.target = target;
    // Calls that would hold more than this fail with an error.
    opts.memoryLimit = size_t(64) << 20;
    auto m = engine.compile(kModule, opts, "fuzz-call.mlir");
    if (!m)
      std::abort();
    return *m;
  };
  static std::shared_ptr<CompiledModule> cpu = compile(Target::CPU);
  static std::shared_ptr<CompiledModule> gpu = compile(Target::CUDAEmulated);
  static const std::vector<std::string> names = cpu->functionNames();

  Reader in{data, size};
  uint8_t pick = in.byte();
  const std::shared_ptr<CompiledModule> &module = pick & 0x80 ? gpu : cpu;
  Expected<Function> fn = module->function(names[(pick & 0x7f) % names.size()]);
  if (!fn)
    std::abort();
  const FunctionSignature &sig = fn->signature();
  // Mostly the signature's argument count, sometimes one off.
  size_t count = sig.inputs.size();
  uint8_t c = in.byte();
  if (c == 255 && count > 0)
    --count;
  else if (c == 254)
    ++count;
  std::vector<Tensor> tensors;
  std::vector<TensorView> views;
  for (size_t i = 0; i < count; ++i) {
    const TensorSpec *spec = i < sig.inputs.size() ? &sig.inputs[i] : nullptr;
    uint8_t t = in.byte();
    DType dtype = spec ? spec->dtype : DType::F32;
    if (t >= 250) // occasionally the wrong element type
      dtype = static_cast<DType>(t % 5);
    size_t rank = spec ? spec->shape.size() : 1;
    uint8_t r = in.byte();
    if (r >= 250)
      rank = r % 6;
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (size_t d = 0; d < rank; ++d) {
      uint8_t v = in.byte();
      // Sizes 0..31 mostly; 255 asks for a large one (refused by the
      // memory limit or a shape check, never allocated blindly).
      int64_t dim = v == 255 ? (int64_t(1) << 20) + in.byte() : v % 32;
      shape.push_back(dim);
      // Saturates: only whether it exceeds the cap below matters.
      numel = std::min<int64_t>(numel * (dim ? dim : 1), int64_t(1) << 40);
    }
    // Data for what fits; huge shapes get a view of a small buffer only if
    // nothing would read past it, which the call's checks must ensure by
    // failing first (the views below describe the real sizes).
    if (numel > (int64_t(1) << 22))
      return 0;
    Expected<Tensor> tensor = Tensor::zeros(dtype, shape);
    if (!tensor)
      return 0;
    auto *bytes = static_cast<uint8_t *>(tensor->data());
    for (size_t b = 0; b < tensor->byteSize(); ++b)
      bytes[b] = in.byte();
    tensors.push_back(tensor.take());
  }
  for (const Tensor &t : tensors)
    views.push_back(t.view());
  Expected<std::vector<Tensor>> r = fn->call(views);
  if (std::getenv("SEQC_FUZZ_VERBOSE"))
    std::fprintf(stderr, "@%s: %s\n", sig.name.c_str(),
                 r ? "ok" : r.message().c_str());
  return 0;
}

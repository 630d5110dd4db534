//===- CApiRuntime.cpp - seqc's C runtime API -----------------------------===//

#include "seqc/seqc_runtime.h"

#include "seqc/Npy.h"
#include "seqc/Signature.h"
#include "seqc/Tensor.h"
#include "seqc/Weights.h"

#include "CApiSupport.h"
#include "Runtime.h"
#include "StridedCopy.h"

#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>

using namespace seqc;

static thread_local std::string lastError;

seqc_status seqc::capi::fail(seqc_status status, const std::string &message) {
  lastError = message;
  return status;
}

void seqc::capi::clearError() { lastError.clear(); }

seqc_tensor *seqc::capi::wrap(Tensor t) {
  return new seqc_tensor{std::move(t)};
}

/// The element type a C caller stored, as an int: C lets any int live in an
/// enum variable, C++ does not, so it is never read as the enum type before
/// it is known to be valid.
static int rawDType(const seqc_dtype &dtype) {
  int raw = 0;
  std::memcpy(&raw, &dtype,
              sizeof(raw) < sizeof(dtype) ? sizeof(raw) : sizeof(dtype));
  return raw;
}

static bool validDType(int raw) { return raw >= SEQC_F32 && raw <= SEQC_I64; }

Expected<TensorView> seqc::capi::toView(const seqc_view &v, size_t index) {
  std::string what = "input " + std::to_string(index);
  if (!validDType(rawDType(v.dtype)))
    return Status::error(what + " has an invalid element type");
  if (v.rank < 0 || v.rank > 64)
    return Status::error(what + " has an invalid rank " +
                         std::to_string(v.rank));
  if (v.rank > 0 && !v.shape)
    return Status::error(what + " has no shape");
  TensorView view;
  view.dtype = static_cast<DType>(v.dtype);
  view.data = v.data;
  view.shape.assign(v.shape, v.shape + v.rank);
  if (v.strides)
    view.strides.assign(v.strides, v.strides + v.rank);
  return view;
}

extern "C" const char *seqc_last_error(void) { return lastError.c_str(); }

extern "C" size_t seqc_dtype_size(seqc_dtype dtype) {
  if (!validDType(rawDType(dtype)))
    return 0;
  switch (dtype) {
  case SEQC_F32:
  case SEQC_F16:
  case SEQC_BF16:
  case SEQC_I32:
  case SEQC_I64:
    return dtypeSize(static_cast<DType>(dtype));
  }
  return 0;
}

extern "C" seqc_dtype seqc_tensor_dtype(const seqc_tensor *t) {
  return t ? static_cast<seqc_dtype>(t->tensor.dtype()) : SEQC_F32;
}
extern "C" int32_t seqc_tensor_rank(const seqc_tensor *t) {
  return t ? static_cast<int32_t>(t->tensor.rank()) : 0;
}
extern "C" const int64_t *seqc_tensor_shape(const seqc_tensor *t) {
  return t ? t->tensor.shape().data() : nullptr;
}
extern "C" int64_t seqc_tensor_numel(const seqc_tensor *t) {
  return t ? t->tensor.numel() : 0;
}
extern "C" void *seqc_tensor_data(seqc_tensor *t) {
  return t ? t->tensor.data() : nullptr;
}
extern "C" void seqc_tensor_destroy(seqc_tensor *t) { delete t; }

static seqc_view cView(const Tensor &t);

extern "C" seqc_view seqc_tensor_view(const seqc_tensor *t) {
  return t ? cView(t->tensor) : seqc_view{};
}

#define SEQC_REQUIRE(ptr)                                                      \
  do {                                                                         \
    if (!(ptr))                                                                \
      return capi::fail(SEQC_ERROR_INVALID_ARGUMENT, #ptr " is NULL");         \
  } while (0)

static seqc_view cView(const Tensor &t) {
  seqc_view v{};
  v.dtype = static_cast<seqc_dtype>(t.dtype());
  v.data = const_cast<void *>(t.data());
  v.rank = static_cast<int32_t>(t.rank());
  v.shape = t.shape().data();
  v.strides = nullptr;
  return v;
}

extern "C" seqc_status seqc_tensor_read_npy(const char *path,
                                            seqc_tensor **tensor) {
  SEQC_REQUIRE(path);
  SEQC_REQUIRE(tensor);
  Expected<Tensor> t = npy::read(path);
  if (!t)
    return capi::fail(SEQC_ERROR_IO, t.message());
  *tensor = capi::wrap(t.take());
  capi::clearError();
  return SEQC_OK;
}

/// A contiguous copy of a (possibly strided) view.
static Expected<Tensor> contiguousCopy(const TensorView &view) {
  Expected<Tensor> copy = Tensor::zeros(view.dtype, view.shape);
  if (!copy || copy->numel() == 0)
    return copy;
  if (!view.data)
    return Status::error("the view has no data");
  stridedCopy(static_cast<char *>(copy->data()),
              static_cast<const char *>(view.data), dtypeSize(view.dtype),
              view.shape, view.effectiveStrides());
  return copy;
}

extern "C" seqc_status seqc_tensor_write_npy(const char *path,
                                             const seqc_view *view) {
  SEQC_REQUIRE(path);
  SEQC_REQUIRE(view);
  Expected<TensorView> v = capi::toView(*view, 0);
  if (!v)
    return capi::fail(SEQC_ERROR_INVALID_ARGUMENT, v.message());
  Expected<Tensor> t = contiguousCopy(*v);
  if (!t)
    return capi::fail(SEQC_ERROR_INVALID_ARGUMENT, t.message());
  Status written = npy::write(path, *t);
  if (!written)
    return capi::fail(SEQC_ERROR_IO, written.message());
  capi::clearError();
  return SEQC_OK;
}

struct seqc_weights {
  std::vector<weights::NamedTensor> tensors;
  std::string path;
};

extern "C" seqc_status seqc_weights_read(const char *path,
                                         seqc_weights **result) {
  SEQC_REQUIRE(path);
  SEQC_REQUIRE(result);
  Expected<std::vector<weights::NamedTensor>> tensors = weights::read(path);
  if (!tensors)
    return capi::fail(SEQC_ERROR_IO, tensors.message());
  *result = new seqc_weights{tensors.take(), path};
  capi::clearError();
  return SEQC_OK;
}

extern "C" size_t seqc_weights_count(const seqc_weights *w) {
  return w ? w->tensors.size() : 0;
}

extern "C" const char *seqc_weights_name(const seqc_weights *w, size_t index) {
  if (!w || index >= w->tensors.size())
    return nullptr;
  return w->tensors[index].name.c_str();
}

extern "C" seqc_status seqc_weights_find(const seqc_weights *w,
                                         const char *name, seqc_view *view) {
  SEQC_REQUIRE(w);
  SEQC_REQUIRE(name);
  SEQC_REQUIRE(view);
  for (const weights::NamedTensor &t : w->tensors)
    if (t.name == name) {
      *view = cView(t.tensor);
      capi::clearError();
      return SEQC_OK;
    }
  return capi::fail(SEQC_ERROR_NOT_FOUND,
                    "'" + w->path + "' has no tensor named '" + name + "'");
}

extern "C" seqc_status seqc_weights_view(const seqc_weights *w, size_t index,
                                         seqc_view *view) {
  SEQC_REQUIRE(w);
  SEQC_REQUIRE(view);
  if (index >= w->tensors.size())
    return capi::fail(SEQC_ERROR_INVALID_ARGUMENT,
                      "tensor index " + std::to_string(index) +
                          " is out of range ('" + w->path + "' has " +
                          std::to_string(w->tensors.size()) + ")");
  *view = cView(w->tensors[index].tensor);
  capi::clearError();
  return SEQC_OK;
}

extern "C" void seqc_weights_destroy(seqc_weights *w) { delete w; }

extern "C" seqc_status seqc_set_num_threads(int64_t threads) {
  if (threads < 1)
    return capi::fail(SEQC_ERROR_INVALID_ARGUMENT,
                      "the thread count must be at least 1");
  seqc_rt_set_num_threads(threads);
  capi::clearError();
  return SEQC_OK;
}

extern "C" int64_t seqc_get_num_threads(void) {
  return seqc_rt_get_num_threads();
}

seqc_status seqc::capi::refuseCall(const RefuseFn &refuse,
                                   const std::string &reason) {
  Status agreed = refuse ? refuse(reason) : Status::ok();
  if (agreed)
    return fail(SEQC_ERROR_INVALID_ARGUMENT, reason);
  return fail(SEQC_ERROR_CALL, agreed.message());
}

seqc_status seqc::capi::call(const std::function<Expected<std::vector<Tensor>>(
                                 const std::vector<TensorView> &)> &fn,
                             size_t expectedOutputs, const seqc_view *inputs,
                             size_t numInputs, seqc_tensor **outputs,
                             size_t numOutputs, const RefuseFn &refuse) {
  auto refused = [&](const std::string &reason) {
    return refuseCall(refuse, reason);
  };
  if (numInputs && !inputs)
    return refused("inputs is NULL");
  if (numOutputs && !outputs)
    return refused("outputs is NULL");
  if (numOutputs != expectedOutputs)
    return refused("the function has " + std::to_string(expectedOutputs) +
                   " results but room for " + std::to_string(numOutputs) +
                   " was given");
  std::vector<TensorView> views;
  views.reserve(numInputs);
  for (size_t i = 0; i < numInputs; ++i) {
    Expected<TensorView> v = toView(inputs[i], i);
    if (!v)
      return refused(v.message());
    views.push_back(v.take());
  }
  Expected<std::vector<Tensor>> results = fn(views);
  if (!results)
    return fail(SEQC_ERROR_CALL, results.message());
  for (size_t i = 0; i < numOutputs; ++i)
    outputs[i] = wrap(std::move((*results)[i]));
  clearError();
  return SEQC_OK;
}

extern "C" int seqc_rt_cpu_has(const char *features) {
  if (!features)
    return 0;
  // A constant of the calling object, asked on every call: answered once
  // per text.
  static std::mutex mutex;
  static auto *answers = new std::unordered_map<std::string, int>;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = answers->emplace(features, 0);
  if (fresh) {
    std::vector<std::string> names;
    std::istringstream in(features);
    for (std::string f; in >> f;)
      names.push_back(f);
    it->second = missingCpuFeatures(names).empty() ? 1 : 0;
  }
  return it->second;
}

extern "C" seqc_status seqc_rt_invoke_c(void (*packed)(void **),
                                        const char *signature, const char *name,
                                        const seqc_view *inputs,
                                        size_t numInputs, seqc_tensor **outputs,
                                        size_t numOutputs) {
  if (!packed || !signature || !name)
    return capi::fail(SEQC_ERROR_INVALID_ARGUMENT, "missing entry point");
  // The text is a constant of the calling object: parse it once, not on
  // every call. Entries are keyed by address and checked by content (a
  // library unloaded and another loaded at the same address must not reuse
  // the old parse).
  struct Parsed {
    std::string text;
    std::vector<FunctionSignature> sigs;
  };
  static std::mutex mutex;
  static auto *parsed = new std::unordered_map<const char *, Parsed>;
  const std::vector<FunctionSignature> *sigs = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = parsed->find(signature);
    if (it == parsed->end() || it->second.text != signature) {
      Expected<std::vector<FunctionSignature>> fresh =
          parseSignatures(signature);
      if (!fresh)
        return capi::fail(SEQC_ERROR_INVALID_ARGUMENT, fresh.message());
      Parsed &entry = (*parsed)[signature];
      entry.text = signature;
      entry.sigs = fresh.take();
      it = parsed->find(signature);
    }
    sigs = &it->second.sigs;
  }
  for (const FunctionSignature &sig : *sigs) {
    if (sig.name != name)
      continue;
    if (std::string missing = missingCpuFeatures(sig.cpuFeatures);
        !missing.empty())
      return capi::fail(
          SEQC_ERROR_CALL,
          std::string(name) + " was compiled for a CPU with " + missing +
              ", which this CPU lacks: compile it for this one (seqc-compile "
              "--cpu NAME, e.g. x86-64-v3; SEQC_CPU_BF16=widen keeps bf16 "
              "products off AVX-512 BF16)");
    return capi::call(
        [&](const std::vector<TensorView> &views) {
          CallOptions options;
          options.memoryLimit = physicalMemoryBytes();
          options.cudaMemory = sig.cuda;
          return invokePacked(packed, sig, views, options);
        },
        sig.outputs.size(), inputs, numInputs, outputs, numOutputs);
  }
  return capi::fail(SEQC_ERROR_NOT_FOUND,
                    std::string("no function @") + name + " in the signature");
}

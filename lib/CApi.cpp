//===- CApi.cpp - seqc's C API over the C++ engine ------------------------===//

#include "seqc/seqc.h"

#include "seqc/Engine.h"

#include "CApiSupport.h"

#include <cstring>

using namespace seqc;
using capi::fail;

struct seqc_engine {
  Engine engine;
};
struct seqc_module {
  std::shared_ptr<CompiledModule> module;
  std::vector<std::string> names;
};
struct seqc_function {
  Function function;
};

#define SEQC_REQUIRE(ptr)                                                      \
  do {                                                                         \
    if (!(ptr))                                                                \
      return fail(SEQC_ERROR_INVALID_ARGUMENT, #ptr " is NULL");               \
  } while (0)

extern "C" void seqc_compile_options_init(seqc_compile_options *o) {
  if (!o)
    return;
  o->target = SEQC_TARGET_CPU;
  o->reference = 0;
  o->opt_level = 3;
  o->memory_limit = 0;
  o->num_threads = 0;
  o->use_cache = 1;
  o->cache_dir = nullptr;
  o->fuse = 1;
  o->profile = SEQC_PROFILE_NONE;
  o->strict = 0;
  o->ranks = 0;
  o->parallel = SEQC_PARALLEL_SEQUENCE;
  o->communicator = nullptr;
  o->bf16_products = SEQC_BF16_AUTO;
  o->bound_weights = nullptr;
  o->local_steps = 0;
  o->call_timeout = 0;
}

extern "C" seqc_status seqc_engine_create(seqc_engine **engine) {
  SEQC_REQUIRE(engine);
  *engine = new seqc_engine();
  capi::clearError();
  return SEQC_OK;
}

extern "C" void seqc_engine_destroy(seqc_engine *engine) { delete engine; }

/// An enum field a C caller stored, as an int: C lets any int live in an
/// enum variable, C++ does not (reading 7 as seqc_profile is undefined), so
/// it is checked as an int before it is read as the enum.
template <typename Enum> static int rawEnum(const Enum &field) {
  int raw = 0;
  std::memcpy(&raw, &field,
              sizeof(raw) < sizeof(field) ? sizeof(raw) : sizeof(field));
  return raw;
}

static Expected<CompileOptions> toOptions(const seqc_compile_options *o) {
  CompileOptions opts;
  if (!o)
    return opts;
  int target = rawEnum(o->target);
  if (target != SEQC_TARGET_CPU && target != SEQC_TARGET_CUDA &&
      target != SEQC_TARGET_CUDA_EMULATED)
    return Status::error("unknown target " + std::to_string(target));
  if (o->opt_level < 0 || o->opt_level > 3)
    return Status::error("opt_level must be 0 to 3");
  if (o->num_threads < 0)
    return Status::error("num_threads must be >= 0");
  int profile = rawEnum(o->profile);
  if (profile != SEQC_PROFILE_NONE && profile != SEQC_PROFILE_CALLS &&
      profile != SEQC_PROFILE_OPS)
    return Status::error("unknown profile " + std::to_string(profile));
  int products = rawEnum(o->bf16_products);
  switch (products) {
  case SEQC_BF16_AUTO:
    opts.bf16Products = Bf16Products::Auto;
    break;
  case SEQC_BF16_DOT:
    opts.bf16Products = Bf16Products::Dot;
    break;
  case SEQC_BF16_WIDEN:
    opts.bf16Products = Bf16Products::Widen;
    break;
  case SEQC_BF16_AMX:
    opts.bf16Products = Bf16Products::Amx;
    break;
  case SEQC_BF16_AMX_EMULATED:
    opts.bf16Products = Bf16Products::AmxEmulated;
    break;
  default:
    return Status::error("unknown bf16_products " + std::to_string(products));
  }
  opts.target = o->target == SEQC_TARGET_CUDA            ? Target::CUDA
                : o->target == SEQC_TARGET_CUDA_EMULATED ? Target::CUDAEmulated
                                                         : Target::CPU;
  opts.reference = o->reference != 0;
  opts.optLevel = o->opt_level;
  opts.memoryLimit = o->memory_limit;
  opts.numThreads = o->num_threads;
  opts.useCache = o->use_cache != 0;
  if (o->cache_dir)
    opts.cacheDir = o->cache_dir;
  opts.fuse = o->fuse != 0;
  opts.strict = o->strict != 0;
  opts.ranks = o->ranks;
  int parallel = rawEnum(o->parallel);
  if (parallel != SEQC_PARALLEL_SEQUENCE && parallel != SEQC_PARALLEL_EXPERTS &&
      parallel != SEQC_PARALLEL_SEQUENCE_AND_EXPERTS)
    return Status::error("unknown parallel " + std::to_string(parallel));
  opts.parallel = parallel == SEQC_PARALLEL_EXPERTS ? Parallelism::Experts
                  : parallel == SEQC_PARALLEL_SEQUENCE_AND_EXPERTS
                      ? Parallelism::SequenceAndExperts
                      : Parallelism::Sequence;
  opts.communicator = o->communicator;
  opts.localSteps = o->local_steps != 0;
  opts.callTimeout = o->call_timeout;
  if (o->bound_weights)
    for (size_t i = 0; i < seqc_weights_count(o->bound_weights); ++i) {
      seqc_view view;
      if (seqc_weights_view(o->bound_weights, i, &view) != SEQC_OK)
        return Status::error(seqc_last_error());
      Expected<TensorView> value = capi::toView(view, i);
      if (!value)
        return value.status();
      opts.boundWeights.push_back(
          {seqc_weights_name(o->bound_weights, i), *value});
    }
  opts.profile = o->profile == SEQC_PROFILE_CALLS ? Profile::Calls
                 : o->profile == SEQC_PROFILE_OPS ? Profile::Ops
                                                  : Profile::None;
  return opts;
}

static seqc_status finishCompile(Expected<std::shared_ptr<CompiledModule>> m,
                                 seqc_module **module) {
  if (!m)
    return fail(SEQC_ERROR_COMPILE, m.message());
  auto *handle = new seqc_module();
  handle->module = *m;
  handle->names = (*m)->functionNames();
  *module = handle;
  capi::clearError();
  return SEQC_OK;
}

extern "C" seqc_status seqc_compile(seqc_engine *engine, const char *source,
                                    size_t length, const char *name,
                                    const seqc_compile_options *options,
                                    seqc_module **module) {
  SEQC_REQUIRE(engine);
  SEQC_REQUIRE(source);
  SEQC_REQUIRE(module);
  Expected<CompileOptions> opts = toOptions(options);
  if (!opts)
    return fail(SEQC_ERROR_INVALID_ARGUMENT, opts.message());
  return finishCompile(engine->engine.compile(std::string_view(source, length),
                                              *opts, name ? name : "<input>"),
                       module);
}

extern "C" seqc_status seqc_compile_file(seqc_engine *engine, const char *path,
                                         const seqc_compile_options *options,
                                         seqc_module **module) {
  SEQC_REQUIRE(engine);
  SEQC_REQUIRE(path);
  SEQC_REQUIRE(module);
  Expected<CompileOptions> opts = toOptions(options);
  if (!opts)
    return fail(SEQC_ERROR_INVALID_ARGUMENT, opts.message());
  return finishCompile(engine->engine.compileFile(path, *opts), module);
}

extern "C" void seqc_module_destroy(seqc_module *module) { delete module; }

extern "C" seqc_cache_status seqc_module_cache_status(const seqc_module *m) {
  if (!m)
    return SEQC_CACHE_COMPILED;
  switch (m->module->cacheStatus()) {
  case CacheStatus::Compiled:
    return SEQC_CACHE_COMPILED;
  case CacheStatus::MemoryHit:
    return SEQC_CACHE_MEMORY_HIT;
  case CacheStatus::DiskHit:
    return SEQC_CACHE_DISK_HIT;
  }
  return SEQC_CACHE_COMPILED;
}

extern "C" const char *seqc_module_cache_note(const seqc_module *m) {
  return m ? m->module->cacheNote().c_str() : "";
}

extern "C" size_t seqc_module_num_functions(const seqc_module *m) {
  return m ? m->names.size() : 0;
}

extern "C" const char *seqc_module_function_name(const seqc_module *m,
                                                 size_t index) {
  if (!m || index >= m->names.size())
    return nullptr;
  return m->names[index].c_str();
}

extern "C" seqc_status seqc_module_function(const seqc_module *m,
                                            const char *name,
                                            seqc_function **function) {
  SEQC_REQUIRE(m);
  SEQC_REQUIRE(name);
  SEQC_REQUIRE(function);
  Expected<Function> fn = m->module->function(name);
  if (!fn)
    return fail(SEQC_ERROR_NOT_FOUND, fn.message());
  *function = new seqc_function{fn.take()};
  capi::clearError();
  return SEQC_OK;
}

extern "C" void seqc_function_destroy(seqc_function *f) { delete f; }

extern "C" size_t seqc_function_num_inputs(const seqc_function *f) {
  return f ? f->function.signature().inputs.size() : 0;
}

extern "C" size_t seqc_function_num_outputs(const seqc_function *f) {
  return f ? f->function.signature().outputs.size() : 0;
}

extern "C" seqc_status seqc_function_tensor(const seqc_function *f,
                                            int isOutput, size_t index,
                                            seqc_dtype *dtype, int32_t *rank,
                                            const int64_t **shape,
                                            const char **name) {
  SEQC_REQUIRE(f);
  const FunctionSignature &sig = f->function.signature();
  const std::vector<TensorSpec> &list = isOutput ? sig.outputs : sig.inputs;
  if (index >= list.size())
    return fail(SEQC_ERROR_INVALID_ARGUMENT,
                std::string(isOutput ? "output" : "input") + " index " +
                    std::to_string(index) + " is out of range (@" + sig.name +
                    " has " + std::to_string(list.size()) + ")");
  const TensorSpec &t = list[index];
  if (dtype)
    *dtype = static_cast<seqc_dtype>(t.dtype);
  if (rank)
    *rank = static_cast<int32_t>(t.shape.size());
  if (shape)
    *shape = t.shape.data();
  if (name)
    *name = t.name.c_str();
  capi::clearError();
  return SEQC_OK;
}

extern "C" seqc_status
seqc_function_call(const seqc_function *f, const seqc_view *inputs,
                   size_t numInputs, seqc_tensor **outputs, size_t numOutputs) {
  SEQC_REQUIRE(f);
  return capi::call(
      [&](const std::vector<TensorView> &views) {
        return f->function.call(views);
      },
      f->function.signature().outputs.size(), inputs, numInputs, outputs,
      numOutputs,
      [&](const std::string &why) { return f->function.refuseCall(why); });
}

extern "C" seqc_status seqc_function_refuse_call(const seqc_function *f,
                                                 const char *reason) {
  SEQC_REQUIRE(f);
  Status agreed = f->function.refuseCall(reason ? reason : "");
  if (agreed) {
    capi::clearError();
    return SEQC_OK;
  }
  return capi::fail(SEQC_ERROR_CALL, agreed.message());
}

extern "C" size_t seqc_function_num_regions(const seqc_function *f) {
  return f ? f->function.signature().profileRegions.size() : 0;
}

extern "C" const char *seqc_function_region_name(const seqc_function *f,
                                                 size_t index) {
  if (!f || index >= f->function.signature().profileRegions.size())
    return nullptr;
  return f->function.signature().profileRegions[index].c_str();
}

extern "C" seqc_status
seqc_function_call_stats(const seqc_function *f, const seqc_view *inputs,
                         size_t numInputs, seqc_tensor **outputs,
                         size_t numOutputs, seqc_call_stats *stats) {
  SEQC_REQUIRE(f);
  if (!stats) // the other ranks of a distributed call wait for this one
    return capi::refuseCall(
        [&](const std::string &why) { return f->function.refuseCall(why); },
        "stats is NULL");
  CallStats measured;
  seqc_status status = capi::call(
      [&](const std::vector<TensorView> &views) {
        return f->function.call(views, measured);
      },
      f->function.signature().outputs.size(), inputs, numInputs, outputs,
      numOutputs,
      [&](const std::string &why) { return f->function.refuseCall(why); });
  if (status != SEQC_OK)
    return status;
  stats->allocated_bytes = measured.allocatedBytes;
  stats->peak_bytes = measured.peakBytes;
  for (size_t i = 0; i < measured.regionSeconds.size(); ++i) {
    if (stats->region_seconds)
      stats->region_seconds[i] = measured.regionSeconds[i];
    if (stats->region_calls)
      stats->region_calls[i] = measured.regionCalls[i];
  }
  return SEQC_OK;
}

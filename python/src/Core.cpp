//===- Core.cpp - seqc._core: the C API for Python, zero copy -------------===//
//
// The Python package's only native part. It wraps seqc's C API (seqc.h):
// compile, look functions up, call them. Arguments are numpy arrays (the
// buffer protocol) or anything with __dlpack__ (PyTorch tensors), read in
// place with their strides; results are seqc's own buffers, handed to numpy
// as arrays whose base owns the buffer, or to PyTorch through DLPack. No
// element is copied either way.
//
//===----------------------------------------------------------------------===//

#include "seqc/seqc.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

//===----------------------------------------------------------------------===//
// DLPack (v0.8 ABI, the structs every producer and consumer share)
//===----------------------------------------------------------------------===//

enum DLDeviceType : int32_t { kDLCPU = 1 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLFloat = 2, kDLBfloat = 4 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(DLManagedTensor *self);
};

constexpr const char *kDLTensorCapsule = "dltensor";
constexpr const char *kUsedDLTensorCapsule = "used_dltensor";

//===----------------------------------------------------------------------===//
// Errors: the package's exception classes, registered from Python
//===----------------------------------------------------------------------===//

struct ErrorClasses {
  py::object compile, call, argumentType, io;
};
ErrorClasses &errorClasses() {
  // Never destroyed: Python objects cannot be released after the
  // interpreter is gone.
  static auto *classes = new ErrorClasses();
  return *classes;
}

/// Raises `cls` (ValueError until the package registered its classes).
[[noreturn]] void raise(const py::object &cls, const std::string &message) {
  PyErr_SetString(cls ? cls.ptr() : PyExc_ValueError, message.c_str());
  throw py::error_already_set();
}

/// The exception for a failed C call, carrying seqc's message.
[[noreturn]] void raiseStatus(seqc_status status) {
  ErrorClasses &e = errorClasses();
  std::string message = seqc_last_error();
  switch (status) {
  case SEQC_ERROR_COMPILE:
    raise(e.compile, message);
  case SEQC_ERROR_IO:
    raise(e.io, message);
  default:
    raise(e.call, message);
  }
}

void check(seqc_status status) {
  if (status != SEQC_OK)
    raiseStatus(status);
}

const char *dtypeName(seqc_dtype dtype) {
  switch (dtype) {
  case SEQC_F32:
    return "float32";
  case SEQC_F16:
    return "float16";
  case SEQC_BF16:
    return "bfloat16";
  case SEQC_I32:
    return "int32";
  case SEQC_I64:
    return "int64";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Results: seqc's buffers, shared by the Python objects that view them
//===----------------------------------------------------------------------===//

using TensorPtr = std::shared_ptr<seqc_tensor>;

TensorPtr own(seqc_tensor *tensor) {
  return TensorPtr(tensor, seqc_tensor_destroy);
}

/// One result: owns seqc's buffer; numpy arrays and DLPack capsules made
/// from it keep it alive.
class Tensor {
public:
  explicit Tensor(TensorPtr tensor) : tensor(std::move(tensor)) {}

  seqc_dtype dtype() const { return seqc_tensor_dtype(tensor.get()); }
  std::vector<int64_t> shape() const {
    const int64_t *s = seqc_tensor_shape(tensor.get());
    return {s, s + seqc_tensor_rank(tensor.get())};
  }
  uintptr_t address() const {
    return reinterpret_cast<uintptr_t>(seqc_tensor_data(tensor.get()));
  }

  /// A DLPack capsule of the buffer; the capsule's owner shares it.
  py::capsule toDLPack() const {
    auto *holder = new Holder{{}, tensor, shape()};
    DLTensor &t = holder->managed.dl_tensor;
    t.data = seqc_tensor_data(tensor.get());
    t.device = {kDLCPU, 0};
    t.ndim = seqc_tensor_rank(tensor.get());
    t.dtype = dlpackType(dtype());
    t.shape = holder->shape.data();
    t.strides = nullptr; // row-major
    t.byte_offset = 0;
    holder->managed.manager_ctx = holder;
    holder->managed.deleter = [](DLManagedTensor *self) {
      delete static_cast<Holder *>(self->manager_ctx);
    };
    // A capsule nobody consumed frees the tensor it holds.
    return py::capsule(&holder->managed, kDLTensorCapsule, [](PyObject *cap) {
      if (!PyCapsule_IsValid(cap, kDLTensorCapsule))
        return; // consumed: the consumer calls the deleter
      auto *managed = static_cast<DLManagedTensor *>(
          PyCapsule_GetPointer(cap, kDLTensorCapsule));
      managed->deleter(managed);
    });
  }

  /// A numpy array over the buffer whose base is `self`.
  static py::array toNumpy(py::object self) {
    auto &t = self.cast<Tensor &>();
    std::vector<int64_t> shape = t.shape();
    py::dtype dt = numpyType(t.dtype());
    return py::array(dt, shape, {}, seqc_tensor_data(t.tensor.get()), self);
  }

  static py::dtype numpyType(seqc_dtype dtype) {
    switch (dtype) {
    case SEQC_F32:
      return py::dtype::of<float>();
    case SEQC_F16:
      return py::dtype("float16");
    case SEQC_I32:
      return py::dtype::of<int32_t>();
    case SEQC_I64:
      return py::dtype::of<int64_t>();
    case SEQC_BF16:
      break;
    }
    raise(errorClasses().argumentType,
          "seqc: numpy has no bfloat16: take the result as a torch tensor "
          "(torch.utils.dlpack.from_dlpack)");
  }

  static DLDataType dlpackType(seqc_dtype dtype) {
    switch (dtype) {
    case SEQC_F32:
      return {kDLFloat, 32, 1};
    case SEQC_F16:
      return {kDLFloat, 16, 1};
    case SEQC_BF16:
      return {kDLBfloat, 16, 1};
    case SEQC_I32:
      return {kDLInt, 32, 1};
    case SEQC_I64:
      return {kDLInt, 64, 1};
    }
    return {kDLFloat, 32, 1};
  }

private:
  struct Holder {
    DLManagedTensor managed;
    TensorPtr tensor;
    std::vector<int64_t> shape;
  };
  TensorPtr tensor;
};

//===----------------------------------------------------------------------===//
// Arguments: views of the caller's memory, held for the call
//===----------------------------------------------------------------------===//

/// The views of one call's arguments and what keeps them valid.
class Arguments {
public:
  Arguments(const seqc_function *fn, const char *fnName)
      : fn(fn), fnName(fnName) {}
  Arguments(const Arguments &) = delete;
  Arguments &operator=(const Arguments &) = delete;
  ~Arguments() {
    for (DLManagedTensor *managed : consumed)
      if (managed->deleter)
        managed->deleter(managed);
  }

  void add(const py::handle &arg) {
    size_t index = views.size();
    storage.emplace_back();
    if (py::isinstance<py::array>(arg))
      addNumpy(index, py::reinterpret_borrow<py::array>(arg));
    else if (py::hasattr(arg, "__dlpack__"))
      addDLPack(index, arg);
    else
      raise(errorClasses().argumentType,
            describe(index) + " is a " +
                std::string(py::str(py::type::of(arg).attr("__name__"))) +
                ": seqc takes numpy arrays and tensors with __dlpack__ "
                "(PyTorch)");
    checkType(index);
  }

  /// Whether an argument came through DLPack (a PyTorch tensor): results
  /// are then returned as PyTorch tensors too.
  bool anyDLPack() const { return !consumed.empty(); }
  const std::vector<seqc_view> &all() const { return views; }

private:
  struct Storage {
    std::vector<int64_t> shape, strides;
  };

  std::string describe(size_t index) const {
    const char *name = nullptr;
    seqc_dtype dtype;
    int32_t rank;
    const int64_t *shape;
    std::string text =
        "seqc: " + std::string(fnName) + ": argument " + std::to_string(index);
    if (seqc_function_tensor(fn, 0, index, &dtype, &rank, &shape, &name) ==
            SEQC_OK &&
        name && *name)
      text += " (" + std::string(name) + ")";
    return text;
  }

  /// Element types are checked here, before seqc's signature check, so that
  /// a wrong dtype is a TypeError.
  void checkType(size_t index) {
    seqc_dtype want;
    int32_t rank;
    const int64_t *shape;
    const char *name;
    if (seqc_function_tensor(fn, 0, index, &want, &rank, &shape, &name) !=
        SEQC_OK)
      return; // too many arguments: seqc's own check says so
    if (views[index].dtype != want)
      raise(errorClasses().argumentType,
            describe(index) + " has dtype " + dtypeName(views[index].dtype) +
                ", but the function takes " + dtypeName(want));
  }

  seqc_dtype dtypeOfNumpy(size_t index, const py::dtype &dt) const {
    char kind = dt.kind();
    size_t size = dt.itemsize();
    if (dt.byteorder() == '>')
      raise(errorClasses().argumentType,
            describe(index) + " is big-endian: seqc reads native byte order "
                              "(.astype(x.dtype.newbyteorder('=')))");
    if (kind == 'f' && size == 4)
      return SEQC_F32;
    if (kind == 'f' && size == 2)
      return SEQC_F16;
    if (kind == 'i' && size == 4)
      return SEQC_I32;
    if (kind == 'i' && size == 8)
      return SEQC_I64;
    raise(errorClasses().argumentType,
          describe(index) + " has dtype " +
              dt.attr("name").cast<std::string>() +
              ": seqc takes float32, float16, bfloat16, int32 and int64");
  }

  void addNumpy(size_t index, const py::array &array) {
    Storage &s = storage[index];
    seqc_dtype dtype = dtypeOfNumpy(index, array.dtype());
    auto itemsize = static_cast<int64_t>(array.itemsize());
    for (py::ssize_t d = 0; d < array.ndim(); ++d) {
      s.shape.push_back(array.shape(d));
      int64_t bytes = array.strides(d);
      if (bytes % itemsize != 0)
        raise(errorClasses().call,
              describe(index) + " has a stride of " + std::to_string(bytes) +
                  " bytes in dimension " + std::to_string(d) +
                  ", not a multiple of its element size");
      s.strides.push_back(bytes / itemsize);
    }
    keep.push_back(array);
    push(dtype, const_cast<void *>(array.data()), s);
  }

  void addDLPack(size_t index, const py::handle &arg) {
    py::object tensor = withoutGradient(index, arg);
    py::object capsule = tensor.attr("__dlpack__")();
    PyObject *cap = capsule.ptr();
    if (!PyCapsule_IsValid(cap, kDLTensorCapsule))
      raise(errorClasses().argumentType,
            describe(index) + ": __dlpack__ returned no DLPack capsule");
    auto *managed = static_cast<DLManagedTensor *>(
        PyCapsule_GetPointer(cap, kDLTensorCapsule));
    // The consumer owns it from here on (the deleter runs after the call).
    PyCapsule_SetName(cap, kUsedDLTensorCapsule);
    consumed.push_back(managed);
    const DLTensor &t = managed->dl_tensor;
    if (t.device.device_type != kDLCPU)
      raise(errorClasses().call,
            describe(index) + " is on device type " +
                std::to_string(t.device.device_type) +
                ": the module runs on the host (move it with .cpu())");
    seqc_dtype dtype = dtypeOfDLPack(index, t.dtype);
    Storage &s = storage[index];
    s.shape.assign(t.shape, t.shape + t.ndim);
    if (t.strides) {
      s.strides.assign(t.strides, t.strides + t.ndim);
    } else {
      s.strides.resize(t.ndim);
      int64_t stride = 1;
      for (int32_t d = t.ndim; d-- > 0;) {
        s.strides[d] = stride;
        stride *= t.shape[d];
      }
    }
    push(dtype, static_cast<char *>(t.data) + t.byte_offset, s);
  }

  /// A PyTorch tensor that requires grad cannot be exported (and seqc
  /// computes no gradients): outside autograd (torch.no_grad(), where no
  /// graph is recorded anyway) it is read detached, else it is an error.
  py::object withoutGradient(size_t index, const py::handle &arg) const {
    py::object tensor = py::reinterpret_borrow<py::object>(arg);
    if (!py::hasattr(arg, "requires_grad") ||
        !py::cast<bool>(arg.attr("requires_grad")))
      return tensor;
    static auto *gradEnabled =
        new py::object(py::module_::import("torch").attr("is_grad_enabled"));
    if (py::cast<bool>((*gradEnabled)()))
      raise(errorClasses().argumentType,
            describe(index) +
                " requires grad: seqc computes no gradients (call it under "
                "torch.no_grad(), or pass .detach())");
    return tensor.attr("detach")();
  }

  seqc_dtype dtypeOfDLPack(size_t index, DLDataType t) const {
    if (t.lanes == 1) {
      if (t.code == kDLFloat && t.bits == 32)
        return SEQC_F32;
      if (t.code == kDLFloat && t.bits == 16)
        return SEQC_F16;
      if (t.code == kDLBfloat && t.bits == 16)
        return SEQC_BF16;
      if (t.code == kDLInt && t.bits == 32)
        return SEQC_I32;
      if (t.code == kDLInt && t.bits == 64)
        return SEQC_I64;
    }
    raise(errorClasses().argumentType,
          describe(index) + " has DLPack type (code " + std::to_string(t.code) +
              ", " + std::to_string(t.bits) +
              " bits): seqc takes float32, float16, bfloat16, int32 and "
              "int64");
  }

  void push(seqc_dtype dtype, void *data, const Storage &s) {
    seqc_view view;
    view.dtype = dtype;
    view.data = data;
    view.rank = static_cast<int32_t>(s.shape.size());
    view.shape = s.shape.data();
    view.strides = s.strides.data();
    views.push_back(view);
  }

  const seqc_function *fn;
  const char *fnName;
  // The views point into each Storage's vectors, whose buffers stay put
  // when this vector grows.
  std::vector<Storage> storage;
  std::vector<seqc_view> views;
  std::vector<py::object> keep;
  std::vector<DLManagedTensor *> consumed;
};

//===----------------------------------------------------------------------===//
// Engine, modules, functions
//===----------------------------------------------------------------------===//

seqc_engine *engine() {
  // One engine per process: its memory cache serves repeated compiles. It
  // lives until exit (functions stay valid after their module is gone).
  static seqc_engine *e = [] {
    seqc_engine *created = nullptr;
    check(seqc_engine_create(&created));
    return created;
  }();
  return e;
}

py::object &torchFromDLPack() {
  static auto *fn = new py::object(
      py::module_::import("torch.utils.dlpack").attr("from_dlpack"));
  return *fn;
}

class Function {
public:
  Function(seqc_function *fn, std::string name)
      : fn(fn, seqc_function_destroy), name(std::move(name)) {}

  py::object call(const py::args &args) const {
    size_t numOutputs = seqc_function_num_outputs(fn.get());
    Arguments in(fn.get(), name.c_str());
    addArguments(in, args);
    std::vector<seqc_tensor *> out(numOutputs, nullptr);
    seqc_status status;
    {
      py::gil_scoped_release release;
      status = seqc_function_call(fn.get(), in.all().data(), in.all().size(),
                                  out.data(), out.size());
    }
    if (status != SEQC_OK)
      raiseStatus(status);
    std::vector<py::object> results;
    results.reserve(out.size());
    for (seqc_tensor *t : out) {
      py::object tensor = py::cast(Tensor(own(t)));
      if (in.anyDLPack())
        results.push_back(
            torchFromDLPack()(tensor.cast<Tensor &>().toDLPack()));
      else if (seqc_tensor_dtype(t) == SEQC_BF16)
        results.push_back(tensor);
      else
        results.push_back(Tensor::toNumpy(tensor));
    }
    if (results.size() == 1)
      return results.front();
    py::tuple tuple(results.size());
    for (size_t i = 0; i < results.size(); ++i)
      tuple[i] = results[i];
    return tuple;
  }

  /// Converts `args`. An argument refused here never reaches the call: for
  /// a distributed function the other ranks, waiting at the call's start,
  /// learn why (seqc_function_refuse_call) and every rank raises the same
  /// CallError; for one process the error is raised as it is.
  void addArguments(Arguments &in, const py::args &args) const {
    try {
      for (const py::handle &arg : args)
        in.add(arg);
    } catch (...) {
      refuseForOtherRanks(std::current_exception());
      throw;
    }
  }

  /// Tells a distributed function's other ranks why this one cannot make
  /// the call, and raises the error they all raise; returns for a function
  /// of one process.
  void refuseForOtherRanks(std::exception_ptr refused) const {
    std::string reason = "an argument could not be converted";
    try {
      std::rethrow_exception(refused);
    } catch (py::error_already_set &e) {
      try {
        reason = py::str(e.value());
      } catch (...) {
        reason = e.what();
      }
    } catch (const std::exception &e) {
      reason = e.what();
    } catch (...) {
    }
    seqc_status agreed;
    {
      py::gil_scoped_release release;
      agreed = seqc_function_refuse_call(fn.get(), reason.c_str());
    }
    if (agreed != SEQC_OK)
      raiseStatus(agreed);
  }

  /// (name, dtype, shape with -1 for dynamic) of each input or output.
  py::list tensors(bool outputs) const {
    py::list list;
    size_t n = outputs ? seqc_function_num_outputs(fn.get())
                       : seqc_function_num_inputs(fn.get());
    for (size_t i = 0; i < n; ++i) {
      seqc_dtype dtype;
      int32_t rank;
      const int64_t *shape;
      const char *argName = nullptr;
      check(seqc_function_tensor(fn.get(), outputs, i, &dtype, &rank, &shape,
                                 &argName));
      list.append(py::make_tuple(argName ? argName : "", dtypeName(dtype),
                                 std::vector<int64_t>(shape, shape + rank)));
    }
    return list;
  }

  std::shared_ptr<seqc_function> fn;
  std::string name;
};

class Module {
public:
  explicit Module(seqc_module *m) : module(m, seqc_module_destroy) {}

  std::vector<std::string> names() const {
    std::vector<std::string> all;
    for (size_t i = 0; i < seqc_module_num_functions(module.get()); ++i)
      all.emplace_back(seqc_module_function_name(module.get(), i));
    return all;
  }
  Function function(const std::string &name) const {
    seqc_function *fn = nullptr;
    check(seqc_module_function(module.get(), name.c_str(), &fn));
    return Function(fn, name);
  }
  std::string cacheStatus() const {
    switch (seqc_module_cache_status(module.get())) {
    case SEQC_CACHE_COMPILED:
      return "compiled";
    case SEQC_CACHE_MEMORY_HIT:
      return "memory";
    case SEQC_CACHE_DISK_HIT:
      return "disk";
    }
    return "?";
  }

  std::shared_ptr<seqc_module> module;
};

seqc_target targetOf(const std::string &name) {
  if (name == "cpu")
    return SEQC_TARGET_CPU;
  if (name == "cuda")
    return SEQC_TARGET_CUDA;
  if (name == "cuda-emulated")
    return SEQC_TARGET_CUDA_EMULATED;
  raise(py::reinterpret_borrow<py::object>(PyExc_ValueError),
        "seqc: unknown target '" + name + "' (cpu, cuda or cuda-emulated)");
}

Module compile(const std::string &source, bool isPath, const std::string &name,
               const std::string &target, bool reference, int optLevel,
               int numThreads, bool cache, const std::string &cacheDir,
               bool fuse, bool strict, size_t memoryLimit, int ranks,
               const std::string &bf16Products, const std::string &parallel,
               const std::string &bindWeights, uint64_t communicator,
               bool localSteps, double callTimeout) {
  seqc_compile_options o;
  seqc_compile_options_init(&o);
  // The weights bound when compiling: read for the compile, then released.
  std::unique_ptr<seqc_weights, void (*)(seqc_weights *)> bound(
      nullptr, seqc_weights_destroy);
  if (!bindWeights.empty()) {
    seqc_weights *raw = nullptr;
    check(seqc_weights_read(bindWeights.c_str(), &raw));
    bound.reset(raw);
    o.bound_weights = raw;
  }
  o.target = targetOf(target);
  o.reference = reference;
  o.opt_level = optLevel;
  o.num_threads = numThreads;
  o.use_cache = cache;
  o.cache_dir = cacheDir.empty() ? nullptr : cacheDir.c_str();
  o.fuse = fuse;
  o.strict = strict;
  o.memory_limit = memoryLimit;
  o.ranks = ranks;
  o.local_steps = localSteps;
  o.call_timeout = callTimeout;
  // The MPI_Comm handle as mpi4py gives it, unsigned (OpenMPI's pointer, or
  // MPICH's int sign-extended: 0xffffffff84000000 for a split
  // communicator), as the C API takes it; 0: MPI_COMM_WORLD.
  o.communicator =
      reinterpret_cast<void *>(static_cast<uintptr_t>(communicator));
  if (bf16Products == "dot")
    o.bf16_products = SEQC_BF16_DOT;
  else if (bf16Products == "widen")
    o.bf16_products = SEQC_BF16_WIDEN;
  else if (bf16Products == "amx")
    o.bf16_products = SEQC_BF16_AMX;
  else if (bf16Products == "amx-emulated")
    o.bf16_products = SEQC_BF16_AMX_EMULATED;
  else if (bf16Products != "auto")
    throw py::value_error("seqc: unknown bf16_products '" + bf16Products +
                          "' (auto, amx, amx-emulated, dot or widen)");
  if (parallel == "experts")
    o.parallel = SEQC_PARALLEL_EXPERTS;
  else if (parallel == "sequence+experts")
    o.parallel = SEQC_PARALLEL_SEQUENCE_AND_EXPERTS;
  else if (parallel != "sequence")
    throw py::value_error("seqc: unknown parallel '" + parallel +
                          "' (sequence, experts or sequence+experts)");
  seqc_module *m = nullptr;
  seqc_status status;
  {
    py::gil_scoped_release release;
    status = isPath
                 ? seqc_compile_file(engine(), source.c_str(), &o, &m)
                 : seqc_compile(engine(), source.data(), source.size(),
                                name.empty() ? nullptr : name.c_str(), &o, &m);
  }
  check(status);
  return Module(m);
}

/// The tensors of a weights file, as numpy arrays (or DLPack capsules for
/// bf16) viewing the file's buffer.
py::dict loadWeights(const std::string &path) {
  seqc_weights *raw = nullptr;
  check(seqc_weights_read(path.c_str(), &raw));
  auto weights = std::shared_ptr<seqc_weights>(raw, seqc_weights_destroy);
  // The arrays' common base keeps the file's buffer alive.
  auto *keeper = new std::shared_ptr<seqc_weights>(weights);
  py::capsule base(keeper, [](void *p) {
    delete static_cast<std::shared_ptr<seqc_weights> *>(p);
  });
  py::dict out;
  for (size_t i = 0; i < seqc_weights_count(raw); ++i) {
    seqc_view view;
    check(seqc_weights_view(raw, i, &view));
    std::vector<int64_t> shape(view.shape, view.shape + view.rank);
    const char *name = seqc_weights_name(raw, i);
    if (view.dtype == SEQC_BF16) {
      // numpy has no bf16: the raw bits, for torch's .view(torch.bfloat16).
      out[name] =
          py::make_tuple("bfloat16", py::array(py::dtype::of<uint16_t>(), shape,
                                               {}, view.data, base));
      continue;
    }
    out[name] =
        py::array(Tensor::numpyType(view.dtype), shape, {}, view.data, base);
  }
  return out;
}

} // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "seqc's C API for Python (the seqc package wraps it)";

  m.def(
      "_set_error_classes",
      [](py::object compile, py::object call, py::object argumentType,
         py::object io) {
        errorClasses() = {std::move(compile), std::move(call),
                          std::move(argumentType), std::move(io)};
      },
      "The exception classes C failures raise (set once by seqc/__init__)");

  py::class_<Tensor>(m, "Tensor",
                     "A result seqc allocated: contiguous, row-major")
      .def_property_readonly(
          "dtype", [](const Tensor &t) { return dtypeName(t.dtype()); })
      .def_property_readonly("shape", &Tensor::shape)
      .def_property_readonly("address", &Tensor::address,
                             "The buffer's address (to check aliasing)")
      .def(
          "__dlpack__",
          [](const Tensor &t, py::object /*stream*/) { return t.toDLPack(); },
          py::arg("stream") = py::none())
      .def("__dlpack_device__",
           [](const Tensor &) { return py::make_tuple(int(kDLCPU), 0); })
      .def("numpy", [](py::object self) { return Tensor::toNumpy(self); });

  py::class_<Function>(m, "Function", "A compiled public function")
      .def("__call__", &Function::call)
      .def_readonly("name", &Function::name)
      .def_property_readonly("inputs",
                             [](const Function &f) { return f.tensors(false); })
      .def_property_readonly("outputs",
                             [](const Function &f) { return f.tensors(true); });

  py::class_<Module>(m, "Module", "A compiled module")
      .def_property_readonly("names", &Module::names)
      .def("function", &Module::function)
      .def_property_readonly("cache_status", &Module::cacheStatus);

  m.def("compile", &compile, py::arg("source"), py::arg("is_path"),
        py::arg("name"), py::arg("target"), py::arg("reference"),
        py::arg("opt_level"), py::arg("num_threads"), py::arg("cache"),
        py::arg("cache_dir"), py::arg("fuse"), py::arg("strict"),
        py::arg("memory_limit"), py::arg("ranks"), py::arg("bf16_products"),
        py::arg("parallel"), py::arg("bind_weights"), py::arg("communicator"),
        py::arg("local_steps"), py::arg("call_timeout"));
  m.def("load_weights", &loadWeights, py::arg("path"));
  m.def("set_num_threads", [](int64_t n) { check(seqc_set_num_threads(n)); });
  m.def("get_num_threads", [] { return seqc_get_num_threads(); });
}

/*===- seqc_runtime.h - seqc's C runtime API ---------------------*- C -*-===*\
|*                                                                            *|
|* Tensors, errors and calls into compiled code: what both the JIT's C API    *|
|* (seqc.h) and the headers of ahead-of-time objects (seqc-compile) use.      *|
|* Plain C99; implemented by libseqc_runtime, which needs no MLIR or LLVM.    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef SEQC_RUNTIME_C_H
#define SEQC_RUNTIME_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every fallible function returns a status; SEQC_OK is 0. On failure,
 * seqc_last_error() (per thread) says why. */
typedef enum seqc_status {
  SEQC_OK = 0,
  SEQC_ERROR_INVALID_ARGUMENT = 1, /* null pointers, bad indices or sizes */
  SEQC_ERROR_COMPILE = 2,          /* invalid IR, unsupported code */
  SEQC_ERROR_NOT_FOUND = 3,        /* no such function */
  SEQC_ERROR_CALL = 4,             /* argument mismatch, run-time check */
  SEQC_ERROR_IO = 5                /* files */
} seqc_status;

/* The message of the last failure on this thread ("" if none). The pointer
 * stays valid until the next seqc call on this thread. */
const char *seqc_last_error(void);

typedef enum seqc_dtype {
  SEQC_F32 = 0,
  SEQC_F16 = 1,
  SEQC_BF16 = 2,
  SEQC_I32 = 3,
  SEQC_I64 = 4
} seqc_dtype;

/* Bytes per element; 0 for an invalid type. */
size_t seqc_dtype_size(seqc_dtype dtype);

/* A view of host memory the caller owns. `strides` (in elements) may be
 * NULL for a contiguous row-major tensor. A call reads a contiguous view in
 * place and copies any other into a contiguous buffer first. */
typedef struct seqc_view {
  seqc_dtype dtype;
  void *data;
  int32_t rank;
  const int64_t *shape;
  const int64_t *strides;
} seqc_view;

/* A result tensor seqc allocated: contiguous, row-major. */
typedef struct seqc_tensor seqc_tensor;

seqc_dtype seqc_tensor_dtype(const seqc_tensor *tensor);
int32_t seqc_tensor_rank(const seqc_tensor *tensor);
/* The `rank` sizes; valid while the tensor lives. */
const int64_t *seqc_tensor_shape(const seqc_tensor *tensor);
int64_t seqc_tensor_numel(const seqc_tensor *tensor);
void *seqc_tensor_data(seqc_tensor *tensor);
/* A view of the tensor (for passing a result on as an input). */
seqc_view seqc_tensor_view(const seqc_tensor *tensor);
/* Destroying NULL does nothing. */
void seqc_tensor_destroy(seqc_tensor *tensor);

/* Reads a .npy file (f32, f16, i32, i64) into a new tensor. */
seqc_status seqc_tensor_read_npy(const char *path, seqc_tensor **tensor);
/* Writes a tensor (or any view) as a .npy file, atomically. */
seqc_status seqc_tensor_write_npy(const char *path, const seqc_view *view);

/* The named tensors of a weights file: .safetensors (F32, F16, BF16, I32,
 * I64) or .npz (stored or deflated members). Every field is checked; a
 * malformed file is an error naming it and the problem. */
typedef struct seqc_weights seqc_weights;
seqc_status seqc_weights_read(const char *path, seqc_weights **weights);
size_t seqc_weights_count(const seqc_weights *weights);
/* The name of tensor `index` (file order); NULL when out of range. */
const char *seqc_weights_name(const seqc_weights *weights, size_t index);
/* A view of the tensor named `name` (SEQC_ERROR_NOT_FOUND if none), valid
 * while `weights` lives. */
seqc_status seqc_weights_find(const seqc_weights *weights, const char *name,
                              seqc_view *view);
/* A view of tensor `index`, valid while `weights` lives. */
seqc_status seqc_weights_view(const seqc_weights *weights, size_t index,
                              seqc_view *view);
/* Destroying NULL does nothing. */
void seqc_weights_destroy(seqc_weights *weights);

/* Threads of the runtime's pool (process-wide). */
seqc_status seqc_set_num_threads(int64_t threads);
int64_t seqc_get_num_threads(void);

/* Calls compiled function `name` whose packed entry point is `packed` and
 * whose signature (the text form of seqc's signatures) is `signature`:
 * checks the `num_inputs` inputs, runs it and stores one new tensor per
 * result into `outputs` (room for `num_outputs`). On failure no output is
 * stored. Used by the code seqc-compile generates. */
seqc_status seqc_rt_invoke_c(void (*packed)(void **), const char *signature,
                             const char *name, const seqc_view *inputs,
                             size_t num_inputs, seqc_tensor **outputs,
                             size_t num_outputs);

/* Nonzero when this CPU has every x86-64 feature of `features` (names
 * separated by spaces, as the signature text's cpu-features line). The
 * entry points seqc-compile generates call it to choose between their code
 * and the fallback code of the same object. */
int seqc_rt_cpu_has(const char *features);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SEQC_RUNTIME_C_H */

/*===- seqc.h - seqc's C API --------------------------------------*- C -*-===*\
|*                                                                            *|
|* Compile MLIR (a graph of seq and tensor-level ops) with seqc's JIT, look   *|
|* functions up and call them on host tensors, from any language with a C    *|
|* FFI. Opaque handles with explicit destroy functions; every fallible call   *|
|* returns a seqc_status and leaves the reason in seqc_last_error(). The      *|
|* library prints nothing. Handles may be used from several threads; a       *|
|* function may be called concurrently.                                       *|
|*                                                                            *|
|*   seqc_engine *engine;  seqc_module *module;  seqc_function *fn;           *|
|*   seqc_engine_create(&engine);                                             *|
|*   seqc_compile_file(engine, "block.mlir", NULL, &module);                  *|
|*   seqc_module_function(module, "main", &fn);                               *|
|*   seqc_function_call(fn, inputs, 2, outputs, 1);                           *|
|*                                                                            *|
|* Tensors, .npy files and weight files (seqc_weights_read) are in           *|
|* seqc_runtime.h: an ahead-of-time host has them without the JIT.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef SEQC_C_H
#define SEQC_C_H

#include "seqc/seqc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct seqc_engine seqc_engine;
typedef struct seqc_module seqc_module;
typedef struct seqc_function seqc_function;

/* SEQC_TARGET_CUDA_EMULATED: the CUDA kernels run on the host (tests). */
typedef enum seqc_target {
  SEQC_TARGET_CPU = 0,
  SEQC_TARGET_CUDA = 1,
  SEQC_TARGET_CUDA_EMULATED = 2
} seqc_target;

typedef enum seqc_cache_status {
  SEQC_CACHE_COMPILED = 0,   /* compiled now */
  SEQC_CACHE_MEMORY_HIT = 1, /* the engine had compiled it */
  SEQC_CACHE_DISK_HIT = 2    /* loaded from the disk cache */
} seqc_cache_status;

/* What a profiled build times (seqc_function_call_stats reports it). */
typedef enum seqc_profile {
  SEQC_PROFILE_NONE = 0,
  SEQC_PROFILE_CALLS = 1, /* every call a public function makes (layers) */
  SEQC_PROFILE_OPS = 2    /* every compute op, each run on its own */
} seqc_profile;

/* How the CPU kernels multiply bf16 operands (matmuls, experts, attention). */
typedef enum seqc_bf16_products {
  SEQC_BF16_AUTO = 0,        /* $SEQC_CPU_BF16 (amx, amx-emulated, dot, widen)
                                if set, else AMX tiles where the CPU has AMX
                                and Linux grants the tile data, else dot on
                                AMD CPUs with AVX-512 BF16, else widened */
  SEQC_BF16_DOT = 1,         /* AVX-512 BF16 vdpbf16ps on bf16 pairs; an error
                                for a CPU without it */
  SEQC_BF16_WIDEN = 2,       /* f32 FMAs on operands widened to f32 */
  SEQC_BF16_AMX = 3,         /* AMX tiles in matmuls and experts (dot products
                                in attention); an error without AMX or its
                                tile data permission */
  SEQC_BF16_AMX_EMULATED = 4 /* the AMX kernels, tiles emulated by vector
                                code: any CPU (tests, not speed) */
} seqc_bf16_products;

/* What a distributed compile (ranks > 0) splits over the processes. */
typedef enum seqc_parallel {
  SEQC_PARALLEL_SEQUENCE = 0, /* every seq op's steps */
  SEQC_PARALLEL_EXPERTS = 1,  /* moe_ffn's experts (E % ranks == 0), the
                                 routed tokens exchanged all-to-all */
  SEQC_PARALLEL_SEQUENCE_AND_EXPERTS = 2 /* both: moe_ffn by experts, every
                                            other seq op by steps */
} seqc_parallel;

typedef struct seqc_compile_options {
  seqc_target target;
  int reference;         /* nonzero: the reference lowering (the oracle) */
  int opt_level;         /* 0-3 */
  size_t memory_limit;   /* bytes one call may hold; 0: physical memory */
  int num_threads;       /* 0: keep the pool's count */
  int use_cache;         /* nonzero: memory and disk cache */
  const char *cache_dir; /* NULL: $SEQC_CACHE_DIR, $XDG_CACHE_HOME/seqc, ... */
  int fuse;             /* nonzero (default): elementwise glue fused into ops */
  seqc_profile profile; /* default SEQC_PROFILE_NONE */
  int strict;           /* nonzero: an op without a fast lowering is an error */
  int ranks; /* > 0: sequence parallelism over MPI_COMM_WORLD's `ranks`
                processes (every process compiles and calls the same
                module on the same arguments, each computes its share of
                the steps; the engine opens OpenMPI's libmpi and calls
                MPI_Init_thread unless MPI is up; SEQC_TARGET_CUDA: one GPU
                per process, the exchanges on NCCL). 0 (default): one
                process */
  seqc_bf16_products bf16_products; /* default SEQC_BF16_AUTO */
  seqc_parallel parallel; /* with ranks > 0; default SEQC_PARALLEL_SEQUENCE */
  void *communicator;     /* with ranks > 0: the host's MPI_Comm, as
                             (void *)(intptr_t)comm (OpenMPI's pointer or
                             MPICH's int), whose size is `ranks` and whose
                             processes call collectively; NULL (default):
                             MPI_COMM_WORLD */
  const seqc_weights *bound_weights; /* NULL (default): none. Each tensor
                         is bound when compiling: every argument of a public
                         function whose seq.name is the tensor's name becomes
                         that tensor, a constant of the module, and the
                         function no longer takes it (matmuls pack such a
                         weight once, when compiling). Read during the
                         compile only. */
  int local_steps; /* with ranks > 0 and SEQC_PARALLEL_SEQUENCE, nonzero:
                      each process passes and gets back only its own steps
                      of the arguments and results with steps (rank r's
                      follow rank r - 1's; any number on each); weights and
                      states stay whole. Default 0: every process passes
                      and gets the whole. */
  double call_timeout; /* with ranks > 1: a call that has not returned after
                          this many seconds prints an error and ends every
                          rank of the job (MPI_Abort), where a rank that
                          stopped inside it would leave the others waiting
                          for ever; 0 (default): no limit */
} seqc_compile_options;

/* The defaults: CPU, fast pipeline, -O3, cache on, fused, no profile. */
void seqc_compile_options_init(seqc_compile_options *options);

seqc_status seqc_engine_create(seqc_engine **engine);
void seqc_engine_destroy(seqc_engine *engine);

/* `options` may be NULL (the defaults). `name` names the buffer in error
 * messages (may be NULL). */
seqc_status seqc_compile(seqc_engine *engine, const char *source, size_t length,
                         const char *name, const seqc_compile_options *options,
                         seqc_module **module);
seqc_status seqc_compile_file(seqc_engine *engine, const char *path,
                              const seqc_compile_options *options,
                              seqc_module **module);
/* Functions looked up from a module stay valid after it is destroyed. */
void seqc_module_destroy(seqc_module *module);
seqc_cache_status seqc_module_cache_status(const seqc_module *module);
/* Why the disk cache was not used or was rebuilt ("" when it was fine): a
 * corrupt entry, an unwritable directory. Valid while the module lives. */
const char *seqc_module_cache_note(const seqc_module *module);

size_t seqc_module_num_functions(const seqc_module *module);
/* NULL when `index` is out of range. */
const char *seqc_module_function_name(const seqc_module *module, size_t index);
seqc_status seqc_module_function(const seqc_module *module, const char *name,
                                 seqc_function **function);
void seqc_function_destroy(seqc_function *function);

size_t seqc_function_num_inputs(const seqc_function *function);
size_t seqc_function_num_outputs(const seqc_function *function);
/* The type of input (is_output = 0) or output `index`: element type, rank
 * and shape (-1 for a dynamic dimension); pointers stay valid while the
 * function lives. */
seqc_status seqc_function_tensor(const seqc_function *function, int is_output,
                                 size_t index, seqc_dtype *dtype, int32_t *rank,
                                 const int64_t **shape, const char **name);

/* Runs the function: checks the inputs against its signature, and on
 * success stores a new tensor per result in `outputs` (destroy each with
 * seqc_tensor_destroy). */
seqc_status seqc_function_call(const seqc_function *function,
                               const seqc_view *inputs, size_t num_inputs,
                               seqc_tensor **outputs, size_t num_outputs);

/* A call's measurements. Before the call, set the arrays (or NULL) with room
 * for seqc_function_num_regions() values; the call fills them (the regions
 * of a build with a profile, else none) and the byte counts. */
typedef struct seqc_call_stats {
  size_t allocated_bytes; /* every buffer the call allocated, summed */
  size_t peak_bytes;      /* the most held at once */
  double *region_seconds; /* per profile region: time spent in it */
  int64_t *region_calls;  /* per profile region: times it ran */
} seqc_call_stats;

/* The profile regions of a function compiled with a profile (0 without). */
size_t seqc_function_num_regions(const seqc_function *function);
/* NULL when `index` is out of range. */
const char *seqc_function_region_name(const seqc_function *function,
                                      size_t index);
/* seqc_function_call, also measuring the call into `stats`. */
seqc_status seqc_function_call_stats(const seqc_function *function,
                                     const seqc_view *inputs, size_t num_inputs,
                                     seqc_tensor **outputs, size_t num_outputs,
                                     seqc_call_stats *stats);

/* For a host that cannot make a call of a distributed function (ranks > 1)
 * that the other ranks make (its own checks refused its arguments, an
 * input file did not read): the others wait at the call's start for this
 * rank, so it takes part with `reason` instead, and every rank's call
 * returns the same error naming the lowest rank that refused. Returns
 * SEQC_ERROR_CALL with that error (seqc_last_error); SEQC_OK, doing
 * nothing, for a function of one process. */
seqc_status seqc_function_refuse_call(const seqc_function *function,
                                      const char *reason);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SEQC_C_H */

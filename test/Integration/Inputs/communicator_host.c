/* A C host that owns MPI and gives seqc its own communicators: the world's
 * 4 processes split into two groups of 2 (ranks 0 and 2, 1 and 3), each
 * group running the same module on its own data, over its communicator:
 * a linear_scan by sequence parallelism and a moe_ffn by expert
 * parallelism. Each group's results must equal one process's (the code
 * talking over MPI_COMM_WORLD would mix the groups' data or wait on the
 * wrong peers); a module for more ranks than its communicator has is an
 * error. Then, in the same processes, other groups on a new communicator
 * (which may reuse the freed one's handle) and the whole world run the
 * scan again: nothing made for the first groups' exchanges may serve them. With
 * the argument cuda-emulated, both run on the emulated GPU target (its
 * exchanges through the NCCL entry points, on MPI). Last, a rank that cannot
 * make a call (the host's own reason, then too little room for the results)
 * stops every rank's call with the same error. Built with mpicc against
 * the build tree's libseqc, by OpenMPI's or MPICH's mpicc: the communicator
 * goes to seqc as `(void *)(intptr_t)comm`, which holds either ABI's handle
 * (OpenMPI's pointer, MPICH's int). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seqc/seqc.h"

enum { T = 41, D = 8, F = 16, E = 4, K = 2 };

static const char *kScan =
    "func.func @main(%a: tensor<1x41x3xf32>, %b: tensor<1x41x3xf32>)\n"
    "    -> (tensor<1x41x3xf32>, tensor<1x3xf32>) {\n"
    "  %h, %last = seq.linear_scan %a, %b : (tensor<1x41x3xf32>, "
    "tensor<1x41x3xf32>) -> (tensor<1x41x3xf32>, tensor<1x3xf32>)\n"
    "  return %h, %last : tensor<1x41x3xf32>, tensor<1x3xf32>\n"
    "}\n";

static const char *kMoe =
    "func.func @main(%x: tensor<41x8xf32>, %w: tensor<41x2xf32>,\n"
    "    %i: tensor<41x2xi32>, %up: tensor<4x8x16xf32>,\n"
    "    %down: tensor<4x16x8xf32>) -> (tensor<41x8xf32>, tensor<4xi64>) {\n"
    "  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down "
    "{capacity_factor = 1.0 : f32} : (tensor<41x8xf32>, tensor<41x2xf32>, "
    "tensor<41x2xi32>, tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> "
    "(tensor<41x8xf32>, tensor<4xi64>)\n"
    "  return %y, %load : tensor<41x8xf32>, tensor<4xi64>\n"
    "}\n";

static seqc_target target = SEQC_TARGET_CPU;
static unsigned state;
static float uniform(void) {
  state = state * 1664525u + 1013904223u;
  return (float)(state >> 8) / 16777216.0f;
}

static seqc_view view(seqc_dtype dtype, void *data, int32_t rank,
                      const int64_t *shape) {
  seqc_view v = {dtype, data, rank, shape, NULL};
  return v;
}

/* Calls `source` split over `comm` (of `ranks` processes) and in one
 * process; 0 when every result agrees. */
static int agree(seqc_engine *engine, const char *what, const char *source,
                 seqc_parallel parallel, MPI_Comm comm, int ranks,
                 const seqc_view *in, size_t n, size_t outputs) {
  seqc_compile_options split, single;
  seqc_module *ms = NULL, *m1 = NULL;
  seqc_function *fs = NULL, *f1 = NULL;
  seqc_tensor *os[2] = {NULL, NULL}, *o1[2] = {NULL, NULL};
  size_t i;
  int64_t j;
  int bad = 0;
  seqc_compile_options_init(&split);
  seqc_compile_options_init(&single);
  split.target = single.target = target;
  split.ranks = ranks;
  split.parallel = parallel;
  split.communicator = (void *)(intptr_t)comm;
  if (seqc_compile(engine, source, strlen(source), "split.mlir", &split, &ms) !=
          SEQC_OK ||
      seqc_compile(engine, source, strlen(source), "single.mlir", &single,
                   &m1) != SEQC_OK ||
      seqc_module_function(ms, "main", &fs) != SEQC_OK ||
      seqc_module_function(m1, "main", &f1) != SEQC_OK ||
      seqc_function_call(fs, in, n, os, outputs) != SEQC_OK ||
      seqc_function_call(f1, in, n, o1, outputs) != SEQC_OK) {
    printf("%s: error: %s\n", what, seqc_last_error());
    return 1;
  }
  for (i = 0; i < outputs; ++i) {
    int64_t count = seqc_tensor_numel(os[i]);
    for (j = 0; j < count; ++j) {
      double a, b;
      if (seqc_tensor_dtype(os[i]) == SEQC_I64) {
        a = (double)((int64_t *)seqc_tensor_data(os[i]))[j];
        b = (double)((int64_t *)seqc_tensor_data(o1[i]))[j];
      } else {
        a = ((float *)seqc_tensor_data(os[i]))[j];
        b = ((float *)seqc_tensor_data(o1[i]))[j];
      }
      if (fabs(a - b) > 1e-4 * (1.0 + fabs(b)))
        bad = 1;
    }
    seqc_tensor_destroy(os[i]);
    seqc_tensor_destroy(o1[i]);
  }
  seqc_function_destroy(fs), seqc_function_destroy(f1);
  seqc_module_destroy(ms), seqc_module_destroy(m1);
  return bad;
}

/* The world's ranks call the scan, but rank 2 refuses with its own reason
 * and then rank 1 gives room for one result of two: each time every rank
 * prints the same error. */
static void refuse(seqc_engine *engine, int world, const seqc_view *in) {
  seqc_compile_options o;
  seqc_module *m = NULL;
  seqc_function *f = NULL;
  seqc_tensor *out[2] = {NULL, NULL};
  seqc_status status;
  seqc_compile_options_init(&o);
  o.target = target;
  o.ranks = 4;
  if (seqc_compile(engine, kScan, strlen(kScan), "scan.mlir", &o, &m) !=
          SEQC_OK ||
      seqc_module_function(m, "main", &f) != SEQC_OK) {
    printf("refused rank %d: error: %s\n", world, seqc_last_error());
    return;
  }
  if (world == 2)
    status = seqc_function_refuse_call(f, "its input file did not read");
  else
    status = seqc_function_call(f, in, 2, out, 2);
  printf("refused rank %d: %s\n", world,
         status == SEQC_OK ? "called" : seqc_last_error());
  status = seqc_function_call(f, in, 2, out, world == 1 ? 1 : 2);
  printf("room rank %d: %s\n", world,
         status == SEQC_OK ? "called" : seqc_last_error());
  seqc_function_destroy(f);
  seqc_module_destroy(m);
}

/* Scan inputs of `seed`. */
static void fillScan(unsigned seed, float *a, float *b) {
  int i;
  state = seed;
  for (i = 0; i < T * 3; ++i)
    a[i] = 0.5f + 0.5f * uniform(), b[i] = uniform() - 0.5f;
}

int main(int argc, char **argv) {
  int world, color, rank, bad = 0, again;
  MPI_Comm group;
  seqc_engine *engine = NULL;
  static float a[T * 3], b[T * 3], x[T * D], w[T * K], up[E * D * F],
      down[E * F * D];
  static int32_t idx[T * K];
  int64_t scanShape[3] = {1, T, 3}, xShape[2] = {T, D}, wShape[2] = {T, K},
          upShape[3] = {E, D, F}, downShape[3] = {E, F, D};
  seqc_view scanIn[2], moeIn[5];
  int t, i;

  MPI_Init(&argc, &argv);
  if (argc > 1 && strcmp(argv[1], "cuda-emulated") == 0)
    target = SEQC_TARGET_CUDA_EMULATED;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  color = world % 2;
  MPI_Comm_split(MPI_COMM_WORLD, color, world, &group);
  MPI_Comm_rank(group, &rank);
  /* Each group its own data, the same on its two ranks. */
  fillScan(17u + 1000u * (unsigned)color, a, b);
  for (i = 0; i < T * D; ++i)
    x[i] = uniform() - 0.5f;
  for (t = 0; t < T; ++t) {
    idx[t * K] = (t * (color + 1)) % E;
    idx[t * K + 1] = (t * (color + 1) + 1 + color) % E;
    w[t * K] = uniform(), w[t * K + 1] = uniform();
  }
  for (i = 0; i < E * D * F; ++i)
    up[i] = uniform() - 0.5f, down[i] = uniform() - 0.5f;

  if (seqc_engine_create(&engine) != SEQC_OK) {
    printf("error: %s\n", seqc_last_error());
    return 1;
  }
  scanIn[0] = view(SEQC_F32, a, 3, scanShape);
  scanIn[1] = view(SEQC_F32, b, 3, scanShape);
  moeIn[0] = view(SEQC_F32, x, 2, xShape);
  moeIn[1] = view(SEQC_F32, w, 2, wShape);
  moeIn[2] = view(SEQC_I32, idx, 2, wShape);
  moeIn[3] = view(SEQC_F32, up, 3, upShape);
  moeIn[4] = view(SEQC_F32, down, 3, downShape);
  bad |= agree(engine, "linear_scan", kScan, SEQC_PARALLEL_SEQUENCE, group, 2,
               scanIn, 2, 2);
  bad |= agree(engine, "moe_ffn", kMoe, SEQC_PARALLEL_EXPERTS, group, 2, moeIn,
               5, 2);
  printf("group %d rank %d: %s\n", color, rank, bad ? "DISAGREE" : "agree");

  /* A module for 4 ranks on a communicator of 2 is an error. */
  {
    seqc_compile_options o;
    seqc_module *m = NULL;
    seqc_compile_options_init(&o);
    o.target = target;
    o.ranks = 4;
    o.communicator = (void *)(intptr_t)group;
    if (seqc_compile(engine, kScan, strlen(kScan), "scan.mlir", &o, &m) ==
        SEQC_OK)
      printf("group %d rank %d: 4 ranks on 2 compiled\n", color, rank), bad = 1;
    else if (rank == 0)
      printf("group %d: error: %s\n", color, seqc_last_error());
  }

  /* Other groups (ranks 0 and 1, 2 and 3) on a communicator that may reuse
   * the freed one's handle, then the whole world, in the same processes:
   * each run exchanges among its own processes only. */
  MPI_Comm_free(&group);
  color = world / 2;
  MPI_Comm_split(MPI_COMM_WORLD, color, world, &group);
  MPI_Comm_rank(group, &rank);
  fillScan(300u + (unsigned)color, a, b);
  again = agree(engine, "linear_scan", kScan, SEQC_PARALLEL_SEQUENCE, group, 2,
                scanIn, 2, 2);
  printf("regroup %d rank %d: %s\n", color, rank, again ? "DISAGREE" : "agree");
  bad |= again;
  fillScan(500u, a, b);
  again = agree(engine, "linear_scan", kScan, SEQC_PARALLEL_SEQUENCE,
                MPI_COMM_WORLD, 4, scanIn, 2, 2);
  printf("world rank %d: %s\n", world, again ? "DISAGREE" : "agree");
  bad |= again;
  refuse(engine, world, scanIn);

  seqc_engine_destroy(engine);
  MPI_Comm_free(&group);
  MPI_Finalize();
  return bad;
}

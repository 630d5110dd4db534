/* seqc's C API: compile gla.mlir with the JIT, inspect a function's
 * signature, call it on two sequence lengths and check the results against
 * a plain-loop reference; then show that a bad call is an error, not a
 * crash. Plain C99; links libseqc. */
#include "gla_reference.h"
#include "seqc/seqc.h"

static int run(const seqc_function *fn, int64_t T) {
  int64_t shape[4] = {1, T, HEADS, DK};
  size_t n = (size_t)(T * HEADS * DK);
  float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4);
  float *g = malloc(n * 4), *o = malloc(n * 4),
        *last = malloc(HEADS * DK * DV * 4);
  seqc_view in[4];
  seqc_tensor *out[2] = {NULL, NULL};
  int failures = 0;
  gla_fill(T, q, k, v, g);
  gla_reference(T, q, k, v, g, 0.25f, o, last);
  gla_views(in, shape, q, k, v, g);
  printf("T = %lld\n", (long long)T);
  if (seqc_function_call(fn, in, 4, out, 2) != SEQC_OK) {
    printf("  error: %s\n", seqc_last_error());
    failures = 1;
  } else {
    failures +=
        gla_compare("outputs", seqc_tensor_data(out[0]), o, (int64_t)n, 1e-4);
    failures += gla_compare("final state", seqc_tensor_data(out[1]), last,
                            HEADS * DK * DV, 1e-4);
  }
  seqc_tensor_destroy(out[0]);
  seqc_tensor_destroy(out[1]);
  free(q), free(k), free(v), free(g), free(o), free(last);
  return failures;
}

int main(void) {
  seqc_engine *engine = NULL;
  seqc_module *module = NULL;
  seqc_function *fn = NULL;
  seqc_dtype dtype;
  int32_t rank, d;
  const int64_t *shape;
  const char *name;
  size_t i;
  int failures = 0;

  if (seqc_engine_create(&engine) != SEQC_OK ||
      seqc_compile_file(engine, GLA_MLIR, NULL, &module) != SEQC_OK ||
      seqc_module_function(module, "gla", &fn) != SEQC_OK) {
    fprintf(stderr, "error: %s\n", seqc_last_error());
    return 1;
  }
  printf("@gla takes");
  for (i = 0; i < seqc_function_num_inputs(fn); ++i) {
    seqc_function_tensor(fn, 0, i, &dtype, &rank, &shape, &name);
    printf(" %s:", name);
    for (d = 0; d < rank; ++d)
      printf(shape[d] < 0 ? "?x" : "%lldx", (long long)shape[d]);
    printf("%s", dtype == SEQC_F32 ? "f32" : "other");
  }
  printf("\n");

  failures += run(fn, 100); /* not a multiple of any chunk size */
  failures += run(fn, 1000);

  /* Misuse is a status and a message. */
  {
    int64_t shape3[3] = {1, 8, HEADS};
    float buf[32];
    seqc_view bad = {SEQC_F32, buf, 3, shape3, NULL};
    seqc_view in[4];
    seqc_tensor *out[2];
    seqc_function *other = NULL;
    seqc_status st;
    in[0] = in[1] = in[2] = in[3] = bad;
    st = seqc_function_call(fn, in, 4, out, 2);
    printf("rank-3 input: status %d, \"%s\"\n", (int)st, seqc_last_error());
    failures += st != SEQC_ERROR_CALL;
    st = seqc_module_function(module, "missing", &other);
    printf("unknown function: status %d, \"%s\"\n", (int)st, seqc_last_error());
    failures += st != SEQC_ERROR_NOT_FOUND;
  }

  seqc_function_destroy(fn);
  seqc_module_destroy(module);
  seqc_engine_destroy(engine);
  printf(failures ? "FAILED\n" : "PASSED\n");
  return failures ? 1 : 0;
}

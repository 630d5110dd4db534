/* An ahead-of-time compiled block: gla.mlir was compiled by seqc-compile at
 * build time into an object and the header gla_aot.h. This program links
 * that object and libseqc_runtime only: no JIT, no MLIR, no LLVM. */
#include "gla_aot.h"
#include "gla_reference.h"

int main(void) {
  enum { T = 64, N = T * HEADS * DK };
  static float q[N], k[N], v[N], g[N], o[N], last[HEADS * DK * DV];
  int64_t shape[4] = {1, T, HEADS, DK};
  seqc_view in[4];
  seqc_tensor *out[2] = {NULL, NULL}, *o64 = NULL, *last64 = NULL;
  int i, failures = 0;

  gla_fill(T, q, k, v, g);
  gla_reference(T, q, k, v, g, 0.25f, o, last);

  /* The dynamic-length entry point takes views. */
  gla_views(in, shape, q, k, v, g);
  printf("gla_gla (views, T = %d)\n", T);
  if (gla_gla(in, GLA_GLA_NUM_INPUTS, out, GLA_GLA_NUM_OUTPUTS) != SEQC_OK) {
    printf("  error: %s\n", seqc_last_error());
    return 1;
  }
  failures += gla_compare("outputs", seqc_tensor_data(out[0]), o, N, 1e-4);
  failures += gla_compare("final state", seqc_tensor_data(out[1]), last,
                          HEADS * DK * DV, 1e-4);

  /* The static one also has a typed entry point. */
  printf("gla_gla64_typed (float pointers)\n");
  if (gla_gla64_typed(q, k, v, g, &o64, &last64) != SEQC_OK) {
    printf("  error: %s\n", seqc_last_error());
    return 1;
  }
  failures += gla_compare("outputs", seqc_tensor_data(o64), o, N, 1e-4);
  failures += gla_compare("final state", seqc_tensor_data(last64), last,
                          HEADS * DK * DV, 1e-4);

  /* A wrong length is caught by the runtime's signature check. */
  {
    int64_t wrong[4] = {1, T, HEADS, DK + 1};
    seqc_status st;
    for (i = 0; i < 4; ++i)
      in[i].shape = wrong;
    st = gla_gla(in, 4, out, 2);
    printf("K = 33: status %d, \"%s\"\n", (int)st, seqc_last_error());
    failures += st != SEQC_ERROR_CALL;
  }

  seqc_tensor_destroy(out[0]);
  seqc_tensor_destroy(out[1]);
  seqc_tensor_destroy(o64);
  seqc_tensor_destroy(last64);
  printf(failures ? "FAILED\n" : "PASSED\n");
  return failures ? 1 : 0;
}

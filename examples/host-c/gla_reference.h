/* The inputs and a plain-loop reference of gated linear attention, shared
 * by the JIT and the ahead-of-time examples. */
#ifndef GLA_REFERENCE_H
#define GLA_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seqc/seqc_runtime.h"

enum { HEADS = 4, DK = 32, DV = 32 };

/* Deterministic inputs in [-1, 1) for q, k, v, and log-decays in
 * [-0.5, 0) for g. */
static void gla_fill(int64_t T, float *q, float *k, float *v, float *g) {
  uint32_t s = 12345;
  int64_t n = T * HEADS * DK, i;
  for (i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    q[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    s = s * 1664525u + 1013904223u;
    k[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    s = s * 1664525u + 1013904223u;
    v[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    s = s * 1664525u + 1013904223u;
    g[i] = -0.5f * (float)(s >> 8) / 16777216.0f;
  }
}

/* S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t, in
 * double, one token at a time. */
static void gla_reference(int64_t T, const float *q, const float *k,
                          const float *v, const float *g, float scale, float *o,
                          float *last) {
  double *S = (double *)calloc(HEADS * DK * DV, sizeof(double));
  int64_t t;
  int h, i, j;
  for (t = 0; t < T; ++t)
    for (h = 0; h < HEADS; ++h) {
      double *Sh = S + h * DK * DV;
      const float *qt = q + (t * HEADS + h) * DK,
                  *kt = k + (t * HEADS + h) * DK;
      const float *vt = v + (t * HEADS + h) * DV,
                  *gt = g + (t * HEADS + h) * DK;
      for (i = 0; i < DK; ++i)
        for (j = 0; j < DV; ++j)
          Sh[i * DV + j] = exp(gt[i]) * Sh[i * DV + j] + (double)kt[i] * vt[j];
      for (j = 0; j < DV; ++j) {
        double acc = 0;
        for (i = 0; i < DK; ++i)
          acc += (double)qt[i] * Sh[i * DV + j];
        o[(t * HEADS + h) * DV + j] = (float)(scale * acc);
      }
    }
  for (i = 0; i < HEADS * DK * DV; ++i)
    last[i] = (float)S[i];
  free(S);
}

/* Contiguous f32 views of q, k, v, g, all of `shape` (1 x T x HEADS x DK). */
static void gla_views(seqc_view in[4], const int64_t shape[4], float *q,
                      float *k, float *v, float *g) {
  float *data[4];
  int i;
  data[0] = q, data[1] = k, data[2] = v, data[3] = g;
  for (i = 0; i < 4; ++i) {
    in[i].dtype = SEQC_F32;
    in[i].data = data[i];
    in[i].rank = 4;
    in[i].shape = shape;
    in[i].strides = NULL;
  }
}

/* Prints the largest difference relative to the largest reference value;
 * returns 0 when within `tol`. */
static int gla_compare(const char *what, const float *got, const float *want,
                       int64_t n, double tol) {
  double err = 0, scale = 1e-30;
  int64_t i;
  int ok;
  for (i = 0; i < n; ++i) {
    double d = fabs((double)got[i] - want[i]);
    if (d != d)
      d = INFINITY; /* a NaN is never within tolerance */
    if (d > err)
      err = d;
    if (fabs(want[i]) > scale)
      scale = fabs(want[i]);
  }
  ok = err <= tol * scale;
  printf("  %-22s max error %.2e of max |value| %.3f: %s\n", what, err, scale,
         ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

#endif

/* The two ways of passing states across ranks that issue 20 names,
 * measured on MPI alone: each rank holds the (transition, state) pair of
 * an ssd over its steps (H heads, a P x N state per head, a transition of
 * one decay per head and state column, as seq-distribute-steps computes)
 * and needs the fold of the pairs of the ranks before it.
 *
 *   allreduce+fold: what seqc did before it lowered shard.all_gather: an
 *                   MPI_Allreduce of R zero-padded rows (MPI_SUM), then a
 *                   local fold over the ranks before it.
 *   Allgather:      what seqc does now (LASP-2): MPI_Allgather of the
 *                   pairs, then the same fold.
 *   Exscan:         MPI_Exscan with a user-defined, non-commutative
 *                   combine (M2 M1, M2 S1 + S2): each rank receives its
 *                   incoming pair directly.
 *
 * Prints the median microseconds per exchange on rank 0.
 *   mpicc -O2 bench/state_exchange.c -o state_exchange
 *   mpirun -np R ./state_exchange [H P N iterations] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int H = 8, P = 64, N = 64;

/* The pair layout: H*N decays, then H*P*N state values. */
static int pairSize(void) { return H * N + H * P * N; }

/* out <- (M_b M_a, M_b S_a + S_b): pair a comes first in step order. */
static void compose(const float *a, const float *b, float *out) {
  const float *ma = a, *sa = a + H * N, *mb = b, *sb = b + H * N;
  float *mo = out, *so = out + H * N;
  int h, p, n;
  for (h = 0; h < H; ++h)
    for (p = 0; p < P; ++p)
      for (n = 0; n < N; ++n) {
        int i = (h * P + p) * N + n;
        so[i] = mb[h * N + n] * sa[i] + sb[i];
      }
  for (h = 0; h < H * N; ++h)
    mo[h] = mb[h] * ma[h];
}

static void scanOp(void *in, void *inout, int *len, MPI_Datatype *type) {
  /* MPI passes the lower ranks' partial result in `in`. */
  int pairs = *len / pairSize(), i;
  float *tmp = malloc(sizeof(float) * pairSize());
  (void)type;
  for (i = 0; i < pairs; ++i) {
    float *a = (float *)in + i * pairSize(), *b = (float *)inout + i * pairSize();
    compose(a, b, tmp);
    memcpy(b, tmp, sizeof(float) * pairSize());
  }
  free(tmp);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int rank, R, it, iterations = 200, j;
  MPI_Op op;
  MPI_Init(&argc, &argv);
  if (argc >= 4)
    H = atoi(argv[1]), P = atoi(argv[2]), N = atoi(argv[3]);
  if (argc >= 5)
    iterations = atoi(argv[4]);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &R);
  MPI_Op_create(scanOp, /*commute=*/0, &op);
  int size = pairSize();
  float *mine = malloc(sizeof(float) * size);
  float *rows = malloc(sizeof(float) * size * R);
  float *gathered = malloc(sizeof(float) * size * R);
  float *incoming = malloc(sizeof(float) * size);
  float *tmp = malloc(sizeof(float) * size);
  double *times[3];
  for (j = 0; j < 3; ++j)
    times[j] = malloc(sizeof(double) * iterations);
  for (j = 0; j < size; ++j)
    mine[j] = 0.5f + 0.001f * (float)((j + rank) % 97);

  for (it = 0; it < iterations; ++it) {
    double t0;
    /* seqc's former exchange: an all-reduce of zero-padded rows, then the
     * fold. */
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    memset(rows, 0, sizeof(float) * size * R);
    memcpy(rows + rank * size, mine, sizeof(float) * size);
    MPI_Allreduce(rows, gathered, size * R, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank > 0) {
      memcpy(incoming, gathered, sizeof(float) * size);
      for (j = 1; j < rank; ++j) {
        compose(incoming, gathered + j * size, tmp);
        memcpy(incoming, tmp, sizeof(float) * size);
      }
    }
    times[0][it] = MPI_Wtime() - t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    MPI_Allgather(mine, size, MPI_FLOAT, gathered, size, MPI_FLOAT,
                  MPI_COMM_WORLD);
    if (rank > 0) {
      memcpy(incoming, gathered, sizeof(float) * size);
      for (j = 1; j < rank; ++j) {
        compose(incoming, gathered + j * size, tmp);
        memcpy(incoming, tmp, sizeof(float) * size);
      }
    }
    times[1][it] = MPI_Wtime() - t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    MPI_Exscan(mine, incoming, size, MPI_FLOAT, op, MPI_COMM_WORLD);
    times[2][it] = MPI_Wtime() - t0;
  }
  /* The slowest rank's time per exchange, then the median over runs. */
  for (j = 0; j < 3; ++j) {
    MPI_Allreduce(MPI_IN_PLACE, times[j], iterations, MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    qsort(times[j], iterations, sizeof(double), cmp);
  }
  if (rank == 0)
    printf("state exchange R=%d H=%d P=%d N=%d (%.3f MB per pair), median of "
           "%d: allreduce of rows + fold %.1f us, MPI_Allgather + fold "
           "(seqc's) %.1f us, MPI_Exscan %.1f us\n",
           R, H, P, N, 4.0 * size / 1e6, iterations,
           1e6 * times[0][iterations / 2], 1e6 * times[1][iterations / 2],
           1e6 * times[2][iterations / 2]);
  MPI_Op_free(&op);
  MPI_Finalize();
  return 0;
}

/*
 * 05_advanced.c - four techniques that make data-parallel training cheaper.
 *
 *   chorusrun -n 4 build/examples/05_advanced          (add --host for host memory)
 *
 * 1. Gradient accumulation: k micro-batches per step, gradients summed
 *    locally and all-reduced once per step instead of after every
 *    micro-batch: k times fewer AllReduces, the same weights.
 * 2. Compression: gradients converted to fp16 or bf16 before the
 *    AllReduce: half the bytes, at the price of a rounding error that is
 *    measured against the fp32 result.
 * 3. Overlap: backward produces gradients layer by layer, last layer first;
 *    a bucket of finished layers can be all-reduced while earlier layers
 *    are still being computed. On a GPU, as frameworks do it: backward's
 *    kernels on one stream, each bucket's AllReduce on a second stream
 *    that waits for the bucket's last layer through an event. On host
 *    memory, a second thread does the AllReduces. The step time is
 *    printed per bucket size.
 * 4. Process groups: ncclCommSplit cuts the ranks into a data-parallel x
 *    tensor-parallel grid; each rank then talks to its row or its column.
 *
 * The model's arithmetic (mlp.h) runs on the CPU here, whatever the memory:
 * this example is about the communication. Every part checks its result
 * and the program exits 1 if one is wrong.
 */
#include "common.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "backward.h"
#include "mlp.h"

static const mlp model = {8, 32, 3};
#define SAMPLES 512
#define BATCH   64 /* global batch per step */
#define LR      0.2f

typedef struct ctx {
  const ex_world *w;
  ncclComm_t comm;
  float *dev; /* a buffer where the communicator works, for any use */
  size_t dev_floats;
  int wrong;
} ctx;

/* An AllReduce of host data through the communicator's memory (a plain
 * copy on host memory, a copy to the GPU and back otherwise). */
static void allreduce_host(ctx *c, float *data, size_t n, ncclRedOp_t op) {
  ex_put(c->w, c->dev, data, n * sizeof(float));
  NCCL_CHECK(ncclAllReduce(c->dev, c->dev, n, ncclFloat, op, c->comm, c->w->stream));
  ex_get(c->w, data, c->dev, n * sizeof(float));
}

/* Rank 0's verdict on a check made on every rank: any rank wrong fails. */
static int agree(ctx *c, int ok) {
  float bad = ok ? 0.0f : 1.0f;
  allreduce_host(c, &bad, 1, ncclSum);
  if (bad != 0) c->wrong++;
  return bad == 0;
}

/* ---- 1. gradient accumulation ---------------------------------------------- */

/* Trains for one epoch with k micro-batches per step. If per_micro, the
 * gradients are all-reduced after every micro-batch (what happens without
 * accumulation); else summed locally and all-reduced once per step.
 * Returns the number of AllReduce calls. */
static int train_epoch(ctx *c, const float *x, const int *y, float *params, int k, int per_micro) {
  const size_t P = mlp_size(&model);
  const int n = c->w->nranks, share = BATCH / n, micro = share / k;
  float *grad = malloc(P * sizeof(float)), *acc = malloc(P * sizeof(float));
  float *bx = malloc(sizeof(float) * (size_t)micro * model.d), stats[2] = {0, 0};
  int *by = malloc(sizeof(int) * (size_t)micro), calls = 0;
  if (!grad || !acc || !bx || !by) exit(1);
  for (int step = 0; step < SAMPLES / BATCH; step++) {
    memset(acc, 0, P * sizeof(float));
    for (int m = 0; m < k; m++) {
      /* Rank r's share of the step is samples [r*share, (r+1)*share) of
       * it; micro-batch m is the m-th slice of that share. */
      int first = step * BATCH + c->w->rank * share + m * micro;
      memcpy(bx, x + (size_t)first * model.d, sizeof(float) * (size_t)micro * model.d);
      memcpy(by, y + first, sizeof(int) * (size_t)micro);
      mlp_grad_cpu(&model, params, bx, by, micro, grad, stats);
      if (per_micro) allreduce_host(c, grad, P, ncclAvg), calls++;
      for (size_t p = 0; p < P; p++) acc[p] += grad[p] / (float)k;
    }
    if (!per_micro) allreduce_host(c, acc, P, ncclAvg), calls++;
    mlp_sgd_cpu(params, acc, P, LR);
  }
  free(grad);
  free(acc);
  free(bx);
  free(by);
  return calls;
}

static void accumulation(ctx *c) {
  const size_t P = mlp_size(&model);
  const int k = 4;
  float *x = malloc(sizeof(float) * SAMPLES * (size_t)model.d);
  int *y = malloc(sizeof(int) * SAMPLES);
  float *every = malloc(P * sizeof(float)), *once = malloc(P * sizeof(float));
  if (!x || !y || !every || !once) exit(1);
  mlp_make_blobs(&model, x, y, SAMPLES, 42);
  mlp_init(&model, every, 7);
  memcpy(once, every, P * sizeof(float));
  int calls_every = train_epoch(c, x, y, every, k, 1);
  int calls_once = train_epoch(c, x, y, once, k, 0);
  double worst = 0;
  for (size_t p = 0; p < P; p++) worst = fmax(worst, fabs((double)every[p] - once[p]));
  int ok = agree(c, worst < 1e-5);
  if (c->w->rank == 0)
    printf("1. Gradient accumulation: %d samples, global batch %d, %d micro-batches of %d per "
           "rank per step\n"
           "   AllReduce after every micro-batch: %3d calls\n"
           "   accumulate, then one per step:     %3d calls (%dx fewer)\n"
           "   largest weight difference: %.2g (%s)\n\n",
           SAMPLES, BATCH, k, BATCH / c->w->nranks / k, calls_every, calls_once,
           calls_every / calls_once, worst, ok ? "the same result" : "WRONG");
  free(x);
  free(y);
  free(every);
  free(once);
}

/* ---- 2. compressed gradients ------------------------------------------------------ */

/* fp16: 1 sign, 5 exponent, 10 fraction bits; rounds to nearest even.
 * Values beyond 65504 become infinity, which is why fp16 training scales
 * the loss; bf16 keeps float's 8 exponent bits and drops fraction bits. */
static uint16_t to_fp16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00); /* too large: infinity */
  int shift = 13;
  uint32_t h = sign | ((uint32_t)exp << 10);
  if (exp <= 0) { /* a subnormal half: the implicit 1 becomes explicit */
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    shift = 14 - exp;
    h = sign;
  }
  uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
  h += mant >> shift;
  if (rem > mid || (rem == mid && (h & 1))) h++; /* a carry rounds into the exponent: right */
  return (uint16_t)h;
}

static float from_fp16(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float f = exp == 0    ? ldexpf((float)mant, -24)
            : exp == 31 ? (mant ? NAN : INFINITY)
                        : ldexpf((float)(mant | 0x400), exp - 25);
  return h & 0x8000 ? -f : f;
}

static uint16_t to_bf16(float f) { /* the top half of the float, rounded */
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static float from_bf16(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* Averages this rank's gradients g (P floats) over the ranks in 16 bits;
 * out gets the result back in float. */
static void allreduce_16(ctx *c, const float *g, float *out, size_t P, int bf16) {
  uint16_t *h = malloc(P * sizeof(uint16_t));
  if (!h) exit(1);
  for (size_t p = 0; p < P; p++) h[p] = bf16 ? to_bf16(g[p]) : to_fp16(g[p]);
  ex_put(c->w, c->dev, h, P * sizeof(uint16_t)); /* half the bytes of float */
  NCCL_CHECK(ncclAllReduce(c->dev, c->dev, P, bf16 ? ncclBfloat16 : ncclFloat16, ncclAvg, c->comm,
                           c->w->stream));
  ex_get(c->w, h, c->dev, P * sizeof(uint16_t));
  for (size_t p = 0; p < P; p++) out[p] = bf16 ? from_bf16(h[p]) : from_fp16(h[p]);
  free(h);
}

static void compression(ctx *c) {
  const size_t P = mlp_size(&model);
  const int share = BATCH / c->w->nranks;
  float *x = malloc(sizeof(float) * BATCH * (size_t)model.d), stats[2] = {0, 0};
  int *y = malloc(sizeof(int) * BATCH);
  float *params = malloc(P * sizeof(float)), *g = malloc(P * sizeof(float));
  float *exact = malloc(P * sizeof(float)), *approx = malloc(P * sizeof(float));
  if (!x || !y || !params || !g || !exact || !approx) exit(1);
  /* Real gradients: one step of the MLP on this rank's share of a batch. */
  mlp_make_blobs(&model, x, y, BATCH, 42);
  mlp_init(&model, params, 7);
  mlp_grad_cpu(&model, params, x + (size_t)c->w->rank * share * model.d, y + c->w->rank * share,
               share, g, stats);
  memcpy(exact, g, P * sizeof(float));
  allreduce_host(c, exact, P, ncclAvg);
  double largest = 0;
  for (size_t p = 0; p < P; p++) largest = fmax(largest, fabs((double)exact[p]));
  if (c->w->rank == 0)
    printf("2. Compression: %zu gradients; fp32 AllReduce moves %zu bytes per rank\n", P,
           P * sizeof(float));
  for (int bf16 = 0; bf16 <= 1; bf16++) {
    allreduce_16(c, g, approx, P, bf16);
    double worst = 0;
    for (size_t p = 0; p < P; p++) worst = fmax(worst, fabs((double)approx[p] - exact[p]));
    /* fp16 keeps 11 significant bits (error ~ 2^-11 per rounding), bf16 8
     * (~ 2^-8); a few roundings (in, the sums, out) stay well below these. */
    double bound = bf16 ? 3e-2 : 4e-3;
    int ok = agree(c, worst / largest < bound);
    if (c->w->rank == 0)
      printf("   %s: %zu bytes (half), largest error %.2g = %.2g of the largest gradient (%s)\n",
             bf16 ? "bf16" : "fp16", P * sizeof(uint16_t), worst, worst / largest,
             ok ? "fine for SGD" : "WRONG: too large");
  }
  if (c->w->rank == 0) printf("\n");
  free(x);
  free(y);
  free(params);
  free(g);
  free(exact);
  free(approx);
}

/* ---- 3. overlapping backward with AllReduce ------------------------------------------ */

#define LAYERS       8
#define LAYER_FLOATS (32 << 10) /* 128 KiB of gradients per layer */
#define LAYER_US     300        /* simulated backward time per layer */

typedef struct overlap {
  ctx *c;
  float *grads; /* LAYERS x LAYER_FLOATS, layer l at l * LAYER_FLOATS */
  int bucket;   /* layers per bucket */
  int done;     /* layers whose gradients are ready, counted from the last */
  int failed;
  pthread_mutex_t lock;
  pthread_cond_t ready;
} overlap;

/* Element i of layer l's gradient on rank r: (r + 1) * a small integer,
 * so the sum over ranks is exact and easy to check. */
static float grad_value(int r, int l, int i) {
  return (float)((r + 1) * ((l * 7 + i) % 5 - 2));
}

/* The communication thread: all-reduces each bucket as soon as backward
 * has finished all its layers. Backward runs from the last layer to the
 * first, so bucket j holds layers LAYERS-(j+1)*bucket .. LAYERS-j*bucket-1,
 * contiguous in memory. */
static void *comm_thread(void *arg) {
  overlap *o = arg;
#ifdef EX_CUDA
  if (o->c->w->gpu) CUDA_CHECK(cudaSetDevice(o->c->w->device)); /* per thread */
#endif
  for (int j = 0; j < LAYERS / o->bucket; j++) {
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 30; /* never wait forever for the other thread */
    pthread_mutex_lock(&o->lock);
    while (o->done < (j + 1) * o->bucket && !o->failed)
      if (pthread_cond_timedwait(&o->ready, &o->lock, &limit) != 0) o->failed = 1;
    pthread_mutex_unlock(&o->lock);
    if (o->failed) return NULL;
    int first = LAYERS - (j + 1) * o->bucket;
    size_t off = (size_t)first * LAYER_FLOATS, n = (size_t)o->bucket * LAYER_FLOATS;
    ex_put(o->c->w, o->c->dev + off, o->grads + off, n * sizeof(float));
    NCCL_CHECK(ncclAllReduce(o->c->dev + off, o->c->dev + off, n, ncclFloat, ncclSum, o->c->comm,
                             o->c->w->stream));
    ex_get(o->c->w, o->grads + off, o->c->dev + off, n * sizeof(float));
  }
  return NULL;
}

#ifdef EX_CUDA
/* One step on a GPU: each layer's backward kernel on the compute stream,
 * then an event; once a bucket's last layer is queued, the communication
 * stream waits for its event and all-reduces the bucket, while the compute
 * stream goes on with the next layers. The host only queues work, so the
 * step's time is from the first launch until both streams are idle. */
static double overlapped_step_gpu(overlap *o, cudaStream_t comm_stream, cudaEvent_t *layer_done) {
  const ex_world *w = o->c->w;
  double t0 = ex_now();
  for (int l = LAYERS - 1, finished = 0; l >= 0; l--) {
    float *g = o->c->dev + (size_t)l * LAYER_FLOATS;
    CUDA_CHECK(backward_layer_gpu(g, LAYER_FLOATS, l, w->rank, LAYER_US, w->stream));
    CUDA_CHECK(cudaEventRecord(layer_done[l], w->stream));
    if (++finished % o->bucket != 0) continue;
    /* layers l .. l + bucket - 1 are done once layer l is: one range */
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream, layer_done[l], 0));
    NCCL_CHECK(ncclAllReduce(g, g, (size_t)o->bucket * LAYER_FLOATS, ncclFloat, ncclSum, o->c->comm,
                             comm_stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(comm_stream));
  CUDA_CHECK(cudaStreamSynchronize(w->stream));
  double us = (ex_now() - t0) * 1e6;
  ex_get(w, o->grads, o->c->dev, sizeof(float) * LAYERS * LAYER_FLOATS);
  return us;
}
#endif

/* One step: backward on this thread, AllReduces on the other. Returns the
 * step's time in microseconds. */
static double overlapped_step(overlap *o) {
  const int rank = o->c->w->rank;
  o->done = 0;
  pthread_t t;
  double t0 = ex_now();
  if (pthread_create(&t, NULL, comm_thread, o) != 0) exit(1);
  for (int l = LAYERS - 1; l >= 0; l--) {
    float *g = o->grads + (size_t)l * LAYER_FLOATS;
    for (int i = 0; i < LAYER_FLOATS; i++) g[i] = grad_value(rank, l, i);
    /* the rest of the layer's backward: the time a real one would take */
    for (double end = ex_now() + LAYER_US * 1e-6; ex_now() < end;) continue;
    pthread_mutex_lock(&o->lock);
    o->done++;
    pthread_cond_signal(&o->ready);
    pthread_mutex_unlock(&o->lock);
  }
  pthread_join(t, NULL);
  return (ex_now() - t0) * 1e6;
}

static void overlapping(ctx *c) {
  overlap o = {c,
               malloc(sizeof(float) * LAYERS * LAYER_FLOATS),
               0,
               0,
               0,
               PTHREAD_MUTEX_INITIALIZER,
               PTHREAD_COND_INITIALIZER};
  if (!o.grads) exit(1);
  const int n = c->w->nranks;
#ifdef EX_CUDA
  cudaStream_t comm_stream = NULL;
  cudaEvent_t layer_done[LAYERS];
  if (c->w->gpu) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
    for (int l = 0; l < LAYERS; l++)
      CUDA_CHECK(cudaEventCreateWithFlags(&layer_done[l], cudaEventDisableTiming));
  }
#endif
  if (c->w->rank == 0)
    printf("3. Overlap: %d layers of %d KiB gradients, backward %d us per layer (simulated);\n"
           "   AllReduce of each finished bucket on %s\n"
           "   %18s %14s %12s\n",
           LAYERS, (int)(LAYER_FLOATS * sizeof(float) >> 10), LAYER_US,
           c->w->gpu ? "a second CUDA stream, after an event" : "a second thread",
           "bucket (layers)", "step (us)", "AllReduces");
  for (int bucket = 1; bucket <= LAYERS; bucket *= 2) {
    o.bucket = bucket;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
#ifdef EX_CUDA
      if (c->w->gpu) {
        best = fmin(best, overlapped_step_gpu(&o, comm_stream, layer_done));
        continue;
      }
#endif
      best = fmin(best, overlapped_step(&o));
    }
    int ok = !o.failed;
    for (int l = 0; l < LAYERS && ok; l++)
      for (int i = 0; i < LAYER_FLOATS; i++)
        if (o.grads[(size_t)l * LAYER_FLOATS + i] != grad_value(0, l, i) * (float)(n + 1) * n / 2) {
          ok = 0;
          break;
        }
    ok = agree(c, ok);
    if (c->w->rank == 0)
      printf("   %12d (%3d KiB) %9.0f %12d%s%s\n", bucket,
             (int)(bucket * LAYER_FLOATS * sizeof(float) >> 10), best, LAYERS / bucket,
             bucket == LAYERS ? "   (one bucket: no overlap)" : "", ok ? "" : "   WRONG sums");
  }
  if (c->w->rank == 0)
    printf("   compute alone: %d us. Small buckets start sooner but pay alpha per call; one\n"
           "   bucket waits for the whole backward. (On host memory the copies need CPU time\n"
           "   too, so overlap gains need spare cores.)\n\n",
           LAYERS * LAYER_US);
#ifdef EX_CUDA
  if (c->w->gpu) {
    for (int l = 0; l < LAYERS; l++) CUDA_CHECK(cudaEventDestroy(layer_done[l]));
    CUDA_CHECK(cudaStreamDestroy(comm_stream));
  }
#endif
  free(o.grads);
}

/* ---- 4. process groups ------------------------------------------------------------------ */

/* Ranks in a grid of dp rows x tp columns: rank = row * tp + column. The
 * tensor-parallel group is a row (the ranks sharing one model replica's
 * layers), the data-parallel group a column (the replicas of one shard). */
static void groups(ctx *c) {
  const int rank = c->w->rank, n = c->w->nranks;
  const int tp = n % 2 == 0 ? 2 : 1, dp = n / tp, row = rank / tp, col = rank % tp;
  ncclComm_t tp_comm, dp_comm;
  /* Same color: same new communicator; key orders the ranks inside it.
   * Every rank of the parent must call ncclCommSplit. */
  NCCL_CHECK(ncclCommSplit(c->comm, row, col, &tp_comm, NULL));
  NCCL_CHECK(ncclCommSplit(c->comm, col, row, &dp_comm, NULL));
  int tp_rank, dp_rank, tp_size, dp_size;
  NCCL_CHECK(ncclCommUserRank(tp_comm, &tp_rank));
  NCCL_CHECK(ncclCommCount(tp_comm, &tp_size));
  NCCL_CHECK(ncclCommUserRank(dp_comm, &dp_rank));
  NCCL_CHECK(ncclCommCount(dp_comm, &dp_size));

  /* Each rank contributes its world rank: a row's AllReduce sums the ranks
   * of that row, a column's the ranks of that column. */
  float sums[2] = {(float)rank, (float)rank};
  ctx row_ctx = *c, col_ctx = *c;
  row_ctx.comm = tp_comm, col_ctx.comm = dp_comm;
  allreduce_host(&row_ctx, &sums[0], 1, ncclSum);
  allreduce_host(&col_ctx, &sums[1], 1, ncclSum);
  float want_row = 0, want_col = 0;
  for (int t = 0; t < tp; t++) want_row += (float)(row * tp + t);
  for (int d = 0; d < dp; d++) want_col += (float)(d * tp + col);
  int ok = tp_rank == col && dp_rank == row && tp_size == tp && dp_size == dp &&
           sums[0] == want_row && sums[1] == want_col;

  if (rank == 0)
    printf("4. Process groups: %d ranks = %d data-parallel x %d tensor-parallel (ncclCommSplit)\n",
           n, dp, tp);
  ex_print_ranks(c->w, c->comm,
                 "   [Rank %d] grid (%d,%d): TP group %d (rank %d of %d) sum %g | DP group %d "
                 "(rank %d of %d) sum %g%s",
                 rank, row, col, row, tp_rank, tp_size, (double)sums[0], col, dp_rank, dp_size,
                 (double)sums[1], ok ? "" : "  WRONG");
  agree(c, ok);
  NCCL_CHECK(ncclCommDestroy(tp_comm));
  NCCL_CHECK(ncclCommDestroy(dp_comm));
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  if (BATCH % (w.nranks * 4) != 0) {
    if (w.rank == 0) fprintf(stderr, "the rank count must divide %d\n", BATCH / 4);
    return 2;
  }
  ctx c = {&w, NULL, NULL, LAYERS * LAYER_FLOATS, 0};
  if (c.dev_floats < mlp_size(&model)) c.dev_floats = mlp_size(&model);
  c.dev = ex_alloc(&w, c.dev_floats * sizeof(float));
  ex_comm_init(&w, &c.comm);
  if (w.rank == 0) printf("05_advanced: %d ranks on %s\n\n", w.nranks, ex_where(&w));

  accumulation(&c);
  compression(&c);
  overlapping(&c);
  groups(&c);

  if (w.rank == 0)
    printf("\n05_advanced: %s\n", c.wrong ? "WRONG results (see above)" : "all checks passed");
  ex_free(&w, c.dev);
  NCCL_CHECK(ncclCommDestroy(c.comm));
  ex_end(&w);
  return c.wrong ? 1 : 0;
}

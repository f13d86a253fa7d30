/*
 * 03_ddp_training.c - data-parallel training, the way PyTorch's DDP does it.
 *
 *   chorusrun -n 4 build/examples/03_ddp_training     (add --host for host memory)
 *
 * Every rank holds a full copy of a small MLP (mlp.h). Each step:
 *   1. the global batch of 64 samples is cut across the ranks, as a
 *      distributed sampler does: every rank sees 64 / n different samples;
 *   2. each rank runs forward and backward on its own samples (CUDA kernels
 *      on a GPU, plain C on the CPU) and gets gradients of its local mean;
 *   3. one AllReduce with ncclAvg makes every rank's gradients the mean
 *      over the whole global batch;
 *   4. each rank applies the same SGD update to the same weights, so the
 *      copies stay identical without ever sending the weights again.
 * Loss and accuracy are summed over the ranks with another AllReduce, and
 * rank 0 prints them per epoch.
 *
 * The checks (exit 1 if one fails): all ranks end with bit-identical
 * weights; those weights equal, to float rounding, what one process gets by
 * training on the whole global batch itself (here: a CPU run inside every
 * rank); and the model learns the data (final accuracy at least 90%).
 */
#include "common.h"

#include <math.h>

#include "mlp.h"

#define FEATURES 8
#define HIDDEN   32
#define CLASSES  3
#define SAMPLES  1024
#define BATCH    64 /* global batch: the same whatever the rank count */
#define EPOCHS   8
#define LR       0.2f

typedef struct dataset {
  float x[SAMPLES][FEATURES];
  int y[SAMPLES];
} dataset;

/* The epoch's sample order: a shuffle seeded by the epoch number, so
 * every rank computes the same order without talking to the others. */
static void epoch_order(int *order, int epoch) {
  unsigned long long state = 1000 + (unsigned long long)epoch;
  for (int i = 0; i < SAMPLES; i++) order[i] = i;
  for (int i = SAMPLES - 1; i > 0; i--) { /* Fisher-Yates */
    int j = (int)(mlp_rand(&state) * (i + 1));
    int t = order[i];
    order[i] = order[j], order[j] = t;
  }
}

/* This rank's share of global batch `step`: every n-th sample from
 * position `rank` on. Together the ranks cover the global batch once. */
static void local_batch(const dataset *ds, const int *order, int step, int rank, int n, float *x,
                        int *y) {
  const int *batch = order + step * BATCH;
  for (int k = 0, pos = rank; pos < BATCH; k++, pos += n) {
    memcpy(x + k * FEATURES, ds->x[batch[pos]], sizeof ds->x[0]);
    y[k] = ds->y[batch[pos]];
  }
}

static const mlp model = {FEATURES, HIDDEN, CLASSES};

/* ---- the data-parallel run ------------------------------------------------ */

typedef struct result {
  float *params; /* final weights, host memory */
  float accuracy;
} result;

static result train_ddp(const ex_world *w, ncclComm_t comm, const dataset *ds) {
  const size_t P = mlp_size(&model);
  const int b = BATCH / w->nranks; /* samples per rank per step */
  result out = {malloc(P * sizeof(float)), 0};
  float *host_x = malloc(sizeof(float) * (size_t)b * FEATURES);
  int *host_y = malloc(sizeof(int) * (size_t)b), *order = malloc(sizeof(int) * SAMPLES);
  if (!out.params || !host_x || !host_y || !order) exit(1);

  /* Parameters, gradients and the loss/accuracy sums live where the
   * communicator works, so NCCL reduces them in place. On host memory the
   * CPU code uses these very buffers. */
  float *params = ex_alloc(w, P * sizeof(float)), *grad = ex_alloc(w, P * sizeof(float));
  float *stats = ex_alloc(w, 2 * sizeof(float));
#ifdef EX_CUDA
  float *dev_x = NULL, *work = NULL;
  int *dev_y = NULL;
  if (w->gpu) {
    dev_x = ex_alloc(w, sizeof(float) * (size_t)b * FEATURES);
    dev_y = ex_alloc(w, sizeof(int) * (size_t)b);
    work = ex_alloc(w, sizeof(float) * mlp_gpu_work_floats(&model, b));
  }
#endif

  /* Each rank starts from its own random weights (seed by rank); the
   * Broadcast from rank 0 makes every copy equal before training. Skip it
   * and the copies drift apart for good. */
  mlp_init(&model, out.params, 7 + (unsigned long long)w->rank);
  ex_put(w, params, out.params, P * sizeof(float));
  NCCL_CHECK(ncclBroadcast(params, params, P, ncclFloat, 0, comm, w->stream));

  for (int epoch = 1; epoch <= EPOCHS; epoch++) {
    const float zero[2] = {0, 0};
    ex_put(w, stats, zero, sizeof zero);
    epoch_order(order, epoch);
    for (int step = 0; step < SAMPLES / BATCH; step++) {
      local_batch(ds, order, step, w->rank, w->nranks, host_x, host_y);
#ifdef EX_CUDA
      if (w->gpu) {
        ex_put(w, dev_x, host_x, sizeof(float) * (size_t)b * FEATURES);
        ex_put(w, dev_y, host_y, sizeof(int) * (size_t)b);
        CUDA_CHECK(mlp_grad_gpu(&model, params, dev_x, dev_y, b, grad, stats, work, w->stream));
      }
#endif
      if (!w->gpu) mlp_grad_cpu(&model, params, host_x, host_y, b, grad, stats);

      /* The one line that makes training data-parallel: every rank's
       * gradients become the average over the ranks. With equal local
       * batches that is the mean over the global batch. */
      NCCL_CHECK(ncclAllReduce(grad, grad, P, ncclFloat, ncclAvg, comm, w->stream));

#ifdef EX_CUDA
      if (w->gpu) CUDA_CHECK(mlp_sgd_gpu(params, grad, P, LR, w->stream));
#endif
      if (!w->gpu) mlp_sgd_cpu(params, grad, P, LR);
    }
    /* Loss and correct answers summed over all ranks: the whole epoch. */
    float sums[2];
    NCCL_CHECK(ncclAllReduce(stats, stats, 2, ncclFloat, ncclSum, comm, w->stream));
    ex_get(w, sums, stats, sizeof sums);
    out.accuracy = sums[1] / SAMPLES;
    if (w->rank == 0)
      printf("epoch %d/%d  loss %.4f  accuracy %5.1f%%\n", epoch, EPOCHS,
             (double)(sums[0] / SAMPLES), (double)(100 * out.accuracy));
  }
  ex_get(w, out.params, params, P * sizeof(float));

#ifdef EX_CUDA
  if (w->gpu) {
    ex_free(w, dev_x);
    ex_free(w, dev_y);
    ex_free(w, work);
  }
#endif
  ex_free(w, params);
  ex_free(w, grad);
  ex_free(w, stats);
  free(host_x);
  free(host_y);
  free(order);
  return out;
}

/* ---- the one-rank reference -------------------------------------------------- */

/* One process, the whole global batch per step, rank 0's initial weights:
 * what the n ranks together must have computed. */
static void train_alone(const dataset *ds, float *params) {
  const size_t P = mlp_size(&model);
  float *grad = malloc(P * sizeof(float)), *x = malloc(sizeof(float) * BATCH * FEATURES);
  int *y = malloc(sizeof(int) * BATCH), *order = malloc(sizeof(int) * SAMPLES);
  if (!grad || !x || !y || !order) exit(1);
  float stats[2] = {0, 0};
  mlp_init(&model, params, 7);
  for (int epoch = 1; epoch <= EPOCHS; epoch++) {
    epoch_order(order, epoch);
    for (int step = 0; step < SAMPLES / BATCH; step++) {
      local_batch(ds, order, step, 0, 1, x, y); /* rank 0 of 1: all of it */
      mlp_grad_cpu(&model, params, x, y, BATCH, grad, stats);
      mlp_sgd_cpu(params, grad, P, LR);
    }
  }
  free(grad);
  free(x);
  free(y);
  free(order);
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  if (BATCH % w.nranks != 0) {
    /* Unequal shares would need a weighted average instead of ncclAvg. */
    if (w.rank == 0) fprintf(stderr, "the global batch (%d) must divide by the ranks\n", BATCH);
    return 2;
  }
  ncclComm_t comm;
  ex_comm_init(&w, &comm);
  dataset *ds = malloc(sizeof *ds);
  if (!ds) return 1;
  /* Every rank makes the same data from the same seed (a real job would
   * read files instead). */
  mlp_make_blobs(&model, &ds->x[0][0], ds->y, SAMPLES, 42);
  if (w.rank == 0)
    printf("03_ddp_training: %d ranks on %s (%s compute); MLP %d-%d-%d, %zu parameters;\n"
           "%d samples, global batch %d = %d ranks x %d, SGD lr %g, %d epochs\n\n",
           w.nranks, ex_where(&w), w.gpu ? "CUDA kernels" : "CPU", FEATURES, HIDDEN, CLASSES,
           mlp_size(&model), SAMPLES, BATCH, w.nranks, BATCH / w.nranks, (double)LR, EPOCHS);

  result r = train_ddp(&w, comm, ds);

  /* Check 1: every rank holds exactly rank 0's weights. */
  const size_t P = mlp_size(&model);
  float *mine = ex_alloc(&w, P * sizeof(float)), *theirs = malloc(P * sizeof(float));
  if (!theirs) return 1;
  ex_put(&w, mine, r.params, P * sizeof(float));
  NCCL_CHECK(ncclBroadcast(mine, mine, P, ncclFloat, 0, comm, w.stream));
  ex_get(&w, theirs, mine, P * sizeof(float));
  int wrong = memcmp(theirs, r.params, P * sizeof(float)) != 0;

  /* Check 2: the same weights as one rank training on the global batch.
   * The sums run in another order (per rank, then across ranks), so the
   * last bits may differ: float rounding, nothing more. */
  float *alone = theirs; /* reused */
  train_alone(ds, alone);
  double worst = 0;
  for (size_t p = 0; p < P; p++) {
    double diff = fabs((double)r.params[p] - alone[p]) / (1 + fabs((double)alone[p]));
    if (diff > worst) worst = diff;
  }
  wrong += worst > 1e-4;
  wrong += r.accuracy < 0.9f; /* check 3: it learned */

  int *flags = ex_alloc(&w, sizeof(int)), total = 0;
  ex_put(&w, flags, &wrong, sizeof wrong);
  NCCL_CHECK(ncclAllReduce(flags, flags, 1, ncclInt, ncclSum, comm, w.stream));
  ex_get(&w, &total, flags, sizeof total);
  if (w.rank == 0) {
    printf("\nweights on all %d ranks: %s\n", w.nranks, total ? "see errors" : "identical");
    printf("largest difference from a one-rank run of the same global batches: %.2g (%s)\n", worst,
           worst > 1e-4 ? "TOO LARGE" : "float rounding");
    printf("03_ddp_training: %s\n", total ? "WRONG (see above)" : "all checks passed");
  }
  if (wrong)
    fprintf(stderr,
            "[Rank %d] WRONG: weights differ from rank 0 or from the one-rank run (%.2g), "
            "or accuracy %.1f%% < 90%%\n",
            w.rank, worst, (double)(100 * r.accuracy));

  ex_free(&w, flags);
  ex_free(&w, mine);
  free(theirs);
  free(r.params);
  free(ds);
  NCCL_CHECK(ncclCommDestroy(comm));
  ex_end(&w);
  return total ? 1 : 0;
}

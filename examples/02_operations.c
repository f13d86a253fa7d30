/*
 * 02_operations.c - every NCCL communication pattern on tiny arrays.
 *
 *   chorusrun -n 4 build/examples/02_operations       (add --host for host memory)
 *
 * For each operation rank 0 prints what it does and where training uses
 * it, then one line per rank with its input and its output. Inputs are
 * easy to trace: element j of rank r's input is 10 r + j, so "21" is
 * element 1 of rank 2. Each rank computes the output it must get from
 * that formula and the program exits 1 when any element differs.
 *
 * Collectives (Broadcast ... Scatter) involve every rank of the
 * communicator, each calling the same function with the same counts.
 * Send and Recv pair two ranks; a rank that both sends and receives puts
 * the two calls in one group so neither waits for the other to start.
 */
#include "common.h"

#define C    2 /* elements per rank (per block, for the operations with n blocks) */
#define ROOT 0 /* the root of the rooted operations */

typedef struct run {
  const ex_world *w;
  ncclComm_t comm;
  int rank, n;
} run;

/* Element j of rank r's input. */
static float input(int r, int j) {
  return (float)(10 * r + j);
}

/* ---- the calls, one per operation ------------------------------------------- */
/* Each takes the rank's input (in, in_count elements) and output buffers in
 * the communicator's memory. */

static void do_broadcast(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclBroadcast(in, out, C, ncclFloat, ROOT, x->comm, x->w->stream));
}
static void do_reduce(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclReduce(in, out, C, ncclFloat, ncclSum, ROOT, x->comm, x->w->stream));
}
static void do_allreduce(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclAllReduce(in, out, C, ncclFloat, ncclSum, x->comm, x->w->stream));
}
static void do_allgather(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclAllGather(in, out, C, ncclFloat, x->comm, x->w->stream));
}
static void do_reducescatter(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclReduceScatter(in, out, C, ncclFloat, ncclSum, x->comm, x->w->stream));
}
static void do_alltoall(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclAlltoAll(in, out, C, ncclFloat, x->comm, x->w->stream));
}
static void do_gather(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclGather(in, out, C, ncclFloat, ROOT, x->comm, x->w->stream));
}
static void do_scatter(const run *x, const float *in, float *out) {
  NCCL_CHECK(ncclScatter(in, out, C, ncclFloat, ROOT, x->comm, x->w->stream));
}
/* A ring: send to the next rank, receive from the previous one. */
static void do_sendrecv(const run *x, const float *in, float *out) {
  int next = (x->rank + 1) % x->n, prev = (x->rank + x->n - 1) % x->n;
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclSend(in, C, ncclFloat, next, x->comm, x->w->stream));
  NCCL_CHECK(ncclRecv(out, C, ncclFloat, prev, x->comm, x->w->stream));
  NCCL_CHECK(ncclGroupEnd());
}

/* ---- what each rank must get -------------------------------------------------- */
/* Element i of rank `rank`'s output, worked out from input(); these return
 * 0 where the output is not defined (the rooted results off the root). */

static int want_broadcast(const run *x, int i, float *v) {
  (void)x; /* the same for every rank */
  *v = input(ROOT, i);
  return 1;
}
static int want_sum(const run *x, int j, float *v) { /* sum over ranks of element j */
  *v = 0;
  for (int r = 0; r < x->n; r++) *v += input(r, j);
  return 1;
}
static int want_reduce(const run *x, int i, float *v) {
  return x->rank == ROOT && want_sum(x, i, v);
}
static int want_allgather(const run *x, int i, float *v) { /* block r from rank r */
  (void)x;
  *v = input(i / C, i % C);
  return 1;
}
static int want_reducescatter(const run *x, int i, float *v) { /* the sum of my block */
  return want_sum(x, x->rank * C + i, v);
}
static int want_alltoall(const run *x, int i, float *v) { /* my block of rank i/C */
  *v = input(i / C, x->rank * C + i % C);
  return 1;
}
static int want_gather(const run *x, int i, float *v) {
  return x->rank == ROOT && want_allgather(x, i, v);
}
static int want_scatter(const run *x, int i, float *v) { /* my block of the root's */
  *v = input(ROOT, x->rank * C + i);
  return 1;
}
static int want_sendrecv(const run *x, int i, float *v) {
  *v = input((x->rank + x->n - 1) % x->n, i);
  return 1;
}

/* ---- the table ------------------------------------------------------------------ */

typedef struct op {
  const char *name, *what, *use;
  int in_blocks_n, out_blocks_n; /* 1: the buffer holds n blocks of C, 0: one block */
  void (*call)(const run *, const float *, float *);
  int (*want)(const run *, int, float *);
} op;

static const op ops[] = {
    {"Broadcast", "the root's array is copied to every rank",
     "distributing the initial parameters so every replica starts the same", 0, 0, do_broadcast,
     want_broadcast},
    {"Reduce", "element-wise sum of all ranks' arrays, on the root only",
     "collecting a loss or metric on the rank that logs it", 0, 0, do_reduce, want_reduce},
    {"AllReduce", "element-wise sum of all ranks' arrays, on every rank",
     "synchronising gradients in data-parallel training", 0, 0, do_allreduce, want_sum},
    {"AllGather", "every rank gets all ranks' arrays, one after another in rank order",
     "gathering predictions, or the parameter shards of ZeRO/FSDP before a layer runs", 0, 1,
     do_allgather, want_allgather},
    {"ReduceScatter", "the element-wise sum, cut in n blocks: rank r keeps block r",
     "each rank gets the summed gradients of its own shard (ZeRO/FSDP)", 1, 0, do_reducescatter,
     want_reducescatter},
    {"AlltoAll", "block j of rank r's array goes to rank j, as block r",
     "sending tokens to their experts (mixture of experts), resharding a tensor", 1, 1, do_alltoall,
     want_alltoall},
    {"Gather", "all ranks' arrays, in rank order, on the root only",
     "collecting predictions on rank 0 for evaluation", 0, 1, do_gather, want_gather},
    {"Scatter", "block r of the root's array goes to rank r (only the root's input is read)",
     "handing each rank its part of a batch read by one process", 1, 0, do_scatter, want_scatter},
    {"Send/Recv", "each rank sends to the next rank and receives from the previous one",
     "pipeline parallelism: activations to the next stage, gradients back", 0, 0, do_sendrecv,
     want_sendrecv},
};

/* Runs one operation on every rank, prints its inputs and outputs and
 * returns how many elements of this rank's output are wrong. */
static int run_op(const run *x, const op *o) {
  const ex_world *w = x->w;
  size_t in_count = o->in_blocks_n ? (size_t)C * x->n : C;
  size_t out_count = o->out_blocks_n ? (size_t)C * x->n : C;
  float *in = calloc(in_count, sizeof(float)), *out = calloc(out_count, sizeof(float));
  if (!in || !out) exit(1);
  for (size_t j = 0; j < in_count; j++) in[j] = input(x->rank, (int)j);

  float *d_in = ex_alloc(w, in_count * sizeof(float)),
        *d_out = ex_alloc(w, out_count * sizeof(float));
  ex_put(w, d_in, in, in_count * sizeof(float));
  o->call(x, d_in, d_out);
  ex_get(w, out, d_out, out_count * sizeof(float)); /* waits for the operation */

  int wrong = 0, defined = 0;
  for (size_t i = 0; i < out_count; i++) {
    float v;
    if (!o->want(x, (int)i, &v)) continue;
    defined = 1;
    if (out[i] != v) {
      fprintf(stderr, "[Rank %d] %s: WRONG element %zu: %g, expected %g\n", x->rank, o->name, i,
              (double)out[i], (double)v);
      wrong++;
    }
  }

  if (x->rank == 0) printf("== %s: %s.\n   In training: %s.\n", o->name, o->what, o->use);
  char line[EX_LINE];
  snprintf(line, sizeof line, "[Rank %d] in: ", x->rank);
  ex_format_floats(line, sizeof line, in, in_count);
  size_t used = strlen(line);
  snprintf(line + used, sizeof line - used, "%*s| out: ", (int)(used < 40 ? 40 - used : 1), "");
  if (defined)
    ex_format_floats(line, sizeof line, out, out_count);
  else
    snprintf(line + strlen(line), sizeof line - strlen(line), "(not the root: none)");
  ex_print_ranks(w, x->comm, "%s", line);
  if (x->rank == 0) printf("\n");

  ex_free(w, d_in);
  ex_free(w, d_out);
  free(in);
  free(out);
  return wrong;
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  run x = {&w, NULL, w.rank, w.nranks};
  ex_comm_init(&w, &x.comm);
  if (w.rank == 0)
    printf("02_operations: %d ranks on %s; element j of rank r's input is 10r + j, the root is "
           "rank %d.\n\n",
           w.nranks, ex_where(&w), ROOT);

  int wrong = 0;
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) wrong += run_op(&x, &ops[k]);

  /* Each rank checked its own outputs; summing the counts tells rank 0. */
  int *d_wrong = ex_alloc(&w, sizeof(int)), total = 0;
  ex_put(&w, d_wrong, &wrong, sizeof wrong);
  NCCL_CHECK(ncclAllReduce(d_wrong, d_wrong, 1, ncclInt, ncclSum, x.comm, w.stream));
  ex_get(&w, &total, d_wrong, sizeof total);
  if (w.rank == 0)
    printf(total ? "02_operations: %d WRONG elements (see above).\n"
                 : "02_operations: every output right (%d wrong).\n",
           total);
  ex_free(&w, d_wrong);
  NCCL_CHECK(ncclCommDestroy(x.comm));
  ex_end(&w);
  return total ? 1 : 0;
}

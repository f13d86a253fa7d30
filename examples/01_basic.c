/*
 * 01_basic.c - the smallest complete NCCL program, two ways.
 *
 *   chorusrun -n 2 build/examples/01_basic          (add --host for host memory)
 *   mpirun -np 2 build/examples/01_basic
 *   torchrun --nproc-per-node 2 --no-python build/examples/01_basic
 *
 * 1. One process per rank (how training jobs run): every process joins one
 *    communicator with ncclCommInitRank, using a unique id that all of them
 *    share, then sums a small tensor across ranks with ncclAllReduce.
 * 2. One process driving several ranks (ncclCommInitAll): rank 0 of the
 *    job then makes a communicator over every local GPU (or 3 host ranks)
 *    and calls each rank's AllReduce inside one group.
 * 3. What a failing call looks like: NCCL_CHECK prints the file, the line
 *    and ncclGetLastError; a call with a wrong datatype shows it (printed
 *    between 1 and 2, without stopping the program).
 *
 * Rank r holds r + 1 in every element, so after the sum over n ranks every
 * element must be 1 + 2 + ... + n = n (n + 1) / 2. The program checks that
 * and exits 1 when any rank sees something else.
 */
#include "common.h"

#define COUNT 3 /* a tiny tensor, so it fits on one line */

static int all_equal(const float *v, int n, float want) {
  for (int i = 0; i < n; i++)
    if (v[i] != want) return 0;
  return 1;
}

/* ---- 3. a failing call ------------------------------------------------------------ */

/* What NCCL_CHECK prints, without ending the program. */
static ncclResult_t report(ncclResult_t res, const char *call, const char *file, int line) {
  if (res != ncclSuccess)
    printf("  %s:%d: %s failed: %s: %s\n", file, line, call, ncclGetErrorString(res),
           ncclGetLastError(NULL));
  return res;
}
#define NCCL_REPORT(call) report((call), #call, __FILE__, __LINE__)

/* An argument error is found before anything is queued, so nothing else is
 * disturbed and the program goes on. Only rank 0 makes the bad call. */
static int show_an_error(const ex_world *w, ncclComm_t comm, float *buf) {
  if (w->rank != 0) return 0;
  printf("A bad call (datatype 99); NCCL_CHECK would stop the program with:\n");
  ncclResult_t res =
      NCCL_REPORT(ncclAllReduce(buf, buf, 1, (ncclDataType_t)99, ncclSum, comm, w->stream));
  printf("\n");
  if (res == ncclSuccess) {
    fprintf(stderr, "[Rank 0] WRONG: a bad datatype was accepted\n");
    return 1;
  }
  return 0;
}

/* ---- 1. one process per rank ----------------------------------------------- */

static int one_process_per_rank(const ex_world *w) {
  /* Every rank needs the same id: rank 0 creates it, the launcher's
   * variables or a file carry it to the others (see common.h). */
  ncclUniqueId id;
  if (ex_unique_id(w, &id) != 0) return 1;

  /* Blocks until all nranks processes have called it with the same id. */
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, w->nranks, id, w->rank));

  int nranks, rank;
  NCCL_CHECK(ncclCommCount(comm, &nranks));
  NCCL_CHECK(ncclCommUserRank(comm, &rank));

  /* The tensor lives where the communicator works: GPU memory, or host
   * memory for a host communicator. We fill it from a host copy. */
  float host[COUNT];
  for (int i = 0; i < COUNT; i++) host[i] = (float)(rank + 1);
  float *tensor = ex_alloc(w, sizeof host);
  ex_put(w, tensor, host, sizeof host);

  char line[EX_LINE] = "";
  snprintf(line, sizeof line, "[Rank %d] before: ", rank);
  ex_format_floats(line, sizeof line, host, COUNT);
  ex_print_ranks(w, comm, "%s", line);

  /* In place (send buffer == receive buffer): every rank ends up with the
   * element-wise sum of all ranks' tensors. On a GPU the call returns once
   * the work is queued on the stream; ex_get waits for it. */
  NCCL_CHECK(ncclAllReduce(tensor, tensor, COUNT, ncclFloat, ncclSum, comm, w->stream));
  ex_get(w, host, tensor, sizeof host);

  snprintf(line, sizeof line, "[Rank %d] after AllReduce: ", rank);
  ex_format_floats(line, sizeof line, host, COUNT);
  ex_print_ranks(w, comm, "%s", line);

  float want = (float)nranks * (float)(nranks + 1) / 2;
  int ok = all_equal(host, COUNT, want);
  if (!ok) fprintf(stderr, "[Rank %d] WRONG: expected %g everywhere\n", rank, (double)want);
  if (rank == 0)
    printf("Each element is 1 + ... + %d = %g on every rank: the sum of all ranks' tensors.\n\n",
           nranks, (double)want);

  if (show_an_error(w, comm, tensor)) ok = 0;

  ex_free(w, tensor);
  /* Destroy waits for the communicator's outstanding work, then frees it. */
  NCCL_CHECK(ncclCommDestroy(comm));
  return ok ? 0 : 1;
}

/* ---- 2. one process, several ranks --------------------------------------------- */

#define MAX_LOCAL 8

static int one_process_all_ranks(const ex_world *w) {
  int n = 3; /* host memory: any number of ranks */
#ifdef EX_CUDA
  if (w->gpu) CUDA_CHECK(cudaGetDeviceCount(&n));
#endif
  if (n > MAX_LOCAL) n = MAX_LOCAL;
  printf("ncclCommInitAll: this process drives %d ranks (%s)\n", n,
         w->gpu ? "one per GPU" : "host memory");

  /* ncclCommInitAll makes all n communicators at once, no unique id
   * needed: devs[i] is the GPU of rank i (NULL would mean 0..n-1). */
  ncclComm_t comms[MAX_LOCAL];
  int devs[MAX_LOCAL];
  for (int i = 0; i < n; i++) devs[i] = i;
  NCCL_CHECK(ncclCommInitAll(comms, n, devs));

  ex_world each[MAX_LOCAL];
  float *tensor[MAX_LOCAL];
  for (int i = 0; i < n; i++) {
    each[i] = *w;
#ifdef EX_CUDA
    if (w->gpu) { /* a stream and memory on rank i's own GPU */
      CUDA_CHECK(cudaSetDevice(i));
      CUDA_CHECK(cudaStreamCreateWithFlags(&each[i].stream, cudaStreamNonBlocking));
    }
#endif
    float host[COUNT];
    for (int k = 0; k < COUNT; k++) host[k] = (float)(i + 1);
    tensor[i] = ex_alloc(&each[i], sizeof host);
    ex_put(&each[i], tensor[i], host, sizeof host);
  }

  /* One thread calls for every rank. Each AllReduce needs all ranks, so
   * called one after another the first could wait for the second forever;
   * inside a group NCCL starts them together at ncclGroupEnd. */
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < n; i++)
    NCCL_CHECK(
        ncclAllReduce(tensor[i], tensor[i], COUNT, ncclFloat, ncclSum, comms[i], each[i].stream));
  NCCL_CHECK(ncclGroupEnd());

  int ok = 1;
  float want = (float)n * (float)(n + 1) / 2;
  for (int i = 0; i < n; i++) {
#ifdef EX_CUDA
    if (w->gpu) CUDA_CHECK(cudaSetDevice(i));
#endif
    float host[COUNT];
    ex_get(&each[i], host, tensor[i], sizeof host);
    char line[EX_LINE];
    snprintf(line, sizeof line, "[InitAll rank %d] after AllReduce: ", i);
    ex_format_floats(line, sizeof line, host, COUNT);
    printf("%s\n", line);
    ok &= all_equal(host, COUNT, want);
    ex_free(&each[i], tensor[i]);
    if (w->gpu) ex_end(&each[i]);
    NCCL_CHECK(ncclCommDestroy(comms[i]));
  }
#ifdef EX_CUDA
  if (w->gpu) CUDA_CHECK(cudaSetDevice(w->device));
#endif
  if (!ok) fprintf(stderr, "ncclCommInitAll: WRONG: expected %g everywhere\n", (double)want);
  printf("\n");
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  if (w.rank == 0)
    printf("01_basic: %d ranks on %s (launcher: %s)\n\n", w.nranks, ex_where(&w), w.launcher);
  int failed = one_process_per_rank(&w);
  if (w.rank == 0) failed |= one_process_all_ranks(&w);
  ex_end(&w);
  if (w.rank == 0 && !failed) printf("01_basic: all results right.\n");
  return failed;
}

/*
 * failures.c - what a GPU communicator does when things go wrong.
 *
 * One process driving two GPUs (ncclCommInitAll). Each case starts fresh
 * communicators:
 *   silent peer:  rank 0 launches a collective that rank 1 never joins; with
 *                 CHORUS_OP_TIMEOUT=2 its kernel must give up within a few
 *                 seconds and ncclCommGetAsyncError must return
 *                 ncclRemoteError with a message naming rank 1 (LL and
 *                 Simple protocols, and an ncclRecv from rank 1).
 *   abort:        no deadline; rank 0's kernel waits for rank 1 until
 *                 another thread calls ncclCommAbort, which must return and
 *                 leave the stream idle.
 *   abort frees the peer: no deadline; rank 0's kernel waits for rank 1,
 *                 which calls ncclCommAbort instead: rank 0's kernel must
 *                 end within 1 s, its async error ncclRemoteError saying
 *                 that rank 1 called ncclCommAbort.
 *   size mismatch: an ncclSend and its ncclRecv of another size (LL lines,
 *                 in one part or many; FIFO chunks): the receiver's kernel
 *                 ends at once and its async error is ncclInvalidUsage
 *                 naming the sender and both sizes.
 *   call mismatch: ranks making different calls, LL- and FIFO-sized
 *                 (AllReduce and Broadcast of one size; AllReduce of two
 *                 counts; of two operators; an AllReduce against an
 *                 ncclRecv): both ranks fail at once with
 *                 ncclInvalidUsage naming both calls (one that only waits
 *                 learns it from the one that found it).
 *   staged:       the silent peer and the abort again with NCCL_P2P_DISABLE=1
 *                 (the waits poll pinned host memory instead).
 *   bad setups:   two ranks on one GPU, more than 8 ranks must each fail
 *                 with ncclInvalidUsage and a message naming the cause.
 * Exit status 0 when every case behaves, 1 otherwise, 77 (skip) with fewer
 * than two GPUs.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "nccl.h"

typedef struct lone {
  ncclComm_t comms[2];
  cudaStream_t s;
  float *buf;
} lone;

/* Rank 0's call: an in-place AllReduce of count floats, or (recv) a
 * receive of count floats from rank 1. */
static ncclResult_t lone_call(lone *l, size_t count, int recv) {
  return recv ? ncclRecv(l->buf, count, ncclFloat, 1, l->comms[0], l->s)
              : ncclAllReduce(l->buf, l->buf, count, ncclFloat, ncclSum, l->comms[0], l->s);
}

/* Fresh communicators on GPUs 0 and 1, then rank 0 alone makes its call
 * (lone_call) on its stream. 0 on success. */
static int lone_start(lone *l, size_t count, int recv) {
  int devs[2] = {0, 1};
  ncclResult_t r = ncclCommInitAll(l->comms, 2, devs);
  if (r != ncclSuccess) {
    fprintf(stderr, "FAIL ncclCommInitAll: %s (%s)\n", ncclGetErrorString(r),
            ncclGetLastError(NULL));
    failures++;
    return -1;
  }
  if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&l->s) != cudaSuccess ||
      cudaMalloc((void **)&l->buf, count * sizeof(float)) != cudaSuccess ||
      cudaMemset(l->buf, 0, count * sizeof(float)) != cudaSuccess) {
    fprintf(stderr, "FAIL CUDA setup on GPU 0\n");
    failures++;
    return -1;
  }
  r = lone_call(l, count, recv);
  EXPECT(r == ncclSuccess, "the call of rank 0 alone returned %s instead of enqueuing",
         ncclGetErrorString(r));
  return r == ncclSuccess ? 0 : -1;
}

static void lone_free(lone *l) {
  cudaSetDevice(0);
  if (l->buf) cudaFree(l->buf);
  if (l->s) cudaStreamDestroy(l->s);
  memset(l, 0, sizeof *l);
}

/* A peer that never launches: the kernel gives up after CHORUS_OP_TIMEOUT
 * and the communicator's async error names the peer. */
static void silent_peer(size_t count, const char *what, int recv) {
  setenv("CHORUS_OP_TIMEOUT", "2", 1);
  lone l = {0};
  if (lone_start(&l, count, recv) == 0) {
    double waited = wait_stream(l.s, 30);
    EXPECT(waited >= 0, "%s: rank 0's kernel still waits after 30 s (CHORUS_OP_TIMEOUT=2)", what);
    EXPECT(waited < 0 || waited > 1.0,
           "%s: rank 0's kernel ended after %.2f s, before its deadline", what, waited);
    ncclResult_t async = ncclSuccess;
    EXPECT(ncclCommGetAsyncError(l.comms[0], &async) == ncclSuccess, "ncclCommGetAsyncError");
    EXPECT(async == ncclRemoteError, "%s: async error %s, want ncclRemoteError", what,
           ncclGetErrorString(async));
    const char *msg = ncclGetLastError(l.comms[0]);
    EXPECT(msg && strstr(msg, "rank 1") && strstr(msg, "CHORUS_OP_TIMEOUT"),
           "%s: the message does not name rank 1 and the setting: \"%s\"", what, msg ? msg : "");
    /* A new call on the failed communicator reports the error too. */
    ncclResult_t r = lone_call(&l, count, recv);
    EXPECT(r == ncclRemoteError, "%s: a call after the failure returned %s", what,
           ncclGetErrorString(r));
    printf("silent peer (%s): kernel gave up after %.2f s: %s\n", what, waited, msg ? msg : "");
  }
  ncclCommAbort(l.comms[0]);
  ncclCommAbort(l.comms[1]);
  lone_free(&l);
  unsetenv("CHORUS_OP_TIMEOUT");
}

typedef struct aborter {
  ncclComm_t comm;
  double took;
  ncclResult_t r;
} aborter;

static void *abort_main(void *arg) {
  aborter *a = arg;
  double t0 = now();
  a->r = ncclCommAbort(a->comm);
  a->took = now() - t0;
  return NULL;
}

/* With no deadline (CHORUS_OP_TIMEOUT=0), lone_start, then checks that
 * rank 0's kernel is still waiting 0.3 s later. 0 when started. */
static int lone_waiting(lone *l, size_t count, const char *what) {
  setenv("CHORUS_OP_TIMEOUT", "0", 1);
  if (lone_start(l, count, 0) != 0) return -1;
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  EXPECT(cudaStreamQuery(l->s) == cudaErrorNotReady,
         "%s: rank 0's kernel finished although rank 1 never joined", what);
  return 0;
}

/* No deadline: only ncclCommAbort (from another thread) ends the wait. */
static void abort_waiting(size_t count, const char *what) {
  lone l = {0};
  if (lone_waiting(&l, count, what) == 0) {
    aborter a = {l.comms[0], 0, ncclInternalError};
    pthread_t t;
    pthread_create(&t, NULL, abort_main, &a);
    pthread_join(t, NULL);
    EXPECT(a.r == ncclSuccess, "%s: ncclCommAbort returned %s", what, ncclGetErrorString(a.r));
    EXPECT(a.took < 10, "%s: ncclCommAbort took %.2f s", what, a.took);
    double waited = wait_stream(l.s, 10);
    EXPECT(waited >= 0, "%s: the stream is still busy 10 s after ncclCommAbort", what);
    printf("abort (%s): ncclCommAbort returned in %.3f s, stream idle\n", what, a.took);
    l.comms[0] = NULL;
  }
  ncclCommAbort(l.comms[1]);
  lone_free(&l);
  unsetenv("CHORUS_OP_TIMEOUT");
}

/* No deadline: rank 1, which rank 0's kernel waits for, aborts its
 * communicator; that must end rank 0's wait at once. */
static void abort_frees_peer(size_t count, const char *what) {
  lone l = {0};
  if (lone_waiting(&l, count, what) == 0) {
    const double t0 = now();
    EXPECT(ncclCommAbort(l.comms[1]) == ncclSuccess, "%s: rank 1's ncclCommAbort failed", what);
    l.comms[1] = NULL;
    const double waited = wait_stream(l.s, 5);
    const double took = now() - t0;
    EXPECT(waited >= 0 && took < 1.0,
           "%s: rank 0's kernel still waited %.2f s after rank 1's ncclCommAbort", what, took);
    ncclResult_t async = ncclSuccess;
    EXPECT(ncclCommGetAsyncError(l.comms[0], &async) == ncclSuccess, "ncclCommGetAsyncError");
    const char *msg = ncclGetLastError(l.comms[0]);
    EXPECT(async == ncclRemoteError && msg && strstr(msg, "rank 1 called ncclCommAbort"),
           "%s: rank 0's async error is %s: \"%s\"", what, ncclGetErrorString(async),
           msg ? msg : "");
    printf("abort frees the peer (%s): rank 0's kernel ended %.3f s after it: %s\n", what, took,
           msg ? msg : "");
  }
  ncclCommAbort(l.comms[0]);
  if (l.comms[1]) ncclCommAbort(l.comms[1]);
  lone_free(&l);
  unsetenv("CHORUS_OP_TIMEOUT");
}

/* Two fresh communicators on GPUs 0 and 1, a stream and a zeroed buffer of
 * count floats on each (pair_start; ncclSuccess or the failure, counted),
 * and their end (pair_end: aborted, freed). */
typedef struct pair {
  ncclComm_t comms[2];
  cudaStream_t s[2];
  float *buf[2];
} pair;

static ncclResult_t pair_start(pair *q, size_t count, const char *what) {
  int devs[2] = {0, 1};
  memset(q, 0, sizeof *q);
  ncclResult_t r = ncclCommInitAll(q->comms, 2, devs);
  EXPECT(r == ncclSuccess, "%s: ncclCommInitAll: %s", what, ncclGetErrorString(r));
  for (int i = 0; i < 2 && r == ncclSuccess; i++)
    if (cudaSetDevice(i) != cudaSuccess || cudaStreamCreate(&q->s[i]) != cudaSuccess ||
        cudaMalloc((void **)&q->buf[i], count * sizeof(float)) != cudaSuccess ||
        cudaMemset(q->buf[i], 0, count * sizeof(float)) != cudaSuccess) {
      EXPECT(0, "%s: CUDA setup on GPU %d", what, i);
      r = ncclSystemError;
    }
  return r;
}

static void pair_end(pair *q) {
  for (int i = 0; i < 2; i++) {
    if (q->comms[i]) ncclCommAbort(q->comms[i]);
    cudaSetDevice(i);
    if (q->buf[i]) cudaFree(q->buf[i]);
    if (q->s[i]) cudaStreamDestroy(q->s[i]);
  }
  memset(q, 0, sizeof *q);
}

/* Rank 0 sends `sent` floats to rank 1, which receives `expected`: rank
 * 1's kernel must end (no deadline needed) with ncclInvalidUsage and a
 * message naming rank 0 and both sizes; rank 0's send completes. */
static void size_mismatch(size_t sent, size_t expected, const char *what) {
  setenv("CHORUS_OP_TIMEOUT", "0", 1);
  pair q;
  ncclResult_t r = pair_start(&q, sent > expected ? sent : expected, what);
  ncclComm_t *comms = q.comms;
  cudaStream_t *s = q.s;
  float **buf = q.buf;
  if (r == ncclSuccess) {
    ncclGroupStart();
    ncclSend(buf[0], sent, ncclFloat, 1, comms[0], s[0]);
    ncclRecv(buf[1], expected, ncclFloat, 0, comms[1], s[1]);
    r = ncclGroupEnd();
    EXPECT(r == ncclSuccess, "%s: the group returned %s instead of enqueuing", what,
           ncclGetErrorString(r));
  }
  if (r == ncclSuccess) {
    double w0 = wait_stream(s[0], 10), w1 = wait_stream(s[1], 10);
    EXPECT(w0 >= 0, "%s: rank 0's send still runs after 10 s", what);
    EXPECT(w1 >= 0, "%s: rank 1's receive still waits after 10 s (no deadline set)", what);
    ncclResult_t a0 = ncclInternalError, a1 = ncclInternalError;
    ncclCommGetAsyncError(comms[0], &a0);
    ncclCommGetAsyncError(comms[1], &a1);
    const char *msg = ncclGetLastError(comms[1]);
    char sizes[2][32];
    snprintf(sizes[0], sizeof sizes[0], "%zu", sent * sizeof(float));
    snprintf(sizes[1], sizeof sizes[1], "%zu", expected * sizeof(float));
    EXPECT(a0 == ncclSuccess, "%s: the sender's async error is %s", what, ncclGetErrorString(a0));
    EXPECT(a1 == ncclInvalidUsage, "%s: the receiver's async error is %s, want ncclInvalidUsage",
           what, ncclGetErrorString(a1));
    EXPECT(msg && strstr(msg, "rank 0") && strstr(msg, sizes[0]) && strstr(msg, sizes[1]),
           "%s: the message does not name rank 0, %s and %s bytes: \"%s\"", what, sizes[0],
           sizes[1], msg ? msg : "");
    printf("size mismatch (%s): %s: %s\n", what, ncclGetErrorString(a1), msg ? msg : "");
  }
  pair_end(&q);
  unsetenv("CHORUS_OP_TIMEOUT");
}

/* One rank's call in call_mismatch, of count floats: an AllReduce (op),
 * a Broadcast from rank 0, or an ncclRecv from rank 0. */
enum { ALLREDUCE, BROADCAST, RECV };
typedef struct call {
  int kind;
  size_t count;
  ncclRedOp_t op;
} call;

static ncclResult_t issue(const call *c, float *buf, ncclComm_t comm, cudaStream_t s) {
  switch (c->kind) {
  case BROADCAST:
    return ncclBroadcast(buf, buf, c->count, ncclFloat, 0, comm, s);
  case RECV:
    return ncclRecv(buf, c->count, ncclFloat, 0, comm, s);
  default:
    return ncclAllReduce(buf, buf, c->count, ncclFloat, c->op, comm, s);
  }
}

/* Ranks 0 and 1 make different calls (LL-sized, or FIFO-sized: then the
 * header beside the first chunk on each channel tells). Both must fail at
 * once (well before CHORUS_OP_TIMEOUT=5) with ncclInvalidUsage and a
 * message naming both calls (words[0] and words[1]): a rank that takes the
 * other's data finds the difference itself, and a rank that waits for data
 * the other never sends (an AllReduce beside a Broadcast's receiver) learns
 * it from the rank that found it, which writes it into its window. */
static void call_mismatch(const call calls[2], const char *const words[2], const char *what) {
  setenv("CHORUS_OP_TIMEOUT", "5", 1);
  pair q;
  size_t most = 4096;
  for (int i = 0; i < 2; i++) most = calls[i].count > most ? calls[i].count : most;
  ncclResult_t r = pair_start(&q, most, what);
  ncclComm_t *comms = q.comms;
  cudaStream_t *s = q.s;
  float **buf = q.buf;
  if (r == ncclSuccess) {
    ncclGroupStart();
    for (int i = 0; i < 2; i++) issue(&calls[i], buf[i], comms[i], s[i]);
    r = ncclGroupEnd();
    EXPECT(r == ncclSuccess, "%s: the group returned %s instead of enqueuing", what,
           ncclGetErrorString(r));
  }
  for (int i = 0; i < 2 && r == ncclSuccess; i++) {
    double w = wait_stream(s[i], 30);
    EXPECT(w >= 0, "%s: rank %d's kernel still runs after 30 s (CHORUS_OP_TIMEOUT=5)", what, i);
    ncclResult_t a = ncclInternalError;
    ncclCommGetAsyncError(comms[i], &a);
    const char *msg = ncclGetLastError(comms[i]);
    EXPECT(w >= 0 && w < 2.0, "%s: rank %d's kernel ended after %.2f s, not at once", what, i, w);
    EXPECT(a == ncclInvalidUsage, "%s: rank %d's async error is %s, want ncclInvalidUsage", what, i,
           ncclGetErrorString(a));
    EXPECT(msg && strstr(msg, words[0]) && strstr(msg, words[1]),
           "%s: rank %d's message does not name \"%s\" and \"%s\": \"%s\"", what, i, words[0],
           words[1], msg ? msg : "");
    printf("call mismatch (%s): rank %d after %.2f s: %s: %s\n", what, i, w, ncclGetErrorString(a),
           msg ? msg : "");
  }
  pair_end(&q);
  unsetenv("CHORUS_OP_TIMEOUT");
}

/* ncclCommInitAll(n, devs) must fail with ncclInvalidUsage and a message
 * containing `words`. */
static void bad_setup(int n, const int *devs, const char *words, const char *what) {
  ncclComm_t comms[16] = {0};
  ncclResult_t r = ncclCommInitAll(comms, n, devs);
  const char *msg = ncclGetLastError(NULL);
  EXPECT(r == ncclInvalidUsage, "%s: ncclCommInitAll returned %s, want ncclInvalidUsage", what,
         ncclGetErrorString(r));
  EXPECT(msg && strstr(msg, words), "%s: the message \"%s\" does not say \"%s\"", what,
         msg ? msg : "", words);
  printf("bad setup (%s): %s: %s\n", what, ncclGetErrorString(r), msg ? msg : "");
  for (int i = 0; i < n; i++)
    if (comms[i]) ncclCommDestroy(comms[i]);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    printf("fewer than two GPUs visible: skipped\n");
    return 77;
  }
  silent_peer(256, "LL, 1 KiB", 0);
  silent_peer(4 << 20, "Simple, 16 MiB", 0);
  silent_peer(1 << 20, "Recv, 4 MiB", 1);
  abort_waiting(256, "LL, 1 KiB");
  abort_waiting(4 << 20, "Simple, 16 MiB");
  abort_frees_peer(256, "LL, 1 KiB");
  abort_frees_peer(4 << 20, "Simple, 16 MiB");
  size_mismatch(100, 200, "LL Send/Recv, 400 B sent, 800 B expected");
  size_mismatch(200, 100, "LL Send/Recv, 800 B sent, 400 B expected");
  /* In parts of 4 KiB, a CTA each: 10 parts sent where 20 are awaited. */
  size_mismatch(10000, 20000, "LL Send/Recv, 40000 B sent, 80000 B expected");
  size_mismatch(20000, 10000, "LL Send/Recv, 80000 B sent, 40000 B expected");
  {
    const call ar_bc[2] = {{0, 256, ncclSum}, {1, 256, ncclSum}};
    const char *const w1[2] = {"AllReduce(count=256, float, sum)",
                               "Broadcast(count=256, float, root=0)"};
    call_mismatch(ar_bc, w1, "AllReduce and Broadcast of 1 KiB");
    const call counts[2] = {{0, 256, ncclSum}, {0, 512, ncclSum}};
    const char *const w2[2] = {"AllReduce(count=256,", "AllReduce(count=512,"};
    call_mismatch(counts, w2, "AllReduce of 256 and 512 floats");
    const call ops[2] = {{0, 1000, ncclSum}, {0, 1000, ncclMax}};
    const char *const w3[2] = {"float, sum)", "float, max)"};
    call_mismatch(ops, w3, "AllReduce sum and max of 1000 floats");
    /* FIFO sizes (a ring on 2 GPUs): the same three kinds of difference. */
    const call ar_bc_big[2] = {{0, 1 << 20, ncclSum}, {1, 1 << 20, ncclSum}};
    const char *const w4[2] = {"AllReduce(count=1048576, float, sum)",
                               "Broadcast(count=1048576, float, root=0)"};
    call_mismatch(ar_bc_big, w4, "FIFO: AllReduce and Broadcast of 4 MiB");
    const call counts_big[2] = {{0, 1 << 20, ncclSum}, {0, 2 << 20, ncclSum}};
    const char *const w5[2] = {"AllReduce(count=1048576,", "AllReduce(count=2097152,"};
    call_mismatch(counts_big, w5, "FIFO: AllReduce of 4 and 8 MiB");
    const call ops_big[2] = {{0, 1 << 20, ncclSum}, {0, 1 << 20, ncclMax}};
    call_mismatch(ops_big, w3, "FIFO: AllReduce sum and max of 4 MiB");
    /* A FIFO-sized receive meets a collective's header: it names itself
     * by the bytes it expects. */
    const call ar_recv[2] = {{ALLREDUCE, 1 << 20, ncclSum}, {RECV, 1 << 20, ncclSum}};
    const char *const w6[2] = {"AllReduce(count=1048576, float, sum)", "Recv(count=4194304, int8)"};
    call_mismatch(ar_recv, w6, "FIFO: AllReduce against ncclRecv of 4 MiB");
  }
  /* FIFO Send/Recv (above CHORUS_GPU_P2P_LL_BYTES): the header of the
   * first chunk carries the size. */
  size_mismatch(1 << 20, 2 << 20, "FIFO Send/Recv, 4 MiB sent, 8 MiB expected");
  size_mismatch(2 << 20, 1 << 20, "FIFO Send/Recv, 8 MiB sent, 4 MiB expected");
  setenv("NCCL_P2P_DISABLE", "1", 1);
  silent_peer(256, "staged LL, 1 KiB", 0);
  abort_waiting(4 << 20, "staged Simple, 16 MiB");
  abort_frees_peer(256, "staged LL, 1 KiB");
  unsetenv("NCCL_P2P_DISABLE");

  const int same[2] = {0, 0};
  bad_setup(2, same, "both use GPU", "two ranks on GPU 0");
  int nine[9];
  for (int i = 0; i < 9; i++) nine[i] = i % 2;
  bad_setup(9, nine, "more than 8 ranks", "nine ranks");

  printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}

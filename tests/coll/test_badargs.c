/*
 * test_badargs.c - bad input gets the right ncclResult_t and a message
 * naming the argument, never a crash or a hang: handles, counts, types,
 * operators, roots, buffers (NULL, overlapping), ids, configs, groups,
 * PreMulSum operators, memory and registration calls, and the parts of the
 * API that are not implemented yet.
 *
 * usage: test_badargs threads|procs NRANKS
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "spawn.h"

static int fails;

static int mentions(const char *msg, const char *word) {
  return !word || strstr(msg, word);
}

/* ncclGetLastError(NULL) is the process's last error, as in NCCL: with
 * ranks as threads, another rank's failing call can land between a call and
 * the read of its message. Calls expected to fail (at once, without
 * waiting for peers) hold this lock with the read. */
static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;

/* Expects `call` to return `want` and the last error to mention `word`. */
#define BAD(want, word, call)                                                                      \
  do {                                                                                             \
    const char *word_ = (word);                                                                    \
    const int lock_ = (want) != ncclSuccess;                                                       \
    if (lock_) pthread_mutex_lock(&msg_lock);                                                      \
    ncclResult_t got_ = (call);                                                                    \
    const char *msg_ = ncclGetLastError(NULL);                                                     \
    if (got_ != (want) || !mentions(msg_, word_)) {                                                \
      harness_log(rank, "line %d: %s returned %d (want %d), last error \"%s\"", __LINE__, #call,   \
                  (int)got_, (int)(want), msg_);                                                   \
      __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);                                             \
    }                                                                                              \
    if (lock_) pthread_mutex_unlock(&msg_lock);                                                    \
  } while (0)

static int collectives(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  float buf[64] = {0}, other[64] = {0};
  BAD(ncclInvalidArgument, "comm is NULL",
      ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL));
  BAD(ncclInvalidArgument, "datatype = 12",
      ncclAllReduce(buf, buf, 4, (ncclDataType_t)12, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument, "datatype = -1",
      ncclAllReduce(buf, buf, 4, (ncclDataType_t)-1, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument, "op = 77",
      ncclAllReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)77, comm, NULL));
  BAD(ncclInvalidArgument, "sendbuff is NULL",
      ncclAllReduce(NULL, buf, 4, ncclFloat, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument, "recvbuff is NULL",
      ncclAllReduce(buf, NULL, 4, ncclFloat, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument, "overlap",
      ncclAllReduce(buf, buf + 1, 8, ncclFloat, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument, "overflows",
      ncclAllReduce(buf, other, SIZE_MAX / 2, ncclFloat, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument,
      "root = ", ncclReduce(buf, other, 4, ncclFloat, ncclSum, nranks, comm, NULL));
  BAD(ncclInvalidArgument, "root = -1", ncclBroadcast(buf, other, 4, ncclFloat, -1, comm, NULL));
  BAD(ncclInvalidArgument, "peer = ", ncclSend(buf, 4, ncclFloat, nranks + 3, comm, NULL));
  /* AllGather's in-place form is sendbuff = recvbuff + rank*count; any other
   * overlap is refused. */
  float big[64 * 8];
  BAD(ncclInvalidArgument, "overlap",
      ncclAllGather(big + (rank == 0 ? 1 : 0), big, 4, ncclFloat, comm, NULL));
  /* PreMulSum operators. */
  ncclRedOp_t op;
  float s = 2;
  BAD(ncclInvalidArgument, "scalar is NULL",
      ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat, ncclScalarHostImmediate, comm));
  BAD(ncclInvalidArgument, "residence",
      ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, (ncclScalarResidence_t)9, comm));
  BAD(ncclInvalidArgument, "built-in", ncclRedOpDestroy(ncclSum, comm));
  if (ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, ncclScalarHostImmediate, comm) != ncclSuccess)
    __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
  BAD(ncclInvalidArgument, "created for float",
      ncclAllReduce(buf, buf, 4, ncclDouble, op, comm, NULL));
  BAD(ncclSuccess, NULL, ncclRedOpDestroy(op, comm));
  BAD(ncclInvalidArgument, "not created", ncclRedOpDestroy(op, comm));
  /* An error inside a group makes ncclGroupEnd fail and nothing runs. */
  for (int i = 0; i < 4; i++) buf[i] = 1;
  ncclGroupStart();
  ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, NULL);
  BAD(ncclInvalidArgument, "datatype",
      ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, comm, NULL));
  BAD(ncclInvalidArgument, NULL, ncclGroupEnd());
  if (buf[0] != 1)
    harness_log(rank, "a failed group still ran its calls"),
        __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
  BAD(ncclInvalidUsage, "without a matching", ncclGroupEnd());
  /* Simulation estimates without running. */
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclGroupStart();
  ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, comm, NULL);
  BAD(ncclSuccess, NULL, ncclGroupSimulateEnd(&sim));
  if (!(sim.estimatedTime > 0) || buf[0] != 1)
    harness_log(rank, "simulate: %g", (double)sim.estimatedTime),
        __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
  ncclSimInfo_t junk;
  memset(&junk, 0, sizeof junk);
  ncclGroupStart();
  BAD(ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER", ncclGroupSimulateEnd(&junk));
  ncclGroupEnd();
  /* Registration and windows. */
  void *h = NULL;
  BAD(ncclSuccess, NULL, ncclCommRegister(comm, buf, sizeof buf, &h));
  BAD(ncclSuccess, NULL, ncclCommDeregister(comm, h));
  BAD(ncclInvalidArgument, "not registered", ncclCommDeregister(comm, h)); /* twice */
  BAD(ncclInvalidArgument, "not registered", ncclCommDeregister(comm, other));
  /* Sizes past the buffer: past the address space, or into unmapped pages. */
  BAD(ncclInvalidArgument, "address space", ncclCommRegister(comm, buf, SIZE_MAX, &h));
  BAD(ncclInvalidArgument, "not all memory", ncclCommRegister(comm, buf, (size_t)1 << 46, &h));
  void *kept = NULL; /* left registered: freed with the communicator */
  BAD(ncclSuccess, NULL, ncclCommRegister(comm, buf, sizeof buf, &kept));
  /* Windows: a range of one ncclMemAlloc allocation; collectives on it are
   * exact; one left registered is freed with the communicator. */
  ncclWindow_t win = NULL, win2 = NULL;
  BAD(ncclInvalidArgument, "ncclMemAlloc", ncclCommWindowRegister(comm, buf, sizeof buf, &win, 0));
  float *wbuf = NULL;
  const size_t wbytes = 64 * sizeof(float);
  BAD(ncclSuccess, NULL, ncclMemAlloc((void **)&wbuf, wbytes));
  if (wbuf) {
    BAD(ncclInvalidArgument, "winFlags", ncclCommWindowRegister(comm, wbuf, wbytes, &win, 4));
    BAD(ncclInvalidArgument, "win is NULL", ncclCommWindowRegister(comm, wbuf, wbytes, NULL, 0));
    BAD(ncclInvalidArgument, "size = 0", ncclCommWindowRegister(comm, wbuf, 0, &win, 0));
    /* ncclMemAlloc rounds up to whole pages: run past the last one. */
    BAD(ncclInvalidArgument, "ncclMemAlloc",
        ncclCommWindowRegister(comm, wbuf + 16, (size_t)1 << 20, &win, 0));
    BAD(ncclSuccess, NULL,
        ncclCommWindowRegister(comm, wbuf, wbytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    BAD(ncclSuccess, NULL, ncclCommWindowRegister(comm, wbuf + 16, 16 * sizeof(float), &win2, 0));
    for (int i = 0; i < 64; i++) wbuf[i] = (float)(rank + 1) * (float)(i % 7);
    BAD(ncclSuccess, NULL, ncclAllReduce(wbuf, wbuf, 64, ncclFloat, ncclSum, comm, NULL));
    for (int i = 0; i < 64; i++)
      if (wbuf[i] != (float)(nranks * (nranks + 1) / 2) * (float)(i % 7))
        harness_log(rank, "window AllReduce: element %d is %g", i, (double)wbuf[i]),
            __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
    BAD(ncclInvalidArgument, "not registered", ncclCommDeregister(comm, (void *)win));
    BAD(ncclInvalidArgument, "not registered", ncclCommWindowDeregister(comm, (ncclWindow_t)kept));
    BAD(ncclSuccess, NULL, ncclCommWindowDeregister(comm, win));
    BAD(ncclInvalidArgument, "not registered", ncclCommWindowDeregister(comm, win));
  }
  /* Nothing above broke the communicator. */
  for (int i = 0; i < 4; i++) buf[i] = 1;
  BAD(ncclSuccess, NULL, ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, NULL));
  if (buf[3] != (float)nranks)
    harness_log(rank, "sum %g", (double)buf[3]), __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
  BAD(ncclSuccess, NULL, ncclCommDestroy(comm)); /* win2 and kept still registered */
  BAD(ncclSuccess, NULL, ncclMemFree(wbuf));
  return __atomic_load_n(&fails, __ATOMIC_RELAXED) ? 1 : 0;
}

static int init_args(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param, (void)nranks;
  ncclComm_t comm;
  BAD(ncclInvalidArgument, "nranks = 0", ncclCommInitRank(&comm, 0, id, 0));
  BAD(ncclInvalidArgument, "rank = 5", ncclCommInitRank(&comm, 2, id, 5));
  BAD(ncclInvalidArgument, "rank = -1", ncclCommInitRank(&comm, 2, id, -1));
  BAD(ncclInvalidArgument, "output pointer", ncclCommInitRank(NULL, 2, id, 0));
  ncclUniqueId junk;
  memset(&junk, 0x5a, sizeof junk);
  BAD(ncclInvalidArgument, "ncclGetUniqueId", ncclCommInitRank(&comm, 1, junk, 0));
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  BAD(ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER",
      ncclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  BAD(ncclInvalidArgument, "nId = 3", ncclCommInitRankScalable(&comm, 2, 0, 3, &id, NULL));
  BAD(ncclInvalidArgument, "ndev = 0", ncclCommInitAll(&comm, 0, NULL));
  BAD(ncclInvalidArgument, "NULL", ncclGetUniqueId(NULL));
  BAD(ncclInvalidArgument, "NULL", ncclGetVersion(NULL));
  BAD(ncclInvalidArgument, "size is 0", ncclMemAlloc((void **)&comm, 0));
  int x;
  BAD(ncclInvalidArgument, "ncclMemAlloc", ncclMemFree(&x));
  void *p = NULL;
  BAD(ncclSuccess, NULL, ncclMemAlloc(&p, 12345));
  memset(p, 1, 12345);
  BAD(ncclSuccess, NULL, ncclMemFree(p));
  BAD(ncclInvalidArgument, "freed already", ncclMemFree(p));
  BAD(ncclSuccess, NULL, ncclCommDestroy(NULL));
  return __atomic_load_n(&fails, __ATOMIC_RELAXED) ? 1 : 0;
}

static const harness_case cases[] = {
    {"collectives", collectives}, {"init_args", init_args}, {NULL, NULL}};

int main(int argc, char **argv) {
  harness_init(argc, argv, cases);
  if (argc != 3) return 2;
  harness_mode mode = strcmp(argv[1], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  int n = atoi(argv[2]);
  int failed = harness_spawn(mode, n, "collectives", "", 120);
  failed += harness_spawn_ex(HARNESS_THREADS, 1, "init_args", "", 60, 0);
  printf("badargs %s x%d: %s\n", argv[1], n, failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}

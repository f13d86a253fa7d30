/*
 * test_comm.c - communicator life cycle and failure behaviour on host
 * memory: grouped and single-thread multi-rank init, nonblocking init,
 * split, shrink, scalable init, finalize/revoke, abort from another thread,
 * dead and silent peers, mismatched calls, and a missing rank at init.
 *
 * usage: test_comm CASE threads|procs NRANKS   (CTest runs each case)
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "ref.h"
#include "spawn.h"

#define CHECKR(call)                                                                               \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      harness_log(rank, "%s:%d %s -> %s", __FILE__, __LINE__, #call, ncclGetErrorString(r_));      \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define EXPECTR(cond)                                                                              \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      harness_log(rank, "%s:%d expectation failed: %s", __FILE__, __LINE__, #cond);                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* All-reduces `count` floats of value (rank+1) and checks the sum. */
static int allreduce_sum_check(ncclComm_t comm, int rank, size_t count) {
  int n = 0, me = 0;
  CHECKR(ncclCommCount(comm, &n));
  CHECKR(ncclCommUserRank(comm, &me));
  float *buf = malloc(count * sizeof *buf);
  for (size_t i = 0; i < count; i++) buf[i] = (float)(me + 1) + (float)(i % 3);
  ncclResult_t r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  int bad = 0;
  for (size_t i = 0; r == ncclSuccess && i < count; i++)
    bad += buf[i] != (float)(n * (n + 1) / 2) + (float)(n * (int)(i % 3));
  free(buf);
  if (r != ncclSuccess || bad)
    harness_log(rank, "allreduce: %s, %d wrong", ncclGetErrorString(r), bad);
  return r != ncclSuccess || bad;
}

static int wait_ready(ncclComm_t comm, int rank) {
  ncclResult_t a = ncclInProgress;
  double t0 = now_s();
  while (a == ncclInProgress && now_s() - t0 < 60) {
    CHECKR(ncclCommGetAsyncError(comm, &a));
    if (a == ncclInProgress) sleep_ms(1);
  }
  EXPECTR(a == ncclSuccess);
  return 0;
}

/* One thread creates nranks communicators with ncclCommInitAll and drives
 * grouped all-reduces on all of them; runs on a single "rank" of the
 * harness. */
static int init_all(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)id, (void)param;
  int ndev = nranks;
  ncclComm_t comms[8];
  CHECKR(ncclCommInitAll(comms, ndev, NULL));
  float *bufs[8];
  for (int i = 0; i < ndev; i++) {
    bufs[i] = malloc(1000 * sizeof(float));
    for (int k = 0; k < 1000; k++) bufs[i][k] = (float)i;
  }
  CHECKR(ncclGroupStart());
  for (int i = 0; i < ndev; i++)
    CHECKR(ncclAllReduce(bufs[i], bufs[i], 1000, ncclFloat, ncclSum, comms[i], NULL));
  CHECKR(ncclGroupEnd());
  for (int i = 0; i < ndev; i++)
    for (int k = 0; k < 1000; k++) EXPECTR(bufs[i][k] == (float)(ndev * (ndev - 1) / 2));
  /* Nested groups, two collectives per communicator. */
  CHECKR(ncclGroupStart());
  CHECKR(ncclGroupStart());
  for (int i = 0; i < ndev; i++) {
    CHECKR(ncclAllReduce(bufs[i], bufs[i], 1000, ncclFloat, ncclMax, comms[i], NULL));
    CHECKR(ncclAllReduce(bufs[i], bufs[i], 10, ncclFloat, ncclSum, comms[i], NULL));
  }
  CHECKR(ncclGroupEnd());
  CHECKR(ncclGroupEnd());
  for (int i = 0; i < ndev; i++) {
    EXPECTR(bufs[i][0] == (float)(ndev * ndev * (ndev - 1) / 2));
    EXPECTR(bufs[i][999] == (float)(ndev * (ndev - 1) / 2));
    free(bufs[i]);
  }
  for (int i = 0; i < ndev; i++) CHECKR(ncclCommDestroy(comms[i]));
  return 0;
}

/* ncclCommInitAll whose n-th host allocation fails (CHORUS_FAULT_ALLOC, a
 * child process per n, before it makes any communicator): the call
 * returns the failing rank's cause, never another rank's echo of it
 * (ncclRemoteError: the rank whose thread is joined first may be one that
 * only heard of the failure), and never hangs (a child is killed after
 * 60 s). Several n land in the init. */
static int init_all_fault(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)nranks, (void)id, (void)param;
  static const int at[] = {1, 4, 12, 40, 120, 400};
  int failed_inits = 0;
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    const pid_t pid = fork();
    EXPECTR(pid >= 0);
    if (pid == 0) {
      char v[16];
      snprintf(v, sizeof v, "%d", at[i]);
      setenv("CHORUS_FAULT_ALLOC", v, 1);
      setenv("NCCL_DEBUG", "NONE", 1); /* the failures are expected */
      alarm(60);
      ncclComm_t comms[6];
      const ncclResult_t r = ncclCommInitAll(comms, 6, NULL);
      fflush(NULL);
      _exit((int)r);
    }
    int st = 0;
    EXPECTR(waitpid(pid, &st, 0) == pid);
    EXPECTR(WIFEXITED(st));
    const int r = WEXITSTATUS(st);
    harness_log(rank, "host allocation %d fails: ncclCommInitAll returns %s", at[i],
                ncclGetErrorString((ncclResult_t)r));
    EXPECTR(r != ncclRemoteError && r != ncclInProgress);
    failed_inits += r != ncclSuccess;
  }
  EXPECTR(failed_inits >= 3);
  return 0;
}

/* Each harness rank drives two communicator ranks from one thread through a
 * group of ncclCommInitRank (the multi-GPU-per-process pattern). */
static int group_init(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t c[2];
  CHECKR(ncclGroupStart());
  for (int g = 0; g < 2; g++) CHECKR(ncclCommInitRank(&c[g], 2 * nranks, id, 2 * rank + g));
  CHECKR(ncclGroupEnd());
  float v[2][64];
  for (int g = 0; g < 2; g++)
    for (int k = 0; k < 64; k++) v[g][k] = 1;
  CHECKR(ncclGroupStart());
  for (int g = 0; g < 2; g++) CHECKR(ncclAllReduce(v[g], v[g], 64, ncclFloat, ncclSum, c[g], NULL));
  CHECKR(ncclGroupEnd());
  for (int g = 0; g < 2; g++) {
    EXPECTR(v[g][63] == (float)(2 * nranks));
    CHECKR(ncclCommDestroy(c[g]));
  }
  return 0;
}

static int nonblocking(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  EXPECTR(r == ncclInProgress && comm != NULL);
  /* Using it before it is ready is an error, not a hang. */
  float x = 1;
  ncclResult_t early = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL);
  EXPECTR(early == ncclInvalidUsage || early == ncclSuccess);
  if (wait_ready(comm, rank)) return 1;
  if (allreduce_sum_check(comm, rank, 777)) return 1;
  CHECKR(ncclCommFinalize(comm));
  ncclResult_t a;
  CHECKR(ncclCommGetAsyncError(comm, &a));
  EXPECTR(a == ncclSuccess);
  EXPECTR(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) == ncclInvalidUsage);
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

static int split(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm, child;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  /* Rank 0 opts out; the others split by parity, reversed by key. */
  int color = rank == 0 ? NCCL_SPLIT_NOCOLOR : rank % 2;
  CHECKR(ncclCommSplit(comm, color, nranks - rank, &child, NULL));
  if (rank == 0) {
    EXPECTR(child == NULL);
  } else {
    int n = 0, me = -1, expect_n = 0, expect_me = 0;
    for (int r = 1; r < nranks; r++)
      if (r % 2 == rank % 2) {
        expect_n++;
        if (r > rank) expect_me++;
      }
    CHECKR(ncclCommCount(child, &n));
    CHECKR(ncclCommUserRank(child, &me));
    EXPECTR(n == expect_n && me == expect_me);
    if (allreduce_sum_check(child, rank, 5000)) return 1;
    CHECKR(ncclCommDestroy(child));
  }
  /* The parent still works after the split. */
  if (allreduce_sum_check(comm, rank, 100)) return 1;
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

static int shrink(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm, child;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  int excl[1] = {1};
  if (rank == 1) { /* excluded: leaves without calling shrink */
    CHECKR(ncclCommDestroy(comm));
    return 0;
  }
  CHECKR(ncclCommShrink(comm, excl, 1, &child, NULL, NCCL_SHRINK_DEFAULT));
  int n = 0, me = -1;
  CHECKR(ncclCommCount(child, &n));
  CHECKR(ncclCommUserRank(child, &me));
  EXPECTR(n == nranks - 1 && me == (rank == 0 ? 0 : rank - 1));
  if (allreduce_sum_check(child, rank, 999)) return 1;
  /* An excluded rank calling shrink is told so. */
  int self[1] = {rank};
  ncclComm_t none;
  EXPECTR(ncclCommShrink(comm, self, 1, &none, NULL, 0) == ncclInvalidArgument);
  CHECKR(ncclCommDestroy(child));
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

/* param: hex of a second unique id (made by the parent). */
static int scalable(int rank, int nranks, ncclUniqueId id, const char *param) {
  ncclUniqueId ids[2];
  ids[0] = id;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    unsigned v;
    sscanf(param + 2 * i, "%2x", &v);
    ids[1].internal[i] = (char)v;
  }
  ncclComm_t comm;
  CHECKR(ncclCommInitRankScalable(&comm, nranks, rank, 2, ids, NULL));
  if (allreduce_sum_check(comm, rank, 300)) return 1;
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

static int finalize_revoke(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  int dev = 0;
  CHECKR(ncclCommCuDevice(comm, &dev));
  EXPECTR(dev == -1);
  if (allreduce_sum_check(comm, rank, 10)) return 1;
  CHECKR(ncclCommRevoke(comm, 0));
  float x = 0;
  EXPECTR(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) == ncclInvalidUsage);
  EXPECTR(ncclCommFinalize(comm) == ncclInvalidUsage);
  EXPECTR(ncclCommRevoke(comm, 1) == ncclInvalidArgument);
  /* Windows are collective: none on a revoked communicator. */
  void *wbuf = NULL;
  ncclWindow_t win = NULL;
  CHECKR(ncclMemAlloc(&wbuf, 4096));
  EXPECTR(ncclCommWindowRegister(comm, wbuf, 4096, &win, 0) == ncclInvalidUsage && win == NULL);
  CHECKR(ncclMemFree(wbuf));
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

typedef struct {
  ncclComm_t comm;
  ncclResult_t r;
  double t;
} bg_call;

static void *bg_allreduce(void *p) {
  bg_call *b = p;
  float x[16] = {0};
  double t0 = now_s();
  b->r = ncclAllReduce(x, x, 16, ncclFloat, ncclSum, b->comm, NULL);
  b->t = now_s() - t0;
  return NULL;
}

/* Rank 0 blocks in an all-reduce that rank 1 never joins; another thread
 * aborts the communicator, which must make the call return promptly. */
static int abort_unblocks(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  if (rank == 0) {
    bg_call b = {comm, ncclSuccess, 0};
    pthread_t th;
    pthread_create(&th, NULL, bg_allreduce, &b);
    sleep_ms(300);
    double t0 = now_s();
    CHECKR(ncclCommAbort(comm));
    double ta = now_s() - t0;
    pthread_join(th, NULL);
    EXPECTR(b.r != ncclSuccess);
    EXPECTR(ta < 5.0);
    harness_log(rank, "abort returned in %.3f s; blocked call returned %s after %.3f s", ta,
                ncclGetErrorString(b.r), b.t);
  } else {
    sleep_ms(600);
    /* The aborted peer poisoned the connections: fail fast, no hang.
     * The same call as the peer's, so that the abort is all that differs;
     * it may complete with what the peer posted before it aborted, but
     * the next cannot. */
    float x[16] = {0};
    double t0 = now_s();
    ncclResult_t r = ncclAllReduce(x, x, 16, ncclFloat, ncclSum, comm, NULL);
    if (r == ncclSuccess) r = ncclAllReduce(x, x, 16, ncclFloat, ncclSum, comm, NULL);
    EXPECTR(r == ncclRemoteError && now_s() - t0 < 10);
    CHECKR(ncclCommDestroy(comm));
  }
  return 0;
}

/* Rank 1 sleeps instead of calling; rank 0 fails after CHORUS_OP_TIMEOUT
 * with a message naming rank 1. */
static int op_timeout(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  if (rank == 0) {
    float x = 1;
    double t0 = now_s();
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL);
    double t = now_s() - t0;
    const char *msg = ncclGetLastError(comm);
    harness_log(rank, "after %.2f s: %s: %s", t, ncclGetErrorString(r), msg);
    EXPECTR(r == ncclRemoteError);
    EXPECTR(t >= 0.9 && t < 10);
    EXPECTR(strstr(msg, "rank 1") != NULL || strstr(msg, "rank 2") != NULL);
    EXPECTR(strstr(msg, "CHORUS_OP_TIMEOUT") != NULL);
    ncclResult_t a;
    CHECKR(ncclCommGetAsyncError(comm, &a));
    EXPECTR(a == ncclRemoteError);
    CHECKR(ncclCommAbort(comm));
  } else {
    sleep_ms(2500);
    CHECKR(ncclCommAbort(comm));
  }
  return 0;
}

/* A lone receive and a lone send that no receiver makes room for: rank 1
 * never calls. Rank 0's ncclRecv from rank 1 and rank 2's ncclSend of
 * 64 MiB to it (more than the buffers hold) each fail after
 * CHORUS_OP_TIMEOUT, saying which call waits for which rank, and for what. */
static int lone_p2p(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  if (rank == 1) {
    sleep_ms(2500);
    CHECKR(ncclCommAbort(comm));
    return 0;
  }
  const size_t count = rank == 0 ? 1024 : (size_t)16 << 20;
  float *buf = calloc(count, sizeof *buf);
  EXPECTR(buf != NULL);
  double t0 = now_s();
  ncclResult_t r = rank == 0 ? ncclRecv(buf, count, ncclFloat, 1, comm, NULL)
                             : ncclSend(buf, count, ncclFloat, 1, comm, NULL);
  double t = now_s() - t0;
  const char *msg = ncclGetLastError(comm);
  harness_log(rank, "after %.2f s: %s: %s", t, ncclGetErrorString(r), msg);
  free(buf);
  EXPECTR(r == ncclRemoteError);
  EXPECTR(t >= 0.9 && t < 10);
  EXPECTR(strstr(msg, rank == 0 ? "Recv(count=1024, float, peer=1)"
                                : "Send(count=16777216, float, peer=1)") != NULL);
  EXPECTR(strstr(msg, rank == 0 ? "waiting for data from rank 1" : "waiting for room at rank 1") !=
          NULL);
  EXPECTR(strstr(msg, "CHORUS_OP_TIMEOUT") != NULL);
  CHECKR(ncclCommAbort(comm));
  return 0;
}

/* Rank 1 dies (processes) or vanishes (threads: abort without a word); the
 * others fail with ncclRemoteError naming it, well before any timeout. */
static int dead_peer(int rank, int nranks, ncclUniqueId id, const char *param) {
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  if (allreduce_sum_check(comm, rank, 100)) return 1;
  if (rank == 1) {
    if (strcmp(param, "procs") == 0) _exit(0);
    CHECKR(ncclCommAbort(comm));
    return 0;
  }
  float x[1000] = {0};
  double t0 = now_s();
  ncclResult_t r = ncclAllReduce(x, x, 1000, ncclFloat, ncclSum, comm, NULL);
  double t = now_s() - t0;
  harness_log(rank, "after %.2f s: %s: %s", t, ncclGetErrorString(r), ncclGetLastError(comm));
  EXPECTR(r == ncclRemoteError);
  EXPECTR(t < 5);
  CHECKR(ncclCommAbort(comm));
  return 0;
}

/* Rank 1's process is killed (SIGKILL from a timer thread) while every rank
 * is inside a large all-reduce (killed_mid_alltoall: AlltoAll, whose
 * blocks a cut across lanes takes rows of); the others fail with
 * ncclRemoteError naming rank 1, quickly. Processes only. */
static void *kill_me_soon(void *arg) {
  (void)arg;
  sleep_ms(30);
  raise(SIGKILL);
  return NULL;
}

static int killed_mid(int rank, int nranks, ncclUniqueId id, int alltoall) {
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  size_t count = 16u << 20; /* 64 MiB of floats: long enough to be killed inside */
  float *buf = calloc(count, sizeof *buf), *out = alltoall ? calloc(count, sizeof *out) : NULL;
  if (rank == 1) {
    pthread_t th;
    pthread_create(&th, NULL, kill_me_soon, NULL);
  }
  double t0 = now_s();
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 50 && r == ncclSuccess; i++)
    r = alltoall ? ncclAlltoAll(buf, out, count / (size_t)nranks, ncclFloat, comm, NULL)
                 : ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  double t = now_s() - t0;
  const char *msg = ncclGetLastError(comm);
  harness_log(rank, "after %.2f s: %s: %s", t, ncclGetErrorString(r), msg);
  EXPECTR(r == ncclRemoteError);
  EXPECTR(strstr(msg, "rank 1") != NULL);
  EXPECTR(t < 20);
  free(buf);
  free(out);
  CHECKR(ncclCommAbort(comm));
  return 0;
}

static int killed_mid_collective(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  return killed_mid(rank, nranks, id, 0);
}

static int killed_mid_alltoall(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  return killed_mid(rank, nranks, id, 1);
}

/* What kills rank 1 in killed_mid_p2p: rank 0's thread that watches rank
 * 2's stream fill its buffer. */
typedef struct {
  volatile const unsigned char *mark; /* rank 2's byte lands here mid-stream */
  pid_t victim;
  int fired;
} mid_stream_killer;

static void *kill_mid_stream(void *arg) {
  mid_stream_killer *k = arg;
  for (int i = 0; i < 100000 && *k->mark != 0x22; i++) usleep(100); /* 10 s at most */
  k->fired = *k->mark == 0x22;
  kill(k->victim, SIGKILL);
  return NULL;
}

/* Rank 0 receives 128 MiB from rank 2 and sends 128 MiB to rank 1, in one
 * group; rank 1 takes nothing, and rank 0 kills it once rank 2's stream is
 * 16 MiB in. Rank 0's group fails naming rank 1 while a socket thread is
 * in the middle of rank 2's stream, which goes straight into rank 0's
 * buffer. Once the call returns the buffer is the caller's: rank 0 gives
 * its pages back (zeros from then on, at once, where writing them would
 * take longer than the reads left) and nothing of rank 2's may land there
 * after. Processes only; the main function runs it 16 times. */
static int killed_mid_p2p(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  int pids[8] = {0};
  pids[rank] = (int)getpid();
  CHECKR(ncclAllGather(&pids[rank], pids, 1, ncclInt32, comm, NULL));
  const size_t bytes = (size_t)128 << 20;
  /* Rank 0's buffer is populated at once (a fault a page was much of the
   * test's time on a virtual machine); rank 2's is one 8 MiB block of
   * 0x22 mapped 16 times over; rank 1 has none. */
  unsigned char *buf = NULL;
  if (rank == 0) {
    buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
               0);
    EXPECTR(buf != MAP_FAILED);
  } else if (rank == 2) {
    const size_t block = (size_t)8 << 20;
    int fd = memfd_create("killed_mid_p2p", 0);
    EXPECTR(fd >= 0 && ftruncate(fd, (off_t)block) == 0);
    buf = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECTR(buf != MAP_FAILED);
    for (size_t off = 0; off < bytes; off += block)
      EXPECTR(mmap(buf + off, block, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
              buf + off);
    close(fd);
    memset(buf, 0x22, block);
  }
  ncclResult_t r = ncclSuccess;
  if (rank == 1) {
    sleep_ms(20000); /* rank 0 kills it long before */
    raise(SIGKILL);
  } else if (rank == 0) {
    mid_stream_killer k = {buf + ((size_t)16 << 20), (pid_t)pids[1], 0};
    pthread_t th;
    pthread_create(&th, NULL, kill_mid_stream, &k);
    /* More than rank 1's sockets and slots hold (its socket threads fill
     * them while it sleeps): the group waits for rank 1. */
    void *to1 = calloc(bytes, 1);
    CHECKR(ncclGroupStart());
    ncclRecv(buf, bytes, ncclUint8, 2, comm, NULL);
    ncclSend(to1, bytes, ncclUint8, 1, comm, NULL);
    r = ncclGroupEnd();
    EXPECTR(madvise(buf, bytes, MADV_DONTNEED) == 0);
    pthread_join(th, NULL);
    free(to1);
    EXPECTR(k.fired);
  } else if (rank == 2) {
    r = ncclSend(buf, bytes, ncclUint8, 0, comm, NULL);
  }
  const char *msg = ncclGetLastError(comm);
  harness_log(rank, "%s: %s", ncclGetErrorString(r), msg);
  if (rank == 0) {
    EXPECTR(r == ncclRemoteError);
    EXPECTR(strstr(msg, "rank 1") != NULL);
    sleep_ms(200);
    /* A late write makes its page resident again: only those are read
     * (reading the others would map the zero page, one fault each). */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), landed = 0;
    unsigned char *resident = malloc(bytes / page);
    EXPECTR(resident && mincore(buf, bytes, resident) == 0);
    for (size_t p = 0; p < bytes / page; p++)
      for (size_t i = p * page; (resident[p] & 1) && i < (p + 1) * page; i++) landed += buf[i] != 0;
    free(resident);
    if (landed) harness_log(rank, "%zu bytes landed in the buffer after the call returned", landed);
    EXPECTR(landed == 0);
  }
  if (buf) munmap(buf, bytes);
  CHECKR(ncclCommAbort(comm));
  return 0;
}

/* Across hosts a rank may hold the notes of its last calls back
 * (transport/net, transport/plugin): no rank may wait for those. Every rank broadcasts from
 * rank 0 64 times; then the others stop outside the library for 2 s (a
 * barrier of another library, say) while rank 0 broadcasts 16 more times.
 * Its call 64 compares the earlier calls with every peer's (calls.h): it
 * must find what it needs sent already, not wait for the peers' return.
 * Every rank a host of its own (HARNESS_HOSTS). */
static int held_notes(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  float x = 1;
  for (int i = 0; i < 64; i++) CHECKR(ncclBroadcast(&x, &x, 1, ncclFloat, 0, comm, NULL));
  const double t0 = now_s();
  if (rank != 0) sleep_ms(2000);
  for (int i = 0; i < 16; i++) CHECKR(ncclBroadcast(&x, &x, 1, ncclFloat, 0, comm, NULL));
  const double t = now_s() - t0;
  harness_log(rank, "16 more calls took %.3f s", t);
  if (rank == 0) EXPECTR(t < 1.0);
  EXPECTR(x == 1);
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

/* Communicators made and destroyed one after another from one parent, each
 * running rooted calls whose ranks finish at different times (a Gather's
 * non-root is done once its block is sent), so ranks destroy a child while
 * peers still send it their last call-board notes: 24 children, each
 * checked, then the parent. Over a network plugin whose close leaves
 * receives posted (aws-ofi-nccl), a note that lands after the close is a
 * write into freed memory, found at a later child's connect. */
static int comm_cycles(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  if (nranks > 8) return 2; /* the gather buffer's size */
  ncclComm_t parent;
  CHECKR(ncclCommInitRank(&parent, nranks, id, rank));
  enum { N = 64 };
  for (int cycle = 0; cycle < 24; cycle++) {
    ncclComm_t comm;
    CHECKR(ncclCommSplit(parent, 0, rank, &comm, NULL));
    const int root = cycle % nranks;
    float blk[N], all[N * 8];
    for (int i = 0; i < N; i++) blk[i] = (float)(rank * 1000 + cycle * 10 + i % 7);
    for (int k = 0; k < 20; k++) CHECKR(ncclBroadcast(blk, all, N, ncclFloat, root, comm, NULL));
    for (int i = 0; i < N; i++) EXPECTR(all[i] == (float)(root * 1000 + cycle * 10 + i % 7));
    for (int i = 0; i < N; i++) blk[i] = (float)(rank * 1000 + cycle * 10 + i % 7);
    CHECKR(ncclGather(blk, all, N, ncclFloat, root, comm, NULL));
    if (rank == root)
      for (int r = 0; r < nranks; r++)
        for (int i = 0; i < N; i++)
          EXPECTR(all[r * N + i] == (float)(r * 1000 + cycle * 10 + i % 7));
    if (rank == root) sleep_ms(5); /* the others destroy first */
    CHECKR(ncclCommDestroy(comm));
  }
  if (allreduce_sum_check(parent, rank, 100)) return 1;
  CHECKR(ncclCommDestroy(parent));
  return 0;
}

/* Rank 0 all-reduces 100 floats, the others 200: detected and named. */
static int mismatch(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  float x[200] = {0};
  ncclResult_t r = ncclAllReduce(x, x, rank == 0 ? 100 : 200, ncclFloat, ncclSum, comm, NULL);
  const char *msg = ncclGetLastError(comm);
  harness_log(rank, "%s: %s", ncclGetErrorString(r), msg);
  EXPECTR(r == ncclInvalidUsage || r == ncclRemoteError);
  if (r == ncclInvalidUsage) EXPECTR(strstr(msg, "count=100") && strstr(msg, "count=200"));
  CHECKR(ncclCommAbort(comm));
  return 0;
}

/* The last rank calls init too late: everyone else gets an error naming
 * it after CHORUS_BOOTSTRAP_TIMEOUT (set to 2 s by the test), and it gets
 * the rendezvous' failure at once (3 s: after the others' failed). */
static int missing_rank(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  const int late = rank == nranks - 1;
  if (late) sleep_ms(3000);
  ncclComm_t comm = NULL;
  double t0 = now_s();
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  double t = now_s() - t0;
  const char *msg = ncclGetLastError(NULL);
  harness_log(rank, "%sinit after %.2f s: %s: %s", late ? "late " : "", t, ncclGetErrorString(r),
              msg);
  EXPECTR(r == ncclRemoteError);
  EXPECTR(t < (late ? 1.5 : 20));
  char want[32];
  snprintf(want, sizeof want, ": %d", nranks - 1);
  EXPECTR(strstr(msg, "never reached") && strstr(msg, want));
  if (late) EXPECTR(strstr(msg, "rendezvous failed"));
  if (comm) ncclCommDestroy(comm);
  return 0;
}

/* With NCCL_COMM_ID (set by main to a free port) every rank derives the id
 * itself and rank 0 hosts the root; twenty communicators in a row must not
 * trip over the previous one's root. */
static int comm_id_repeat(int rank, int nranks, ncclUniqueId unused, const char *param) {
  (void)unused, (void)param;
  for (int i = 0; i < 20; i++) {
    ncclUniqueId id;
    ncclComm_t comm;
    CHECKR(ncclGetUniqueId(&id));
    CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
    if (allreduce_sum_check(comm, rank, 33)) return 1;
    CHECKR(ncclCommDestroy(comm));
  }
  return 0;
}

/* A group that another thread opened, holding an AllReduce on comm until
 * told to end it. */
typedef struct held_group {
  ncclComm_t comm;
  float *buf;
  int queued, release; /* atomic */
  ncclResult_t res;
} held_group;

static void *hold_group(void *arg) {
  held_group *h = arg;
  ncclGroupStart();
  h->res = ncclAllReduce(h->buf, h->buf, 64, ncclFloat, ncclSum, h->comm, NULL);
  __atomic_store_n(&h->queued, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 30000 && !__atomic_load_n(&h->release, __ATOMIC_ACQUIRE); i++) sleep_ms(1);
  ncclResult_t r = ncclGroupEnd();
  if (h->res == ncclSuccess) h->res = r;
  return NULL;
}

/* A known sequence of calls for the live statistics (stats_check.py reads
 * what CHORUS_STATS_INTERVAL=1 wrote): 5 AllReduce of 1000 floats alone,
 * a pause past one interval, 3 Broadcast of 64 KiB, 1 AllGather of 100
 * floats per rank, 2 AllReduce of 10 floats in a group, 1 Broadcast with a
 * bad root (an error). */
static int stats_calls(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  float *buf = calloc((size_t)16384 * (size_t)nranks, sizeof *buf);
  int bad = buf == NULL;
  for (int i = 0; i < 5 && !bad; i++)
    bad |= ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
  nanosleep(&(struct timespec){1, 300000000}, NULL);
  for (int i = 0; i < 3 && !bad; i++)
    bad |= ncclBroadcast(buf, buf, 16384, ncclFloat32, 0, comm, NULL) != ncclSuccess;
  if (!bad)
    bad |= ncclAllGather(buf, buf + 100 * rank, 100, ncclFloat32, comm, NULL) != ncclSuccess;
  if (!bad) {
    ncclGroupStart();
    ncclAllReduce(buf, buf, 10, ncclFloat32, ncclSum, comm, NULL);
    ncclAllReduce(buf + 10, buf + 10, 10, ncclFloat32, ncclSum, comm, NULL);
    bad |= ncclGroupEnd() != ncclSuccess;
  }
  if (!bad)
    bad |= ncclBroadcast(buf, buf, 1, ncclFloat32, nranks, comm, NULL) != ncclInvalidArgument;
  free(buf);
  if (ncclCommDestroy(comm) != ncclSuccess) bad = 1;
  if (bad) harness_log(rank, "a call of the known sequence failed");
  return bad;
}

/* Misuse that must not crash: ncclCommDestroy and ncclCommAbort on a
 * communicator with calls queued in this thread's open group (the calls
 * are dropped and ncclGroupEnd fails) or in another thread's (refused
 * until that group ends), a communicator destroyed twice or used after
 * ncclCommDestroy, and ncclCommFinalize inside a group (the queued call
 * still runs). Each case on its own child of one parent, which works at
 * the end. */
static int misuse(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  ncclComm_t comm, child;
  CHECKR(ncclCommInitRank(&comm, nranks, id, rank));
  float x[64] = {0};
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  CHECKR(ncclCommSplit(comm, 0, rank, &child, NULL));
  CHECKR(ncclGroupStart());
  CHECKR(ncclAllReduce(x, x, 64, ncclFloat, ncclSum, child, NULL));
  EXPECTR(ncclCommDestroy(child) == ncclSuccess);
  EXPECTR(ncclGroupEnd() == ncclInvalidUsage);
  EXPECTR(ncclCommDestroy(child) == ncclInvalidArgument);
  EXPECTR(ncclAllReduce(x, x, 64, ncclFloat, ncclSum, child, NULL) == ncclInvalidArgument);
  EXPECTR(ncclCommAbort(child) == ncclInvalidArgument);

  CHECKR(ncclCommSplit(comm, 0, rank, &child, NULL));
  CHECKR(ncclGroupStart());
  CHECKR(ncclSend(x, 8, ncclFloat, next, child, NULL));
  CHECKR(ncclRecv(x + 8, 8, ncclFloat, prev, child, NULL));
  CHECKR(ncclAllReduce(x + 16, x + 16, 8, ncclFloat, ncclSum, comm, NULL)); /* not dropped... */
  EXPECTR(ncclCommAbort(child) == ncclSuccess);
  EXPECTR(ncclGroupEnd() == ncclInvalidUsage); /* ...but the group fails whole */
  EXPECTR(ncclCommAbort(child) == ncclInvalidArgument);

  CHECKR(ncclCommSplit(comm, 0, rank, &child, NULL));
  held_group h = {child, x, 0, 0, ncclSuccess};
  pthread_t th;
  EXPECTR(pthread_create(&th, NULL, hold_group, &h) == 0);
  for (int i = 0; i < 30000 && !__atomic_load_n(&h.queued, __ATOMIC_ACQUIRE); i++) sleep_ms(1);
  EXPECTR(ncclCommDestroy(child) == ncclInvalidUsage);
  EXPECTR(strstr(ncclGetLastError(NULL), "another thread's open group") != NULL);
  __atomic_store_n(&h.release, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  EXPECTR(h.res == ncclSuccess);
  CHECKR(ncclCommDestroy(child));

  CHECKR(ncclCommSplit(comm, 0, rank, &child, NULL));
  for (int i = 0; i < 64; i++) x[i] = (float)(rank + 1);
  CHECKR(ncclGroupStart());
  CHECKR(ncclAllReduce(x, x, 64, ncclFloat, ncclSum, child, NULL));
  CHECKR(ncclCommFinalize(child));
  CHECKR(ncclGroupEnd());
  EXPECTR(x[0] == (float)(nranks * (nranks + 1) / 2) && x[63] == x[0]);
  CHECKR(ncclCommDestroy(child));

  if (allreduce_sum_check(comm, rank, 100)) return 1;
  CHECKR(ncclCommDestroy(comm));
  return 0;
}

/* Rank 1 of zombie_peer, in a process of its own (argv: zombie_child ID):
 * one AllReduce, then it exits without a word. */
static int zombie_child(const char *hex) {
  const int rank = 1;
  ncclUniqueId id;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    unsigned v = 0;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 2;
    id.internal[i] = (char)v;
  }
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, 2, id, rank));
  if (allreduce_sum_check(comm, rank, 100)) return 1;
  _exit(0);
}

/* A peer that has exited but is not reaped: this rank starts rank 1 as its
 * own child process and, blocked in a collective, cannot reap it, so the
 * peer stays a zombie (which kill(pid, 0) reports alive). This rank fails
 * with ncclRemoteError naming rank 1, in seconds. Runs as one thread. */
static int zombie_peer(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)nranks, (void)param;
  char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
    sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
  char exe[] = "/proc/self/exe", what[] = "zombie_child";
  char *args[] = {exe, what, hex, NULL};
  const pid_t pid = fork();
  if (pid == 0) {
    execv(exe, args);
    _exit(127);
  }
  EXPECTR(pid > 0);
  ncclComm_t comm;
  CHECKR(ncclCommInitRank(&comm, 2, id, 0));
  if (allreduce_sum_check(comm, rank, 100)) return 1;
  float x[1000] = {0};
  const double t0 = now_s();
  const ncclResult_t r = ncclAllReduce(x, x, 1000, ncclFloat, ncclSum, comm, NULL);
  const double t = now_s() - t0;
  const char *msg = ncclGetLastError(comm);
  harness_log(rank, "after %.2f s: %s: %s", t, ncclGetErrorString(r), msg);
  char path[64], stat[256] = "";
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f) {
    stat[fread(stat, 1, sizeof stat - 1, f)] = '\0';
    fclose(f);
  }
  const char *end = strrchr(stat, ')');
  const int zombie = end && end[1] == ' ' && end[2] == 'Z';
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECTR(zombie); /* what this case is about: the peer was not reaped */
  EXPECTR(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECTR(r == ncclRemoteError);
  EXPECTR(strstr(msg, "rank 1") && strstr(msg, "has exited")); /* not the op timeout */
  EXPECTR(t < 5);
  CHECKR(ncclCommAbort(comm));
  return 0;
}

/* Rank 2 is killed (SIGKILL, from a timer thread) at a moment of its init
 * that varies with its pid. Every rank's process must leave nothing in
 * /dev/shm (the harness looks for each child's segments), whether its
 * init failed or not, and the survivors here exit without destroying a
 * communicator whose init failed, as many programs do. Processes only. */
static void *kill_me_in_init(void *arg) {
  sleep_ms(*(int *)arg);
  raise(SIGKILL);
  return NULL;
}

static int killed_in_init(int rank, int nranks, ncclUniqueId id, const char *param) {
  (void)param;
  static int delay_ms;
  if (rank == 2) {
    delay_ms = (int)(getpid() % 40);
    pthread_t th;
    pthread_create(&th, NULL, kill_me_in_init, &delay_ms);
  }
  ncclComm_t comm = NULL;
  const ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (rank == 2) {
    sleep_ms(5000); /* killed long before */
    return 1;
  }
  harness_log(rank, "init: %s", ncclGetErrorString(r));
  if (r == ncclSuccess) {
    sleep_ms(100); /* rank 2 is dead by now */
    ncclCommAbort(comm);
    return 0;
  }
  /* Gone at once, as a program that gives up on an error: no destroy, and
   * no exit handlers (a leak check would count the communicator). */
  fflush(NULL);
  _exit(0);
}

static const harness_case cases[] = {{"init_all", init_all},
                                     {"init_all_fault", init_all_fault},
                                     {"group_init", group_init},
                                     {"nonblocking", nonblocking},
                                     {"split", split},
                                     {"shrink", shrink},
                                     {"scalable", scalable},
                                     {"finalize_revoke", finalize_revoke},
                                     {"abort_unblocks", abort_unblocks},
                                     {"op_timeout", op_timeout},
                                     {"lone_p2p", lone_p2p},
                                     {"dead_peer", dead_peer},
                                     {"mismatch", mismatch},
                                     {"missing_rank", missing_rank},
                                     {"comm_id_repeat", comm_id_repeat},
                                     {"killed_mid_collective", killed_mid_collective},
                                     {"killed_mid_alltoall", killed_mid_alltoall},
                                     {"killed_mid_p2p", killed_mid_p2p},
                                     {"held_notes", held_notes},
                                     {"comm_cycles", comm_cycles},
                                     {"misuse", misuse},
                                     {"stats_calls", stats_calls},
                                     {"zombie_peer", zombie_peer},
                                     {"killed_in_init", killed_in_init},
                                     {NULL, NULL}};

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "zombie_child") == 0) return zombie_child(argv[2]);
  harness_init(argc, argv, cases);
  if (argc != 4) {
    fprintf(stderr, "usage: %s CASE threads|procs NRANKS\n", argv[0]);
    return 2;
  }
  const char *name = argv[1];
  harness_mode mode = strcmp(argv[2], "procs") == 0 ? HARNESS_PROCS : HARNESS_THREADS;
  int n = atoi(argv[3]);
  char param[2 * NCCL_UNIQUE_ID_BYTES + 1] = "";
  if (strcmp(name, "scalable") == 0) {
    ncclUniqueId extra;
    if (ncclGetUniqueId(&extra) != ncclSuccess) return 1;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
      sprintf(param + 2 * i, "%02x", (unsigned char)extra.internal[i]);
  } else {
    snprintf(param, sizeof param, "%s", argv[2]);
  }
  if (strcmp(name, "op_timeout") == 0 || strcmp(name, "lone_p2p") == 0)
    setenv("CHORUS_OP_TIMEOUT", "1", 1);
  /* A rank killed before it joins is missing: the others wait this long. */
  if (strcmp(name, "missing_rank") == 0 || strcmp(name, "killed_in_init") == 0)
    setenv("CHORUS_BOOTSTRAP_TIMEOUT", "2", 1);
  if (strncmp(name, "init_all", 8) == 0) n = 1; /* one thread drives all ranks */
  if (strcmp(name, "comm_id_repeat") == 0) {
    char addr[64];
    /* Below Linux's ephemeral ports (32768 on): another test's outgoing
     * connection cannot be holding it. */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 12000 + (int)(getpid() % 20000));
    setenv("NCCL_COMM_ID", addr, 1);
  }
  int own_ids = strncmp(name, "init_all", 8) == 0 || strcmp(name, "comm_id_repeat") == 0;
  int failed = 0;
  /* Trials, each with a victim whose death is no failure: killed_in_init
   * kills at different moments; in killed_mid_p2p a late write must also
   * land after the pages went back. */
  int trials = strcmp(name, "killed_in_init") == 0   ? 8
               : strcmp(name, "killed_mid_p2p") == 0 ? 16
                                                     : 0;
#ifdef CHORUS_SANITIZED
  /* A quarter (at least 2) in sanitized builds: there the suite runs
   * again for memory errors in these paths; the plain build runs them
   * all for the races they catch now and then. */
  if (trials) trials = trials / 4 > 2 ? trials / 4 : 2;
#endif
  if (trials) {
    for (int t = 0; t < trials; t++) failed += harness_spawn_ex(mode, n, name, param, 120, 1) - 1;
  } else {
    failed = harness_spawn_ex(mode, n, name, param, 120, !own_ids);
  }
  /* The victim of killed_mid_collective and _alltoall is meant to die (by SIGKILL). */
  if (strcmp(name, "killed_mid_collective") == 0 || strcmp(name, "killed_mid_alltoall") == 0)
    failed -= 1;
  printf("%s %s x%s: %s\n", name, argv[2], argv[3], failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}

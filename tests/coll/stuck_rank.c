/*
 * stuck_rank.c - ranks of a job where one rank holds the others up, for
 * the stuck report (stuck_check.py drives it and reads the reports).
 *
 * usage: stuck_rank late|stop|branch                  (one rank: RANK,
 *            WORLD_SIZE, NCCL_COMM_ID as for net_rank.c)
 *        stuck_rank late|branch threads N             (N ranks as threads)
 * READY_DIR: a folder where each rank creates ready.R just before its
 * call #3, and where `stop` waits for the file "go".
 *
 * Every rank splits off a second communicator named "side" from the first
 * ("main"), then AllReduces 1024 floats on main three times (#0-#2). The
 * culprit is the last rank. Then:
 *   late    the culprit sleeps LATE_S seconds before AllReduce #3 (first
 *           writing its state with chorusDumpState when
 *           CHORUS_DUMP_SIGNAL is set); every call must end right.
 *   stop    every rank waits for "go" before #3 (the driver stops the
 *           culprit first and lets it go on after the reports); every
 *           call must end right.
 *   branch  the culprit calls Broadcast (root 0) on side instead; nobody
 *           can finish, and every call must fail (CHORUS_OP_TIMEOUT).
 * Prints "rank R: ok" when its part went as planned; exit status 0 then.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chorus.h"

#define COUNT 1024

static const char *scenario, *ready_dir;

/* The first communicator, named so the reports name it. */
static ncclResult_t init_main(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "main";
  return ncclCommInitRankConfig(comm, nranks, id, rank, &cfg);
}

static void touch(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", ready_dir, name);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
}

static int wait_go(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/go", ready_dir);
  for (int i = 0; i < 1200; i++) { /* 60 s */
    struct stat st;
    if (stat(path, &st) == 0) return 0;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

static int allreduce(ncclComm_t comm, float *buf, int rank, int nranks, int k) {
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(rank + k);
  const ncclResult_t r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
  if (r != ncclSuccess) {
    printf("rank %d: AllReduce #%d failed: %s\n", rank, k, ncclGetLastError(comm));
    return -1;
  }
  const float want = (float)(nranks * (nranks - 1) / 2 + nranks * k);
  for (int i = 0; i < COUNT; i++)
    if (buf[i] != want) {
      printf("rank %d: AllReduce #%d: element %d is %g, want %g\n", rank, k, i, buf[i], want);
      return -1;
    }
  return 0;
}

static int body(int rank, int nranks, ncclComm_t main_comm) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "side";
  ncclComm_t side;
  if (ncclCommSplit(main_comm, 0, rank, &side, &cfg) != ncclSuccess) {
    printf("rank %d: split failed: %s\n", rank, ncclGetLastError(main_comm));
    return 1;
  }
  float *buf = malloc(COUNT * sizeof *buf);
  int rc = 0;
  for (int k = 0; k < 3 && rc == 0; k++) rc = allreduce(main_comm, buf, rank, nranks, k);
  const int culprit = rank == nranks - 1;
  char name[32];
  snprintf(name, sizeof name, "ready.%d", rank);
  if (rc == 0 && !strcmp(scenario, "late")) {
    touch(name);
    /* The culprit's own state, through chorus.h (where CHORUS_DUMP_SIGNAL
     * is set), then its nap. */
    const int bad_dump = culprit && getenv("CHORUS_DUMP_SIGNAL") && chorusDumpState() != 0;
    if (bad_dump) printf("rank %d: chorusDumpState failed\n", rank);
    if (culprit) sleep((unsigned)atoi(getenv("LATE_S") ? getenv("LATE_S") : "5"));
    rc = allreduce(main_comm, buf, rank, nranks, 3) || bad_dump;
  } else if (rc == 0 && !strcmp(scenario, "stop")) {
    touch(name);
    rc = wait_go() == 0 ? allreduce(main_comm, buf, rank, nranks, 3) : -1;
  } else if (rc == 0) {
    touch(name);
    ncclResult_t r = culprit ? ncclBroadcast(buf, buf, COUNT, ncclFloat, 0, side, NULL)
                             : ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, main_comm, NULL);
    printf("rank %d: %s: %s\n", rank,
           r == ncclSuccess ? "FAIL: the call ended" : "failed as planned",
           ncclGetLastError(culprit ? side : main_comm));
    rc = r == ncclSuccess;
  }
  printf("rank %d: %s\n", rank, rc == 0 ? "ok" : "FAIL");
  fflush(stdout);
  free(buf);
  if (!strcmp(scenario, "branch")) {
    ncclCommAbort(side);
    ncclCommAbort(main_comm);
  } else {
    ncclCommDestroy(side);
    ncclCommDestroy(main_comm);
  }
  return rc != 0;
}

typedef struct targ {
  int rank, nranks, rc;
  ncclUniqueId id;
} targ;

static void *thread_main(void *p) {
  targ *a = p;
  ncclComm_t comm;
  if (init_main(&comm, a->nranks, a->id, a->rank) != ncclSuccess) {
    printf("rank %d: init failed\n", a->rank);
    a->rc = 1;
    return NULL;
  }
  a->rc = body(a->rank, a->nranks, comm);
  return NULL;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  scenario = argc > 1 ? argv[1] : "";
  ready_dir = getenv("READY_DIR");
  if (!ready_dir ||
      (strcmp(scenario, "late") && strcmp(scenario, "stop") && strcmp(scenario, "branch"))) {
    fprintf(stderr, "usage: READY_DIR=dir %s late|stop|branch [threads N]\n", argv[0]);
    return 2;
  }
  if (argc == 4 && !strcmp(argv[2], "threads")) {
    const int n = atoi(argv[3]);
    targ *a = calloc((size_t)n, sizeof *a);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    for (int r = 0; r < n; r++) {
      a[r] = (targ){r, n, 0, id};
      pthread_create(&t[r], NULL, thread_main, &a[r]);
    }
    int rc = 0;
    for (int r = 0; r < n; r++) {
      pthread_join(t[r], NULL);
      rc |= a[r].rc;
    }
    free(a);
    free(t);
    return rc;
  }
  const char *rs = getenv("RANK"), *ns = getenv("WORLD_SIZE");
  if (!rs || !ns || !getenv("NCCL_COMM_ID")) {
    fprintf(stderr, "stuck_rank: set RANK, WORLD_SIZE and NCCL_COMM_ID\n");
    return 2;
  }
  const int rank = atoi(rs), nranks = atoi(ns);
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || init_main(&comm, nranks, id, rank) != ncclSuccess) {
    printf("rank %d: init failed: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  return body(rank, nranks, comm);
}

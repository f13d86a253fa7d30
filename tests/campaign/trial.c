/*
 * trial.c - one trial of the fault campaign (scripts/campaign.py): ranks
 * as processes on host memory, doing collectives, and one fault.
 *
 * usage: trial MODE NRANKS SEED
 *   kill   a random rank is killed (SIGKILL) at a random moment after
 *          init; every survivor must fail within LIMIT naming it
 *   stop   a random rank is stopped (SIGSTOP) for a while, then continued:
 *          below CHORUS_OP_TIMEOUT every rank must finish as if nothing
 *          happened; above it every other rank must fail naming it
 *   abort  a random rank's second thread calls ncclCommAbort at a random
 *          moment; its own call must return within LIMIT, and the others
 *          fail
 *   soak   SOAK_CALLS calls (default 1,000,000) over sizes from 4 B to
 *          256 KiB; memory, descriptors and /dev/shm must stay flat
 * Transport by environment: TRIAL_HOSTS=H makes H hosts of the ranks
 * (NCCL_HOSTID), NCCL_SHM_DISABLE=1 TCP only. Built with TRIAL_GPU
 * (campaign_trial_gpu), rank r drives GPU r: its buffers are device memory
 * on a stream of its own, each round waits for the stream, and a failure
 * is what ncclCommGetAsyncError says after the wait (kill only). Ranks stop together: every
 * round starts with an AllReduce of rank 0's "stop" flag.
 *
 * Prints one line: "trial mode=... key=value ..." and exits 0 when the
 * trial met its criteria, 1 when not, 2 on a usage error. All times are
 * CLOCK_MONOTONIC (one clock for all processes of the host).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#ifdef TRIAL_GPU
#include <cuda_runtime.h>
#endif

#define MAXR     16
#define LIMIT_NS (1000ll * 1000000) /* detection within 1 s */
#define RUN_NS   (400ll * 1000000)  /* how long ranks keep calling, fault or not */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void sleep_ns(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ll), (long)(ns % 1000000000ll)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* What each rank reports, in shared memory the parent reads after. */
typedef struct report {
  int ready;                               /* its init returned */
  int done;                                /* the rank reached the end of its body */
  int code;                                /* ncclResult_t of its first failure, 0: none */
  int64_t fail_ns;                         /* when that failure returned */
  int named;                               /* its message named the faulty rank */
  long calls;                              /* calls that succeeded */
  int64_t abort_ns;                        /* abort: when the second thread called ncclCommAbort */
  int64_t returned_ns;                     /* abort: when the aborted rank's call returned */
  long rss0, rss1, fds0, fds1, shm0, shm1; /* soak */
  char msg[200];
} report;

/* The unique id, made by the parent after it forked the ranks: a process
 * that forks while it has other threads (ncclGetUniqueId starts the root
 * thread) may fork one holding a lock of the allocator, and the child
 * then blocks in its first allocation (seen under ASan). */
typedef struct shared_id {
  int ready; /* 1: id is there; -1: the parent could not make one */
  ncclUniqueId id;
} shared_id;

typedef struct plan {
  const char *mode;
  int n, victim;
  uint64_t seed;
  shared_id *sid;
  report *rep;
} plan;

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long count_dir(const char *path, const char *prefix) {
  DIR *d = opendir(path);
  long n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.' && (!prefix || strncmp(e->d_name, prefix, strlen(prefix)) == 0)) n++;
  closedir(d);
  return n;
}

static long own_shm(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "chorus-%d-", (int)getpid());
  return count_dir("/dev/shm", prefix);
}

typedef struct aborter {
  ncclComm_t comm;
  int64_t delay_ns;
  report *rep;
} aborter;

static void *abort_later(void *p) {
  aborter *a = p;
  sleep_ns(a->delay_ns);
  a->rep->abort_ns = now_ns();
  ncclCommAbort(a->comm);
  return NULL;
}

static void fail_note(report *r, ncclResult_t res, ncclComm_t comm, int victim) {
  if (r->code) return;
  r->code = res;
  r->fail_ns = now_ns();
  const char *msg = ncclGetLastError(comm);
  snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
  char want[32];
  snprintf(want, sizeof want, "rank %d", victim);
  r->named = msg && strstr(msg, want) != NULL;
}

#ifdef TRIAL_GPU
/* One round on the GPU: the stop flag's AllReduce, then (not stopping) a
 * data AllReduce of count floats; waits for the stream and returns the
 * communicator's state. */
static ncclResult_t gpu_round(ncclComm_t comm, cudaStream_t st, float *dstop, float *dbuf,
                              size_t count, float *stop) {
  if (cudaMemcpyAsync(dstop, stop, sizeof *stop, cudaMemcpyHostToDevice, st) != cudaSuccess)
    return ncclUnhandledCudaError;
  ncclResult_t res = ncclAllReduce(dstop, dstop, 1, ncclFloat, ncclMax, comm, st);
  if (res == ncclSuccess &&
      (cudaMemcpyAsync(stop, dstop, sizeof *stop, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
       cudaStreamSynchronize(st) != cudaSuccess))
    return ncclUnhandledCudaError;
  if (res == ncclSuccess && *stop == 0)
    res = ncclAllReduce(dbuf, dbuf, count, ncclFloat, ncclSum, comm, st);
  ncclResult_t async = ncclSuccess;
  if (res == ncclSuccess && ncclCommGetAsyncError(comm, &async) == ncclSuccess) res = async;
  return res;
}
#endif

static int rank_body(const plan *p, int rank) {
  report *r = &p->rep[rank];
  const char *hosts = getenv("TRIAL_HOSTS");
  if (hosts && atoi(hosts) > 1) {
    char hid[48];
    snprintf(hid, sizeof hid, "trial-host-%d", rank * atoi(hosts) / p->n);
    setenv("NCCL_HOSTID", hid, 1);
  }
#ifdef TRIAL_GPU
  float *dstop = NULL, *dbuf = NULL;
  cudaStream_t st = NULL;
  if (cudaSetDevice(rank) != cudaSuccess || cudaMalloc((void **)&dstop, sizeof *dstop) ||
      cudaMalloc((void **)&dbuf, 262144 * sizeof *dbuf) || cudaStreamCreate(&st))
    return 2;
#endif
  const int64_t id_by = now_ns() + 20ll * 1000000000;
  while (!__atomic_load_n(&p->sid->ready, __ATOMIC_ACQUIRE) && now_ns() < id_by) sleep_ns(1000000);
  if (__atomic_load_n(&p->sid->ready, __ATOMIC_ACQUIRE) != 1) return 2;
  ncclComm_t comm;
  ncclResult_t res = ncclCommInitRank(&comm, p->n, p->sid->id, rank);
  __atomic_store_n(&r->ready, 1, __ATOMIC_RELEASE);
  if (res != ncclSuccess) {
    fail_note(r, res, NULL, p->victim);
    r->done = 1;
    return 0;
  }
  const int soak = strcmp(p->mode, "soak") == 0;
  const long soak_calls = getenv("SOAK_CALLS") ? atol(getenv("SOAK_CALLS")) : 1000000;
  const size_t maxc = soak ? 65536 : 262144;
  float *buf = calloc(maxc, sizeof *buf);
  pthread_t th;
  aborter ab = {comm, 0, r};
  const int aborts = strcmp(p->mode, "abort") == 0 && rank == p->victim;
  if (aborts) {
    ab.delay_ns = (int64_t)(mix(p->seed ^ 0xab) % 200) * 1000000;
    pthread_create(&th, NULL, abort_later, &ab);
  }
  const int64_t t0 = now_ns();
  uint64_t s = mix(p->seed);
  for (long i = 0;; i++) {
    float stop = 0;
    if (rank == 0) stop = soak ? (float)(i >= soak_calls / 2) : (float)(now_ns() - t0 > RUN_NS);
    s = mix(s);
    const size_t count = (size_t)1 << (s % 17); /* 4 B .. 256 KiB (64 KiB soaking) */
#ifdef TRIAL_GPU
    res = gpu_round(comm, st, dstop, dbuf, count, &stop);
    if (res == ncclSuccess && stop > 0) break;
#else
    res = ncclAllReduce(&stop, &stop, 1, ncclFloat, ncclMax, comm, NULL);
    if (res == ncclSuccess && stop > 0) break;
    if (res == ncclSuccess)
      res = ncclAllReduce(buf, buf, count < maxc ? count : maxc, ncclFloat, ncclSum, comm, NULL);
#endif
    if (res != ncclSuccess) {
      fail_note(r, res, aborts ? NULL : comm, p->victim);
      if (aborts) r->returned_ns = r->fail_ns;
      break;
    }
    r->calls += 2;
    if (soak && i == 500) {
      r->rss0 = rss_kb();
      r->fds0 = count_dir("/proc/self/fd", NULL);
      r->shm0 = own_shm();
    }
  }
  if (soak) {
    r->rss1 = rss_kb();
    r->fds1 = count_dir("/proc/self/fd", NULL);
    r->shm1 = own_shm();
  }
  if (aborts) {
    pthread_join(th, NULL); /* the communicator is gone */
  } else if (r->code) {
    ncclCommAbort(comm);
  } else {
    ncclCommDestroy(comm);
  }
  free(buf);
#ifdef TRIAL_GPU
  cudaStreamSynchronize(st); /* an aborted stream may still end a kernel */
  cudaFree(dstop);
  cudaFree(dbuf);
  cudaStreamDestroy(st);
#endif
  r->done = 1;
  return 0;
}

static double ms(int64_t ns) {
  return (double)ns / 1e6;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s kill|stop|abort|soak NRANKS SEED\n", argv[0]);
    return 2;
  }
  plan p = {argv[1], atoi(argv[2]), 0, strtoull(argv[3], NULL, 10), NULL, NULL};
  const char *m = p.mode;
#ifdef TRIAL_GPU
  const int gpu_only_kills = strcmp(m, "kill") != 0;
#else
  const int gpu_only_kills = 0;
#endif
  if (p.n < 2 || p.n > MAXR || gpu_only_kills ||
      (strcmp(m, "kill") && strcmp(m, "stop") && strcmp(m, "abort") && strcmp(m, "soak"))) {
    fprintf(stderr, "usage: %s kill|stop|abort|soak NRANKS(2..%d) SEED\n", argv[0], MAXR);
    return 2;
  }
  const uint64_t s = mix(p.seed);
  p.victim = (int)(s % (uint64_t)p.n);
  p.rep =
      mmap(NULL, MAXR * sizeof(report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  p.sid = mmap(NULL, sizeof *p.sid, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p.rep == MAP_FAILED || p.sid == MAP_FAILED) return 2;
  memset(p.rep, 0, MAXR * sizeof(report));
  memset(p.sid, 0, sizeof *p.sid);
  /* stop: below or above the op timeout, by the seed. */
  const char *ot = getenv("CHORUS_OP_TIMEOUT");
  const int64_t op_timeout = (ot ? atoll(ot) : 600) * 1000000000ll;
  const int above = (s >> 8) & 1;
  const int64_t stop_ns = above ? op_timeout + 1500ll * 1000000 : op_timeout / 4;
  pid_t pid[MAXR];
  for (int r = 0; r < p.n; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(rank_body(&p, r));
  }
  __atomic_store_n(&p.sid->ready, ncclGetUniqueId(&p.sid->id) == ncclSuccess ? 1 : -1,
                   __ATOMIC_RELEASE);
  /* The fault, at a random moment once every rank is in (a rank lost in
   * init is the rendezvous' business: test_comm killed_in_init). */
  const int64_t ready_by = now_ns() + 20ll * 1000000000;
  for (int r = 0; r < p.n && now_ns() < ready_by; r++)
    while (!__atomic_load_n(&p.rep[r].ready, __ATOMIC_ACQUIRE) && now_ns() < ready_by)
      sleep_ns(1000000);
  const int64_t delay = (int64_t)((s >> 16) % 300) * 1000000;
  int64_t fault_ns = 0;
  if (!strcmp(m, "kill") || !strcmp(m, "stop")) {
    sleep_ns(delay);
    fault_ns = now_ns();
    kill(pid[p.victim], !strcmp(m, "kill") ? SIGKILL : SIGSTOP);
    if (!strcmp(m, "stop")) {
      sleep_ns(stop_ns);
      kill(pid[p.victim], SIGCONT);
    }
  }
  /* Every rank must be done well within its limits; the others are hung. */
  const int64_t end = now_ns() + (strcmp(m, "soak") ? 20ll : 600ll) * 1000000000ll +
                      (op_timeout < 60ll * 1000000000 ? op_timeout : 0);
  int hangs = 0, crashes = 0, left = p.n;
  int status[MAXR] = {0}, reaped[MAXR] = {0};
  while (left > 0 && now_ns() < end) {
    for (int r = 0; r < p.n; r++)
      if (!reaped[r] && waitpid(pid[r], &status[r], WNOHANG) == pid[r]) reaped[r] = 1, left--;
    sleep_ns(2000000);
  }
  for (int r = 0; r < p.n; r++) {
    if (reaped[r]) continue;
    hangs++;
    kill(pid[r], SIGKILL);
    waitpid(pid[r], &status[r], 0);
  }
  /* Leftovers: shared memory of any of the ranks. */
  int leftovers = 0;
  for (int r = 0; r < p.n; r++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "chorus-%d-", (int)pid[r]);
    long k = count_dir("/dev/shm", prefix);
    if (k > 0) leftovers += (int)k;
  }
  /* Judge. */
  int bad = 0, failed = 0, named = 0, survivors = 0;
  int64_t worst = 0;
  char times[256] = "";
  size_t o = 0;
  for (int r = 0; r < p.n; r++) {
    const report *rp = &p.rep[r];
    const int faulty = r == p.victim && strcmp(m, "soak");
    const int signaled = WIFSIGNALED(status[r]);
    if (signaled && !(faulty && !strcmp(m, "kill"))) crashes++;
    if (faulty) continue;
    survivors++;
    const int must_fail =
        !strcmp(m, "kill") || !strcmp(m, "abort") || (!strcmp(m, "stop") && above);
    if (rp->code) failed++;
    if (rp->named) named++;
    if (must_fail) {
      int64_t since = !strcmp(m, "abort") ? p.rep[p.victim].abort_ns
                                          : fault_ns + (!strcmp(m, "stop") ? op_timeout : 0);
      int64_t took = rp->code ? rp->fail_ns - since : -1;
      if (took > worst) worst = took;
      if (o < sizeof times - 16)
        o += (size_t)snprintf(times + o, sizeof times - o, "%s%.1f", o ? "," : "", ms(took));
      if (!rp->code || took > LIMIT_NS || (!strcmp(m, "kill") && !rp->named)) bad++;
    } else if (rp->code || !rp->done) {
      bad++;
    }
  }
#ifdef TRIAL_GPU
  printf("trial gpu=1 mode=%s n=%d seed=%llu victim=%d hosts=%s shm=%s", m, p.n,
#else
  printf("trial mode=%s n=%d seed=%llu victim=%d hosts=%s shm=%s", m, p.n,
#endif
         (unsigned long long)p.seed, p.victim, getenv("TRIAL_HOSTS") ? getenv("TRIAL_HOSTS") : "1",
         getenv("NCCL_SHM_DISABLE") && atoi(getenv("NCCL_SHM_DISABLE")) ? "off" : "on");
  if (!strcmp(m, "stop")) printf(" stop_ms=%.0f above=%d", ms(stop_ns), above);
  if (!strcmp(m, "abort")) {
    const report *v = &p.rep[p.victim];
    const int64_t ret = v->returned_ns ? v->returned_ns - v->abort_ns : -1;
    printf(" abort_return_ms=%.1f", ms(ret));
    if (v->returned_ns && ret > LIMIT_NS) bad++;
  }
  if (!strcmp(m, "soak")) {
    long drss = 0, dfd = 0, dshm = 0, calls = 0;
    for (int r = 0; r < p.n; r++) {
      const report *rp = &p.rep[r];
      if (rp->rss1 - rp->rss0 > drss) drss = rp->rss1 - rp->rss0;
      if (rp->fds1 - rp->fds0 > dfd) dfd = rp->fds1 - rp->fds0;
      if (rp->shm1 - rp->shm0 > dshm) dshm = rp->shm1 - rp->shm0;
      calls += rp->calls;
    }
    printf(" calls=%ld rss_growth_kb=%ld fd_growth=%ld shm_growth=%ld", calls / p.n, drss, dfd,
           dshm);
    if (drss > 4096 || dfd > 0 || dshm > 0) bad++;
  }
  printf(" survivors=%d failed=%d named=%d hangs=%d crashes=%d leftovers=%d detect_max_ms=%.1f "
         "detect_ms=%s ok=%d\n",
         survivors, failed, named, hangs, crashes, leftovers, ms(worst), times[0] ? times : "-",
         !(bad || hangs || crashes || leftovers));
  for (int r = 0; r < p.n && (bad || hangs || crashes); r++)
    if (p.rep[r].msg[0]) fprintf(stderr, "  rank %d: %s\n", r, p.rep[r].msg);
  return (bad || hangs || crashes || leftovers) ? 1 : 0;
}

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
 *   alloc  a random rank's n-th allocation fails, n random up to ALLOC_MAX:
 *          by ALLOC_KIND, host memory (CHORUS_FAULT_ALLOC, the default;
 *          ALLOC_MAX default 3000), a shared-memory segment
 *          (CHORUS_FAULT_SHM, 2) or device memory (CHORUS_FAULT_DEVICE, 3);
 *          in its init or in a call; then every rank must fail within
 *          LIMIT of the first failure naming the rank, else every rank
 *          finish
 *   strangers while the ranks run, the parent connects to every TCP port
 *          they listen on (found in /proc) and sends junk: random bytes,
 *          huge lengths, a hello with a wrong mac, idle connections; every
 *          rank must finish as if nothing happened
 *   shmfull no fault of its own: run where /dev/shm is too small for every
 *          rank's segment (scripts/campaign.py mounts a small one in a
 *          mount namespace); the same criteria as alloc
 * Transport by environment: TRIAL_HOSTS=H makes H hosts of the ranks
 * (NCCL_HOSTID), NCCL_SHM_DISABLE=1 TCP only. TRIAL_RANKS_PER_PROC=G runs
 * G ranks as threads of each process (ranks 0..G-1 in the first): a kill
 * or stop then hits every rank of the victim's process, and a survivor may
 * name any of them. TRIAL_FAULTY_LINGER_MS=M keeps a faulty rank whose
 * init failed alive M ms more. Built with TRIAL_GPU (campaign_trial_gpu; kill and
 * alloc), rank r drives GPU r: its buffers are device memory on a stream
 * of its own, each round waits for the stream, and a failure is what
 * ncclCommGetAsyncError says after the wait. Ranks stop together: every
 * round starts with an AllReduce of rank 0's "stop" flag.
 *
 * Prints one line: "trial mode=... key=value ..." and exits 0 when the
 * trial met its criteria, 1 when not, 2 on a usage error. All times are
 * CLOCK_MONOTONIC (one clock for all processes of the host).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mix.h"
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
  int per;      /* ranks per process */
  int vlo, vhi; /* the ranks of the victim's process: [vlo, vhi) */
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

/* Notes a rank's first failure and whether its message names one of the
 * faulty ranks, p->vlo..vhi-1 (a whole word: "rank 1" is not "rank 12"). */
static void fail_note(report *r, ncclResult_t res, ncclComm_t comm, const plan *p) {
  if (r->code) return;
  r->code = res;
  r->fail_ns = now_ns();
  const char *msg = ncclGetLastError(comm);
  snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
  for (int v = p->vlo; v < p->vhi && msg; v++) {
    char want[32];
    snprintf(want, sizeof want, "rank %d", v);
    for (const char *at = strstr(msg, want); at && !r->named; at = strstr(at + 1, want))
      r->named = at[strlen(want)] < '0' || at[strlen(want)] > '9';
  }
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
    fail_note(r, res, NULL, p);
    r->done = 1;
    /* TRIAL_FAULTY_LINGER_MS: a faulty rank outlives its failed init, so
     * that the others learn of it from its word, not from its exit. */
    const char *linger = getenv("TRIAL_FAULTY_LINGER_MS");
    if (linger && rank >= p->vlo && rank < p->vhi) sleep_ns(atoll(linger) * 1000000);
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
      fail_note(r, res, aborts ? NULL : comm, p);
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

typedef struct rank_arg {
  const plan *p;
  int rank, rc;
} rank_arg;

static void *rank_thread(void *a) {
  rank_arg *ra = a;
  ra->rc = rank_body(ra->p, ra->rank);
  return NULL;
}

/* Process q: its ranks, as threads when there are several; the fault's
 * setting armed before any of them starts (setenv is not thread-safe). */
static int proc_body(const plan *p, int q) {
  const int lo = q * p->per, hi = lo + p->per < p->n ? lo + p->per : p->n;
  if (!strcmp(p->mode, "alloc") && lo == p->vlo) {
    const char *kind = getenv("ALLOC_KIND") ? getenv("ALLOC_KIND") : "host";
    const char *var = !strcmp(kind, "shm")      ? "CHORUS_FAULT_SHM"
                      : !strcmp(kind, "device") ? "CHORUS_FAULT_DEVICE"
                                                : "CHORUS_FAULT_ALLOC";
    const char *mx = getenv("ALLOC_MAX");
    const uint64_t dflt = !strcmp(kind, "shm") ? 2 : !strcmp(kind, "device") ? 3 : 3000;
    const uint64_t most = mx && atoll(mx) > 0 ? (uint64_t)atoll(mx) : dflt;
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)(1 + mix(p->seed ^ 0xa11c) % most));
    setenv(var, n, 1);
  }
  if (hi - lo == 1) return rank_body(p, lo);
  rank_arg a[MAXR];
  pthread_t th[MAXR];
  int rc = 0;
  for (int r = lo; r < hi; r++) {
    a[r - lo] = (rank_arg){p, r, 2};
    if (pthread_create(&th[r - lo], NULL, rank_thread, &a[r - lo]) != 0) return 2;
  }
  for (int r = lo; r < hi; r++) {
    pthread_join(th[r - lo], NULL);
    if (a[r - lo].rc > rc) rc = a[r - lo].rc;
  }
  return rc;
}

/* The IPv4 TCP ports process pid listens on (its socket inodes matched
 * against its /proc net table): at most max, their count. */
static int listeners(pid_t pid, struct sockaddr_in *out, int max) {
  unsigned long inodes[256];
  int ni = 0, n = 0;
  char path[64], link[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) && ni < 256;) {
    char fd[400];
    snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
    ssize_t k = readlink(fd, link, sizeof link - 1);
    if (k <= 0) continue;
    link[k] = '\0';
    unsigned long ino;
    if (sscanf(link, "socket:[%lu]", &ino) == 1) inodes[ni++] = ino;
  }
  closedir(d);
  snprintf(path, sizeof path, "/proc/%d/net/tcp", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[512];
  while (fgets(line, sizeof line, f) && n < max) {
    unsigned addr, port, st;
    unsigned long ino;
    if (sscanf(line, " %*d: %x:%x %*x:%*x %x %*s %*s %*s %*d %*d %lu", &addr, &port, &st, &ino) !=
            4 ||
        st != 0x0A)
      continue;
    for (int i = 0; i < ni; i++)
      if (inodes[i] == ino) {
        memset(&out[n], 0, sizeof out[n]);
        out[n].sin_family = AF_INET;
        out[n].sin_addr.s_addr = addr; /* the table prints the address as stored */
        out[n].sin_port = htons((uint16_t)port);
        n++;
        break;
      }
  }
  fclose(f);
  return n;
}

/* Strangers on every port of every rank: per listener, connections that
 * send random bytes, a huge length, a hello-shaped header with a wrong
 * mac, or nothing (kept open until the trial ends, in idle[]). Returns
 * the connections made. */
typedef struct port_set {
  uint32_t addr[512];
  uint16_t port[512];
  int n;
} port_set;

/* Whether l was attacked already (else it is noted as attacked). */
static int seen_port(port_set *done, const struct sockaddr_in *l) {
  for (int i = 0; i < done->n; i++)
    if (done->addr[i] == l->sin_addr.s_addr && done->port[i] == l->sin_port) return 1;
  if (done->n < 512) {
    done->addr[done->n] = l->sin_addr.s_addr;
    done->port[done->n++] = l->sin_port;
  }
  return 0;
}

static int strangers(const pid_t *pid, int n, uint64_t seed, port_set *done, int *idle,
                     int *nidle) {
  int made = 0;
  uint64_t s = mix(seed ^ 0x5712 ^ (uint64_t)done->n);
  for (int r = 0; r < n; r++) {
    struct sockaddr_in ls[64];
    const int nl = listeners(pid[r], ls, 64);
    for (int l = 0; l < nl; l++)
      for (int k = 0; k < 8 && (k > 0 || !seen_port(done, &ls[l])); k++) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) continue;
        if (connect(fd, (const struct sockaddr *)&ls[l], sizeof ls[l]) != 0) {
          close(fd);
          continue;
        }
        made++;
        unsigned char junk[256];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(s = mix(s));
        if (k % 4 == 1) memset(junk, 0xff, 16);          /* a huge length, or counts */
        if (k % 4 == 2) memcpy(junk, "1SHC\1\0\0\0", 8); /* hello magic, kind 1, bad mac */
        if (k % 4 == 3 && *nidle < 256) {
          idle[(*nidle)++] = fd;
          continue;
        }
        if (send(fd, junk, k % 4 == 0 ? sizeof junk : 64, MSG_NOSIGNAL) < 0) {
        }
        close(fd);
      }
  }
  return made;
}

static double ms(int64_t ns) {
  return (double)ns / 1e6;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s kill|stop|abort|soak|alloc|shmfull|strangers NRANKS SEED\n",
            argv[0]);
    return 2;
  }
  plan p = {.mode = argv[1], .n = atoi(argv[2]), .seed = strtoull(argv[3], NULL, 10)};
  const char *m = p.mode;
#ifdef TRIAL_GPU
  const int gpu_lacks = strcmp(m, "kill") && strcmp(m, "alloc");
#else
  const int gpu_lacks = 0;
#endif
  const char *per = getenv("TRIAL_RANKS_PER_PROC");
  p.per = per && atoi(per) > 1 ? atoi(per) : 1;
  if (p.n < 2 || p.n > MAXR || gpu_lacks ||
      (strcmp(m, "kill") && strcmp(m, "stop") && strcmp(m, "abort") && strcmp(m, "soak") &&
       strcmp(m, "alloc") && strcmp(m, "shmfull") && strcmp(m, "strangers"))) {
    fprintf(stderr, "usage: %s kill|stop|abort|soak|alloc|shmfull|strangers NRANKS(2..%d) SEED\n",
            argv[0], MAXR);
    return 2;
  }
  const uint64_t s = mix(p.seed);
  p.victim = (int)(s % (uint64_t)p.n);
  /* kill, stop, alloc: the victim's process is faulty; abort: the rank. */
  const int whole = strcmp(m, "abort") != 0;
  p.vlo = whole ? p.victim / p.per * p.per : p.victim;
  p.vhi = whole ? (p.vlo + p.per < p.n ? p.vlo + p.per : p.n) : p.victim + 1;
  const int nproc = (p.n + p.per - 1) / p.per;
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
  pid_t pid[MAXR]; /* per process */
  for (int q = 0; q < nproc; q++) {
    pid[q] = fork();
    if (pid[q] == 0) _exit(proc_body(&p, q));
  }
  __atomic_store_n(&p.sid->ready, ncclGetUniqueId(&p.sid->id) == ncclSuccess ? 1 : -1,
                   __ATOMIC_RELEASE);
  /* strangers: on every port during the rendezvous too (the root's, here
   * in the parent, and the ranks' as they open), each attacked once. */
  const int attack = !strcmp(m, "strangers");
  int idle[256], nidle = 0, made = 0;
  port_set done = {.n = 0};
  pid_t all[MAXR + 1];
  memcpy(all, pid, (size_t)nproc * sizeof *pid);
  all[nproc] = getpid();
  /* The fault, at a random moment once every rank is in (a rank lost in
   * init is the rendezvous' business: test_comm killed_in_init). */
  const int64_t ready_by = now_ns() + 20ll * 1000000000;
  for (int r = 0; r < p.n && now_ns() < ready_by; r++)
    while (!__atomic_load_n(&p.rep[r].ready, __ATOMIC_ACQUIRE) && now_ns() < ready_by) {
      if (attack) made += strangers(all, nproc + 1, p.seed, &done, idle, &nidle);
      sleep_ns(1000000);
    }
  const int64_t delay = (int64_t)((s >> 16) % 300) * 1000000;
  int64_t fault_ns = 0;
  if (!strcmp(m, "kill") || !strcmp(m, "stop")) {
    sleep_ns(delay);
    fault_ns = now_ns();
    kill(pid[p.victim / p.per], !strcmp(m, "kill") ? SIGKILL : SIGSTOP);
    if (!strcmp(m, "stop")) {
      sleep_ns(stop_ns);
      kill(pid[p.victim / p.per], SIGCONT);
    }
  }
  if (attack) { /* and the ports open after init */
    done.n = 0;
    made += strangers(all, nproc + 1, p.seed, &done, idle, &nidle);
  }
  /* Every rank must be done well within its limits; the others are hung. */
  const int64_t end = now_ns() + (strcmp(m, "soak") ? 20ll : 600ll) * 1000000000ll +
                      (op_timeout < 60ll * 1000000000 ? op_timeout : 0);
  int hangs = 0, crashes = 0, left = nproc;
  int status[MAXR] = {0}, reaped[MAXR] = {0}; /* per process */
  while (left > 0 && now_ns() < end) {
    for (int q = 0; q < nproc; q++)
      if (!reaped[q] && waitpid(pid[q], &status[q], WNOHANG) == pid[q]) reaped[q] = 1, left--;
    sleep_ns(2000000);
  }
  for (int q = 0; q < nproc; q++) {
    if (reaped[q]) continue;
    hangs++;
    kill(pid[q], SIGKILL);
    waitpid(pid[q], &status[q], 0);
  }
  for (int i = 0; i < nidle; i++) close(idle[i]);
  /* Leftovers: shared memory of any of the processes. */
  int leftovers = 0;
  for (int q = 0; q < nproc; q++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "chorus-%d-", (int)pid[q]);
    long k = count_dir("/dev/shm", prefix);
    if (k > 0) leftovers += (int)k;
  }
  /* Judge. */
  int bad = 0, failed = 0, named = 0, survivors = 0;
  int64_t worst = 0;
  char times[256] = "";
  size_t o = 0;
  /* alloc, shmfull: all fail together (from the first failure) or none. */
  const int together = !strcmp(m, "alloc") || !strcmp(m, "shmfull");
  int64_t first = INT64_MAX;
  for (int r = 0; r < p.n && together; r++)
    if (p.rep[r].code && p.rep[r].fail_ns < first) first = p.rep[r].fail_ns;
  for (int r = 0; r < p.n && together; r++) {
    const report *rp = &p.rep[r];
    const int q = r / p.per;
    if (reaped[q] && WIFSIGNALED(status[q]) && r % p.per == 0) crashes++; /* not the hung */
    survivors++;
    if (rp->code) failed++;
    if (first == INT64_MAX) {
      if (!rp->done) bad++;
      continue;
    }
    const int64_t took = rp->code ? rp->fail_ns - first : -1;
    if (took > worst) worst = took;
    if (o < sizeof times - 16)
      o += (size_t)snprintf(times + o, sizeof times - o, "%s%.1f", o ? "," : "", ms(took));
    /* alloc: every message names the rank whose allocation failed. */
    if (!rp->code || took > LIMIT_NS || !rp->msg[0] || (!strcmp(m, "alloc") && !rp->named)) bad++;
    if (rp->named) named++;
  }
  for (int r = 0; r < p.n && !together; r++) {
    const report *rp = &p.rep[r];
    const int q = r / p.per;
    const int faulty = r >= p.vlo && r < p.vhi && strcmp(m, "soak") && strcmp(m, "strangers");
    /* once per process; not the hung ones killed above */
    const int signaled = reaped[q] && WIFSIGNALED(status[q]) && r % p.per == 0;
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
  printf("trial gpu=1 mode=%s n=%d per=%d seed=%llu victim=%d hosts=%s shm=%s", m, p.n, p.per,
#else
  printf("trial mode=%s n=%d per=%d seed=%llu victim=%d hosts=%s shm=%s", m, p.n, p.per,
#endif
         (unsigned long long)p.seed, p.victim, getenv("TRIAL_HOSTS") ? getenv("TRIAL_HOSTS") : "1",
         getenv("NCCL_SHM_DISABLE") && atoi(getenv("NCCL_SHM_DISABLE")) ? "off" : "on");
  if (!strcmp(m, "stop")) printf(" stop_ms=%.0f above=%d", ms(stop_ns), above);
  if (!strcmp(m, "strangers")) {
    printf(" strangers=%d", made);
    if (made == 0) bad++; /* found no port: the trial tested nothing */
  }
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
  if (together)
    printf(" kind=%s failed_first_ms=%s", getenv("ALLOC_KIND") ? getenv("ALLOC_KIND") : "host",
           first == INT64_MAX ? "-" : "0");
  printf(" survivors=%d failed=%d named=%d hangs=%d crashes=%d leftovers=%d detect_max_ms=%.1f "
         "detect_ms=%s ok=%d\n",
         survivors, failed, named, hangs, crashes, leftovers, ms(worst), times[0] ? times : "-",
         !(bad || hangs || crashes || leftovers));
  for (int r = 0; r < p.n && (bad || hangs || crashes); r++)
    if (p.rep[r].msg[0]) fprintf(stderr, "  rank %d: %s\n", r, p.rep[r].msg);
  return (bad || hangs || crashes || leftovers) ? 1 : 0;
}

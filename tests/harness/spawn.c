/*
 * spawn.c - see spawn.h.
 */
#include "spawn.h"

#include "util/alloc.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const harness_case *g_cases;
static char g_self[4096];

static const harness_case *find_case(const char *name) {
  for (const harness_case *c = g_cases; c && c->name; c++)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

static int leftover_segments(pid_t pid);

static void id_to_hex(const ncclUniqueId *id, char *out) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
    sprintf(out + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static int hex_to_id(const char *hex, ncclUniqueId *id) {
  if (strlen(hex) != 2 * NCCL_UNIQUE_ID_BYTES) return -1;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
    id->internal[i] = (char)v;
  }
  return 0;
}

void harness_log(int rank, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[test rank %d pid %d] %s\n", rank, (int)getpid(), buf);
}

void harness_init(int argc, char **argv, const harness_case *cases) {
  g_cases = cases;
  ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
  g_self[n > 0 ? n : 0] = '\0';
  /* Child: argv = self --chorus-rank <case> <rank> <nranks> <idhex> <param> */
  if (argc == 7 && strcmp(argv[1], "--chorus-rank") == 0) {
    const harness_case *c = find_case(argv[2]);
    ncclUniqueId id;
    if (!c || hex_to_id(argv[5], &id) != 0) {
      fprintf(stderr, "harness: bad child arguments\n");
      _exit(2);
    }
    /* HARNESS_HOSTS=H: the rank processes form H hosts (blocks of ranks),
     * so traffic between blocks takes the network path. */
    const char *hosts = getenv("HARNESS_HOSTS");
    if (hosts && atoi(hosts) > 1) {
      char hid[48];
      snprintf(hid, sizeof hid, "harness-host-%d", atoi(argv[3]) * atoi(hosts) / atoi(argv[4]));
      setenv("NCCL_HOSTID", hid, 1);
    }
    int rc = c->fn(atoi(argv[3]), atoi(argv[4]), id, argv[6]);
    fflush(NULL);
    exit(rc == 0 ? 0 : 1);
  }
  /* Test traffic stays on loopback; waits are bounded well inside the CTest
   * timeouts, so a hang shows up as a failure with a message. */
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("CHORUS_BOOTSTRAP_TIMEOUT", "60", 0);
  setenv("CHORUS_OP_TIMEOUT", "120", 0);
}

typedef struct {
  const harness_case *c;
  int rank, nranks;
  ncclUniqueId id;
  const char *param;
  int rc;
  int done;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  a->rc = a->c->fn(a->rank, a->nranks, a->id, a->param);
  __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int spawn_threads(const harness_case *c, int nranks, ncclUniqueId id, const char *param,
                         int timeout_s) {
  thread_arg *args = calloc((size_t)nranks, sizeof *args);
  pthread_t *th = calloc((size_t)nranks, sizeof *th);
  for (int r = 0; r < nranks; r++) {
    args[r] = (thread_arg){c, r, nranks, id, param, -1, 0};
    pthread_create(&th[r], NULL, thread_main, &args[r]);
  }
  int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
  for (;;) {
    int done = 0;
    for (int r = 0; r < nranks; r++) done += __atomic_load_n(&args[r].done, __ATOMIC_ACQUIRE);
    if (done == nranks) break;
    if (now_ms() > deadline) {
      for (int r = 0; r < nranks; r++)
        if (!__atomic_load_n(&args[r].done, __ATOMIC_ACQUIRE))
          fprintf(stderr, "harness: case %s: rank %d (thread) did not finish within %d s\n",
                  c->name, r, timeout_s);
      /* A hung thread cannot be stopped; end the whole test as failed. */
      fflush(NULL);
      _exit(3);
    }
    sleep_ms(2);
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    pthread_join(th[r], NULL);
    if (args[r].rc != 0) {
      fprintf(stderr, "harness: case %s: rank %d failed (%d)\n", c->name, r, args[r].rc);
      failed++;
    }
  }
  free(args);
  free(th);
  return failed;
}

static int spawn_procs(const harness_case *c, int nranks, ncclUniqueId id, const char *param,
                       int timeout_s) {
  char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
  id_to_hex(&id, hex);
  pid_t *pids = calloc((size_t)nranks, sizeof *pids);
  int *status = calloc((size_t)nranks, sizeof *status);
  for (int r = 0; r < nranks; r++) {
    char rank_s[16], n_s[16];
    snprintf(rank_s, sizeof rank_s, "%d", r);
    snprintf(n_s, sizeof n_s, "%d", nranks);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      execl(g_self, g_self, "--chorus-rank", c->name, rank_s, n_s, hex, param, (char *)NULL);
      _exit(127);
    }
    pids[r] = pid;
  }
  int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
  int remaining = nranks;
  while (remaining > 0) {
    for (int r = 0; r < nranks; r++) {
      if (pids[r] <= 0) continue;
      int st;
      pid_t w = waitpid(pids[r], &st, WNOHANG);
      if (w == pids[r]) {
        status[r] = st;
        pids[r] = -pids[r];
        remaining--;
      }
    }
    if (remaining == 0) break;
    if (now_ms() > deadline) {
      for (int r = 0; r < nranks; r++) {
        if (pids[r] > 0) {
          fprintf(stderr, "harness: case %s: rank %d (pid %d) did not finish within %d s; killed\n",
                  c->name, r, (int)pids[r], timeout_s);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          status[r] = -1;
          pids[r] = -pids[r];
        }
      }
      break;
    }
    sleep_ms(2);
  }
  int failed = 0;
  for (int r = 0; r < nranks; r++) {
    int st = status[r];
    failed += leftover_segments(-pids[r]);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      if (st != -1)
        fprintf(stderr, "harness: case %s: rank %d failed (%s %d)\n", c->name, r,
                WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      failed++;
    }
  }
  free(pids);
  free(status);
  return failed;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* Shared-memory segments left behind by a process: /dev/shm/chorus-<pid>-*. */
static int leftover_segments(pid_t pid) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "chorus-%d-", (int)pid);
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
      fprintf(stderr, "harness: leftover shared memory /dev/shm/%s\n", e->d_name);
      n++;
    }
  closedir(d);
  return n;
}

/* After the ranks finish, this process must be back where it started: no
 * extra descriptors, no library memory, no shared-memory names. Background
 * threads (a rendezvous root) may still be closing, so poll briefly. */
static int clean_state_check(int fds_before, int64_t host_before) {
  int64_t fds = 0, host = 0, shm = 0;
  for (int i = 0; i < 200; i++) {
    fds = count_fds();
    host = chorus_alloc_blocks(CHORUS_MEM_HOST);
    shm = chorus_alloc_blocks(CHORUS_MEM_SHM);
    if (fds <= fds_before && host <= host_before && shm == 0) break;
    sleep_ms(10);
  }
  int bad = 0;
  if (fds > fds_before)
    fprintf(stderr, "harness: %lld file descriptors open after the run, %d before\n",
            (long long)fds, fds_before),
        bad = 1;
  if (host > host_before)
    fprintf(stderr, "harness: %lld library host blocks held after the run, %lld before\n",
            (long long)host, (long long)host_before),
        bad = 1;
  if (shm != 0)
    fprintf(stderr, "harness: %lld shm segments still mapped\n", (long long)shm), bad = 1;
  return bad + leftover_segments(getpid());
}

int harness_spawn(harness_mode mode, int nranks, const char *name, const char *param,
                  int timeout_s) {
  return harness_spawn_ex(mode, nranks, name, param, timeout_s, 1);
}

int harness_spawn_ex(harness_mode mode, int nranks, const char *name, const char *param,
                     int timeout_s, int make_id) {
  const harness_case *c = find_case(name);
  if (!c) {
    fprintf(stderr, "harness: no case named %s\n", name);
    return nranks;
  }
  int fds_before = count_fds();
  int64_t host_before = chorus_alloc_blocks(CHORUS_MEM_HOST);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ncclResult_t res = make_id ? ncclGetUniqueId(&id) : ncclSuccess;
  if (res != ncclSuccess) {
    fprintf(stderr, "harness: ncclGetUniqueId failed: %s\n", ncclGetErrorString(res));
    return nranks;
  }
  int failed = mode == HARNESS_THREADS ? spawn_threads(c, nranks, id, param ? param : "", timeout_s)
                                       : spawn_procs(c, nranks, id, param ? param : "", timeout_s);
  return failed + clean_state_check(fds_before, host_before);
}

int harness_join_env(const char *who, int *rank, int *nranks, ncclComm_t *comm) {
  const char *rs = getenv("RANK"), *ns = getenv("WORLD_SIZE");
  if (!rs || !ns || !getenv("NCCL_COMM_ID")) {
    fprintf(stderr, "%s: set RANK, WORLD_SIZE and NCCL_COMM_ID\n", who);
    return 2;
  }
  *rank = atoi(rs);
  *nranks = atoi(ns);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(comm, *nranks, id, *rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", *rank, ncclGetLastError(NULL));
    return 1;
  }
  return 0;
}

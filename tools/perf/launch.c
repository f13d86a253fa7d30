/*
 * launch.c - how the ranks of a perf run start.
 *
 * A run is nprocs processes x nthreads threads (-t) x ngpus ranks per
 * thread (-g). Several processes are recognised from their launcher's
 * environment, in this order: Open MPI (OMPI_COMM_WORLD_*), MPICH/Hydra
 * (PMI_RANK/PMI_SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS), Slurm srun
 * (SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID,
 * SLURM_STEP_NUM_NODES), then torchrun and chorusrun (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE).
 *
 * No MPI library is linked; the processes find each other by:
 *   1. NCCL_COMM_ID=<host>:<port> when set: every process calls
 *      ncclGetUniqueId, which encodes that address, and rank 0 hosts the
 *      rendezvous inside ncclCommInitRank;
 *   2. else MASTER_ADDR/MASTER_PORT (torchrun): NCCL_COMM_ID is set to
 *      MASTER_ADDR:(MASTER_PORT+1), since torchrun's own store listens on
 *      MASTER_PORT, and we go on as in 1;
 *   3. else, when every process runs on this host: rank 0 calls
 *      ncclGetUniqueId and publishes the id in a file of $TMPDIR (or /tmp)
 *      named after the user id, the parent process (which siblings started
 *      by mpirun, srun or hydra share) and the world size; the others wait
 *      for it (60 s at most). Rank 0 removes it once its communicators exist;
 *   4. else the run stops and asks for NCCL_COMM_ID.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define RDV_WAIT_S 60

static char rdv_path[512]; /* the file rank 0 wrote, until removed */
static time_t start_time;

void pt_rdv_cleanup(void) {
  if (rdv_path[0]) unlink(rdv_path);
  rdv_path[0] = '\0';
}

static int env_int(const char *name, int *out) {
  const char *v = getenv(name);
  char *end = NULL;
  if (!v || !*v) return 0;
  long x = strtol(v, &end, 10);
  if (*end || x < 0) return 0;
  *out = (int)x;
  return 1;
}

static const struct launcher {
  const char *name, *rank, *size, *local_rank, *local_size;
} launchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", NULL, "SLURM_LOCALID", NULL},
    {"torchrun/chorusrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

/* Slurm: the step's size, and a local size only when the step has one node. */
static int slurm_sizes(pt_world *w) {
  if (!env_int("SLURM_STEP_NUM_TASKS", &w->nprocs) && !env_int("SLURM_NTASKS", &w->nprocs))
    return 0;
  int nodes = 0;
  if (!env_int("SLURM_STEP_NUM_NODES", &nodes)) env_int("SLURM_NNODES", &nodes);
  w->local_size = nodes == 1 ? w->nprocs : 0;
  return 1;
}

static void detect_processes(pt_world *w) {
  w->nprocs = 1, w->proc = 0, w->local_rank = 0, w->local_size = 1, w->launcher = "none";
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
    const struct launcher *l = &launchers[i];
    pt_world c = *w;
    if (!env_int(l->rank, &c.proc)) continue;
    if (l->size ? !env_int(l->size, &c.nprocs) : !slurm_sizes(&c)) continue;
    if (c.nprocs < 1 || c.proc >= c.nprocs) continue;
    if (!env_int(l->local_rank, &c.local_rank)) c.local_rank = 0;
    if (l->local_size && !env_int(l->local_size, &c.local_size)) c.local_size = 0;
    c.launcher = l->name;
    *w = c;
    return;
  }
}

/* Before any NCCL call: NCCL_COMM_ID from torchrun's MASTER_ADDR/PORT. */
static int prepare_rendezvous(const pt_world *w) {
  if (w->nprocs == 1) return 0;
  const char *id = getenv("NCCL_COMM_ID");
  if (id && *id) return 0;
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr && *addr && port && *port) {
    char buf[512];
    int p = atoi(port) + 1;
    if (p <= 1 || p > 65535) {
      fprintf(stderr, "chorus perf: MASTER_PORT=%s is not a port below 65535\n", port);
      return -1;
    }
    int v6 = strchr(addr, ':') && addr[0] != '[';
    snprintf(buf, sizeof buf, v6 ? "[%s]:%d" : "%s:%d", addr, p);
    setenv("NCCL_COMM_ID", buf, 1);
    return 0;
  }
  if (w->local_size == w->nprocs) return 0;
  fprintf(stderr,
          "chorus perf: %d processes (launched by %s) span several hosts: set "
          "NCCL_COMM_ID=<host-of-rank-0>:<port> (a free port there) in every process's "
          "environment, or MASTER_ADDR and MASTER_PORT\n",
          w->nprocs, w->launcher);
  return -1;
}

/* Start time of the parent (field 22 of /proc/PID/stat): sets the file name
 * apart from that of an earlier parent with the same pid. */
static unsigned long long parent_start(void) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)getppid());
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  unsigned long long start = 0;
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  if (p) start = strtoull(p + 1, NULL, 10);
  return start;
}

static void rdv_file_name(const pt_world *w, char *out, size_t cap) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  snprintf(out, cap, "%s/chorus-perf-id.%d.%d.%llu.%d", dir, (int)getuid(), (int)getppid(),
           parent_start(), w->nprocs);
}

static int publish_id(const char *path, const ncclUniqueId *uid) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0 || write(fd, uid, sizeof *uid) != (ssize_t)sizeof *uid || close(fd) != 0 ||
      rename(tmp, path) != 0) {
    fprintf(stderr, "chorus perf: cannot publish the unique id in %s: %s\n", path, strerror(errno));
    if (fd >= 0) unlink(tmp);
    return -1;
  }
  snprintf(rdv_path, sizeof rdv_path, "%s", path);
  return 0;
}

/* A file older than this process by more than RDV_WAIT_S was left by an
 * earlier run that crashed (same parent): wait for rank 0 to replace it. */
static int fresh(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_mtime >= start_time - RDV_WAIT_S;
}

static int read_id(const char *path, ncclUniqueId *uid) {
  double deadline = pt_now() + RDV_WAIT_S;
  while (pt_now() < deadline) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      ssize_t n = fresh(fd) ? read(fd, uid, sizeof *uid) : 0;
      close(fd);
      if (n == (ssize_t)sizeof *uid) return 0;
    }
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr,
          "chorus perf: no unique id from rank 0 in %s after %d s. Is rank 0 running, on this "
          "host, started by the same parent? Otherwise set NCCL_COMM_ID=<host-of-rank-0>:<port>\n",
          path, RDV_WAIT_S);
  return -1;
}

static int get_unique_id(const pt_world *w, ncclUniqueId *uid) {
  const char *id = getenv("NCCL_COMM_ID");
  char path[512];
  if (w->nprocs > 1 && !(id && *id)) {
    rdv_file_name(w, path, sizeof path);
    if (w->proc != 0) return read_id(path, uid);
  }
  ncclResult_t res = ncclGetUniqueId(uid);
  if (res != ncclSuccess) {
    const char *last = ncclGetLastError(NULL);
    fprintf(stderr, "chorus perf: ncclGetUniqueId failed: '%s' / '%s'\n", ncclGetErrorString(res),
            last ? last : "");
    return -1;
  }
  if (w->nprocs > 1 && !(id && *id)) return publish_id(path, uid);
  return 0;
}

/* ---- threads and their ranks ------------------------------------------------- */
static void init_comms(pt_thread *t) {
  const pt_args *a = t->args;
  pt_call_begin(t); /* the -T watchdog covers the rendezvous too */
  pt_check_nccl(t, 0, ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    pt_dev_bind(t, i, r); /* its GPU is current when the communicator binds */
    ncclResult_t res;
    if (a->blocking < 0) {
      res = ncclCommInitRank(&r->comm, t->world->nranks, t->uid, r->rank);
    } else {
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.blocking = a->blocking;
      res = ncclCommInitRankConfig(&r->comm, t->world->nranks, t->uid, r->rank, &cfg);
    }
    if (res != ncclSuccess && res != ncclInProgress)
      pt_fail(t, r->rank, "ncclCommInitRank failed: '%s' / '%s'", ncclGetErrorString(res),
              ncclGetLastError(r->comm));
  }
  pt_wait_comms(t, ncclGroupEnd(), "ncclCommInitRank");
  pt_call_end(t);
  if (t->world->proc == 0 && t->thread == 0) pt_rdv_cleanup();
}

static void alloc_buffers(pt_thread *t) {
  size_t bytes = t->args->maxbytes;
  const int reg = t->args->reg, win = reg == 2;
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    r->send = pt_mem_alloc(r->comm, bytes, win);
    r->recv = pt_mem_alloc(r->comm, bytes, win);
    r->scratch = pt_mem_alloc(r->comm, 64, 0);
    if (!r->send || !r->recv || !r->scratch)
      pt_fail(t, r->rank, "cannot allocate 2 buffers of %zu bytes", bytes);
    if (reg == 1) {
      pt_check_nccl(t, i, ncclCommRegister(r->comm, r->send, bytes, &r->send_reg),
                    "ncclCommRegister");
      pt_check_nccl(t, i, ncclCommRegister(r->comm, r->recv, bytes, &r->recv_reg),
                    "ncclCommRegister");
    }
  }
  if (!win) return;
  /* Windows are collective: every local rank's in one group. */
  ncclGroupStart();
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    pt_check_nccl(
        t, i,
        ncclCommWindowRegister(r->comm, r->send, bytes, &r->send_win, NCCL_WIN_COLL_SYMMETRIC),
        "ncclCommWindowRegister");
    pt_check_nccl(
        t, i,
        ncclCommWindowRegister(r->comm, r->recv, bytes, &r->recv_win, NCCL_WIN_COLL_SYMMETRIC),
        "ncclCommWindowRegister");
  }
  pt_check_nccl(t, 0, ncclGroupEnd(), "ncclGroupEnd (windows)");
}

static void teardown(pt_thread *t) {
  const int win = t->args->reg == 2;
  for (int i = 0; i < t->nlocal; i++) {
    pt_rank *r = &t->ranks[i];
    if (r->send_reg)
      pt_check_nccl(t, i, ncclCommDeregister(r->comm, r->send_reg), "ncclCommDeregister");
    if (r->recv_reg)
      pt_check_nccl(t, i, ncclCommDeregister(r->comm, r->recv_reg), "ncclCommDeregister");
    if (r->send_win)
      pt_check_nccl(t, i, ncclCommWindowDeregister(r->comm, r->send_win),
                    "ncclCommWindowDeregister");
    if (r->recv_win)
      pt_check_nccl(t, i, ncclCommWindowDeregister(r->comm, r->recv_win),
                    "ncclCommWindowDeregister");
    pt_mem_free(r->comm, r->send, win);
    pt_mem_free(r->comm, r->recv, win);
    pt_mem_free(r->comm, r->scratch, 0);
  }
  for (int i = 0; i < t->nlocal; i++) {
    pt_check_nccl(t, i, ncclCommDestroy(t->ranks[i].comm), "ncclCommDestroy");
    pt_dev_unbind(&t->ranks[i]);
  }
}

void pt_run_thread(pt_thread *t) {
  init_comms(t);
  alloc_buffers(t);
  pt_print_devices(t);
  if (t->main) pt_print_table_header(t->args);
  pt_run_tests(t);
  pt_barrier(t);
  t->low_bw = pt_print_footer(t, t->coll);
  teardown(t);
}

static void *thread_main(void *arg) {
  pt_run_thread(arg);
  return NULL;
}

static pt_thread *make_threads(const pt_args *a, const pt_coll *coll, const pt_world *w,
                               const ncclUniqueId *uid) {
  pt_thread *th = calloc((size_t)a->nthreads, sizeof *th);
  for (int k = 0; th && k < a->nthreads; k++) {
    pt_thread *t = &th[k];
    *t = (pt_thread){.args = a, .coll = coll, .world = w, .uid = *uid, .thread = k};
    t->main = w->proc == 0 && k == 0;
    t->nlocal = a->ngpus;
    t->ranks = calloc((size_t)a->ngpus, sizeof *t->ranks);
    t->bufs = calloc((size_t)a->ngpus, sizeof *t->bufs);
    t->ivals = calloc((size_t)a->ngpus, sizeof *t->ivals);
    t->dvals = calloc((size_t)a->ngpus, sizeof *t->dvals);
    if (!t->ranks || !t->bufs || !t->ivals || !t->dvals) return NULL;
    for (int g = 0; g < a->ngpus; g++)
      t->ranks[g].rank = (w->proc * a->nthreads + k) * a->ngpus + g;
  }
  return th;
}

static int run_threads(pt_thread *th, int n) {
  pthread_t *ids = calloc((size_t)n, sizeof *ids);
  if (!ids) return -1;
  for (int k = 1; k < n; k++)
    if (pthread_create(&ids[k], NULL, thread_main, &th[k]) != 0) {
      fprintf(stderr, "chorus perf: cannot start thread %d\n", k);
      _exit(EXIT_FAILURE); /* started threads wait in collectives */
    }
  pt_run_thread(&th[0]);
  for (int k = 1; k < n; k++) pthread_join(ids[k], NULL);
  free(ids);
  return 0;
}

static int check_world(const pt_args *a, const pt_coll *coll, pt_world *w) {
  if ((long)w->nprocs * a->nthreads * a->ngpus > 1 << 20) {
    fprintf(stderr, "chorus perf: too many ranks\n");
    return -1;
  }
  w->nthreads = a->nthreads;
  w->ngpus = a->ngpus;
  w->nranks = w->nprocs * a->nthreads * a->ngpus;
  if (coll->rooted && a->root >= w->nranks) {
    fprintf(stderr, "chorus perf: root %d is not a rank (0..%d)\n", a->root, w->nranks - 1);
    return -1;
  }
  return 0;
}

int pt_main(int argc, char **argv, const pt_coll *coll) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  start_time = time(NULL);
  pt_args a;
  int rc = pt_parse_args(argc, argv, &a);
  if (rc != 0) return rc > 0 ? 0 : EXIT_FAILURE;
  pt_world w;
  detect_processes(&w);
  if (check_world(&a, coll, &w) || prepare_rendezvous(&w)) return EXIT_FAILURE;
  if (w.proc == 0 && a.json_path && pt_json_open(a.json_path)) return EXIT_FAILURE;
  if (w.proc == 0) pt_print_banner(&a, coll);
  ncclUniqueId uid;
  if (get_unique_id(&w, &uid)) return EXIT_FAILURE;
  pt_thread *th = make_threads(&a, coll, &w, &uid);
  if (!th) return fprintf(stderr, "chorus perf: out of memory\n"), EXIT_FAILURE;
  pt_watchdog_start(th, a.nthreads, a.timeout);
  if (run_threads(th, a.nthreads)) return EXIT_FAILURE;
  pt_json_close();
  int failed = th[0].errors > 0 || th[0].low_bw;
  for (int k = 0; k < a.nthreads; k++) {
    free(th[k].ranks);
    free(th[k].bufs);
    free(th[k].ivals);
    free(th[k].dvals);
  }
  free(th);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * common.h - the few things every example needs and none of them teaches.
 *
 * NCCL itself does not start processes and does not tell a process its
 * rank: a launcher does (chorusrun, mpirun, torchrun, srun), and the
 * program hands the rank, the rank count and one shared ncclUniqueId to
 * ncclCommInitRank. This header holds that glue, so that each example can
 * stay about what it teaches. It uses only nccl.h (and the CUDA runtime
 * when EX_CUDA is defined), so the examples build against NVIDIA's NCCL too.
 *
 *   NCCL_CHECK(call)   ends the program when an NCCL call fails, printing
 *                      the file, the line and ncclGetLastError's message.
 *   ex_start()         reads --host / --gpu, the launcher's variables, picks
 *                      the GPU (or host memory) and makes a stream.
 *   ex_unique_id()     gives every rank the same ncclUniqueId.
 *   ex_alloc() ...     buffers that live where the communicator works.
 *   ex_print_ranks()   one line per rank, printed by rank 0 in rank order.
 *
 * Everything is static inline: a header-only helper needs no library.
 */
#ifndef EXAMPLES_COMMON_H
#define EXAMPLES_COMMON_H

/* POSIX and GNU calls (clock_gettime, setenv, getifaddrs, dladdr) under
 * -std=c11; include this header before any other. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef EX_CUDA
#include <cuda_runtime.h>
#endif
#include <nccl.h>

/* ---- checking every call -------------------------------------------------- */

/* Every NCCL call returns an ncclResult_t; ignoring one hides the reason a
 * later call hangs or fails. ncclGetErrorString names the kind of error,
 * ncclGetLastError (NULL: this thread's last error) says what went wrong. */
#define NCCL_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t res_ = (call);                                                                    \
    if (res_ != ncclSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,                     \
              ncclGetErrorString(res_), ncclGetLastError(NULL));                                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#ifdef EX_CUDA
#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                         \
              cudaGetErrorString(err_));                                                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#endif

/* Monotonic seconds, for timings and for bounding every wait. */
static inline double ex_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void ex_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- who am I: the launcher's variables ------------------------------------ */

typedef struct ex_world {
  int rank, nranks; /* this process in the job */
  int local_rank;   /* this process on this machine: picks the GPU */
  int gpu;          /* 1: buffers in GPU memory; 0: host memory */
  int device;       /* the CUDA device when gpu is 1, else -1 */
  int host_env_set; /* 1: ex_start set CHORUS_HOST_COMM=1 */
  const char *launcher;
  cudaStream_t stream; /* NCCL calls are queued here; NULL on host */
} ex_world;

/* An integer from the environment; 0 with *out untouched when unset. */
static inline int ex_env_int(const char *name, int *out) {
  const char *v = getenv(name);
  char *end = NULL;
  if (!v || !*v) return 0;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 24) return 0;
  *out = (int)x;
  return 1;
}

/* Each launcher names rank and size its own way. The first one found wins:
 * mpirun exports its variables to the program, torchrun and chorusrun set
 * RANK and WORLD_SIZE. Without any, the program is rank 0 of 1. */
static inline void ex_read_launcher(ex_world *w) {
  static const char *const names[][4] = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"torchrun/chorusrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  w->rank = 0, w->nranks = 1, w->local_rank = 0, w->launcher = "none (one process)";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (ex_env_int(names[i][1], &w->rank) && ex_env_int(names[i][2], &w->nranks)) {
      w->launcher = names[i][0];
      if (!ex_env_int(names[i][3], &w->local_rank)) w->local_rank = w->rank;
      return;
    }
  }
}

/* ---- host or GPU ------------------------------------------------------------ */

/* Exit status for "this machine cannot run what was asked" (--gpu without
 * a GPU); test runners (CTest's SKIP_RETURN_CODE) count it as skipped. */
#define EX_CANNOT_RUN_HERE 77

/* --host or --gpu on the command line, else EXAMPLES_MEMORY=host|gpu, else
 * a GPU when the build has CUDA and one is visible. Chorus moves host
 * memory when CHORUS_HOST_COMM=1 (or when it sees no GPU); NVIDIA's NCCL
 * only moves GPU memory, so --host needs Chorus. */
static inline int ex_choose_memory(int *argc, char **argv, int *want_gpu) {
  const char *env = getenv("EXAMPLES_MEMORY");
  *want_gpu = -1; /* -1: whatever there is */
  if (env && !strcmp(env, "host")) *want_gpu = 0;
  if (env && !strcmp(env, "gpu")) *want_gpu = 1;
  int kept = 1;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--host")) {
      *want_gpu = 0;
    } else if (!strcmp(argv[i], "--gpu")) {
      *want_gpu = 1;
    } else {
      argv[kept++] = argv[i]; /* leave the example's own arguments */
    }
  }
  *argc = kept;
  argv[kept] = NULL;
#ifndef EX_CUDA
  if (*want_gpu == 1) {
    fprintf(stderr, "--gpu: this example was built without CUDA\n");
    return EX_CANNOT_RUN_HERE;
  }
#endif
  return 0;
}

/* Reads the launcher's variables and --host/--gpu (removed from argv), then
 * binds this process to its GPU (local rank modulo the GPU count, so that
 * ranks on one machine spread over its GPUs) or to host memory. Returns 0,
 * or the status main should exit with: EX_CANNOT_RUN_HERE when --gpu
 * cannot be honoured (no CUDA in the build, or no GPU visible). */
static inline int ex_start(int *argc, char **argv, ex_world *w) {
  memset(w, 0, sizeof *w);
  w->device = -1;
  ex_read_launcher(w);
  int want_gpu;
  int rc = ex_choose_memory(argc, argv, &want_gpu);
  if (rc != 0) return rc;
#ifdef EX_CUDA
  int ndev = 0;
  if (want_gpu != 0 && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
    (void)cudaGetLastError(); /* clear the "no device" error */
    if (want_gpu == 1) {
      fprintf(stderr, "rank %d: --gpu but no GPU is visible\n", w->rank);
      return EX_CANNOT_RUN_HERE;
    }
    ndev = 0;
  }
  if (want_gpu != 0 && ndev > 0) {
    w->gpu = 1;
    w->device = w->local_rank % ndev;
    CUDA_CHECK(cudaSetDevice(w->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    return 0;
  }
#endif
  /* Host memory: tell Chorus before the communicator exists. */
  w->host_env_set = !getenv("CHORUS_HOST_COMM");
  setenv("CHORUS_HOST_COMM", "1", 1);
  return 0;
}

static inline const char *ex_where(const ex_world *w) {
  return w->gpu ? "GPU memory" : "host memory";
}

/* ---- one unique id for every rank -------------------------------------------- */

/* ncclGetUniqueId on one rank creates the rendezvous address every rank
 * must pass to ncclCommInitRank. Programs usually broadcast it with MPI or
 * a store; without either, these ways work:
 *   1. NCCL_COMM_ID=host:port (chorusrun sets it): NCCL puts that address
 *      in the id, so every rank can call ncclGetUniqueId itself, and rank 0
 *      listens there inside ncclCommInitRank;
 *   2. torchrun's MASTER_ADDR and MASTER_PORT: as 1 with MASTER_PORT + 1
 *      (torchrun's own store listens on MASTER_PORT);
 *   3. otherwise, all ranks on one machine: rank 0 writes the id to a file
 *      named after the user, the parent process (mpirun, which started
 *      every rank) and the rank count; the others read it. */
static char ex_id_path[512];

static inline void ex_remove_id_file(void) {
  if (ex_id_path[0]) unlink(ex_id_path);
}

/* When the parent process started (field 22 of /proc/PID/stat): with the
 * parent's pid it names one run, even after pids are reused. */
static inline unsigned long long ex_parent_start(void) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)getppid());
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* $TMPDIR/nccl-example-id.<user>.<parent pid>.<parent start>.<ranks>.<n>,
 * n counting the ids this process asked for, so that a second
 * communicator never reads the first one's file. */
static inline void ex_id_file(const ex_world *w, char *path, size_t cap) {
  static int calls;
  const char *dir = getenv("TMPDIR");
  snprintf(path, cap, "%s/nccl-example-id.%d.%d.%llu.%d.%d", dir && *dir ? dir : "/tmp",
           (int)getuid(), (int)getppid(), ex_parent_start(), w->nranks, calls++);
}

static inline int ex_unique_id(const ex_world *w, ncclUniqueId *id) {
  const char *comm_id = getenv("NCCL_COMM_ID"), *maddr = getenv("MASTER_ADDR");
  int port = 0;
  if (!(comm_id && *comm_id) && maddr && ex_env_int("MASTER_PORT", &port) && port < 65535) {
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", maddr, port + 1);
    setenv("NCCL_COMM_ID", addr, 1);
    comm_id = addr;
  }
  if (w->nranks == 1 || (comm_id && *comm_id)) {
    NCCL_CHECK(ncclGetUniqueId(id));
    return 0;
  }
  char path[512], tmp[600];
  ex_id_file(w, path, sizeof path);
  if (w->rank == 0) {
    /* Written under another name, then renamed: readers never see half. */
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    NCCL_CHECK(ncclGetUniqueId(id));
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(id, sizeof *id, 1, f) == 1;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
      fprintf(stderr, "rank 0: cannot write %s: %s\n", path, strerror(errno));
      return -1;
    }
    /* Every rank read the previous id before that communicator existed. */
    if (ex_id_path[0])
      ex_remove_id_file();
    else
      atexit(ex_remove_id_file); /* every rank has read it by then */
    snprintf(ex_id_path, sizeof ex_id_path, "%s", path);
    return 0;
  }
  for (double end = ex_now() + 60; ex_now() < end; ex_sleep_ms(10)) {
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    size_t got = fread(id, sizeof *id, 1, f);
    fclose(f);
    if (got == 1) return 0;
  }
  fprintf(stderr,
          "rank %d: no unique id from rank 0 in %s after 60 s; on several machines set "
          "NCCL_COMM_ID=<address of rank 0>:<free port>\n",
          w->rank, path);
  return -1;
}

/* The usual start: the id, then ncclCommInitRank (it returns once every
 * rank has joined). */
static inline void ex_comm_init(const ex_world *w, ncclComm_t *comm) {
  ncclUniqueId id;
  if (ex_unique_id(w, &id) != 0) exit(1);
  NCCL_CHECK(ncclCommInitRank(comm, w->nranks, id, w->rank));
}

/* ---- buffers where the communicator works -------------------------------- */

/* NCCL reads and writes the buffers of a GPU communicator on the GPU, so
 * they come from cudaMalloc; a host communicator takes ordinary memory.
 * Both come zeroed. */
static inline void *ex_alloc(const ex_world *w, size_t bytes) {
  void *p = NULL;
#ifdef EX_CUDA
  if (w->gpu) {
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
  }
#endif
  p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", w->rank, bytes);
    exit(1);
  }
  return p;
}

static inline void ex_free(const ex_world *w, void *p) {
#ifdef EX_CUDA
  if (w->gpu) {
    CUDA_CHECK(cudaFree(p));
    return;
  }
#endif
  (void)w;
  free(p);
}

/* Waits for everything queued on the stream (60 s at most). NCCL calls on
 * a GPU return once queued; the data is there only after this. Host calls
 * of Chorus have finished when they return. */
static inline void ex_wait(const ex_world *w) {
#ifdef EX_CUDA
  if (w->gpu) {
    double end = ex_now() + 60;
    cudaError_t e;
    while ((e = cudaStreamQuery(w->stream)) == cudaErrorNotReady && ex_now() < end) ex_sleep_ms(1);
    if (e != cudaSuccess) {
      fprintf(stderr, "rank %d: stream: %s\n", w->rank,
              e == cudaErrorNotReady ? "still busy after 60 s" : cudaGetErrorString(e));
      exit(1);
    }
  }
#endif
  (void)w;
}

/* Copies to (put) and from (get) a buffer of ex_alloc; both wait, so the
 * host side may be read or reused at once. */
static inline void ex_put(const ex_world *w, void *dst, const void *src, size_t bytes) {
#ifdef EX_CUDA
  if (w->gpu) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, w->stream));
    ex_wait(w);
    return;
  }
#endif
  (void)w;
  memcpy(dst, src, bytes);
}

static inline void ex_get(const ex_world *w, void *dst, const void *src, size_t bytes) {
#ifdef EX_CUDA
  if (w->gpu) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, w->stream));
    ex_wait(w);
    return;
  }
#endif
  (void)w;
  memcpy(dst, src, bytes);
}

static inline void ex_end(ex_world *w) {
#ifdef EX_CUDA
  if (w->gpu) CUDA_CHECK(cudaStreamDestroy(w->stream));
#endif
  w->stream = NULL;
}

/* ---- printing ------------------------------------------------------------ */

/* Appends up to n floats to line as "1 2 3" (compact %g). */
static inline void ex_format_floats(char *line, size_t cap, const float *v, size_t n) {
  size_t used = strlen(line);
  for (size_t i = 0; i < n && used + 1 < cap; i++) {
    int k = snprintf(line + used, cap - used, "%s%g", i ? " " : "", (double)v[i]);
    if (k < 0) break;
    used += (size_t)k;
  }
}

#define EX_LINE 240

/* Processes printing at once interleave their lines in any order. Instead,
 * every rank sends its line to all (an AllGather of fixed-size text) and
 * rank 0 prints them in rank order. Every rank must call it. */
static inline void ex_print_ranks(const ex_world *w, ncclComm_t comm, const char *fmt, ...) {
  char mine[EX_LINE] = {0};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mine, sizeof mine, fmt, ap);
  va_end(ap);
  char *send = ex_alloc(w, EX_LINE), *recv = ex_alloc(w, (size_t)EX_LINE * w->nranks);
  ex_put(w, send, mine, EX_LINE);
  NCCL_CHECK(ncclAllGather(send, recv, EX_LINE, ncclChar, comm, w->stream));
  ex_wait(w);
  if (w->rank == 0) {
    char *all = malloc((size_t)EX_LINE * w->nranks);
    if (!all) exit(1);
    ex_get(w, all, recv, (size_t)EX_LINE * w->nranks);
    for (int r = 0; r < w->nranks; r++) {
      all[(size_t)r * EX_LINE + EX_LINE - 1] = '\0';
      printf("%s\n", all + (size_t)r * EX_LINE);
    }
    fflush(stdout);
    free(all);
  }
  ex_free(w, send);
  ex_free(w, recv);
}

#endif /* EXAMPLES_COMMON_H */

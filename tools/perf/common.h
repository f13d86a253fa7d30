/*
 * common.h - the framework shared by the Chorus perf programs.
 *
 * The programs (all_reduce_perf, all_gather_perf, ...) accept the options of
 * NVIDIA's nccl-tests and print the same table. Each one is a small file that
 * describes its collective with a pt_coll and calls pt_main(); everything else
 * lives here:
 *
 *   args.c    command line (nccl-tests flags) and the type/operator tables
 *   launch.c  how ranks start: launcher detection, rendezvous, threads
 *   mem.c     buffer memory (host memory today; device memory later)
 *   data.c    element encoding for every ncclDataType_t, input generator
 *   check.c   data initialisation and result checking
 *   calls.c   NCCL calls for all ranks of a thread, barriers, aggregation,
 *             failures and the -T watchdog
 *   bench.c   the timing loop (the timing method is described there)
 *   report.c  the table, the footer and the JSON lines (main thread only;
 *             pt_print_devices is collective: every thread calls it)
 *
 * Ranks: nprocs processes x nthreads threads x ngpus ranks per thread.
 * Global rank = proc*nthreads*ngpus + thread*ngpus + g. One thread drives its
 * ngpus ranks together (inside ncclGroupStart/End).
 */
#ifndef CHORUS_PERF_COMMON_H
#define CHORUS_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "chorus.h"
#include "nccl.h"

#define PT_VERSION "0.1.0"

/* Reduction operators as the tests index them; PT_MULSUM stands for an
 * ncclRedOpCreatePreMulSum operator, PT_NONE for data movement. */
enum { PT_SUM = 0, PT_PROD, PT_MAX, PT_MIN, PT_AVG, PT_MULSUM, PT_NUM_OPS, PT_NONE = -1 };

/* ---- command line (args.c) ------------------------------------------------ */
typedef struct pt_args {
  int nthreads, ngpus;
  size_t minbytes, maxbytes, stepbytes, stepfactor;
  int iters, warmup, agg, check, cycles;
  int ntypes;
  ncclDataType_t types[ncclNumTypes];
  int nops;
  int ops[PT_NUM_OPS];
  int root;     /* -1: every root in turn */
  int blocking; /* -1: library default; else ncclConfig_t.blocking */
  int average;  /* 0 rank 0, 1 average, 2 minimum, 3 maximum (as nccl-tests) */
  int inplace;  /* 0: measure out-of-place only */
  int reg;      /* -R: 0 none, 1 ncclCommRegister, 2 symmetric windows */
  int cputime;  /* label the time column "cputime" (same value on host) */
  int timeout;  /* seconds one NCCL call may take; 0: no limit */
  const char *json_path;
} pt_args;

/* Parses argv into a; returns 0 to run, 1 after -h, -1 on a bad option. */
int pt_parse_args(int argc, char **argv, pt_args *a);
const char *pt_type_name(ncclDataType_t t);
const char *pt_op_name(int op);

/* ---- the world of ranks (launch.c) -------------------------------------- */
typedef struct pt_world {
  int nprocs, proc;           /* processes and this one's index */
  int local_rank, local_size; /* on this host; local_size 0: unknown */
  const char *launcher;       /* "none", "Open MPI", ... */
  int nthreads, ngpus;
  int nranks;         /* nprocs * nthreads * ngpus */
  char rdv_file[512]; /* file rendezvous: path rank 0 removes */
} pt_world;

/* ---- one collective (one small file per program) -------------------------- */
typedef struct pt_counts {
  size_t send, recv, param;          /* elements: buffers, and the API's count */
  size_t send_inplace, recv_inplace; /* in place: ptr = recvbuff + off * rank */
} pt_counts;

typedef struct pt_call {
  const void *send;
  void *recv;
  size_t count; /* pt_counts.param */
  ncclDataType_t type;
  ncclRedOp_t op;
  int root, rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream; /* NULL on host memory */
} pt_call;

/* Where element j of a rank's result comes from: input element `index` of
 * rank `rank`, or of every rank reduced together (rank == PT_ALL_RANKS). */
#define PT_ALL_RANKS (-1)
typedef struct pt_src {
  int rank;
  size_t index;
} pt_src;

typedef struct pt_coll {
  const char *name; /* program name, e.g. "all_reduce_perf" */
  const char *func; /* NCCL function, for error messages */
  int reduces;      /* takes a reduction operator */
  int rooted;       /* takes a root */
  /* count = bytes / sizeof(type): buffer sizes and in-place offsets. */
  void (*counts)(size_t count, int nranks, pt_counts *c);
  double (*bus_factor)(int nranks); /* busbw = algbw * factor */
  ncclResult_t (*run)(const pt_call *c);
  /* Fills src for result element j of `rank`; returns 0 when that rank's
   * result is unspecified (e.g. not the root). */
  int (*source)(const pt_counts *c, int rank, int nranks, int root, size_t j, pt_src *src);
} pt_coll;

int pt_main(int argc, char **argv, const pt_coll *coll);

/* ---- memory and streams (mem.c) ------------------------------------------- */
/* 1 when ranks run on GPUs (a CUDA build of the perf programs that sees a
 * GPU, without CHORUS_HOST_COMM=1). */
int pt_dev_mode(void);
/* Before rank i of thread t is created: picks its GPU (as nccl-tests does),
 * makes it current and gives the rank a stream. -1 on host memory. */
typedef struct pt_thread pt_thread;
typedef struct pt_rank pt_rank;
int pt_dev_bind(const pt_thread *t, int i, pt_rank *r);
void pt_dev_unbind(pt_rank *r);
/* Waits for every operation queued on the thread's ranks' streams. */
void pt_dev_sync(const pt_thread *t);
/* Buffers of one rank's communicator: host memory, or device memory on
 * the communicator's GPU. */
/* ncclmem: from ncclMemAlloc (for windows), else cudaMalloc / host. */
void *pt_mem_alloc(ncclComm_t comm, size_t bytes, int ncclmem);
void pt_mem_free(ncclComm_t comm, void *p, int ncclmem);
/* A host-visible window on bytes at p: read=1 copies the contents in; after
 * pt_mem_end with write=1 the window's contents are in p. Host memory is its
 * own window (no copies). */
void *pt_mem_begin(ncclComm_t comm, void *p, size_t bytes, int read);
void pt_mem_end(ncclComm_t comm, void *p, void *view, size_t bytes, int write);
/* Fills bytes at p (a whole number of units) with copies of the unit_bytes
 * at unit, by doubling copies inside p: on a GPU from a block of at most
 * 1 MiB written once, so that large buffers cost no host memory or copies. */
void pt_mem_fill(ncclComm_t comm, void *p, size_t bytes, const void *unit, size_t unit_bytes);

/* ---- element values (data.c) ------------------------------------------------ */
size_t pt_type_size(ncclDataType_t t);
int pt_type_is_float(ncclDataType_t t);
int pt_type_is_signed(ncclDataType_t t);
void pt_set(ncclDataType_t t, void *buf, size_t i, double v); /* v exactly representable */
double pt_get(ncclDataType_t t, const void *buf, size_t i);
int64_t pt_get_int(ncclDataType_t t, const void *buf, size_t i); /* integer types */
void pt_set_sentinel(ncclDataType_t t, void *buf, size_t n);     /* never a valid result */

/* Deterministic input values: every rank can compute every rank's input,
 * and every element of a reduction of all of them in O(1) (data.c). */
typedef struct pt_gen {
  ncclDataType_t type;
  int op; /* PT_* or PT_NONE */
  int nranks;
  uint64_t seed;
  int kind, sign;
  int64_t xlo, ylo, clo; /* element base x, extra y, table values c: [lo, lo+range) */
  uint64_t xrange, yrange, crange;
  int cnonzero; /* entries of c that may be non-zero (or 2, for prod) */
  int64_t *c;   /* nranks entries */
  double csum, cprod, cmax1, cmin1;
} pt_gen;

int pt_gen_init(pt_gen *g, ncclDataType_t type, int op, int nranks, uint64_t seed);
void pt_gen_free(pt_gen *g);
/* Input element i of rank (every input is an integer, exactly representable). */
int64_t pt_gen_int(const pt_gen *g, int rank, size_t i);
void pt_gen_fill(const pt_gen *g, int rank, void *buf, size_t n); /* elements 0..n-1 */
/* Elements i0..i1-1 of buf (the whole input's start). */
void pt_gen_fill_range(const pt_gen *g, int rank, void *buf, size_t i0, size_t i1);
/* Element idx of the reduction of every rank's input (op of g). */
double pt_gen_reduced(const pt_gen *g, size_t idx);
double pt_mulsum_scalar(int rank);    /* the PreMulSum scalar of each rank */
double pt_tolerance(const pt_gen *g); /* 0 unless rounding is inherent */

/* ---- threads, ranks and the benchmark (bench.c, check.c, report.c) ---------- */
typedef struct pt_rank {
  int rank; /* global */
  ncclComm_t comm;
  void *send, *recv;               /* args.maxbytes each */
  void *scratch;                   /* small buffer for aggregation */
  void *send_reg, *recv_reg;       /* -R 1: registration handles */
  ncclWindow_t send_win, recv_win; /* -R 2: windows */
  ncclRedOp_t mulsum;
  int64_t wrong; /* of the last check */
  int dev;       /* CUDA device, -1: host memory */
  cudaStream_t stream;
} pt_rank;

typedef struct pt_thread {
  const pt_args *args;
  const pt_coll *coll;
  const pt_world *world;
  ncclUniqueId uid;
  int thread;
  int main;   /* prints: thread 0 of process 0 */
  int nlocal; /* ranks of this thread (-g) */
  pt_rank *ranks;
  void **bufs;    /* nlocal buffer pointers, for grouped calls */
  int64_t *ivals; /* nlocal values, for aggregation */
  double *dvals;
  uint64_t rep;  /* check counter, identical on every thread */
  double bw_sum; /* sum of the busbw of every table cell */
  int bw_count;
  int errors;     /* table cells with #wrong > 0 */
  int low_bw;     /* below NCCL_TESTS_MIN_BW */
  uint64_t calls; /* watchdog: odd while an NCCL call is in flight */
} pt_thread;

/* Per-size state of one benchmark. */
typedef struct pt_case {
  ncclDataType_t type;
  int op, root;
  size_t bytes; /* printed size */
  pt_counts c;
} pt_case;

/* Result of one placement. */
typedef struct pt_result {
  double time_us, algbw, busbw;
  int64_t wrong; /* -1: not checked */
} pt_result;

/* launch.c */
void pt_run_thread(pt_thread *t); /* comm init, every test, teardown */
void pt_rdv_cleanup(void);        /* removes the rendezvous file, if ours */

/* bench.c: every type, operator, root and size. */
void pt_run_tests(pt_thread *t);

/* calls.c: NCCL calls of one thread, for all its ranks. */
void pt_issue(pt_thread *t, const pt_case *k, int inplace);
void pt_barrier(pt_thread *t);
/* In-place ncclAllReduce of bufs[i] on local rank i, grouped. */
void pt_allreduce_bufs(pt_thread *t, void *const *bufs, size_t count, ncclDataType_t type,
                       ncclRedOp_t op);
/* vals: nlocal elements of type, one per local rank; replaced by the result. */
void pt_allreduce_scalar(pt_thread *t, void *vals, ncclDataType_t type, ncclRedOp_t op);
void pt_wait_comms(pt_thread *t, ncclResult_t res, const char *what);
void pt_check_nccl(pt_thread *t, int li, ncclResult_t res, const char *what);
void pt_fail(const pt_thread *t, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
void pt_watchdog_start(pt_thread *threads, int n, int timeout_s);
void pt_call_begin(pt_thread *t);
void pt_call_end(pt_thread *t);
double pt_now(void);

/* check.c */
void pt_fill_stable(pt_thread *t, const pt_case *k);
void pt_fill_check(pt_thread *t, const pt_case *k, int inplace, uint64_t seed);
int64_t pt_check(pt_thread *t, const pt_case *k, int inplace, uint64_t seed);
void *pt_send_ptr(const pt_thread *t, const pt_rank *r, const pt_case *k, int inplace);
void *pt_recv_ptr(const pt_thread *t, const pt_rank *r, const pt_case *k, int inplace);

/* report.c: printing by the main thread (pt_print_devices: every thread) */
void pt_print_banner(const pt_args *a, const pt_coll *coll);
void pt_print_devices(pt_thread *t);
void pt_print_table_header(const pt_args *a);
void pt_print_row_start(const pt_case *k, const pt_coll *coll);
void pt_print_cell(const pt_result *r);
void pt_print_row_end(pt_thread *t, const pt_case *k, const pt_result res[2], int nres);
int pt_print_footer(pt_thread *t, const pt_coll *coll); /* 1: bandwidth too low */
int pt_json_open(const char *path);
void pt_json_close(void);
void pt_report_newline_if_open(void);

#endif

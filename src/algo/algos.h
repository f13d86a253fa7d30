/*
 * algos.h - the algorithms and protocols of both backends, as one table,
 * and the NCCL_ALGO / NCCL_PROTO filters over it.
 *
 * An algorithm is a way to move a call's data; its protocol says how
 * chunks are flagged (LL: 8 bytes of data and a flag per 16-byte line;
 * Simple: whole chunks behind counters). Each algorithm says, per backend,
 * which functions it runs, in which protocols, and what it needs of the
 * communicator and the call (CHORUS_NEED_*); the planner (plan/plan.h)
 * checks the needs, the rules (rules.h) and these filters choose.
 *
 * NCCL_ALGO and NCCL_PROTO take NCCL's forms: "ring,oneshot" (allow
 * these), "^ring" (all but these), per function "allreduce:ring;
 * broadcast:^chain" (functions as NCCL spells them, "sendrecv" for Send
 * and Recv). Names are case-insensitive. A plain list applies to every
 * collective (NCCL_PROTO also to Send/Recv, as in NCCL); a list naming a function
 * binds it. NCCL's names that Chorus has no algorithm for (nvls,
 * collnetdirect, ...; LL128) are ignored with an INFO line; any other
 * unknown word is an error naming it.
 */
#ifndef CHORUS_ALGO_ALGOS_H
#define CHORUS_ALGO_ALGOS_H

#include <stddef.h>
#include <stdint.h>

#include "algo/func.h"

typedef enum {
  CHORUS_BACKEND_HOST = 0, /* host memory: schedules over transports (coll/) */
  CHORUS_BACKEND_GPU,      /* GPU memory: kernels and copies on CUDA streams (gpu/) */
  CHORUS_BACKEND_COUNT
} chorus_backend;

typedef enum {
  CHORUS_ALGO_RING = 0, /* every rank streams to the next, around the ring */
  CHORUS_ALGO_CHAIN,    /* Broadcast and Reduce: a pipeline from or to the root */
  CHORUS_ALGO_DIRECT,   /* each rank's transfer goes straight to each peer */
  CHORUS_ALGO_ONESHOT,  /* every rank hands its data to all at once, each takes all */
  CHORUS_ALGO_TWOSHOT,  /* AllReduce: each rank reduces its share, then all gather */
  CHORUS_ALGO_RD,       /* AllReduce: recursive doubling, log2(n) pairwise exchanges */
  CHORUS_ALGO_ZEROCOPY, /* ranks read (GPU: and write) the peers' own buffers */
  CHORUS_ALGO_CE,       /* cudaMemcpyAsync between the ranks' buffers (copy engine) */
  CHORUS_ALGO_HIER,     /* across hosts: steps in each host around one step across hosts */
  CHORUS_ALGO_STAGED,   /* GPUs across hosts: the whole call carried by the host */
  CHORUS_ALGO_TREE,     /* AllReduce: up and down two binary trees, a half each */
  CHORUS_ALGO_ORDERED,  /* reductions gathered, then added in rank order (CHORUS_REPRODUCIBLE) */
  CHORUS_ALGO_COUNT
} chorus_algo;

typedef enum {
  CHORUS_PROTO_LL = 0,
  CHORUS_PROTO_LL128, /* NCCL's; no Chorus algorithm runs it */
  CHORUS_PROTO_SIMPLE,
  CHORUS_PROTO_COUNT
} chorus_proto;
#define CHORUS_PROTO_BIT(p) (1u << (p))

/* What an algorithm needs beyond the functions it runs. */
enum {
  CHORUS_NEED_RANKS2 = 1u << 0,      /* two ranks or more */
  CHORUS_NEED_NODE_MEM = 1u << 1,    /* host: every rank on this host, shared memory on */
  CHORUS_NEED_PEER_ACCESS = 1u << 2, /* GPU: the GPUs reach each other (not staged) */
  CHORUS_NEED_PEER_BUFS = 1u << 3,   /* GPU: every rank reaches every rank's buffers (all
                                        ranks' calls in one group of one process, or
                                        symmetric windows) */
  CHORUS_NEED_ONE_PROC = 1u << 4,    /* GPU: every rank's call in one group of this process,
                                        on streams that are not being captured */
  CHORUS_NEED_FITS_MSG = 1u << 5,    /* host: the whole buffer fits one message slot */
  CHORUS_NEED_HOSTS = 1u << 6,       /* GPU: ranks on several hosts (a GPU algorithm without
                                        it runs only among the GPUs of one host) */
  CHORUS_NEED_PEER_READ = 1u << 7    /* host: every rank reads every rank's memory
                                        (chorus_node.peer_read) */
};

typedef struct chorus_algo_backend {
  uint32_t funcs;  /* chorus_func_bit of each function it runs; 0: not on this backend */
  uint32_t protos; /* CHORUS_PROTO_BIT of each protocol */
  uint32_t needs;  /* CHORUS_NEED_* */
} chorus_algo_backend;

typedef struct chorus_algo_info {
  chorus_algo id;
  const char *name; /* NCCL_ALGO and CHORUS_TUNE spelling */
  const char *doc;  /* one line */
  chorus_algo_backend on[CHORUS_BACKEND_COUNT];
} chorus_algo_info;

const chorus_algo_info *chorus_algo_get(int algo); /* NULL outside the table */
const char *chorus_algo_name(int algo);            /* "?" outside the table */
const char *chorus_proto_name(int proto);          /* "LL", "LL128", "Simple" */
const char *chorus_backend_name(int backend);      /* "host", "gpu" */
/* Lookup by name (case-insensitive, len bytes); -1 when none. */
int chorus_algo_by_name(const char *name, size_t len);
int chorus_proto_by_name(const char *name, size_t len);
/* Whether algo runs func on backend. */
int chorus_algo_runs(int algo, int backend, int func);

/* NCCL_ALGO and NCCL_PROTO read into masks per function. */
typedef struct chorus_algo_filter {
  uint32_t algos[CHORUS_FUNC_COUNT];  /* bit per chorus_algo allowed */
  uint32_t protos[CHORUS_FUNC_COUNT]; /* bit per chorus_proto allowed */
  uint8_t algo_named[CHORUS_FUNC_COUNT];
  uint8_t proto_named[CHORUS_FUNC_COUNT];
} chorus_algo_filter;

/* Parses NCCL_ALGO (algo) and NCCL_PROTO (proto), either NULL or empty
 * for "all". Returns 0, or -1 with a message naming the bad word in err. */
int chorus_algo_filter_parse(chorus_algo_filter *f, const char *algo, const char *proto, char *err,
                             size_t errlen);

#endif

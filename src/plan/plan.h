/*
 * plan.h - the planner: a group of calls in, a list of tasks out, for both
 * backends.
 *
 * A task says how one call runs: its algorithm and protocol, the channels
 * and steps it moves in, and which calls of the group it moves with (the
 * copy engine runs a collective from its first rank's call; zero-copy
 * reads every rank's own buffers; Send/Recv kernels move in rounds). The
 * executors (coll/ for host memory, gpu/ for GPUs) only carry tasks out.
 *
 * Everything here is pure: a call arrives with the facts its executor
 * gathered (which buffers every GPU reaches, whether its stream may be
 * joined), and the same calls and settings give the same tasks on every
 * rank. The choice, per call: the user's rules (CHORUS_TUNE), then the
 * backend's defaults (algo/rules.h); the first rule that matches the call,
 * whose algorithm NCCL_ALGO allows and can run it (its needs, algos.h),
 * in the rule's protocol where NCCL_PROTO allows it, else the algorithm's
 * other one. A filter naming the function that leaves it nothing is an
 * error; a plain list that does is ignored for it, as NCCL does. Where
 * the defaults chose, a tuner plugin (chorus_plan_tuner) may reprice what
 * NCCL's table shows of the call, as NCCL lets it.
 */
#ifndef CHORUS_PLAN_PLAN_H
#define CHORUS_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algos.h"
#include "algo/cost.h"
#include "algo/rules.h"

#define CHORUS_PLAN_MAX_RANKS 8 /* GPU communicators: most ranks (CHORUS_KERN_MAX_RANKS) */

/* NCCL's tuner plugins (core/tuner.h) see a call as NCCL's cost table:
 * its algorithms (tree 0, ring 1, collnet direct 2, collnet chain 3, nvls
 * 4, nvls tree 5, pat 6) by its protocols (LL 0, LL128 1, Simple 2), in
 * microseconds, -1 where nothing runs. Chorus's ring fills ring's cells,
 * and so do its chains for Broadcast and Reduce (NCCL runs those on its
 * ring); its tree fills tree's, and its recursive doubling and halving
 * (AllGather, ReduceScatter: log2 n steps, as NCCL's pat) pat's. Its other
 * algorithms have no cell: a tuner cannot name them, and they keep their
 * own prices. */
#define CHORUS_TUNER_ALGOS  7
#define CHORUS_TUNER_PROTOS 3
typedef struct chorus_plan_tuner {
  /* Lets the tuner reprice cost for a call of NCCL's function code
   * nccl_func (chorus_func_nccl_code) whose larger buffer is `bytes`;
   * *nchannels gets the most channels it wants (0: any). Returns 0, or -1:
   * Chorus's own choice stands. NULL: no tuner. */
  int (*reprice)(void *arg, int nccl_func, uint64_t bytes,
                 float cost[CHORUS_TUNER_ALGOS][CHORUS_TUNER_PROTOS], int *nchannels);
  void *arg;
} chorus_plan_tuner;

/* The cell of Chorus's algo in proto for func in the tuner's table
 * (algorithm * CHORUS_TUNER_PROTOS + protocol), or -1 where it has none. */
int chorus_plan_tuner_cell(int func, int algo, int proto);

/* What the planner knows of a communicator: filled at init. */
typedef struct chorus_plan_comm {
  chorus_cost_env env; /* backend, ranks, hosts, node memory, oversubscription, slot */
  int rank;
  /* GPU communicators. */
  uint64_t key;          /* its name among this process's communicators (same on its ranks) */
  int one_process;       /* every rank is a GPU of this process */
  int staged;            /* arenas in host memory: the GPUs do not reach each other */
  size_t twoshot_ll_max; /* the largest share an LL two-shot's slots hold (0: none) */
  size_t p2p_ll_max;     /* the largest Send/Recv the LL slots carry (0: none) */
  size_t ll_peer_max;    /* under maxCTAs: most LL bytes per peer of a collective (0: any) */
  uint32_t channels, chunk_bytes;           /* exchanges */
  uint32_t ring_channels, ring_chunk;       /* rings and chains */
  uint32_t twoshot_channels, twoshot_chunk; /* two-shot (fifo form) */
  uint32_t zc_channels;                     /* zero-copy: most CTAs */
  size_t zc_cta_bytes;                      /* zero-copy: least bytes per CTA */
  uint64_t big_from; /* copies, rings and Send/Recv of this many bytes: up to twice the channels */
  /* GPU communicators across hosts (gpu/proxy.c). */
  int hosts_in_order; /* each host's ranks consecutive, in place order (env.nlocal: per host) */
  /* The choice. */
  chorus_algo_filter filter;
  chorus_rule user[CHORUS_RULES_MAX];
  size_t nuser;
  const chorus_rule *defaults;
  size_t ndefaults;
  chorus_plan_tuner tuner; /* a tuner plugin, consulted where the defaults choose */
} chorus_plan_comm;

/* Facts about a call that only its executor can find out (device
 * queries), asked for only where a choice depends on them. */
enum {
  CHORUS_FACT_PREMULSUM = 1u << 0,   /* scales each rank's input by its own scalar */
  CHORUS_FACT_SYM_WINDOWS = 1u << 1, /* its buffers lie in symmetric windows every rank
                                        mapped (zero-copy across processes) */
  CHORUS_FACT_SEND_REACH = 1u << 2,  /* every GPU of the communicator reaches its sendbuff */
  CHORUS_FACT_RECV_REACH = 1u << 3,  /* ... and its recvbuff */
  CHORUS_FACT_STREAM_OK = 1u << 4,   /* its stream is one of its own, not being captured */
};

typedef struct chorus_plan_call {
  const chorus_plan_comm *comm;
  int func;
  size_t count, esize;
  int root;      /* root or peer; -1 */
  uint64_t desc; /* what the call is: equal on every rank exactly when calls match */
  uint64_t seq;  /* GPU: the communicator's collectives before this one */
  const void *send, *recv;
  uint32_t facts; /* CHORUS_FACT_* that hold */
  uint32_t known; /* CHORUS_FACT_* asked already (PREMULSUM is always known) */
  void *user;     /* the executor's own record of the call */
} chorus_plan_call;

/* How the planner asks for facts: returns which of `want` hold for c. */
typedef struct chorus_plan_probe {
  uint32_t (*facts)(void *arg, const chorus_plan_call *c, uint32_t want);
  void *arg;
} chorus_plan_probe;

typedef struct chorus_task {
  int8_t algo;       /* chorus_algo */
  int8_t proto;      /* chorus_proto */
  int8_t tail_proto; /* GPU ring AllReduce: the protocol of its tail (the elements past
                        the last whole share, one exchange) */
  int16_t rule;      /* index of the rule that chose it (users' first), -1: forced */
  uint8_t depends;   /* the choice looked at facts or at partners in the group: the same
                        call may be chosen otherwise another time */
  int32_t lead;      /* copy-engine collective: the index of the call that runs it; -1 */
  int32_t pair;      /* copy-engine Send/Recv: its partner's index; -1 */
  int32_t round;     /* Send/Recv in kernels: the launch it moves in; -1 */
  /* Zero-copy in one process: each rank's call of the same collective. */
  int32_t peer_call[CHORUS_PLAN_MAX_RANKS];
  uint32_t channels; /* CTAs (GPU) */
  uint32_t chunk;    /* bytes per step of a channel (GPU FIFO kernels) */
} chorus_task;

/* An explanation being written: where the planner says why (may be NULL). */
typedef struct chorus_explain {
  char *buf;
  size_t len, used;
} chorus_explain;

/* Reads NCCL_ALGO, NCCL_PROTO and CHORUS_TUNE into c->filter and c->user,
 * and the backend's defaults (c->env.backend set). Returns 0, or -1 with
 * a message naming the bad word in err. */
int chorus_plan_comm_settings(chorus_plan_comm *c, char *err, size_t errlen);
/* Why algo cannot run on m for its host count (NULL: it can): one host's
 * GPU kernels across hosts, an across-hosts algorithm on one host, host
 * memory's hier without two or more ranks on every host, as many. */
const char *chorus_plan_hosts_misfit(const chorus_plan_comm *m, int algo);

/* Frees the functions NCCL_ALGO names only with algorithms that cannot
 * run on c (another backend's; on GPUs, one host's kernels across hosts
 * or the reverse). A GPU communicator across hosts runs its calls as host
 * calls: "allreduce:hier" binds the GPU choice and leaves the host calls
 * theirs, "allreduce:ring" binds the host calls and leaves the GPU choice
 * (as NCCL's ring runs across nodes too). */
void chorus_plan_unbind_foreign(chorus_plan_comm *c);

/* The size rules and costs are stated in for call c (bytes of its larger
 * buffer). */
uint64_t chorus_plan_size(const chorus_plan_call *c);

/* Chooses for one call, with the algorithms in `exclude` (bits of
 * chorus_algo) ruled out; group-only needs (CHORUS_NEED_ONE_PROC, and
 * CHORUS_NEED_PEER_BUFS without symmetric windows) count as met when
 * `group` is set. Facts come from probe (NULL: none hold). Fills t (algo, proto, rule, channels,
 * chunk; the rest -1). Returns 0, or -1 with a message in err when the filters leave a function
 * they name nothing. Writes its reasons into ex. */
int chorus_plan_choose(chorus_plan_call *c, const chorus_plan_probe *probe, uint32_t exclude,
                       int group, chorus_task *t, chorus_explain *ex, char *err, size_t errlen);

/* Plans a group (calls in call order, on any communicators): every task,
 * with the calls that move together resolved: zero-copy and copy-engine
 * collectives only where every rank's call goes the same way, copy-engine
 * Send/Recv only in matched pairs, the rest of each communicator's
 * Send/Recv in rounds. Returns 0, or -1 with a message in err. */
int chorus_plan_group(chorus_plan_call *calls, size_t n, const chorus_plan_probe *probe,
                      chorus_task *tasks, char *err, size_t errlen);

/* Fills the round of every Send/Recv of calls[0..n) in kernels (tasks
 * chosen), as chorus_plan_group does: for executors that reuse tasks. */
void chorus_plan_rounds(const chorus_plan_call *calls, size_t n, chorus_task *tasks);

/* Modelled microseconds of calls[0..n) planned as tasks: per communicator
 * the sum, across communicators the largest (they run side by side). */
double chorus_plan_cost_us(const chorus_plan_call *calls, const chorus_task *tasks, size_t n);

/* ---- pieces of the group planner, pure and tested on their own ---------- */

/* Call i's partner of each rank: match[i * CHORUS_PLAN_MAX_RANKS + p] gets
 * the index of the candidate call (cand) of rank p of the same
 * communicator (key) with the same number (seq), or -1. Returns how many
 * calls have a partner of every rank. */
size_t chorus_plan_match_colls(const uint64_t *key, const uint64_t *seq, const int *rank,
                               const int *nranks, const uint8_t *cand, size_t n, int *match);

/* A Send or Recv as the copy-engine pairing sees it. */
typedef struct chorus_plan_p2p {
  uint64_t key;   /* the communicator (0: not a candidate; still counted among its rank's
                     calls to that peer, and its buffer may clash with a copy's) */
  int rank, peer; /* the caller's rank, and the rank it sends to or receives from */
  int send;       /* 1 Send, 0 Recv */
  int want;       /* its rule chose the copy engine */
  size_t bytes;
  const void *buf;
} chorus_plan_p2p;
/* Pairs each wanting Send of c[] with the Recv it matches (the k-th send
 * from rank a to b with b's k-th receive from a, calls of 0 bytes aside),
 * wanting too and of the same size, whose buffers meet no other call's
 * that the copy would race with: pair[i] gets the partner's index, or -1.
 * Returns the number of pairs. */
size_t chorus_plan_pair_p2p(const chorus_plan_p2p *c, size_t n, long *pair);

/* Which copy-engine collectives go: call i is a candidate (cand[i]) with
 * description desc[i] on nranks[i] ranks, match as chorus_plan_match_colls
 * fills it. A collective goes when every rank's call is in the group, all
 * described alike, one right after another in call order (running them
 * all at the first keeps every GPU's calls in order): lead[i] gets the
 * index of its first call, else -1. Returns how many collectives go. */
size_t chorus_plan_ce_leads(const uint8_t *cand, const uint64_t *desc, const int *nranks,
                            const int *match, size_t n, long *lead);

/* Explanation helpers. */
void chorus_explain_put(chorus_explain *ex, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif

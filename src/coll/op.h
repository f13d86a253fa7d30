/*
 * op.h - one collective or point-to-point call being executed, and the view
 * of its communicator that schedules need.
 *
 * A schedule is a resumable function (util/coro.h) stored in op->step. It
 * returns ncclSuccess when the call is complete on this rank, ncclInProgress
 * when it must wait (after saying what for, in op->wait_conn/wait_dir), or an
 * error. It never blocks; the executor (exec.h) decides when to call it again
 * and when to sleep.
 *
 * Collectives of one communicator run one after another; point-to-point
 * calls (op->concurrent) run all at once, ordered per connection by tickets.
 */
#ifndef CHORUS_COLL_OP_H
#define CHORUS_COLL_OP_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algos.h"
#include "algo/ring.h"
#include "plan/plan.h"
#include "host/copy.h"
#include "host/reduce.h"
#include "nccl.h"
#include "transport/transport.h"
#include "util/bufcache.h"
#include "util/log.h"

#define CHORUS_COLL_MEMO 4 /* host choices kept per function */

/* A communicator as seen by schedules and the executor. Filled by core. */
typedef struct chorus_coll_comm {
  int rank, nranks;
  chorus_conn **conns; /* [peer][channel][dir] */
  const chorus_transport *const *transports;
  void **tstates;
  int ntransports;
  chorus_doorbell *doorbell; /* this rank's, or NULL */
  chorus_node *node;         /* node memory when all ranks share this host, or NULL */
  int *abort_flag;           /* set by ncclCommAbort (any thread) */
  int64_t timeout_ns;        /* CHORUS_OP_TIMEOUT; <= 0: none */
  int64_t spin_ns;           /* polling time before yielding */
  int64_t yield_ns;          /* then yielding time before sleeping */
  /* Its place among its machine's ranks + 1, where they outnumber the
   * CPUs: the thread of its first call binds itself to a CPU by it
   * (util/affinity.h, CHORUS_SPREAD_RANKS), then 0. */
  int spread;
  int reproducible;    /* CHORUS_REPRODUCIBLE: reductions in rank order (coll/ordered.c) */
  uint64_t seq;        /* next collective's sequence number */
  const int *ring;     /* ring order: position -> rank */
  const int *ring_pos; /* rank -> position */
  const chorus_topo *topo;
  /* Set once a call on this communicator failed; later calls are refused. */
  ncclResult_t failed;
  /* What the planner knows of the communicator (filled at init: the
   * settings by core, the cost model's inputs by coll/prepare.c, the GPU's
   * shape by gpu/), and the last host choices per function: a few sizes
   * each, since programs alternate sizes (a small call between large ones
   * as a barrier, say). */
  chorus_plan_comm plan;
  struct {
    size_t bytes;
    int algo;   /* -1: none */
    int premul; /* chosen for a PreMulSum call (zerocopy cannot take one) */
  } last[CHORUS_FUNC_COUNT][CHORUS_COLL_MEMO];
  uint8_t last_next[CHORUS_FUNC_COUNT]; /* the entry to replace next */
  size_t nt_bytes;                      /* outputs this big take non-temporal stores (reductions) */
  size_t nt_move_bytes;                 /* the same for calls that only move bytes */
  /* How this rank writes what peers read (host/copy.h): copies into its
   * stage, reductions into its stage, copies into FIFO slots. */
  chorus_store_tuner stage_tuner, reduce_tuner, slot_tuner;
  /* GPU communicators: the device side (gpu/gpu.h) where every rank
   * shares this host, else the host-staged side (gpu/proxy.h); NULL on
   * host-memory communicators. */
  struct chorus_gpu *gpu;
  struct chorus_proxy *proxy;
  /* A host-memory communicator whose every host holds one rank: its
   * lanes (coll/lanes.h; lane 0 is this one), which its large calls are
   * cut across (core/enqueue.c); else NULL. */
  struct chorus_lanes *lanes;
  int lanes_streams; /* its connections' agreed sockets per peer (byte moves' lanes) */
  /* CHORUS_REPRODUCIBLE on a GPU communicator: the scratch its reductions
   * gather into (gpu/ordered.h); else NULL. */
  struct chorus_gpu_ordered *gpu_ordered;
  /* Work in flight that ncclCommAbort waits for: busy counts what any
   * thread runs (atomic read-modify-write); calls_in the application's
   * calls, written only by the thread that makes them (NCCL's one thread
   * at a time per communicator), so entering a call costs no locked
   * instruction (util/fence.h orders it against the abort). */
  int busy;
  int calls_in;
  /* What the application's calls are doing (coll/progress.h); NULL on a
   * communicator that is a part of another. */
  struct chorus_progress *progress;
  int tracing; /* calls take their times: CHORUS_TRACE (core/trace.h), a profiler plugin */
  /* The executor's last hint to the transports (transport.h): its calls
   * only move bytes, in large messages; 0 until said, as they start. */
  int moves;
  /* The call board (coll/calls.h): this rank's last posted calls (NULL:
   * no board); calls from unchecked_from on were not all compared with
   * every peer's when they ended (unchecked = 0: none). */
  chorus_call_entry *mine;
  int unchecked;
  uint64_t unchecked_from;
  uint64_t calls_chain; /* the hash of this rank's posted calls so far */
  /* Open groups (any thread's) holding calls on it, each counted once
   * (atomic): destroying the communicator under them would leave the
   * group freed memory. */
  int queued;
  /* Large scratch buffers its calls leave for the next ones (chorus_op_scratch). */
  chorus_bufcache bufs;
  /* Log context of this communicator (rank and last-error buffer). */
  chorus_log_ctx log_ctx;
  /* The first failure a peer passed on to this rank, verbatim ("rank R
   * ..."), which this rank passes on in turn; empty: none. From here on: cold. */
  char cause[CHORUS_REASON_MAX];
  /* A profiler plugin that watches its calls' messages across the network
   * (coll/steps.h; NULL: none), its context, this communicator's lane (a
   * part's or a lane's place among its parent's, else 0) and its ranks'
   * ranks in the application's communicator (NULL: the same). */
  const struct chorus_step_hooks *step_hooks;
  void *step_ctx;
  int step_lane;
  const int *step_ranks;
} chorus_coll_comm;

static inline chorus_conn *chorus_cc_conn(const chorus_coll_comm *cc, int peer, int ch, int dir) {
  return cc->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

/* Rank at ring position (pos mod n). */
static inline int chorus_cc_ring_rank(const chorus_coll_comm *cc, int pos) {
  int n = cc->nranks;
  return cc->ring[((pos % n) + n) % n];
}

typedef struct chorus_op chorus_op;

/* Streams one byte range through one connection in slot-sized messages
 * (coll/xfer.c). Several can run inside one op. */
typedef struct chorus_xfer {
  int co;
  chorus_conn *conn;
  char *buf; /* source (send) or destination (recv) */
  size_t bytes, done;
  void *slot;
  size_t cap;
  const void *rbuf;
  size_t rbytes;
  uint64_t placed; /* recv: messages placed ahead (recv_expect) */
} chorus_xfer;

struct chorus_op {
  ncclResult_t (*step)(chorus_op *op);
  /* Optional: adds everything the op may be waiting on (ops that drive
   * several connections at once); else the executor uses wait_conn. */
  void (*wait_info)(chorus_op *op, chorus_waitset *ws);
  chorus_coll_comm *cc;
  int co;         /* coroutine resume point */
  int concurrent; /* point-to-point: runs beside other ops */
  /* Its transfers may go by reference, the peer reading them in place
   * (coll/xfer.h), so a send completes only once read: collectives, and
   * Sends in a group that also receives. A lone Send keeps to slots and
   * completes into them without its receiver, as programs that Send
   * before they Recv on both sides expect of messages that fit. */
  int by_ref;
  /* Send/Recv of a GPU communicator whose buffer is the user's device
   * memory, moved by the network itself (chorus_conn.dev_mem, xfer.h). */
  int dev_mem;
  int moved;      /* the schedule finished; the call board's check remains (coll/calls.h) */
  uint64_t ticks; /* bumped whenever the schedule moves */
  chorus_conn *wait_conn;
  int wait_dir;
  /* The call. */
  int func; /* chorus_func */
  int algo; /* chorus_algo */
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  /* A share of a call cut across lanes (gpu/cut.h): the whole call's
   * count, which its messages carry instead, so that peers that cut a
   * call differently (their counts differ) see a mismatch; 0: count. */
  size_t whole_count;
  /* Elements from one rank's block to the next on a side that holds one
   * per rank (AllGather's output, AlltoAll's both, ...); 0: count. A share
   * of a call cut across lanes (core/enqueue.c) holds the same range of
   * every block of the whole call, whose blocks lie whole_count apart. */
  size_t pitch;
  int dtype;
  size_t esize;
  chorus_red red;
  int nccl_op;                   /* the caller's ncclRedOp_t kind, for messages */
  int root;                      /* root or peer; -1 */
  chorus_msg_meta meta;          /* what every message of this call carries */
  chorus_msg_meta expect;        /* what messages received must carry (= meta, but for Recv) */
  uint64_t ticket;               /* point-to-point: place in its connection's line */
  uint64_t app_index;            /* the call's number in coll/progress.h's sense */
  int64_t t_enq, t_start, t_end; /* cc->tracing: issued, first stepped, ended (ns) */
  void *prof_api, *prof_coll;    /* a profiler plugin's handles of its events (core/profiler.h) */
  void *scratch;                 /* from chorus_op_scratch, given back after the op (may be NULL) */
  size_t scratch_bytes;          /* its size */
  int nt;            /* output too big to stay cached: non-temporal stores (host/copy.h) */
  void *cuda_stream; /* GPU communicators: the caller's stream */
  /* Schedule state. */
  union {
    struct {
      chorus_ring_plan plan;
      size_t round;
      int k;
      chorus_conn *next, *prev;
      const void *rbuf;
      size_t rbytes;
      void *sbuf;
      size_t scap;
      /* messages from prev: placed ahead (recv_expect), released */
      uint64_t placed, taken;
    } ring;
    struct {
      chorus_ring_plan plan; /* over the host's L ranks */
      size_t round, seg_off, seg_len;
      int k, L, li, H, hi; /* ranks per host and ours; hosts and ours */
      chorus_conn *lnext, *lprev, *xnext, *xprev;
      const void *rbuf;
      size_t rbytes;
      void *sbuf;
      size_t scap;
    } hier;
    struct {
      chorus_xfer x;
    } p2p;
    struct {
      size_t chunk_elems, nchunks, c;
      uint64_t g;    /* node chunk number of chunk c */
      int fast;      /* fast lines per writer (coll/node.c), 0: none; set at the first step */
      unsigned from; /* fast lines: the ranks read from, a bit each */
    } node;
    struct {
      int p2, rem, v, mask, peer;
      int lo, hi;       /* ReduceScatter: the blocks still halved (participants) */
      chorus_xfer x[2]; /* AllGather, ReduceScatter: one exchange */
      uint8_t kind[2];
      const void *acc; /* AllReduce: this rank's partial result so far, sent by reference */
      const void *rbuf;
      size_t rbytes;
      void *sbuf;
      size_t scap;
    } rd;
    struct {
      chorus_xfer *x; /* a transfer per child (and the parent's), in scratch */
      uint8_t *kind;
      int nx, m;
      char *acc; /* Reduce: this rank's partial sum, in scratch */
    } binomial;
    struct {
      int parent[2], kid[2][2]; /* per tree; -1: none */
      size_t seg, npieces, c;   /* elements per piece, pieces per half, this piece */
      int t, k;                 /* this tree, this link */
      const void *rbuf[2];
      size_t rbytes;
      void *sbuf;
      size_t scap;
    } tree;
    struct {
      chorus_xfer *x; /* nx transfers, in scratch */
      uint8_t *kind;  /* per transfer (CHORUS_XFER_SEND, ...), in scratch */
      int nx;
      /* This rank's own block, copied while the transfers wait */
      char *own_dst;
      const char *own_src;
      size_t own_left;
    } multi;
    struct {
      chorus_op *child; /* the gathering call, in scratch */
      char *all;        /* every rank's contribution, in rank order (NULL: none here) */
      char *scaled;     /* PreMulSum: this rank's contribution, scaled */
      size_t mine_bytes;
    } ordered;
    struct {
      /* A GPU call running as the gathering of a reduction in rank order
       * (gpu/ordered.h): the caller's function (0: not turned) and what
       * the turn replaced; every contribution, in rank order (NULL: none
       * here). */
      int func;
      const void *sendbuff;
      void *recvbuff;
      chorus_red red;
      char *all;
    } gpu_ordered;
  } u;
  chorus_op *next_op; /* executor queue link */
  /* A share of a call cut across lanes before its events began: where
   * the whole call's Coll/P2p handle is (chorus_op_prof); else NULL. */
  void *const *prof_whole;
  struct chorus_steps *steps; /* its ProxyOp and ProxyStep events while it runs (coll/steps.h) */
};

/* Elements from one rank's block to the next (chorus_op.pitch). */
static inline size_t chorus_op_pitch(const chorus_op *op) {
  return op->pitch ? op->pitch : op->count;
}

/* The count of op's whole call (a share cut across lanes has its own). */
static inline size_t chorus_op_whole_count(const chorus_op *op) {
  return op->whole_count ? op->whole_count : op->count;
}

/* The profiler plugin's Coll or P2p handle of op's call, or NULL. */
static inline void *chorus_op_prof(const chorus_op *op) {
  return op->prof_whole ? *op->prof_whole : op->prof_coll;
}

/* Fills op->meta (and op->expect) from the call and the communicator's next
 * sequence number. */
chorus_msg_meta chorus_op_stamp(chorus_op *op);

/* Human-readable description of a call, e.g.
 * "AllReduce(count=1024, float, sum) #17". */
void chorus_meta_describe(const chorus_msg_meta *m, char *buf, size_t size);
/* Logs and returns the error for this rank's collective `mine` against
 * rank peer's `theirs` (ncclInvalidUsage). */
ncclResult_t chorus_meta_mismatch(const chorus_msg_meta *mine, int peer,
                                  const chorus_msg_meta *theirs);

/* This rank's call, as the user made it: collectives as above; a point-to-
 * point call by its own side, e.g. "Recv(count=8, int32, peer=0) #2" (the
 * wire description names the sender's side on both ends). */
void chorus_op_describe(const chorus_op *op, char *buf, size_t size);

#endif

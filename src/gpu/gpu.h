/*
 * gpu.h - the device side of a communicator whose ranks are GPUs.
 *
 * Each rank owns one window of device memory: counters, the LL slots and
 * the pipeline FIFOs that peers push into (layout in gpu.c). At init the
 * ranks exchange their windows (raw pointers with peer access inside one
 * process, CUDA IPC handles across processes), verify each mapping with a
 * test write, and from then on a collective is one kernel launch per
 * exchange on the caller's stream (device/kernels.h); the host never waits
 * for it.
 */
#ifndef CHORUS_GPU_GPU_H
#define CHORUS_GPU_GPU_H

#include "bootstrap/bootstrap.h"
#include "coll/op.h"
#include "device/kernels.h"
#include "nccl.h"
#include "topo/topo.h"

typedef struct chorus_gpu chorus_gpu;

/* Collective over the bootstrap: every rank of the communicator calls it
 * with its device already chosen. */
ncclResult_t chorus_gpu_setup(chorus_gpu **out, chorus_bootstrap *bs, const chorus_topo *topo,
                              int rank, int nranks, int device);
/* Frees the window and unmaps the peers' (after the device went idle). */
void chorus_gpu_free(chorus_gpu *g);
/* Stops every kernel of this communicator that is waiting (any thread). */
void chorus_gpu_abort(chorus_gpu *g);
/* ncclSuccess, or the error a kernel reported (a peer that never came, an
 * abort), with a message naming the peer. */
ncclResult_t chorus_gpu_async_error(chorus_gpu *g);

/* What the plan chooses by (bytes per rank's buffer): the measured
 * crossovers, what the slots hold, and NCCL_ALGO / NCCL_PROTO (masks of
 * what they exclude per function, so that a zeroed struct allows all). */
/* The most bytes a Send/Recv may move in LL lines (CHORUS_GPU_P2P_LL_BYTES
 * is clipped to it). */
#define CHORUS_GPU_P2P_LL_MAX (1 << 20)

typedef struct chorus_gpu_tune {
  size_t twoshot_bytes;    /* AllReduce on 2+ ranks: ReduceScatter + AllGather in one launch, */
  size_t twoshot_max;      /* up to this many bytes */
  size_t chain_bytes;      /* Broadcast and Reduce on 3+ ranks: a chain */
  size_t ring_bytes;       /* AllReduce (per share), AllGather, ReduceScatter on 2+: a ring */
  size_t pipe_bytes;       /* blocks from this size stream Simple chunks, smaller ones LL lines */
  size_t twoshot_ll_bytes; /* two-shot AllReduce up to this many bytes in LL lines */
  size_t ll_lines;         /* LL slot lines per source (an LL two-shot needs two shares) */
  size_t ll_cta_lines;     /* lines per run of the LL kernels */
  int fifo_twoshot;        /* the FIFO two-shot can run (two channels or more) */
  size_t p2p_ll_bytes;     /* Send/Recv up to this many bytes in LL lines (0: none) */
  size_t p2p_ce_bytes;     /* Send/Recv in one process from this many bytes on the copy engine */
  size_t bcast_ce_bytes;   /* Broadcast in one process: the same (0: never; _PAIR on 2 GPUs) */
  size_t bcast_ce_chunk;   /* bytes per copy of the chain on 3+ GPUs */
  size_t xchg_ce_bytes;    /* AllGather and AlltoAll in one process: the same (larger buffer) */
  uint32_t algo_deny[CHORUS_FUNC_COUNT];  /* bits of chorus_algo that NCCL_ALGO excludes */
  uint8_t algo_named[CHORUS_FUNC_COUNT];  /* NCCL_ALGO names the function itself */
  uint32_t proto_deny[CHORUS_FUNC_COUNT]; /* bits of chorus_proto that NCCL_PROTO excludes */
} chorus_gpu_tune;

/* Fills *t from the settings (CHORUS_GPU_*, NCCL_ALGO, NCCL_PROTO) for a
 * communicator of nranks GPUs with the given pipeline channels and LL
 * slots. */
void chorus_gpu_tune_read(chorus_gpu_tune *t, int nranks, uint32_t channels, size_t ll_lines,
                          uint32_t ll_cta_lines);

/* Most exchanges one call takes: a ring AllReduce and its tail. */
#define CHORUS_GPU_MAX_STEPS 2

/* The exchanges (device/kernels.h) that run op on rank `rank` of `nranks`
 * GPUs, in order (plan.c): returns how many (1, or 2 for a ring AllReduce,
 * whose elements past the last whole share take a one-shot exchange), 0
 * when the function has no GPU schedule, -1 when NCCL_ALGO and NCCL_PROTO
 * allow none for it.
 * Pure; the unit tests replay plans on host memory. */
int chorus_gpu_plan(int rank, int nranks, const chorus_gpu_tune *tune, const chorus_op *op,
                    chorus_kern_xchg out[CHORUS_GPU_MAX_STEPS]);
/* What call op is, in the 8 bytes LL launches send ahead of their lines
 * (function, type, operator of reductions, root of rooted calls, count):
 * equal on every rank exactly when the calls match. And the description
 * of one ("AllReduce(count=256, float, sum)"). Pure (plan.c). */
uint64_t chorus_gpu_call_desc(const chorus_op *op);
void chorus_gpu_call_describe(uint64_t desc, char *buf, size_t size);
/* Piece [off, off + piece) of every block of `whole`. */
void chorus_gpu_piece(const chorus_kern_xchg *whole, int nranks, size_t off, size_t piece,
                      chorus_kern_xchg *out);

/* The settings every rank must share (agree.c): their values as this
 * rank reads them (string settings hashed), exchanged at init. */
#define CHORUS_GPU_AGREE_MAX 32
typedef struct chorus_gpu_agree {
  int32_t count;
  int32_t pad;
  int64_t value[CHORUS_GPU_AGREE_MAX];
} chorus_gpu_agree;
void chorus_gpu_agree_read(chorus_gpu_agree *a);
/* -1 when every rank's equals rank 0's; else the index of the first
 * setting that differs, with a message naming it, its values and the
 * ranks in err (pure). */
int chorus_gpu_agree_check(const chorus_gpu_agree *all, int nranks, char *err, size_t errlen);

/* Zero-copy collectives (direct.c, device/kernels.h chorus_kern_direct).
 * Settings: CHORUS_GPU_DIRECT, _BYTES, _MAX, _AGRS_MAX, _CHANNELS,
 * _CTA_BYTES. */
typedef struct chorus_gpu_direct_cfg {
  int on;
  size_t min_bytes, max_bytes; /* of the larger buffer; max 0: no limit */
  size_t agrs_max;             /* AllGather/ReduceScatter on 3+ GPUs; 0: none */
  uint32_t channels;           /* most CTAs */
  size_t cta_bytes;            /* least of a rank's block per CTA */
} chorus_gpu_direct_cfg;
void chorus_gpu_direct_read(chorus_gpu_direct_cfg *cfg);
/* Whether op may run zero-copy on nranks GPUs, by its call alone (pure):
 * its CHORUS_DIRECT_* kind and, in *d, the kind, sizes, CTAs and call
 * description (buffers and offsets left to the caller); 0 when not. */
int chorus_gpu_direct_shape(const chorus_gpu_direct_cfg *cfg, const chorus_gpu_tune *tune,
                            int nranks, const chorus_op *op, chorus_kern_direct *d);
/* Which calls of one group run together (pure): call i is the collective
 * number seq[i] of rank rank[i] of nranks[i] in the communicator named
 * key[i] (every rank counts its communicator's collectives alike, so equal
 * numbers are the same call); its partner of rank p is the candidate call
 * (cand) of (key[i], p) with the same number. match[i * 8 + p] gets its
 * index, or -1 (also for calls without cand). Returns how many calls have
 * a partner of every rank. */
size_t chorus_gpu_direct_match(const uint64_t *key, const uint64_t *seq, const int *rank,
                               const int *nranks, const uint8_t *cand, size_t n, int *match);
/* The same over one group's calls (in call order), numbering each from its
 * communicator's count of collectives so far: match[i * 8 + p] is the call
 * of rank p that is call i's collective (both cand), or -1. Returns 0, or
 * -1 out of memory (then every entry -1). */
int chorus_gpu_group_match(chorus_op **ops, size_t n, const uint8_t *cand, int *match);
/* For the calls of one group (in call order): fills dir[i] for each call
 * that runs zero-copy together with its partners of every rank in this
 * group (communicators of one process), kind 0 for the others. */
void chorus_gpu_direct_group(chorus_op **ops, size_t n, chorus_kern_direct *dir);

/* Windows (ncclCommWindowRegister) on GPU communicators. Collective where
 * every rank has its own process: [buff, buff + size), inside the
 * ncclMemAlloc allocation [block, block + block_bytes), is handed to every
 * rank and mapped there, and NCCL_WIN_COLL_SYMMETRIC windows then carry
 * zero-copy collectives whose buffers all ranks place at the same offsets.
 * Elsewhere only recorded. */
typedef struct chorus_gpu_window chorus_gpu_window;
ncclResult_t chorus_gpu_window_add(chorus_gpu *g, chorus_bootstrap *bs, void *buff, size_t size,
                                   void *block, size_t block_bytes, int symmetric,
                                   chorus_gpu_window **out);
void chorus_gpu_window_remove(chorus_gpu *g, chorus_gpu_window *w);

/* Whether op is a Send or Recv (the rest of a group is collectives). */
static inline int chorus_gpu_is_p2p(const chorus_op *op) {
  return op->func == CHORUS_FUNC_SEND || op->func == CHORUS_FUNC_RECV;
}

/* Launches the GPU calls of one group, or one call (checked, in call
 * order; group.c): per GPU its collectives in order, then each
 * communicator's Send/Recv together; several GPUs at once from their
 * launcher threads (launchers.h). */
ncclResult_t chorus_gpu_run_ops(chorus_op **ops, size_t n);

/* Enqueues collective op (checked, with op->cuda_stream) on the device:
 * zero-copy as dir says (from chorus_gpu_direct_group; NULL or kind 0:
 * through windows where op's buffers are in symmetric ones, else staged). */
ncclResult_t chorus_gpu_enqueue(chorus_gpu *g, chorus_op *op, const chorus_kern_direct *dir);

/* Counts collective op as enqueued on g where something else queues it
 * (the copy engine, ce.h); the error a kernel reported, if any. */
ncclResult_t chorus_gpu_enqueue_elsewhere(chorus_gpu *g);

int chorus_gpu_rank(const chorus_gpu *g);
int chorus_gpu_nranks(const chorus_gpu *g);
int chorus_gpu_device(const chorus_gpu *g);

/* Send/Recv (p2p.c). The point-to-point calls of one group on this
 * communicator (checked, in call order) as rounds of one launch each, on
 * the first call's stream (the others' streams joined through events). */
ncclResult_t chorus_gpu_enqueue_p2p(chorus_gpu *g, chorus_op *const *ops, int nops);
/* The rounds (pure; `rounds` has nops zeroed entries): round k holds the
 * k-th send to and the k-th receive from each peer; calls of 0 bytes are
 * left out. Returns how many, or -1 with a message in err when a send to
 * itself has no receive of the same size in its round. */
int chorus_gpu_p2p_rounds(int rank, int nranks, chorus_op *const *ops, int nops,
                          chorus_kern_p2p *rounds, char *err, size_t errlen);
/* Splits a round by how each transfer moves, which follows from its size
 * alone so that both ends agree (pure): up to ll_bytes into *ll (LL lines,
 * chorus_kern_sendrecv_ll), the rest into *fifo (chorus_kern_sendrecv);
 * the own entry's send and receive (one size) go together. Returns bit 1
 * when *ll got any transfer, bit 2 when *fifo did. */
int chorus_gpu_p2p_split(const chorus_kern_p2p *round, int nranks, size_t ll_bytes,
                         chorus_kern_p2p *ll, chorus_kern_p2p *fifo);
/* Whether a receive buffer of p overlaps a send buffer (pure; the own
 * entry's receive into its own send buffer, which copies nothing, aside):
 * then the LL launch's CTAs all read before any writes (p->overlap). */
int chorus_gpu_p2p_overlap(const chorus_kern_p2p *p, int rank, int nranks);
/* The descriptions (chorus_gpu_call_desc) of a Send and of a Recv of 0
 * int8: a FIFO transfer's call header is the Send's with its size as the
 * count (chorus_kern_p2p.send_desc, recv_desc). */
void chorus_gpu_p2p_descs(uint64_t *send, uint64_t *recv);
/* Launches one round on stream: its LL transfers, then the others. */
ncclResult_t chorus_gpu_sendrecv(chorus_gpu *g, const chorus_kern_p2p *round, void *stream);

#endif

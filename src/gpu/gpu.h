/*
 * gpu.h - the device side of a communicator whose ranks are GPUs.
 *
 * Each rank owns one arena of device memory: counters, the LL slots and
 * the FIFOs that peers push into (layout.h). At init the ranks exchange
 * their arenas (arena.h: raw pointers with peer access inside one process,
 * cuMem descriptors or CUDA IPC handles across processes), verify each
 * mapping with a test write, and from then on the planner's tasks
 * (plan/plan.h) run as kernels, or copies, on the callers' streams
 * (device/kernels.h); the host never waits for them. "Window" means a
 * user's registered window (ncclCommWindowRegister, regwin.h) only.
 */
#ifndef CHORUS_GPU_GPU_H
#define CHORUS_GPU_GPU_H

#include "bootstrap/bootstrap.h"
#include "coll/op.h"
#include "plan/plan.h"
#include "device/kernels.h"
#include "nccl.h"
#include "topo/topo.h"

typedef struct chorus_gpu chorus_gpu;

/* Collective over the bootstrap: every rank of the communicator calls it
 * with its device already chosen, and the maxCTAs it was given (0: none;
 * the least one asked for caps every launch). Fills the GPU part of *plan
 * (its shape, as the planner sees it). */
ncclResult_t chorus_gpu_setup(chorus_gpu **out, chorus_bootstrap *bs, const chorus_topo *topo,
                              int rank, int nranks, int device, int max_ctas,
                              chorus_plan_comm *plan);
/* Frees the arena and unmaps the peers' (after the device went idle). */
void chorus_gpu_free(chorus_gpu *g);
/* Stops every kernel of this communicator that is waiting (any thread). */
void chorus_gpu_abort(chorus_gpu *g);
/* After chorus_gpu_abort, for ncclCommAbort: tells the peers' GPUs, so
 * that their kernels waiting for this rank stop at once (with "rank R
 * called ncclCommAbort") instead of at their deadline. */
void chorus_gpu_tell_aborted(chorus_gpu *g);
/* ncclSuccess, or the error a kernel reported (a peer that never came, an
 * abort), with a message naming the peer. */
ncclResult_t chorus_gpu_async_error(chorus_gpu *g);

/* The most bytes a Send/Recv may move in LL lines (CHORUS_GPU_P2P_LL_BYTES
 * is clipped to it). */
#define CHORUS_GPU_P2P_LL_MAX (1 << 20)

/* Most exchanges one call takes: a ring AllReduce and its tail. */
#define CHORUS_GPU_MAX_STEPS 2

/* The exchanges (device/kernels.h) that run collective op on rank `rank`
 * of `nranks` GPUs as task t says (algorithm oneshot, twoshot, ring or
 * chain, and its protocol), in order (lower.c): returns how many (1, or 2
 * for a ring AllReduce, whose elements past the last whole share take a
 * one-shot exchange), 0 when the function or algorithm has no exchange.
 * Pure; the unit tests replay them on host memory. */
int chorus_gpu_lower(int rank, int nranks, const chorus_op *op, const chorus_task *t,
                     chorus_kern_xchg out[CHORUS_GPU_MAX_STEPS]);
/* What call op is, in the 8 bytes LL launches send ahead of their lines
 * (function, type, operator of reductions, root of rooted calls, count):
 * equal on every rank exactly when the calls match. And the description
 * of one ("AllReduce(count=256, float, sum)"). Pure (lower.c). */
uint64_t chorus_gpu_call_desc(const chorus_op *op);
void chorus_gpu_call_describe(uint64_t desc, char *buf, size_t size);
/* Piece [off, off + piece) of every block of `whole`. */
void chorus_gpu_piece(const chorus_kern_xchg *whole, int nranks, size_t off, size_t piece,
                      chorus_kern_xchg *out);
/* The largest two-shot share (bytes) whose two halves fit LL slots of
 * ll_lines lines, LL runs of cta_lines lines dealt to `blocks` CTAs
 * (lower.c). */
size_t chorus_gpu_twoshot_ll_max(size_t ll_lines, uint32_t cta_lines, uint32_t blocks);

/* The settings every rank must share (agree.c: those param_table.h marks
 * AGREE): their values as this rank reads them (strings hashed), exchanged
 * at init. */
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
/* Collective over bs: ncclInvalidUsage, naming the setting, its values and
 * the ranks, when any rank reads one of them differently. */
ncclResult_t chorus_gpu_agree_all(chorus_bootstrap *bs, int rank, int nranks);

/* Zero-copy collectives (direct.c, device/kernels.h chorus_kern_zc):
 * the kernel's arguments for op as task t chose it, but the buffers (the
 * kind, sizes, CTAs, call description), 0 when op's function has none. */
int chorus_gpu_zc_shape(const chorus_op *op, const chorus_task *t, int nranks, chorus_kern_zc *d);

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
  return chorus_func_p2p(op->func);
}

/* Launches the GPU calls of one group, or one call (checked, in call
 * order; group.c): per GPU its collectives in order, then each
 * communicator's Send/Recv together; several GPUs at once from their
 * launcher threads (launchers.h). */
ncclResult_t chorus_gpu_run_ops(chorus_op **ops, size_t n);

/* Enqueues collective op (checked, with op->cuda_stream) on the device as
 * task t says; zero-copy with the buffers in *zc (NULL: through symmetric
 * windows). */
ncclResult_t chorus_gpu_enqueue(chorus_gpu *g, chorus_op *op, const chorus_task *t,
                                const chorus_kern_zc *zc);
/* A reduction as the kernels take it. */
void chorus_gpu_kern_red(const chorus_red *r, chorus_kern_red *red);

/* Payload bytes the calls launched on g moved between its GPU and peer's
 * (to it, *sent; from it, *got), whichever GPU or copy engine drove the
 * copy; counted as launched (a graph's calls once, at capture). Whether
 * the GPUs reach each other directly (else through pinned host memory). */
void chorus_gpu_peer_bytes(const chorus_gpu *g, int peer, uint64_t *sent, uint64_t *got);
int chorus_gpu_direct(const chorus_gpu *g);

int chorus_gpu_rank(const chorus_gpu *g);
int chorus_gpu_nranks(const chorus_gpu *g);
int chorus_gpu_device(const chorus_gpu *g);

/* Send/Recv (p2p.c). The point-to-point calls of one group on this
 * communicator that run in kernels (checked, in call order, with their
 * tasks: round and protocol) as rounds of one launch each, on the first
 * call's stream (the others' streams joined through events). */
ncclResult_t chorus_gpu_enqueue_p2p(chorus_gpu *g, chorus_op *const *ops,
                                    const chorus_task *const *tasks, int nops);
/* The launches of the calls (pure; `ll` and `fifo` have a zeroed entry
 * for every round the tasks name below nops): call i moves in round
 * tasks[i]->round (the planner's:
 * the k-th send to and the k-th receive from each peer in round k; calls
 * of 0 bytes in none), in ll[k] when its protocol is LL, else in fifo[k].
 * Returns how many rounds, or -1 with a message in err when a send to
 * itself has no receive of the same size in its launch. */
int chorus_gpu_p2p_rounds(int rank, chorus_op *const *ops, const chorus_task *const *tasks,
                          int nops, chorus_kern_p2p *ll, chorus_kern_p2p *fifo, char *err,
                          size_t errlen);
/* Whether a receive buffer of p overlaps a send buffer (pure; the own
 * entry's receive into its own send buffer, which copies nothing, aside):
 * then the LL launch's CTAs all read before any writes (p->overlap). */
int chorus_gpu_p2p_overlap(const chorus_kern_p2p *p, int rank, int nranks);
/* The descriptions (chorus_gpu_call_desc) of a Send and of a Recv of 0
 * int8: a FIFO transfer's call header is the Send's with its size as the
 * count (chorus_kern_p2p.send_desc, recv_desc). */
void chorus_gpu_p2p_descs(uint64_t *send, uint64_t *recv);
/* Launches one round on stream: its LL transfers, then the others. */
ncclResult_t chorus_gpu_sendrecv(chorus_gpu *g, const chorus_kern_p2p *ll,
                                 const chorus_kern_p2p *fifo, void *stream);

#endif

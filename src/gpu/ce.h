/*
 * ce.h - Send/Recv, Broadcast, AllGather and AlltoAll between GPUs of this
 * process on the copy engine.
 *
 * When one process drives several GPUs and every end of a transfer is in
 * one group, the host knows every buffer, and large transfers move as
 * cudaMemcpyAsync calls between the ranks' own buffers, joined to the
 * ranks' streams by events: no kernel, no SMs, and 256-byte NVLink writes
 * where SM stores write 128 bytes (bench/ce_probe.cu).
 *
 * A program is a list of steps over streams named by index: a copy on a
 * stream, or a stream waiting for what another holds so far (an event
 * recorded there, waited on here). Programs are made by pure functions
 * (ce_plan.c; the unit tests run them on host memory in random orders)
 * and run by chorus_gpu_ce_exec (ce.c).
 */
#ifndef CHORUS_GPU_CE_H
#define CHORUS_GPU_CE_H

#include <stddef.h>
#include <stdint.h>

#include "coll/op.h"
#include "device/kernels.h"
#include "gpu/gpu.h"
#include "nccl.h"

typedef struct chorus_gpu_ce_step {
  int on;    /* the stream that gets the step */
  int of;    /* -1: a copy; else the stream `on` waits for, as it is now */
  void *dst; /* a copy's */
  const void *src;
  size_t bytes;
} chorus_gpu_ce_step;

/* ---- Send/Recv ------------------------------------------------------------ */

/* A Send or Recv as the matching sees it: key 0 for one that may not use
 * the copy engine (it still counts among its rank's calls to that peer,
 * and its buffer may clash with a copy's). */
typedef struct chorus_gpu_ce_call {
  uint64_t key;   /* the communicator's name in this process (0: not a candidate) */
  int rank, peer; /* the caller's rank, and the rank it sends to or receives from */
  int send;       /* 1 Send, 0 Recv */
  size_t bytes;
  const void *buf;
  int stream; /* the call's stream, as an index into the streams a program runs on */
} chorus_gpu_ce_call;

/* Pairs each Send of c[] of at least min_bytes (0: none) with the Recv it
 * matches (the k-th send from rank a to b with b's k-th receive from a,
 * calls of 0 bytes aside), of the same size, whose buffers meet no other
 * call's that the copy would race with (pure): pair[i] gets the partner's
 * index, or -1. Returns the number of pairs. */
size_t chorus_gpu_ce_match(const chorus_gpu_ce_call *c, size_t n, size_t min_bytes, long *pair);
/* The program that moves the pairs (pure): every copy's stream first waits
 * for its receiver's (so that the copies of two GPUs sending to each other
 * run at once), then the copies on the senders' streams, then each
 * receiver's stream waits for the copies into it. out holds 3 steps per
 * pair; returns how many it wrote. */
size_t chorus_gpu_ce_plan_pairs(const chorus_gpu_ce_call *c, size_t n, const long *pair,
                                chorus_gpu_ce_step *out);

/* ---- Broadcast ------------------------------------------------------------ */

typedef struct chorus_gpu_ce_bcast {
  int nranks, root;
  int stream[CHORUS_KERN_MAX_RANKS]; /* each rank's stream (an index) */
  const void *send;                  /* the root's */
  void *recv[CHORUS_KERN_MAX_RANKS];
  size_t bytes;
  size_t chunk; /* bytes per pipelined copy on 3+ ranks (2 ranks: one copy) */
} chorus_gpu_ce_bcast;

/* The program of one Broadcast (pure): a chain from the root through the
 * ranks in order, chunk by chunk, each hop's copy on its receiver's
 * stream, of a chunk after the previous hop's copy of it; each sender's
 * stream then waits for the copies that read its buffer; the root copies
 * send to recv on its own stream when they differ (at the same time as the
 * first hop: nothing of the chain waits for that copy). out NULL: only
 * counts. Returns the number of steps. */
size_t chorus_gpu_ce_plan_bcast(const chorus_gpu_ce_bcast *b, chorus_gpu_ce_step *out);

/* ---- AllGather and AlltoAll ---------------------------------------------- */

typedef struct chorus_gpu_ce_xchg {
  int nranks;
  int alltoall; /* 0: AllGather (rank p's block to every rank); 1: AlltoAll (its block q to q) */
  int stream[CHORUS_KERN_MAX_RANKS]; /* each rank's stream (an index) */
  int side[CHORUS_KERN_MAX_RANKS];   /* a second stream of its GPU (an index; -1: none) */
  const void *send[CHORUS_KERN_MAX_RANKS];
  void *recv[CHORUS_KERN_MAX_RANKS];
  size_t block; /* bytes of one block */
} chorus_gpu_ce_xchg;

/* The program of one AllGather or AlltoAll (pure): each rank's stream
 * waits for every other's, through rank 0's (their inputs are ready);
 * then each pulls the blocks meant for it into block p of its receive
 * buffer, its own first, then rank r's from r+1, r+2, ... (so no rank is
 * read by all at once), the own block on the rank's side stream where it
 * has one (a local copy beside the pulls, joined back after them; on one
 * stream the copies add up: 2xH200, 1 GiB AlltoAll, 1657 us against
 * NCCL's 1617); then each rank's stream waits for every other's again
 * (its input has been read). An AllGather may be in place (send[p]
 * block p of recv[p]: no own copy); an AlltoAll may not (a rank would
 * overwrite blocks its peers still read). out NULL: only counts. Returns
 * the number of steps. */
size_t chorus_gpu_ce_plan_xchg(const chorus_gpu_ce_xchg *x, chorus_gpu_ce_step *out);

/* ---- which collectives (pure) ----------------------------------------------- */

/* The least size at which a collective of function func on nranks GPUs
 * goes on the copy engine, in bytes of its larger buffer: Broadcast
 * CHORUS_GPU_BCAST_CE_BYTES, AllGather and AlltoAll
 * CHORUS_GPU_XCHG_CE_BYTES (t read for nranks: the _PAIR settings on 2
 * GPUs); 0: never (other functions, 1 rank). */
size_t chorus_gpu_ce_coll_min(const chorus_gpu_tune *t, int func, int nranks);
/* Whether a call of func on nranks GPUs moving `bytes` per rank (count
 * times element size) may go on the copy engine as far as its kind, size
 * and settings go: at least the least size, not named by NCCL_ALGO, at
 * most CHORUS_KERN_MAX_RANKS ranks, and no AlltoAll in place (a rank
 * would overwrite blocks its peers still read). */
int chorus_gpu_ce_coll_fits(const chorus_gpu_tune *t, int func, int nranks, size_t bytes,
                            int in_place);
/* Which calls of a group form whole collectives on the copy engine: call
 * i is a candidate (cand[i]) with description desc[i] on nranks[i] ranks,
 * and match[i * CHORUS_KERN_MAX_RANKS + p] is the index of rank p's call
 * of the same collective (-1: none in the group), as
 * chorus_gpu_group_match fills it. A collective goes when every rank's
 * call is in the group, all described alike, one right after another in
 * call order (running them all at the first keeps every GPU's calls in
 * order): lead[i] gets the index of its first call, else -1. Returns
 * how many collectives go. */
size_t chorus_gpu_ce_coll_leads(const uint8_t *cand, const uint64_t *desc, const int *nranks,
                                const int *match, size_t n, long *lead);

/* ---- one group's calls ---------------------------------------------------- */

/* Which Send/Recv of a group's calls (any calls; in call order) pair on
 * the copy engine: a Send/Recv on a communicator whose ranks are all GPUs
 * of this process (peer access), on a stream of its own (not a default
 * stream) that is not being captured, CHORUS_GPU_P2P_CE_BYTES permitting.
 * pair[i] as chorus_gpu_ce_match fills it; returns the number of pairs. */
size_t chorus_gpu_ce_group(chorus_op **ops, size_t n, long *pair);
/* Queues the pairs' program. */
ncclResult_t chorus_gpu_ce_run(chorus_op **ops, size_t n, const long *pair);

/* Which collectives of a group run on the copy engine: Broadcasts of at
 * least CHORUS_GPU_BCAST_CE_BYTES(_PAIR), AllGathers and AlltoAlls (not in
 * place) of at least CHORUS_GPU_XCHG_CE_BYTES(_PAIR), that every rank of their
 * communicator (all GPUs of this process) calls in this group, one after
 * another in call order, on streams of their own not being captured.
 * lead[i]: the index of the first rank's call of i's collective (i itself
 * for that one), or -1. Returns how many collectives. */
size_t chorus_gpu_ce_coll_group(chorus_op **ops, size_t n, long *lead);
/* Queues the program of the collective whose first call is ops[i]. */
ncclResult_t chorus_gpu_ce_coll_run(chorus_op **ops, size_t n, const long *lead, size_t i);

/* Runs a program: stream k is streams[k] on GPU devices[k]. */
ncclResult_t chorus_gpu_ce_exec(const chorus_gpu_ce_step *steps, size_t nsteps,
                                void *const *streams, const int *devices, const char *what);

#endif

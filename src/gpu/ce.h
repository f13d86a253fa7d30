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

/* A Send or Recv of a copy-engine pair (the planner pairs them,
 * plan/plan.h chorus_plan_pair_p2p). */
typedef struct chorus_gpu_ce_call {
  int send; /* 1 Send, 0 Recv */
  size_t bytes;
  const void *buf;
  int stream; /* the call's stream, as an index into the streams a program runs on */
} chorus_gpu_ce_call;

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

/* ---- one group's calls ---------------------------------------------------- */

/* Queues the program of the copy-engine pairs of a group (tasks[i].pair:
 * the partner of Send/Recv i, or -1). */
ncclResult_t chorus_gpu_ce_run(chorus_op **ops, size_t n, const chorus_task *tasks);
/* Queues the program of the collective whose first call is ops[i]
 * (tasks[j].lead == i for each rank's call j of it). */
ncclResult_t chorus_gpu_ce_coll_run(chorus_op **ops, size_t n, const chorus_task *tasks, size_t i);

/* Runs a program: stream k is streams[k] on GPU devices[k]. */
ncclResult_t chorus_gpu_ce_exec(const chorus_gpu_ce_step *steps, size_t nsteps,
                                void *const *streams, const int *devices, const char *what);

#endif

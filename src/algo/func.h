/*
 * func.h - what each collective and point-to-point function is: the one
 * table of function properties (name, whether it has a root or a peer,
 * whether it reduces, how large its buffers are and where they are used,
 * and its in-place layout). Argument checks, planners, cost models, call
 * descriptions and the GPU lowering all read it; nothing else decides
 * these facts.
 */
#ifndef CHORUS_ALGO_FUNC_H
#define CHORUS_ALGO_FUNC_H

#include <stddef.h>
#include <stdint.h>

/* Functions (also the low byte of chorus_msg_meta.call). */
typedef enum {
  CHORUS_FUNC_ALLREDUCE = 1,
  CHORUS_FUNC_BROADCAST,
  CHORUS_FUNC_REDUCE,
  CHORUS_FUNC_ALLGATHER,
  CHORUS_FUNC_REDUCESCATTER,
  CHORUS_FUNC_ALLTOALL,
  CHORUS_FUNC_GATHER,
  CHORUS_FUNC_SCATTER,
  CHORUS_FUNC_SEND,
  CHORUS_FUNC_RECV,
  CHORUS_FUNC_COUNT
} chorus_func;

/* Where a buffer is used. */
enum {
  CHORUS_BUF_NONE = 0, /* never */
  CHORUS_BUF_ALL,      /* on every rank */
  CHORUS_BUF_ROOT      /* on the root only */
};

/* The in-place form NCCL defines: which buffer lies inside the other, at
 * which block. */
enum {
  CHORUS_INPLACE_NONE = 0,     /* no in-place form (Send, Recv) */
  CHORUS_INPLACE_SAME,         /* sendbuff == recvbuff */
  CHORUS_INPLACE_SEND_AT_RANK, /* sendbuff == recvbuff + rank * count */
  CHORUS_INPLACE_RECV_AT_RANK, /* recvbuff == sendbuff + rank * count */
  CHORUS_INPLACE_SEND_AT_ROOT, /* sendbuff == recvbuff + root * count */
  CHORUS_INPLACE_RECV_AT_ROOT  /* recvbuff == sendbuff + root * count */
};

typedef struct chorus_func_info {
  const char *name; /* "AllReduce" */
  const char *key;  /* NCCL_ALGO and CHORUS_TUNE spelling: "allreduce" */
  uint8_t rooted;   /* takes a root */
  uint8_t p2p;      /* Send or Recv: takes a peer */
  uint8_t reduces;  /* applies a reduction operator */
  /* Counts per buffer: 1 (count elements) or nranks (CHORUS_FUNC_N). */
  uint8_t send_blocks, recv_blocks;
  uint8_t send_where, recv_where; /* CHORUS_BUF_* */
  uint8_t inplace;                /* CHORUS_INPLACE_* */
} chorus_func_info;
#define CHORUS_FUNC_N 0xff /* a buffer of nranks blocks */

/* The table entry of func, or NULL outside 1..CHORUS_FUNC_COUNT-1. */
const chorus_func_info *chorus_func_get(int func);
const char *chorus_func_name(int func); /* "AllReduce", "?" when unknown */
/* NCCL's code for func (ncclFunc_t: Broadcast 0, Reduce 1, AllGather 2,
 * ReduceScatter 3, AllReduce 4, SendRecv 5, Send 6, Recv 7), as its
 * plugins see it; AlltoAll, Gather and Scatter, which NCCL runs as Sends
 * and Recvs, are SendRecv. */
int chorus_func_nccl_code(int func);
/* The table's flags by function (0 when unknown). */
int chorus_func_rooted(int func);  /* takes a root */
int chorus_func_p2p(int func);     /* Send or Recv: takes a peer */
int chorus_func_reduces(int func); /* applies a reduction operator */
/* The function NCCL_ALGO / CHORUS_TUNE spell `key` (case-insensitive; "sendrecv" is
 * Send), or 0. */
int chorus_func_by_key(const char *key, size_t len);
/* The bit of func in a function mask; Send and Recv share one. */
#define CHORUS_FUNC_BIT(func) (1u << ((func) == CHORUS_FUNC_RECV ? CHORUS_FUNC_SEND : (func)))
static inline uint32_t chorus_func_bit(int func) {
  return CHORUS_FUNC_BIT(func);
}
#define CHORUS_FUNC_ALL_COLLS 0x1feu /* AllReduce..Scatter */
#define CHORUS_FUNC_ALL       0x3feu /* and Send/Recv */

/* Elements of each buffer rank `rank` of n touches in a call of `count`
 * elements with root `root` (0: unused there). */
size_t chorus_func_send_elems(int func, size_t count, int rank, int root, int n);
size_t chorus_func_recv_elems(int func, size_t count, int rank, int root, int n);
/* Elements of rank's input that other ranks read: its send elements but
 * where the root alone receives (Reduce, Gather), whose own block stays
 * with it. What a one-shot writes for its peers. */
size_t chorus_func_shared_elems(int func, size_t count, int rank, int root, int n);
/* Bytes of the larger buffer: the size nccl-tests reports and the size
 * rules and cost models are stated in (count x element size, times n
 * where a buffer is n blocks). */
size_t chorus_func_size(int func, size_t count, size_t esize, int n);
/* nccl-tests' bus bandwidth factor: bus bandwidth = that size / time x
 * this (2(n-1)/n for AllReduce; (n-1)/n where each rank's block goes to
 * the others; 1 for Broadcast, Reduce and Send/Recv). */
double chorus_func_bus_factor(int func, int n);
/* Bytes of output one rank writes where its output is used everywhere
 * (the root's for Gather), for choosing how to store it. */
size_t chorus_func_out_bytes(int func, size_t count, size_t esize, int n);

#endif

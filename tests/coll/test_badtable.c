/*
 * test_badtable.c - the bad-argument table: every public function the host
 * build runs, against every class of bad argument that applies to it (a
 * NULL or destroyed communicator, NULL buffers and output pointers, counts
 * that overflow, unknown types, operators and flags, roots and peers out of
 * range, overlapping buffers, an uninitialised config). Each case runs in a
 * process of its own with a deadline, on a fresh one-rank communicator, so
 * that a crash or a hang is counted instead of ending the table. A case
 * passes when the call returns its expected ncclResult_t and the last error
 * names the argument (the word given).
 *
 * usage: test_badtable [-v]   (-v: a line per case)
 * Prints "badtable: N cases, P right, C crashes, H hangs, W wrong" and
 * exits 0 when every case passed.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define LIMIT_MS 10000 /* a case that takes longer hangs */
#define BUF      4096

typedef struct ctx {
  ncclComm_t comm; /* a live communicator of one rank */
  ncclComm_t dead; /* one destroyed before the call */
  float *a, *b;    /* BUF floats each */
} ctx;

/* X(id, function, class, expected code, word the message must hold, call) */
#define COLL_CASES(X)                                                                              \
  X(ar_null_comm, "ncclAllReduce", "NULL comm", ncclInvalidArgument, "comm is NULL",               \
    ncclAllReduce(x->a, x->b, 4, ncclFloat, ncclSum, NULL, NULL))                                  \
  X(ar_dead_comm, "ncclAllReduce", "destroyed comm", ncclInvalidArgument, "not a valid",           \
    ncclAllReduce(x->a, x->b, 4, ncclFloat, ncclSum, x->dead, NULL))                               \
  X(ar_null_send, "ncclAllReduce", "NULL buffer", ncclInvalidArgument, "sendbuff",                 \
    ncclAllReduce(NULL, x->b, 4, ncclFloat, ncclSum, x->comm, NULL))                               \
  X(ar_null_recv, "ncclAllReduce", "NULL buffer", ncclInvalidArgument, "recvbuff",                 \
    ncclAllReduce(x->a, NULL, 4, ncclFloat, ncclSum, x->comm, NULL))                               \
  X(ar_count, "ncclAllReduce", "count overflows", ncclInvalidArgument, "count",                    \
    ncclAllReduce(x->a, x->b, SIZE_MAX / 2, ncclFloat, ncclSum, x->comm, NULL))                    \
  X(ar_type, "ncclAllReduce", "unknown type", ncclInvalidArgument, "datatype",                     \
    ncclAllReduce(x->a, x->b, 4, (ncclDataType_t)99, ncclSum, x->comm, NULL))                      \
  X(ar_op, "ncclAllReduce", "unknown op", ncclInvalidArgument, "op",                               \
    ncclAllReduce(x->a, x->b, 4, ncclFloat, (ncclRedOp_t)77, x->comm, NULL))                       \
  X(ar_overlap, "ncclAllReduce", "overlapping buffers", ncclInvalidArgument, "overlap",            \
    ncclAllReduce(x->a, x->a + 1, 8, ncclFloat, ncclSum, x->comm, NULL))                           \
  X(ag_null_comm, "ncclAllGather", "NULL comm", ncclInvalidArgument, "comm is NULL",               \
    ncclAllGather(x->a, x->b, 4, ncclFloat, NULL, NULL))                                           \
  X(ag_dead_comm, "ncclAllGather", "destroyed comm", ncclInvalidArgument, "not a valid",           \
    ncclAllGather(x->a, x->b, 4, ncclFloat, x->dead, NULL))                                        \
  X(ag_null_send, "ncclAllGather", "NULL buffer", ncclInvalidArgument, "sendbuff",                 \
    ncclAllGather(NULL, x->b, 4, ncclFloat, x->comm, NULL))                                        \
  X(ag_null_recv, "ncclAllGather", "NULL buffer", ncclInvalidArgument, "recvbuff",                 \
    ncclAllGather(x->a, NULL, 4, ncclFloat, x->comm, NULL))                                        \
  X(ag_count, "ncclAllGather", "count overflows", ncclInvalidArgument, "count",                    \
    ncclAllGather(x->a, x->b, SIZE_MAX / 2, ncclFloat, x->comm, NULL))                             \
  X(ag_type, "ncclAllGather", "unknown type", ncclInvalidArgument, "datatype",                     \
    ncclAllGather(x->a, x->b, 4, (ncclDataType_t)-1, x->comm, NULL))                               \
  X(ag_overlap, "ncclAllGather", "overlapping buffers", ncclInvalidArgument, "overlap",            \
    ncclAllGather(x->a + 1, x->a, 4, ncclFloat, x->comm, NULL))                                    \
  X(rs_null_comm, "ncclReduceScatter", "NULL comm", ncclInvalidArgument, "comm is NULL",           \
    ncclReduceScatter(x->a, x->b, 4, ncclFloat, ncclSum, NULL, NULL))                              \
  X(rs_dead_comm, "ncclReduceScatter", "destroyed comm", ncclInvalidArgument, "not a valid",       \
    ncclReduceScatter(x->a, x->b, 4, ncclFloat, ncclSum, x->dead, NULL))                           \
  X(rs_null_send, "ncclReduceScatter", "NULL buffer", ncclInvalidArgument, "sendbuff",             \
    ncclReduceScatter(NULL, x->b, 4, ncclFloat, ncclSum, x->comm, NULL))                           \
  X(rs_count, "ncclReduceScatter", "count overflows", ncclInvalidArgument, "count",                \
    ncclReduceScatter(x->a, x->b, SIZE_MAX / 2, ncclFloat, ncclSum, x->comm, NULL))                \
  X(rs_type, "ncclReduceScatter", "unknown type", ncclInvalidArgument, "datatype",                 \
    ncclReduceScatter(x->a, x->b, 4, (ncclDataType_t)12, ncclSum, x->comm, NULL))                  \
  X(rs_op, "ncclReduceScatter", "unknown op", ncclInvalidArgument, "op",                           \
    ncclReduceScatter(x->a, x->b, 4, ncclFloat, (ncclRedOp_t)-1, x->comm, NULL))                   \
  X(rs_overlap, "ncclReduceScatter", "overlapping buffers", ncclInvalidArgument, "overlap",        \
    ncclReduceScatter(x->a, x->a + 1, 4, ncclFloat, ncclSum, x->comm, NULL))                       \
  X(re_null_comm, "ncclReduce", "NULL comm", ncclInvalidArgument, "comm is NULL",                  \
    ncclReduce(x->a, x->b, 4, ncclFloat, ncclSum, 0, NULL, NULL))                                  \
  X(re_dead_comm, "ncclReduce", "destroyed comm", ncclInvalidArgument, "not a valid",              \
    ncclReduce(x->a, x->b, 4, ncclFloat, ncclSum, 0, x->dead, NULL))                               \
  X(re_null_send, "ncclReduce", "NULL buffer", ncclInvalidArgument, "sendbuff",                    \
    ncclReduce(NULL, x->b, 4, ncclFloat, ncclSum, 0, x->comm, NULL))                               \
  X(re_count, "ncclReduce", "count overflows", ncclInvalidArgument, "count",                       \
    ncclReduce(x->a, x->b, SIZE_MAX / 2, ncclFloat, ncclSum, 0, x->comm, NULL))                    \
  X(re_type, "ncclReduce", "unknown type", ncclInvalidArgument, "datatype",                        \
    ncclReduce(x->a, x->b, 4, (ncclDataType_t)99, ncclSum, 0, x->comm, NULL))                      \
  X(re_op, "ncclReduce", "unknown op", ncclInvalidArgument, "op",                                  \
    ncclReduce(x->a, x->b, 4, ncclFloat, (ncclRedOp_t)77, 0, x->comm, NULL))                       \
  X(re_root, "ncclReduce", "root out of range", ncclInvalidArgument, "root",                       \
    ncclReduce(x->a, x->b, 4, ncclFloat, ncclSum, 1, x->comm, NULL))                               \
  X(re_root_neg, "ncclReduce", "root out of range", ncclInvalidArgument, "root",                   \
    ncclReduce(x->a, x->b, 4, ncclFloat, ncclSum, -1, x->comm, NULL))                              \
  X(re_overlap, "ncclReduce", "overlapping buffers", ncclInvalidArgument, "overlap",               \
    ncclReduce(x->a, x->a + 1, 8, ncclFloat, ncclSum, 0, x->comm, NULL))                           \
  X(bc_null_comm, "ncclBroadcast", "NULL comm", ncclInvalidArgument, "comm is NULL",               \
    ncclBroadcast(x->a, x->b, 4, ncclFloat, 0, NULL, NULL))                                        \
  X(bc_dead_comm, "ncclBroadcast", "destroyed comm", ncclInvalidArgument, "not a valid",           \
    ncclBroadcast(x->a, x->b, 4, ncclFloat, 0, x->dead, NULL))                                     \
  X(bc_null_recv, "ncclBroadcast", "NULL buffer", ncclInvalidArgument, "recvbuff",                 \
    ncclBroadcast(x->a, NULL, 4, ncclFloat, 0, x->comm, NULL))                                     \
  X(bc_count, "ncclBroadcast", "count overflows", ncclInvalidArgument, "count",                    \
    ncclBroadcast(x->a, x->b, SIZE_MAX / 2, ncclFloat, 0, x->comm, NULL))                          \
  X(bc_type, "ncclBroadcast", "unknown type", ncclInvalidArgument, "datatype",                     \
    ncclBroadcast(x->a, x->b, 4, (ncclDataType_t)99, 0, x->comm, NULL))                            \
  X(bc_root, "ncclBroadcast", "root out of range", ncclInvalidArgument, "root",                    \
    ncclBroadcast(x->a, x->b, 4, ncclFloat, 5, x->comm, NULL))                                     \
  X(bc_overlap, "ncclBroadcast", "overlapping buffers", ncclInvalidArgument, "overlap",            \
    ncclBroadcast(x->a, x->a + 1, 8, ncclFloat, 0, x->comm, NULL))                                 \
  X(bcast_null_comm, "ncclBcast", "NULL comm", ncclInvalidArgument, "comm is NULL",                \
    ncclBcast(x->a, 4, ncclFloat, 0, NULL, NULL))                                                  \
  X(bcast_null_buf, "ncclBcast", "NULL buffer", ncclInvalidArgument, "buff",                       \
    ncclBcast(NULL, 4, ncclFloat, 0, x->comm, NULL))                                               \
  X(bcast_root, "ncclBcast", "root out of range", ncclInvalidArgument, "root",                     \
    ncclBcast(x->a, 4, ncclFloat, -3, x->comm, NULL))                                              \
  X(a2a_null_comm, "ncclAlltoAll", "NULL comm", ncclInvalidArgument, "comm is NULL",               \
    ncclAlltoAll(x->a, x->b, 4, ncclFloat, NULL, NULL))                                            \
  X(a2a_dead_comm, "ncclAlltoAll", "destroyed comm", ncclInvalidArgument, "not a valid",           \
    ncclAlltoAll(x->a, x->b, 4, ncclFloat, x->dead, NULL))                                         \
  X(a2a_null_send, "ncclAlltoAll", "NULL buffer", ncclInvalidArgument, "sendbuff",                 \
    ncclAlltoAll(NULL, x->b, 4, ncclFloat, x->comm, NULL))                                         \
  X(a2a_count, "ncclAlltoAll", "count overflows", ncclInvalidArgument, "count",                    \
    ncclAlltoAll(x->a, x->b, SIZE_MAX / 2, ncclFloat, x->comm, NULL))                              \
  X(a2a_type, "ncclAlltoAll", "unknown type", ncclInvalidArgument, "datatype",                     \
    ncclAlltoAll(x->a, x->b, 4, (ncclDataType_t)99, x->comm, NULL))                                \
  X(a2a_overlap, "ncclAlltoAll", "overlapping buffers", ncclInvalidArgument, "overlap",            \
    ncclAlltoAll(x->a, x->a + 1, 4, ncclFloat, x->comm, NULL))                                     \
  X(ga_null_comm, "ncclGather", "NULL comm", ncclInvalidArgument, "comm is NULL",                  \
    ncclGather(x->a, x->b, 4, ncclFloat, 0, NULL, NULL))                                           \
  X(ga_null_send, "ncclGather", "NULL buffer", ncclInvalidArgument, "sendbuff",                    \
    ncclGather(NULL, x->b, 4, ncclFloat, 0, x->comm, NULL))                                        \
  X(ga_root, "ncclGather", "root out of range", ncclInvalidArgument, "root",                       \
    ncclGather(x->a, x->b, 4, ncclFloat, 1, x->comm, NULL))                                        \
  X(ga_type, "ncclGather", "unknown type", ncclInvalidArgument, "datatype",                        \
    ncclGather(x->a, x->b, 4, (ncclDataType_t)99, 0, x->comm, NULL))                               \
  X(sc_null_comm, "ncclScatter", "NULL comm", ncclInvalidArgument, "comm is NULL",                 \
    ncclScatter(x->a, x->b, 4, ncclFloat, 0, NULL, NULL))                                          \
  X(sc_null_recv, "ncclScatter", "NULL buffer", ncclInvalidArgument, "recvbuff",                   \
    ncclScatter(x->a, NULL, 4, ncclFloat, 0, x->comm, NULL))                                       \
  X(sc_root, "ncclScatter", "root out of range", ncclInvalidArgument, "root",                      \
    ncclScatter(x->a, x->b, 4, ncclFloat, -1, x->comm, NULL))                                      \
  X(sc_count, "ncclScatter", "count overflows", ncclInvalidArgument, "count",                      \
    ncclScatter(x->a, x->b, SIZE_MAX / 2, ncclFloat, 0, x->comm, NULL))                            \
  X(send_null_comm, "ncclSend", "NULL comm", ncclInvalidArgument, "comm is NULL",                  \
    ncclSend(x->a, 4, ncclFloat, 0, NULL, NULL))                                                   \
  X(send_dead_comm, "ncclSend", "destroyed comm", ncclInvalidArgument, "not a valid",              \
    ncclSend(x->a, 4, ncclFloat, 0, x->dead, NULL))                                                \
  X(send_null_buf, "ncclSend", "NULL buffer", ncclInvalidArgument, "sendbuff",                     \
    ncclSend(NULL, 4, ncclFloat, 0, x->comm, NULL))                                                \
  X(send_peer, "ncclSend", "peer out of range", ncclInvalidArgument, "peer",                       \
    ncclSend(x->a, 4, ncclFloat, 1, x->comm, NULL))                                                \
  X(send_type, "ncclSend", "unknown type", ncclInvalidArgument, "datatype",                        \
    ncclSend(x->a, 4, (ncclDataType_t)99, 0, x->comm, NULL))                                       \
  X(send_count, "ncclSend", "count overflows", ncclInvalidArgument, "count",                       \
    ncclSend(x->a, SIZE_MAX / 2, ncclFloat, 0, x->comm, NULL))                                     \
  X(recv_null_comm, "ncclRecv", "NULL comm", ncclInvalidArgument, "comm is NULL",                  \
    ncclRecv(x->a, 4, ncclFloat, 0, NULL, NULL))                                                   \
  X(recv_null_buf, "ncclRecv", "NULL buffer", ncclInvalidArgument, "recvbuff",                     \
    ncclRecv(NULL, 4, ncclFloat, 0, x->comm, NULL))                                                \
  X(recv_peer, "ncclRecv", "peer out of range", ncclInvalidArgument, "peer",                       \
    ncclRecv(x->a, 4, ncclFloat, -2, x->comm, NULL))                                               \
  X(recv_type, "ncclRecv", "unknown type", ncclInvalidArgument, "datatype",                        \
    ncclRecv(x->a, 4, (ncclDataType_t)-7, 0, x->comm, NULL))

static ncclResult_t split_bad_color(ctx *x) {
  ncclComm_t c = NULL;
  return ncclCommSplit(x->comm, -5, 0, &c, NULL);
}
/* A fresh unique id for the init cases (their rank is alone). */
static ncclUniqueId fresh_id(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  (void)ncclGetUniqueId(&id);
  return id;
}
static ncclResult_t init_config_garbage(ctx *x) {
  (void)x;
  ncclComm_t c = NULL;
  ncclConfig_t cfg;
  memset(&cfg, 0x5a, sizeof cfg); /* never NCCL_CONFIG_INITIALIZER */
  return ncclCommInitRankConfig(&c, 1, fresh_id(), 0, &cfg);
}
static ncclResult_t init_rank_range(ctx *x) {
  (void)x;
  return ncclCommInitRank(&(ncclComm_t){NULL}, 2, fresh_id(), 2);
}
static ncclResult_t init_nranks(ctx *x) {
  (void)x;
  return ncclCommInitRank(&(ncclComm_t){NULL}, 0, fresh_id(), 0);
}
static ncclResult_t init_scalable_none(ctx *x) {
  (void)x;
  ncclUniqueId id = fresh_id();
  return ncclCommInitRankScalable(&(ncclComm_t){NULL}, 1, 0, 0, &id, NULL);
}
static ncclResult_t dereg_twice(ctx *x) {
  void *h = NULL;
  if (ncclCommRegister(x->comm, x->a, BUF * sizeof(float), &h) != ncclSuccess ||
      ncclCommDeregister(x->comm, h) != ncclSuccess)
    return ncclInternalError;
  return ncclCommDeregister(x->comm, h);
}
static ncclResult_t destroy_twice(ctx *x) {
  return ncclCommDestroy(x->dead);
}
static ncclResult_t premul_bad_type(ctx *x) {
  ncclRedOp_t op;
  float s = 2;
  return ncclRedOpCreatePreMulSum(&op, &s, (ncclDataType_t)99, ncclScalarHostImmediate, x->comm);
}
static ncclResult_t redop_not_created(ctx *x) {
  return ncclRedOpDestroy((ncclRedOp_t)(ncclNumOps + 3), x->comm);
}
static ncclResult_t simulate_garbage(ctx *x) {
  (void)x;
  ncclSimInfo_t sim;
  memset(&sim, 0, sizeof sim);
  ncclGroupStart();
  ncclResult_t r = ncclGroupSimulateEnd(&sim);
  ncclGroupEnd();
  return r;
}
static ncclResult_t simulate_null(ctx *x) {
  (void)x;
  ncclGroupStart();
  ncclResult_t r = ncclGroupSimulateEnd(NULL);
  ncclGroupEnd();
  return r;
}
static ncclResult_t group_end_unopened(ctx *x) {
  (void)x;
  return ncclGroupEnd();
}
static ncclResult_t destroy_in_group(ctx *x) {
  ncclGroupStart();
  ncclResult_t r = ncclAllReduce(x->a, x->a, 4, ncclFloat, ncclSum, x->comm, NULL);
  if (r == ncclSuccess) r = ncclCommDestroy(x->comm);
  ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

#define OTHER_CASES(X)                                                                             \
  X(count_null_out, "ncclCommCount", "NULL output", ncclInvalidArgument, "count",                  \
    ncclCommCount(x->comm, NULL))                                                                  \
  X(count_dead, "ncclCommCount", "destroyed comm", ncclInvalidArgument, "not a valid",             \
    ncclCommCount(x->dead, &(int){0}))                                                             \
  X(userrank_null_out, "ncclCommUserRank", "NULL output", ncclInvalidArgument, "rank",             \
    ncclCommUserRank(x->comm, NULL))                                                               \
  X(userrank_null_comm, "ncclCommUserRank", "NULL comm", ncclInvalidArgument, "comm is NULL",      \
    ncclCommUserRank(NULL, &(int){0}))                                                             \
  X(cudev_null_out, "ncclCommCuDevice", "NULL output", ncclInvalidArgument, "device",              \
    ncclCommCuDevice(x->comm, NULL))                                                               \
  X(cudev_dead, "ncclCommCuDevice", "destroyed comm", ncclInvalidArgument, "not a valid",          \
    ncclCommCuDevice(x->dead, &(int){0}))                                                          \
  X(async_null_out, "ncclCommGetAsyncError", "NULL output", ncclInvalidArgument, "asyncError",     \
    ncclCommGetAsyncError(x->comm, NULL))                                                          \
  X(async_dead, "ncclCommGetAsyncError", "destroyed comm", ncclInvalidArgument, "not a valid",     \
    ncclCommGetAsyncError(x->dead, &(ncclResult_t){ncclSuccess}))                                  \
  X(finalize_null, "ncclCommFinalize", "NULL comm", ncclInvalidArgument, "comm is NULL",           \
    ncclCommFinalize(NULL))                                                                        \
  X(finalize_dead, "ncclCommFinalize", "destroyed comm", ncclInvalidArgument, "not a valid",       \
    ncclCommFinalize(x->dead))                                                                     \
  X(destroy_dead, "ncclCommDestroy", "destroyed comm (twice)", ncclInvalidArgument, "not a valid", \
    destroy_twice(x))                                                                              \
  X(destroy_group, "ncclCommDestroy", "inside a group with its calls", ncclInvalidUsage, "group",  \
    destroy_in_group(x))                                                                           \
  X(abort_dead, "ncclCommAbort", "destroyed comm", ncclInvalidArgument, "not a valid",             \
    ncclCommAbort(x->dead))                                                                        \
  X(revoke_flags, "ncclCommRevoke", "unknown flags", ncclInvalidArgument, "revokeFlags",           \
    ncclCommRevoke(x->comm, 77))                                                                   \
  X(revoke_null, "ncclCommRevoke", "NULL comm", ncclInvalidArgument, "comm is NULL",               \
    ncclCommRevoke(NULL, 0))                                                                       \
  X(split_null_out, "ncclCommSplit", "NULL output", ncclInvalidArgument, "newcomm",                \
    ncclCommSplit(x->comm, 0, 0, NULL, NULL))                                                      \
  X(split_color, "ncclCommSplit", "color out of range", ncclInvalidArgument, "color",              \
    split_bad_color(x))                                                                            \
  X(split_dead, "ncclCommSplit", "destroyed comm", ncclInvalidArgument, "not a valid",             \
    ncclCommSplit(x->dead, 0, 0, &(ncclComm_t){NULL}, NULL))                                       \
  X(shrink_null_list, "ncclCommShrink", "NULL buffer", ncclInvalidArgument, "excludeRanksCount",   \
    ncclCommShrink(x->comm, NULL, 1, &(ncclComm_t){NULL}, NULL, 0))                                \
  X(shrink_rank, "ncclCommShrink", "rank out of range", ncclInvalidArgument, "exclude",            \
    ncclCommShrink(x->comm, (int[]){7}, 1, &(ncclComm_t){NULL}, NULL, 0))                          \
  X(reg_null_comm, "ncclCommRegister", "NULL comm", ncclInvalidArgument, "comm is NULL",           \
    ncclCommRegister(NULL, x->a, 64, &(void *){NULL}))                                             \
  X(reg_null_buf, "ncclCommRegister", "NULL buffer", ncclInvalidArgument, "buff",                  \
    ncclCommRegister(x->comm, NULL, 64, &(void *){NULL}))                                          \
  X(reg_null_out, "ncclCommRegister", "NULL output", ncclInvalidArgument, "handle",                \
    ncclCommRegister(x->comm, x->a, 64, NULL))                                                     \
  X(reg_size, "ncclCommRegister", "size overflows", ncclInvalidArgument, "size",                   \
    ncclCommRegister(x->comm, x->a, SIZE_MAX, &(void *){NULL}))                                    \
  X(dereg_freed, "ncclCommDeregister", "handle freed", ncclInvalidArgument, "not registered",      \
    dereg_twice(x))                                                                                \
  X(dereg_bogus, "ncclCommDeregister", "unknown handle", ncclInvalidArgument, "not registered",    \
    ncclCommDeregister(x->comm, x->b))                                                             \
  X(win_null_out, "ncclCommWindowRegister", "NULL output", ncclInvalidArgument, "win",             \
    ncclCommWindowRegister(x->comm, x->a, 64, NULL, 0))                                            \
  X(win_null_buf, "ncclCommWindowRegister", "NULL buffer", ncclInvalidArgument, "buff",            \
    ncclCommWindowRegister(x->comm, NULL, 64, &(ncclWindow_t){NULL}, 0))                           \
  X(win_flags, "ncclCommWindowRegister", "unknown flags", ncclInvalidArgument, "winFlags",         \
    ncclCommWindowRegister(x->comm, x->a, 64, &(ncclWindow_t){NULL}, 0x7000))                      \
  X(windereg_null, "ncclCommWindowDeregister", "NULL window", ncclInvalidArgument, "win",          \
    ncclCommWindowDeregister(x->comm, NULL))                                                       \
  X(init_null_out, "ncclCommInitRank", "NULL output", ncclInvalidArgument, "output pointer",       \
    ncclCommInitRank(NULL, 1, (ncclUniqueId){{0}}, 0))                                             \
  X(init_zero_ranks, "ncclCommInitRank", "nranks out of range", ncclInvalidArgument, "nranks",     \
    init_nranks(x))                                                                                \
  X(init_rank, "ncclCommInitRank", "rank out of range", ncclInvalidArgument, "rank = 2",           \
    init_rank_range(x))                                                                            \
  X(init_config, "ncclCommInitRankConfig", "uninitialised config", ncclInvalidArgument,            \
    "NCCL_CONFIG_INITIALIZER", init_config_garbage(x))                                             \
  X(init_scalable, "ncclCommInitRankScalable", "no ids", ncclInvalidArgument, "nId",               \
    init_scalable_none(x))                                                                         \
  X(initall_null, "ncclCommInitAll", "NULL output", ncclInvalidArgument, "comm array",             \
    ncclCommInitAll(NULL, 1, NULL))                                                                \
  X(initall_ndev, "ncclCommInitAll", "count out of range", ncclInvalidArgument, "ndev",            \
    ncclCommInitAll(&(ncclComm_t){NULL}, -1, NULL))                                                \
  X(uid_null, "ncclGetUniqueId", "NULL output", ncclInvalidArgument, "uniqueId",                   \
    ncclGetUniqueId(NULL))                                                                         \
  X(version_null, "ncclGetVersion", "NULL output", ncclInvalidArgument, "version",                 \
    ncclGetVersion(NULL))                                                                          \
  X(premul_null_out, "ncclRedOpCreatePreMulSum", "NULL output", ncclInvalidArgument, "op",         \
    ncclRedOpCreatePreMulSum(NULL, &(float){2}, ncclFloat, ncclScalarHostImmediate, x->comm))      \
  X(premul_null_scalar, "ncclRedOpCreatePreMulSum", "NULL buffer", ncclInvalidArgument, "scalar",  \
    ncclRedOpCreatePreMulSum(&(ncclRedOp_t){ncclSum}, NULL, ncclFloat, ncclScalarHostImmediate,    \
                             x->comm))                                                             \
  X(premul_type, "ncclRedOpCreatePreMulSum", "unknown type", ncclInvalidArgument, "datatype",      \
    premul_bad_type(x))                                                                            \
  X(premul_residence, "ncclRedOpCreatePreMulSum", "unknown flags", ncclInvalidArgument,            \
    "residence",                                                                                   \
    ncclRedOpCreatePreMulSum(&(ncclRedOp_t){ncclSum}, &(float){2}, ncclFloat,                      \
                             (ncclScalarResidence_t)9, x->comm))                                   \
  X(premul_dead, "ncclRedOpCreatePreMulSum", "destroyed comm", ncclInvalidArgument, "not a valid", \
    ncclRedOpCreatePreMulSum(&(ncclRedOp_t){ncclSum}, &(float){2}, ncclFloat,                      \
                             ncclScalarHostImmediate, x->dead))                                    \
  X(opdestroy_builtin, "ncclRedOpDestroy", "built-in op", ncclInvalidArgument, "built-in",         \
    ncclRedOpDestroy(ncclSum, x->comm))                                                            \
  X(opdestroy_unknown, "ncclRedOpDestroy", "op never created", ncclInvalidArgument, "not created", \
    redop_not_created(x))                                                                          \
  X(memalloc_null, "ncclMemAlloc", "NULL output", ncclInvalidArgument, "ptr",                      \
    ncclMemAlloc(NULL, 64))                                                                        \
  X(simulate_no_info, "ncclGroupSimulateEnd", "NULL output", ncclInvalidArgument, "simInfo",       \
    simulate_null(x))                                                                              \
  X(simulate_init, "ncclGroupSimulateEnd", "uninitialised struct", ncclInvalidArgument,            \
    "NCCL_SIM_INFO_INITIALIZER", simulate_garbage(x))                                              \
  X(groupend_unopened, "ncclGroupEnd", "no group open", ncclInvalidUsage, "without a matching",    \
    group_end_unopened(x))                                                                         \
  X(errstr_unknown, "ncclGetErrorString", "unknown code", ncclSuccess, NULL,                       \
    ncclGetErrorString((ncclResult_t)999) ? ncclSuccess : ncclInternalError)

#define ALL_CASES(X) COLL_CASES(X) OTHER_CASES(X)

#define DEFINE(id, fn, cls, want, word, call)                                                      \
  static ncclResult_t id(ctx *x) {                                                                 \
    (void)x;                                                                                       \
    return call;                                                                                   \
  }
ALL_CASES(DEFINE)

typedef struct bcase {
  const char *id, *fn, *cls;
  ncclResult_t want;
  const char *word;
  ncclResult_t (*call)(ctx *x);
} bcase;

#define ROW(id, fn, cls, want, word, call) {#id, fn, cls, want, word, id},
static const bcase table[] = {ALL_CASES(ROW)};

/* What a case's process reports back. */
typedef struct outcome {
  int ran;
  ncclResult_t got;
  char msg[240];
} outcome;

static int child(const bcase *b, outcome *o) {
  ctx x = {0};
  ncclUniqueId id, id2;
  x.a = calloc(BUF, sizeof(float));
  x.b = calloc(BUF, sizeof(float));
  if (!x.a || !x.b || ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&x.comm, 1, id, 0) != ncclSuccess || ncclGetUniqueId(&id2) != ncclSuccess ||
      ncclCommInitRank(&x.dead, 1, id2, 0) != ncclSuccess || ncclCommDestroy(x.dead) != ncclSuccess)
    return 3;
  o->got = b->call(&x);
  const char *m = ncclGetLastError(NULL);
  snprintf(o->msg, sizeof o->msg, "%s", m ? m : "");
  o->ran = 1;
  return 0;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
  const int verbose = argc > 1 && !strcmp(argv[1], "-v");
  const size_t n = sizeof table / sizeof table[0];
  outcome *o = mmap(NULL, sizeof *o, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (o == MAP_FAILED) return 2;
  int right = 0, crashes = 0, hangs = 0, wrong = 0;
  for (size_t i = 0; i < n; i++) {
    const bcase *b = &table[i];
    memset(o, 0, sizeof *o);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) _exit(child(b, o));
    int status = 0, done = 0;
    for (const int64_t end = now_ms() + LIMIT_MS; !done && now_ms() < end;) {
      done = waitpid(pid, &status, WNOHANG) == pid;
      if (!done) usleep(2000);
    }
    const char *verdict;
    if (!done) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      hangs++;
      verdict = "HANG";
    } else if (WIFSIGNALED(status)) {
      crashes++;
      verdict = "CRASH";
    } else if (!o->ran) {
      wrong++;
      verdict = "SETUP FAILED";
    } else if (o->got != b->want || (b->word && !strstr(o->msg, b->word))) {
      wrong++;
      verdict = "WRONG";
    } else {
      right++;
      verdict = "ok";
    }
    if (verbose || strcmp(verdict, "ok"))
      printf("%-5s %-26s %-30s got %d (want %d): %s\n", verdict, b->fn, b->cls, (int)o->got,
             (int)b->want, o->msg);
  }
  printf("badtable: %zu cases, %d right, %d crashes, %d hangs, %d wrong\n", n, right, crashes,
         hangs, wrong);
  return right == (int)n ? 0 : 1;
}

/*
 * coll_entry.c - the collective and point-to-point entry points, each a
 * call of chorus_enqueue_call (coll_api.h). In a file of their own: the
 * build keeps files that define entry points out of link-time
 * optimisation (which would make their weak aliases strong), and the
 * work behind them stays in.
 */
#include "algo/func.h"
#include "core/api.h"
#include "core/coll_api.h"

NCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclAllReduce", CHORUS_FUNC_ALLREDUCE, sendbuff, recvbuff,
                             count, datatype, 1, op, -1, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclBroadcast", CHORUS_FUNC_BROADCAST, sendbuff, recvbuff,
                             count, datatype, 0, ncclSum, root, stream);
}

NCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclBcast", CHORUS_FUNC_BROADCAST, buff, buff, count, datatype,
                             0, ncclSum, root, stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclReduce", CHORUS_FUNC_REDUCE, sendbuff, recvbuff, count,
                             datatype, 1, op, root, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclAllGather", CHORUS_FUNC_ALLGATHER, sendbuff, recvbuff,
                             sendcount, datatype, 0, ncclSum, -1, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclReduceScatter", CHORUS_FUNC_REDUCESCATTER, sendbuff,
                             recvbuff, recvcount, datatype, 1, op, -1, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclAlltoAll", CHORUS_FUNC_ALLTOALL, sendbuff, recvbuff, count,
                             datatype, 0, ncclSum, -1, stream);
}

NCCL_API(ncclResult_t, ncclGather, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclGather", CHORUS_FUNC_GATHER, sendbuff, recvbuff, count,
                             datatype, 0, ncclSum, root, stream);
}

NCCL_API(ncclResult_t, ncclScatter, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclScatter", CHORUS_FUNC_SCATTER, sendbuff, recvbuff, count,
                             datatype, 0, ncclSum, root, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclSend", CHORUS_FUNC_SEND, sendbuff, NULL, count, datatype, 0,
                             ncclSum, peer, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return chorus_enqueue_call(comm, "ncclRecv", CHORUS_FUNC_RECV, NULL, recvbuff, count, datatype, 0,
                             ncclSum, peer, stream);
}

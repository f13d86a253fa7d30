/*
 * ce.c - Send/Recv between GPUs of this process on the copy engine (gpu.h).
 *
 * When one process drives several GPUs (ncclCommInitAll, nccl-tests' -g)
 * and both ends of a Send/Recv are in the same group, the host knows both
 * buffers: the sender's stream copies straight into the receiver's buffer
 * with cudaMemcpyAsync, which over NVLink moves 256-byte writes where SM
 * stores move 128 (396 against 353 GB/s on 2xH200, bench/ce_probe.cu), and
 * uses no SMs. The copy waits, through events, for what the receiver's
 * stream held before the group, and the receiver's stream waits for the
 * copy; nothing waits on the host. The calls left (small, mismatched, a
 * peer outside the group, buffers that overlap another transfer's) run in
 * the kernels (p2p.c) as before; both ends of a pair decide together here,
 * so they agree.
 */
#include <stdint.h>
#include <string.h>

#include "device/device.h"
#include "gpu/gpu.h"
#include "gpu/gpu_impl.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static int meet(const void *a, size_t an, const void *b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && x < y + bn && y < x + an;
}

/* The index of the k-th (from 0) call of c[] that is a `send` of rank
 * `rank` with peer `peer` in communicator `key`, moving bytes; -1 if none. */
static long kth(const chorus_gpu_ce_call *c, size_t n, uint64_t key, int rank, int peer, int send,
                size_t k) {
  for (size_t i = 0; i < n; i++)
    if (c[i].key == key && c[i].rank == rank && c[i].peer == peer && c[i].send == send &&
        c[i].bytes && k-- == 0)
      return (long)i;
  return -1;
}

size_t chorus_gpu_ce_match(const chorus_gpu_ce_call *c, size_t n, size_t min_bytes, long *pair) {
  size_t pairs = 0;
  for (size_t i = 0; i < n; i++) pair[i] = -1;
  if (!min_bytes) return 0;
  for (size_t i = 0; i < n; i++) {
    const chorus_gpu_ce_call *s = &c[i];
    if (!s->send || !s->key || !s->bytes || s->peer == s->rank) continue;
    /* This Send's number among its rank's sends to that peer (calls of 0
     * bytes match nothing, as in the kernels' rounds), and the receive of
     * the same number there. */
    size_t k = 0;
    for (size_t j = 0; j < i; j++)
      k += c[j].key == s->key && c[j].rank == s->rank && c[j].peer == s->peer && c[j].send &&
           c[j].bytes;
    const long r = kth(c, n, s->key, s->peer, s->rank, 0, k);
    if (r < 0 || c[r].bytes != s->bytes || s->bytes < min_bytes) continue;
    /* Copies run at once, in no order among themselves: a destination that
     * another transfer reads, or a source that another writes, is left to
     * the kernels (an in-place ring shift, say). */
    int clash = 0;
    for (size_t j = 0; j < n && !clash; j++)
      clash = c[j].send ? meet(c[r].buf, c[r].bytes, c[j].buf, c[j].bytes)
                        : meet(s->buf, s->bytes, c[j].buf, c[j].bytes);
    if (clash) continue;
    pair[i] = r;
    pair[r] = (long)i;
    pairs++;
  }
  return pairs;
}

/* Streams that name a device's default stream (NULL, cudaStreamLegacy,
 * cudaStreamPerThread) are a different stream on each GPU, which the
 * joins below cannot tell apart. */
static int own_stream(const void *s) {
  return (uintptr_t)s > 2;
}

size_t chorus_gpu_ce_group(chorus_op **ops, size_t n, long *pair) {
  for (size_t i = 0; i < n; i++) pair[i] = -1;
  if (n < 2 || n > 1024) return 0;
  chorus_gpu_ce_call *c = chorus_calloc(n, sizeof *c);
  if (!c) return 0;
  size_t any = 0;
  for (size_t i = 0; i < n; i++) {
    const chorus_op *op = ops[i];
    if (!chorus_gpu_is_p2p(op)) continue;
    const chorus_gpu *g = op->cc->gpu;
    const int send = op->func == CHORUS_FUNC_SEND;
    /* Every call of the communicator is described (its number among the
     * calls to a peer counts them all); only ones that may use the copy
     * engine get a key. */
    c[i].rank = g->rank;
    c[i].peer = op->root;
    c[i].send = send;
    c[i].bytes = op->count * op->esize;
    c[i].buf = send ? op->sendbuff : op->recvbuff;
    c[i].key = g->key;
    if (g->all_local && !g->staged && g->tune.p2p_ce_bytes && own_stream(op->cuda_stream) &&
        chorus_dev_stream_capturing(op->cuda_stream) == 0)
      any++;
    else
      c[i].key = 0;
  }
  /* A communicator with some calls that may not gets none: its calls to
   * one peer would otherwise be numbered differently on the two ends. */
  for (size_t i = 0; i < n && any; i++)
    if (chorus_gpu_is_p2p(ops[i]) && !c[i].key)
      for (size_t j = 0; j < n; j++)
        if (chorus_gpu_is_p2p(ops[j]) && ops[j]->cc->gpu->key == ops[i]->cc->gpu->key) c[j].key = 0;
  size_t pairs = 0;
  if (any) {
    /* Settings are read alike on every rank of the process. */
    const size_t min_bytes = ops[0]->cc->gpu->tune.p2p_ce_bytes;
    pairs = chorus_gpu_ce_match(c, n, min_bytes, pair);
  }
  chorus_free(c);
  return pairs;
}

/* Makes `waiter` wait for what `waited` (of GPU device) holds so far. */
static int join(void *waiter, void *waited, int device) {
  return chorus_dev_use(device) != 0 || chorus_dev_stream_wait(waiter, waited) != 0 ? -1 : 0;
}

ncclResult_t chorus_gpu_ce_run(chorus_op **ops, size_t n, const long *pair) {
  const int saved = chorus_device_current();
  ncclResult_t res = ncclSuccess;
  const char *step = "";
  /* First every copy waits for its receiver's stream, so that the copies
   * of a pair of GPUs sending to each other run at the same time. */
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    if (pair[i] < 0 || ops[i]->func != CHORUS_FUNC_SEND) continue;
    const chorus_op *r = ops[pair[i]];
    res = chorus_gpu_async_error(ops[i]->cc->gpu);
    if (res == ncclSuccess) res = chorus_gpu_async_error(r->cc->gpu);
    if (res == ncclSuccess && join(ops[i]->cuda_stream, r->cuda_stream, chorus_gpu_device(r->cc->gpu)))
      step = "waiting for the receiver's stream", res = ncclUnhandledCudaError;
  }
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    if (pair[i] < 0 || ops[i]->func != CHORUS_FUNC_SEND) continue;
    const chorus_op *s = ops[i], *r = ops[pair[i]];
    if (chorus_dev_use(chorus_gpu_device(s->cc->gpu)) != 0 ||
        chorus_dev_copy(r->recvbuff, s->sendbuff, s->count * s->esize, s->cuda_stream) != 0)
      step = "the copy", res = ncclUnhandledCudaError;
    if (res == ncclSuccess && !s->cc->gpu->ce_told) {
      s->cc->gpu->ce_told = 1;
      INFO(CHORUS_P2P | CHORUS_TUNING,
           "rank %d: ncclSend of %zu bytes to rank %d (GPU %d, this process) runs on the copy "
           "engine; so do later ones from %zu bytes with both ends in one group "
           "(CHORUS_GPU_P2P_CE_BYTES; 0: never)",
           s->cc->gpu->rank, s->count * s->esize, s->root, chorus_gpu_device(r->cc->gpu),
           s->cc->gpu->tune.p2p_ce_bytes);
    }
  }
  /* Then each receiver's stream waits for the copies into it. */
  for (size_t i = 0; i < n && res == ncclSuccess; i++) {
    if (pair[i] < 0 || ops[i]->func != CHORUS_FUNC_SEND) continue;
    const chorus_op *r = ops[pair[i]];
    if (join(r->cuda_stream, ops[i]->cuda_stream, chorus_gpu_device(ops[i]->cc->gpu)))
      step = "the receiver's stream waiting for the copy", res = ncclUnhandledCudaError;
  }
  if (saved >= 0) chorus_dev_use(saved);
  if (res == ncclUnhandledCudaError)
    return chorus_error(res, "ncclSend/ncclRecv on the copy engine (%s): %s", step,
                        chorus_dev_error());
  return res;
}

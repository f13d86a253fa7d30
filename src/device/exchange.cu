/*
 * exchange.cu - the one-shot LL exchange kernel: every collective on GPU
 * communicators at latency-bound sizes (kernels.h).
 *
 * Every collective here is "each rank pushes a block to some peers, then
 * each rank takes the blocks of some sources and copies them into its
 * output or reduces them": AllReduce pushes its buffer to everyone and
 * reduces everyone's; ReduceScatter pushes block p to rank p and reduces
 * what arrives; AllGather, Broadcast, AlltoAll, Gather and Scatter copy.
 *
 * CTA b of every rank owns the same range of 16-byte lines; line j holds
 * bytes [8j, 8j+8) of a block. Phase 1: each thread pushes its lines, the
 * epoch of CTA b folded into both halves, into slot [parity][me] of each
 * destination. Phase 2: the same thread polls its own window for its lines
 * from each source, in rank order. Seeing the epoch in both 8-byte halves
 * of a line proves its data arrived (NVLink and PCIe deliver aligned 8-byte
 * stores whole), so no flag or barrier is needed. At the end every rank
 * stores the epoch into an ack word of every peer; before pushing epoch e
 * into a parity a destination may still read, a sender waits for that
 * destination's ack of epoch e - 2.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}
#include "device/kern_util.cuh"

#define THREADS       512
#define LINES_PER_CTA 2048
/* Waits for line p to carry flag in both halves. Returns its payload, or
 * sets *failed (after recording why) and returns zeros. */
static __device__ uint2 poll_line(const char *p, uint32_t flag, const chorus_kern_comm &c, int src,
                                  volatile int *failed) {
  uint64_t deadline = 0;
  for (unsigned spins = 0;; spins++) {
    uint4 v = ld_line(p);
    if (v.y == flag && v.w == flag) return make_uint2(v.x, v.z);
    if (*failed) return make_uint2(0, 0);
    if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &deadline, src, failed))
      return make_uint2(0, 0);
  }
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
    exchange(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t units_per_cta) {
  typedef uint2 U; /* 8 data bytes per 16-byte line */
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  const int b = blockIdx.x, n = c.nranks, me = c.rank;
  if (threadIdx.x == 0) {
    s_epoch = c.epochs[b] + 1;
    s_failed = 0;
  }
  __syncthreads();
  const uint32_t flag = s_epoch;
  const size_t parity = flag & 1;
  const size_t nbytes = x.bytes;
  const size_t nunits = (nbytes + sizeof(U) - 1) / sizeof(U);
  const size_t lo = (size_t)b * units_per_cta;
  const size_t hi = lo + units_per_cta < nunits ? lo + units_per_cta : nunits;
  const size_t slot_bytes = c.ll_lines * CHORUS_KERN_LINE;
  const size_t my_slot = (parity * n + me) * slot_bytes;
  const char *send = (const char *)x.send;
  char *recv = (char *)x.recv;
  const size_t row = (size_t)b * CHORUS_KERN_MAX_RANKS; /* [block][src] words */
  const uint32_t *acks = (const uint32_t *)(c.win[me] + c.ack_off) + row;

  const bool premul = x.reduce && red.kind == CHORUS_RED_PREMULSUM;
  const A scalar = premul_scalar<T>(red);

  /* The destinations finished reading this parity (epoch - 2). */
  if (threadIdx.x < n && ((x.send_to >> threadIdx.x) & 1))
    wait_at_least(&acks[threadIdx.x], flag - 2, c, threadIdx.x, &s_failed);
  __syncthreads();

  /* Phase 1: push. */
  if (!s_failed)
    for (size_t j = lo + threadIdx.x; j < hi; j += blockDim.x)
      for (int k = 1; k < n; k++) {
        int p = me + k < n ? me + k : me + k - n;
        if (!((x.send_to >> p) & 1)) continue;
        U d = load_unit<U>(send + x.soff[p], nbytes, j);
        if (premul) d = scaled<T, U>(d, scalar);
        st_line(c.win[p] + c.ll_off + my_slot + j * CHORUS_KERN_LINE,
                make_uint4(d.x, flag, d.y, flag));
      }
  /* Phase 2: take the sources' units in rank order; copy or reduce. */
  const char *own = c.win[me] + c.ll_off;
  for (size_t j = lo + threadIdx.x; j < hi && !s_failed; j += blockDim.x) {
    A acc[E];
    bool first = true;
    for (int src = 0; src < n; src++) {
      if (!((x.recv_from >> src) & 1)) continue;
      U d;
      if (src == me) {
        d = load_unit<U>(send + x.soff[me], nbytes, j);
        if (premul) d = scaled<T, U>(d, scalar);
      } else {
        d = poll_line(own + (parity * n + src) * slot_bytes + j * CHORUS_KERN_LINE, flag, c, src,
                      &s_failed);
        if (s_failed) break;
      }
      if (!x.reduce) {
        put_unit<U>(recv + x.roff[src], nbytes, j, d);
        continue;
      }
      fold_unit<T, U>(acc, d, first, red.kind);
      first = false;
    }
    if (s_failed || !x.reduce) continue;
    put_unit<U>(recv + x.roff[0], nbytes, j, finish_unit<T, U>(acc, red, true));
  }

  /* Tell every peer this rank is done with epoch `flag` of block b. */
  __syncthreads();
  if (threadIdx.x < n && (int)threadIdx.x != me)
    *(volatile uint32_t *)((uint32_t *)(c.win[threadIdx.x] + c.ack_off) + row + me) = flag;
  if (threadIdx.x == 0) c.epochs[b] = flag;
}

template <typename T> struct launch_ll {
  static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, cudaStream_t stream) {
    size_t nlines = (x->bytes + 7) / 8;
    size_t grid = (nlines + LINES_PER_CTA - 1) / LINES_PER_CTA;
    if (grid < 1) grid = 1;
    if (grid > CHORUS_KERN_MAX_BLOCKS) grid = CHORUS_KERN_MAX_BLOCKS;
    size_t per = (nlines + grid - 1) / grid;
    int threads = per < THREADS ? (int)((per + 31) / 32 * 32) : THREADS;
    if (threads < 32) threads = 32;
    exchange<T><<<(unsigned)grid, threads, 0, stream>>>(*c, *red, *x, per);
    return cudaGetLastError();
  }
};

extern "C" int chorus_kern_exchange(const chorus_kern_comm *c, const chorus_kern_red *red,
                                    const chorus_kern_xchg *x, void *stream) {
  if (x->bytes == 0) return 0;
  /* Copies move bytes: one instantiation serves every type. */
  cudaError_t e = by_dtype<launch_ll>(x->reduce ? red->dtype : 1, c, red, x, (cudaStream_t)stream);
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the LL exchange kernel");
  return 0;
}

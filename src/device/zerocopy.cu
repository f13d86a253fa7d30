/*
 * direct.cu - zero-copy collectives (kernels.h, chorus_kern_zc):
 * AllReduce, AllGather and ReduceScatter between buffers that every GPU of
 * the communicator reaches, with no arena in the data's way.
 *
 * CTA b of every rank takes slice b of its rank's block (the same slices
 * on every rank, from the size alone) and meets CTA b of every other rank
 * twice, through 32-byte lines in the receiver's arena ([CTA][src], the
 * sender's epoch written last with a system-scope release):
 *   first, before touching any peer's buffer: a peer that arrived has
 *     started its kernel, so everything its stream did before is done (its
 *     input written, its output no longer read). The line also carries the
 *     peer's call and window offsets, compared with this rank's: another
 *     call or offset stops the kernel with CHORUS_KERN_CALL_MISMATCH or
 *     CHORUS_KERN_SEND_OFFSET / _RECV_OFFSET, written into every rank's
 *     arena (kern_util.cuh), before anything is read or written;
 *   last, after its slice is done: once every peer's CTA b has arrived,
 *     no one reads or writes slice b of this rank's buffers any more.
 * Each CTA's epoch lives in its own rank's arena (zc_ep_off) and only
 * the kernels advance it, so launches can be captured in CUDA graphs.
 * Every wait watches the abort word, the peers' exits and the deadline.
 */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}
#include "device/kern_util.cuh"

#define NT        512 /* threads per CTA */
#define UNROLL    2   /* 16-byte units in flight per thread and source (reductions) */
#define UNROLL_AG 4   /* the same for AllGather, which has one source */
typedef uint4 V;

/* Line [cta][src] in the arena at `arena`. */
static __device__ __forceinline__ char *line_of(const chorus_kern_comm &c, char *arena, int cta,
                                                int src) {
  return arena + c.zc_off + ((size_t)cta * CHORUS_KERN_MAX_RANKS + (size_t)src) * 32;
}

/* Barrier e of this CTA with CTA b of every other rank; the first one also
 * compares the calls and offsets. False when the kernel must stop. */
static __device__ bool meet(const chorus_kern_comm &c, const chorus_kern_zc &d, uint32_t e,
                            bool first, volatile int *failed) {
  const int t = threadIdx.x, n = c.nranks, me = c.rank, b = blockIdx.x;
  __syncthreads();
  if (t < n && t != me) {
    char *theirs = line_of(c, c.arena[t], b, me);
    if (first) {
      volatile uint64_t *w = (volatile uint64_t *)theirs;
      w[1] = d.desc;
      w[2] = d.soff;
      w[3] = d.roff;
    }
    /* No fence: the release is cumulative, covering this thread's words
     * above and, through the barrier, the CTA's data stores. */
    st_release((uint32_t *)theirs, e);
    const char *mine = line_of(c, c.arena[me], b, t);
    if (wait_at_least((const uint32_t *)mine, e, c, t, failed) && first) {
      const volatile uint64_t *w = (const volatile uint64_t *)mine;
      const uint64_t desc = w[1], so = w[2], ro = w[3];
      int why = 0;
      uint64_t got = 0, want = 0;
      if (desc != d.desc)
        why = CHORUS_KERN_CALL_MISMATCH, got = desc, want = d.desc;
      else if (so != d.soff)
        why = CHORUS_KERN_SEND_OFFSET, got = so, want = d.soff;
      else if (ro != d.roff)
        why = CHORUS_KERN_RECV_OFFSET, got = ro, want = d.roff;
      if (why) {
        record_failure(c, why, t, got, want);
        *failed = 1;
      }
    }
  }
  __syncthreads();
  return !*failed;
}

/* REDUCE: AllReduce or ReduceScatter over elements of T (d.kind says
 * which; one instance for both keeps the build short), else AllGather. */
template <typename T, bool REDUCE>
__global__ void __launch_bounds__(NT)
    direct(chorus_kern_comm c, chorus_kern_red red, chorus_kern_zc d) {
  board_post(c, d.seq, d.desc, true);
  __shared__ int s_failed;
  __shared__ uint32_t s_ep;
  const int t = threadIdx.x, b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  uint32_t *ep = (uint32_t *)(c.arena[me] + c.zc_ep_off) + b;
  if (t == 0) {
    s_failed = 0;
    s_ep = *ep;
  }
  __syncthreads();
  const uint32_t e = s_ep;
  if (!meet(c, d, e + 1, true, &s_failed)) return;

  /* This rank's block: where it starts in the buffers that hold a block per
   * rank, and how long it is; then this CTA's slice of its units. */
  size_t lo, len;
  const bool scatter = d.kind == CHORUS_KERN_ZC_REDUCESCATTER;
  if (d.kind == CHORUS_KERN_ZC_ALLREDUCE) {
    lo = (size_t)me * d.block;
    len = lo >= d.bytes ? 0 : d.bytes - lo < d.block ? d.bytes - lo : d.block;
  } else {
    lo = (size_t)me * d.bytes;
    len = d.bytes;
  }
  const size_t units = (len + sizeof(V) - 1) / sizeof(V);
  const size_t u0 = units * (size_t)b / (size_t)G, u1 = units * ((size_t)b + 1) / (size_t)G;
  constexpr int E = sizeof(V) / sizeof(T);
  typedef typename elem<T>::acc A;

  if (!REDUCE) {
    const char *from = (const char *)d.send[me];
    for (size_t j = u0 + (size_t)t; j < u1; j += (size_t)NT * UNROLL_AG) {
      V v[UNROLL_AG];
#pragma unroll
      for (int u = 0; u < UNROLL_AG; u++)
        if (j + (size_t)u * NT < u1) v[u] = load_unit<V>(from, len, j + (size_t)u * NT);
#pragma unroll
      for (int u = 0; u < UNROLL_AG; u++) {
        const size_t k = j + (size_t)u * NT;
        if (k >= u1) continue;
#pragma unroll
        for (int q = 0; q < CHORUS_KERN_MAX_RANKS; q++)
          if (q < n) put_unit<V>((char *)d.recv[q] + lo, len, k, v[u]);
      }
    }
  } else {
    /* AllReduce and ReduceScatter: every source's units first (all loads
     * in flight at once), then the fold in rank order. */
    for (size_t j = u0 + (size_t)t; j < u1; j += (size_t)NT * UNROLL) {
      V v[UNROLL][CHORUS_KERN_MAX_RANKS];
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int q = 0; q < CHORUS_KERN_MAX_RANKS; q++)
          if (q < n && j + (size_t)u * NT < u1)
            v[u][q] = load_unit<V>((const char *)d.send[q] + lo, len, j + (size_t)u * NT);
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const size_t k = j + (size_t)u * NT;
        if (k >= u1) continue;
        A acc[E];
#pragma unroll
        for (int q = 0; q < CHORUS_KERN_MAX_RANKS; q++)
          if (q < n) fold_unit<T, V>(acc, v[u][q], q == 0, red.kind);
        const V out = finish_unit<T, V>(acc, red, true);
        if (scatter) {
          put_unit<V>((char *)d.recv[me], len, k, out);
        } else {
#pragma unroll
          for (int q = 0; q < CHORUS_KERN_MAX_RANKS; q++)
            if (q < n) put_unit<V>((char *)d.recv[q] + lo, len, k, out);
        }
      }
    }
  }
  if (!meet(c, d, e + 2, false, &s_failed)) return;
  if (t == 0) *ep = e + 2;
}

namespace {
template <typename T> struct reducing {
  static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_zc *d, cudaStream_t stream) {
    direct<T, true><<<d->grid, NT, 0, stream>>>(*c, *red, *d);
    return cudaGetLastError();
  }
};
} // namespace

extern "C" int chorus_kern_zc_run(const chorus_kern_comm *c, const chorus_kern_red *red,
                                  const chorus_kern_zc *d, void *stream) {
  if (d->grid < 1 || d->grid > CHORUS_KERN_MAX_BLOCKS || c->nranks > CHORUS_KERN_MAX_RANKS)
    return chorus_dev_fail((int)cudaErrorInvalidValue, "a zero-copy launch of a bad shape");
  cudaStream_t s = (cudaStream_t)stream;
  cudaError_t e;
  if (d->kind == CHORUS_KERN_ZC_ALLGATHER) {
    direct<uint8_t, false><<<d->grid, NT, 0, s>>>(*c, *red, *d);
    e = cudaGetLastError();
  } else {
    e = by_dtype<reducing>(red->dtype, c, red, d, s);
  }
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the zero-copy kernel");
  return 0;
}

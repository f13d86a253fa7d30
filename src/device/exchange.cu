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
 * destination. Phase 2: the same thread polls its own arena for its lines
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

#define THREADS 512

/* Which CTA handles a line is fixed for the communicator, whatever the
 * launch: runs of q lines (ll_cta_lines) go to CTAs 0, 1, ...,
 * ll_blocks - 1 in turn. Each CTA index has its own epoch
 * and acks, so a line position is only ever written with that CTA's
 * epochs, which only grow: a stale line can never carry the flag a later
 * launch waits for (with ranges that moved between launches it could,
 * when CTAs' epochs differ). */
static __host__ __device__ size_t ll_run(const chorus_kern_comm &c) {
  return c.ll_cta_lines ? c.ll_cta_lines : 256;
}
/* The CTAs the runs go to in turn. */
static __host__ __device__ size_t ll_blocks(const chorus_kern_comm &c) {
  return c.ll_blocks && c.ll_blocks < CHORUS_KERN_MAX_BLOCKS ? c.ll_blocks : CHORUS_KERN_MAX_BLOCKS;
}
/* Header line [parity][src][block] of the arena at `arena`. */
static __device__ __forceinline__ char *hdr_line(const chorus_kern_comm &c, char *arena,
                                                 uint32_t flag, int src) {
  return arena + c.hdr_off +
         (((size_t)(flag & 1) * CHORUS_KERN_MAX_RANKS + src) * CHORUS_KERN_MAX_BLOCKS +
          blockIdx.x) *
             CHORUS_KERN_LINE;
}

/* What every LL launch does first, CTA b: takes the next epoch of b (the
 * flag its lines carry; its parity picks the slots), waits until the
 * destinations in `to` acked epoch flag - 2, that is, finished reading
 * those slots, and sends them the call's description (desc) in its header
 * line. */
static __device__ uint32_t ll_start(const chorus_kern_comm &c, uint32_t to, uint64_t desc,
                                    uint32_t *s_epoch, volatile int *s_failed) {
  if (threadIdx.x == 0) {
    *s_epoch = c.epochs[blockIdx.x] + 1;
    *s_failed = 0;
  }
  __syncthreads();
  const uint32_t flag = *s_epoch;
  const uint32_t *acks = (const uint32_t *)(c.arena[c.rank] + c.ack_off) +
                         (size_t)blockIdx.x * CHORUS_KERN_MAX_RANKS; /* [block][src] */
  const int p = threadIdx.x;
  if (p < c.nranks && ((to >> p) & 1) && wait_at_least(&acks[p], flag - 2, c, p, s_failed))
    st_line(hdr_line(c, c.arena[p], flag, c.rank),
            make_uint4((uint32_t)desc, flag, (uint32_t)(desc >> 32), flag));
  __syncthreads();
  return flag;
}
/* Phase 2 of an LL launch starts here: thread src waits for the header of
 * source src (in `from`, not this rank) and compares it with this rank's
 * call; another call (a different function, count, type, operator or
 * root) is recorded and fails the launch, whose other threads and CTAs
 * then stop waiting. The header travels ahead of the lines, so this costs
 * little. CTA 0 also compares the calls before this one on the call board
 * (board_post), its loads in flight while the header comes. */
static __device__ void ll_check(const chorus_kern_comm &c, uint32_t flag, uint32_t from,
                                uint64_t desc, uint32_t seq, volatile int *s_failed) {
  const int src = threadIdx.x;
  if (src >= c.nranks || src == c.rank || !((from >> src) & 1) || *s_failed) return;
  board_history past;
  if (blockIdx.x == 0) board_load(c, src, seq, &past);
  const uint2 h = poll_line(hdr_line(c, c.arena[c.rank], flag, src), flag, c, src, s_failed);
  const uint64_t theirs = h.x | (uint64_t)h.y << 32;
  if (!*s_failed && theirs != desc) {
    record_failure(c, CHORUS_KERN_CALL_MISMATCH, src, theirs, desc);
    *s_failed = 1;
  }
  if (blockIdx.x == 0 && !*s_failed) board_compare(c, src, &past);
}
/* And last: tells every peer this rank is done with epoch flag of CTA b. */
static __device__ void ll_finish(const chorus_kern_comm &c, uint32_t flag) {
  __syncthreads();
  const int p = threadIdx.x;
  if (p < c.nranks && p != c.rank)
    *(volatile uint32_t *)((uint32_t *)(c.arena[p] + c.ack_off) +
                           (size_t)blockIdx.x * CHORUS_KERN_MAX_RANKS + c.rank) = flag;
  if (p == 0) c.epochs[blockIdx.x] = flag;
}

/* Step 1 of every LL launch, CTA b: pushes its lines of from[p] (len[p]
 * bytes, zero past the end; scaled for PreMulSum) to each destination p in
 * `to`, into slot [parity][me] there, flag in both halves. */
template <typename T>
static __device__ void push_lines(const chorus_kern_comm &c, uint32_t flag, size_t q, size_t nunits,
                                  uint32_t to, const char *const *from, const size_t *len,
                                  bool premul, typename elem<T>::acc scalar) {
  typedef uint2 U;
  const int n = c.nranks, me = c.rank;
  const size_t my_slot = ((flag & 1) * n + me) * c.ll_lines * CHORUS_KERN_LINE;
  for (size_t k0 = (size_t)blockIdx.x * q; k0 < nunits; k0 += ll_blocks(c) * q)
    for (size_t j = k0 + threadIdx.x; j < k0 + q && j < nunits; j += blockDim.x)
      for (int k = 1; k < n; k++) {
        const int p = me + k < n ? me + k : me + k - n;
        if (!((to >> p) & 1)) continue;
        U d = load_unit<U>(from[p], len[p], j);
        if (premul) d = scaled<T, U>(d, scalar);
        st_line(c.arena[p] + c.ll_off + my_slot + j * CHORUS_KERN_LINE,
                make_uint4(d.x, flag, d.y, flag));
      }
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
    exchange(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t q) {
  pdl_enter();
  board_post(c, x.seq, x.desc, false);
  typedef uint2 U; /* 8 data bytes per 16-byte line */
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  const int b = blockIdx.x, n = c.nranks, me = c.rank;
  const uint32_t flag = ll_start(c, x.send_to, x.desc, &s_epoch, &s_failed);
  const size_t parity = flag & 1;
  const size_t nbytes = x.bytes;
  const size_t nunits = (nbytes + sizeof(U) - 1) / sizeof(U);
  const size_t slot_bytes = c.ll_lines * CHORUS_KERN_LINE;
  const char *send = (const char *)x.send;
  char *recv = (char *)x.recv;
  const bool premul = x.reduce && red.kind == CHORUS_RED_PREMULSUM;
  const A scalar = premul_scalar<T>(red);

  /* Phase 1: push. */
  if (!s_failed) {
    const char *from[CHORUS_KERN_MAX_RANKS];
    size_t len[CHORUS_KERN_MAX_RANKS];
    for (int p = 0; p < n; p++) from[p] = send + x.soff[p], len[p] = nbytes;
    push_lines<T>(c, flag, q, nunits, x.send_to, from, len, premul, scalar);
  }
  /* Phase 2: take the sources' units in rank order; copy or reduce. With
   * no sources (Reduce's and Gather's other ranks) the output is not this
   * rank's to touch, and may be NULL. */
  ll_check(c, flag, x.recv_from, x.desc, x.seq, &s_failed);
  const char *own = c.arena[me] + c.ll_off;
  for (size_t k0 = (size_t)b * q; k0 < nunits && !s_failed && x.recv_from; k0 += ll_blocks(c) * q)
    for (size_t j = k0 + threadIdx.x; j < k0 + q && j < nunits && !s_failed; j += blockDim.x) {
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

  ll_finish(c, flag);
}

/* Two-shot AllReduce in LL lines (x->twoshot, launched through
 * chorus_kern_twoshot when a share fits half a slot): the same epochs,
 * parities and acks as the exchange above, and the same ownership of lines
 * by CTA, so the two kinds of launch follow each other freely. Line j of
 * every block belongs to one thread of one CTA on every rank, which
 *   1. pushes line j of its block p into slot [parity][me] of rank p;
 *   2. polls line j of its own block from every peer, reduces it with its
 *      own input in rank order, writes the result and pushes it into the
 *      second half of slot [parity][me] of every peer (after L lines, L
 *      the lines of a share);
 *   3. polls line j of every peer's reduced block there and writes it.
 * No barrier between the steps: each line carries its own flag. In place,
 * the thread that overwrites line j of block p in step 3 is the one that
 * read it in step 1. */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    twoshot_ll(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t q) {
  pdl_enter();
  board_post(c, x.seq, x.desc, false);
  typedef uint2 U;
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  const int b = blockIdx.x, n = c.nranks, me = c.rank;
  const uint32_t all = (1u << n) - 1;
  const uint32_t flag = ll_start(c, all & ~(1u << me), x.desc, &s_epoch, &s_failed);
  const size_t parity = flag & 1;
  const size_t nunits = (x.bytes + sizeof(U) - 1) / sizeof(U); /* lines of a share: L */
  const size_t slot_bytes = c.ll_lines * CHORUS_KERN_LINE;
  const size_t my_slot = (parity * n + me) * slot_bytes;
  const size_t second = chorus_kern_ll_second(nunits, q, ll_blocks(c)) * CHORUS_KERN_LINE;
  const char *send = (const char *)x.send;
  char *recv = (char *)x.recv;
  const bool premul = red.kind == CHORUS_RED_PREMULSUM;
  const A scalar = premul_scalar<T>(red);
  size_t len[CHORUS_KERN_MAX_RANKS];
  for (int p = 0; p < n; p++) {
    const size_t start = (size_t)p * x.bytes;
    len[p] = start >= x.total ? 0 : x.total - start < x.bytes ? x.total - start : x.bytes;
  }

  if (!s_failed) {
    const char *from[CHORUS_KERN_MAX_RANKS];
    for (int p = 0; p < n; p++) from[p] = send + (size_t)p * x.bytes;
    push_lines<T>(c, flag, q, nunits, all & ~(1u << me), from, len, premul, scalar);
  }
  ll_check(c, flag, all & ~(1u << me), x.desc, x.seq, &s_failed);
  const char *own = c.arena[me] + c.ll_off;
  for (size_t k0 = (size_t)b * q; k0 < nunits && !s_failed; k0 += ll_blocks(c) * q)
    for (size_t j = k0 + threadIdx.x; j < k0 + q && j < nunits && !s_failed; j += blockDim.x) {
      A acc[E];
      for (int src = 0; src < n; src++) {
        U d;
        if (src == me) {
          d = load_unit<U>(send + (size_t)me * x.bytes, len[me], j);
          if (premul) d = scaled<T, U>(d, scalar);
        } else {
          d = poll_line(own + (parity * n + src) * slot_bytes + j * CHORUS_KERN_LINE, flag, c, src,
                        &s_failed);
          if (s_failed) break;
        }
        fold_unit<T, U>(acc, d, src == 0, red.kind);
      }
      if (s_failed) break;
      const U r = finish_unit<T, U>(acc, red, true);
      put_unit<U>(recv + (size_t)me * x.bytes, len[me], j, r);
      for (int k = 1; k < n; k++) {
        const int p = me + k < n ? me + k : me + k - n;
        st_line(c.arena[p] + c.ll_off + my_slot + second + j * CHORUS_KERN_LINE,
                make_uint4(r.x, flag, r.y, flag));
      }
    }
  for (size_t k0 = (size_t)b * q; k0 < nunits && !s_failed; k0 += ll_blocks(c) * q)
    for (size_t j = k0 + threadIdx.x; j < k0 + q && j < nunits && !s_failed; j += blockDim.x)
      for (int k = 1; k < n; k++) {
        const int src = me + k < n ? me + k : me + k - n;
        const U d = poll_line(own + (parity * n + src) * slot_bytes + second + j * CHORUS_KERN_LINE,
                              flag, c, src, &s_failed);
        if (s_failed) break;
        put_unit<U>(recv + (size_t)src * x.bytes, len[src], j, d);
      }

  ll_finish(c, flag);
}

/* CTAs and threads of an LL launch over nlines lines in runs of q (at most
 * `blocks` CTAs; a thread per line of a run, 512 at most). */
static void ll_shape(size_t nlines, size_t q, size_t blocks, size_t *grid, int *threads) {
  *grid = (nlines + q - 1) / q;
  if (*grid < 1) *grid = 1;
  if (*grid > blocks) *grid = blocks;
  *threads = q < THREADS ? (int)q : THREADS;
}

/* File-local (every kernel file has a launcher; shared names would be
 * folded into one by the linker). */
namespace {
/* One LL instance per element type, reducing or not (the kernels read
 * x.reduce): a copy runs the uint8_t one. */
template <typename T, bool REDUCE> struct launcher {
  static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, cudaStream_t stream) {
    const size_t q = ll_run(*c);
    size_t grid;
    int threads;
    ll_shape((x->bytes + 7) / 8, q, ll_blocks(*c), &grid, &threads);
    if (x->twoshot)
      return chorus_launch(c->pdl, twoshot_ll<T>, (unsigned)grid, threads, stream, *c, *red, *x, q);
    return chorus_launch(c->pdl, exchange<T>, (unsigned)grid, threads, stream, *c, *red, *x, q);
  }
};
} // namespace

extern "C" int chorus_kern_exchange(const chorus_kern_comm *c, const chorus_kern_red *red,
                                    const chorus_kern_xchg *x, void *stream) {
  if (x->bytes == 0) return 0;
  const size_t lines = (x->bytes + 7) / 8;
  if (x->twoshot && chorus_kern_ll_second(lines, ll_run(*c), ll_blocks(*c)) + lines > c->ll_lines)
    return chorus_dev_fail((int)cudaErrorInvalidValue, "a two-shot share too large for LL slots");
  return launch_exchange<launcher>::run("launching the LL exchange kernel", c, red, x, stream);
}

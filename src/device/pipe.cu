/*
 * pipe.cu - the pipelined exchange kernel: every collective on GPU
 * communicators at bandwidth-bound sizes, in one launch (kernels.h).
 *
 * It runs the same exchanges as the LL kernel (exchange.cu), but streams
 * them: a block is cut into chunks, chunk k goes to
 * channel (CTA) k % G, and each channel moves its chunks through a FIFO
 * per source in the destination's arena, cut into nslots chunk-sized
 * slots for this launch (pipe_util.cuh):
 *
 *   pushing warps (first half of the CTA), step s of this channel:
 *     wait until every destination has consumed step s - nslots (its done
 *     word here; at step 0, everything of earlier launches), copy the
 *     chunk into slot s % nslots of each destination, then announce it
 *     with a release store of s + 1 into the destination's head word for
 *     this rank (cumulative: it covers the group's copies, which the group
 *     barrier ordered before it, so no system fence is needed);
 *   taking warps (second half), step s:
 *     wait for every source's head to reach s + 1, read the chunk from
 *     each source's slot (this rank's own from its send buffer), copy or
 *     reduce in rank order into the output, then hand the slots back with a release
 *     store of s + 1 into each source's done word for this rank.
 *
 * The two halves synchronise with named barriers of their own, so a CTA
 * pushes step s + 1 while it still reduces step s: NVLink writes and local
 * reductions overlap, nslots steps deep. Counters only grow (their totals
 * per channel and peer live in device memory), so no host sequence number
 * is involved and launches can be captured in CUDA graphs. Every wait
 * watches the abort word and the deadline (kern_util.cuh).
 *
 * A half is H threads: GROUP, or twice that for large copies both ways
 * (the launcher's wide_from), where more warps keep more of NVLink's
 * writes and the output's stores in flight.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}
#include "device/pipe_util.cuh"

/* The pushing half: this rank's own blocks into the destinations' FIFOs. */
template <typename T, bool REDUCE, int H>
static __device__ void push_steps(const chorus_kern_comm &c, const chorus_kern_red &red,
                                  const chorus_kern_xchg &x, size_t chunk, uint32_t nslots,
                                  size_t nsteps, const uint32_t *sent, volatile int *failed,
                                  volatile uint32_t *pushed) {
  const int t = threadIdx.x, b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  const size_t cu = chunk / sizeof(U), nunits = (x.bytes + sizeof(U) - 1) / sizeof(U);
  const bool premul = REDUCE && red.kind == CHORUS_RED_PREMULSUM;
  const typename elem<T>::acc scalar = premul_scalar<T>(red);
  const char *send = (const char *)x.send;
  for (size_t s = 0; s < nsteps; s++) {
    if (t < n && ((x.send_to >> t) & 1))
      wait_at_least(done_word(c, c.arena[me], b, t), room_needed(sent[t], (uint32_t)s, nslots), c,
                    t, failed);
    if (group_any(BAR_PUSH, *failed, H)) break;
    const size_t j0 = (b + s * G) * cu, j1 = j0 + cu < nunits ? j0 + cu : nunits;
    for (int k = 0; k < n - 1; k++) { /* channels start on different links */
      const int p = (me + 1 + (k + b) % (n - 1)) % n;
      if (!((x.send_to >> p) & 1)) continue;
      const char *from = send + x.soff[p];
      const bool fast = whole(from, x.bytes, j1);
      char *to = slot(c, c.arena[p], b, me, sent[p] + (uint32_t)s, chunk, nslots) - j0 * sizeof(U);
      for (size_t j = j0 + t; j < j1; j += H * UNROLL) {
        U d[UNROLL];
        load_units<UNROLL, H>(d, from, x.bytes, j, j1, fast);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
          if (j + u * H < j1)
            *(U *)(to + (j + u * H) * sizeof(U)) = premul ? scaled<T, U>(d[u], scalar) : d[u];
      }
    }
    group_sync(BAR_PUSH, H);
    if (t < n && ((x.send_to >> t) & 1)) {
      if (s == 0) put_call(c, b, t, sent[t], x.desc);
      st_release(head_word(c, c.arena[t], b, me), sent[t] + (uint32_t)s + 1);
    }
    if (t == 0) *pushed = (uint32_t)s + 1; /* every pushing thread has read step s */
  }
  if (t == 0) *pushed = 0xffffffffu;
}

/* The taking half: the sources' chunks (own from send) into the output. */
template <typename T, bool REDUCE, int H>
static __device__ void take_steps(const chorus_kern_comm &c, const chorus_kern_red &red,
                                  const chorus_kern_xchg &x, size_t chunk, uint32_t nslots,
                                  size_t nsteps, const uint32_t *sent, const uint32_t *taken,
                                  volatile int *failed, volatile uint32_t *pushed) {
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  /* Reductions keep UR accumulators of E elements: fewer units for 1-byte types. */
  constexpr int UR = !REDUCE ? UNROLL : E > 8 ? UNROLL / 4 : UNROLL / 2;
  const int t = threadIdx.x - H, b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  const size_t cu = chunk / sizeof(U), nunits = (x.bytes + sizeof(U) - 1) / sizeof(U);
  const bool premul = REDUCE && red.kind == CHORUS_RED_PREMULSUM;
  const A scalar = premul_scalar<T>(red);
  const char *send = (const char *)x.send;
  char *recv = (char *)x.recv;
  /* Nothing to take (Reduce's and Gather's other ranks): the output is
   * not this rank's to touch, and may be NULL. */
  if (!x.recv_from) return;
  for (size_t s = 0; s < nsteps; s++) {
    if (t < n && t != me && ((x.recv_from >> t) & 1) &&
        wait_at_least(head_word(c, c.arena[me], b, t), taken[t] + (uint32_t)s + 1, c, t, failed) &&
        s == 0)
      check_call(c, b, t, taken[t], x.desc, failed);
    if (t == 64 && x.send_to) /* in place: own pushes of this step read the input first */
      while (*pushed < (uint32_t)s + 1 && !*failed) {
      }
    if (group_any(BAR_TAKE, *failed, H)) break;
    const size_t j0 = (b + s * G) * cu, j1 = j0 + cu < nunits ? j0 + cu : nunits;
    const bool own_fast = whole(send + x.soff[me], x.bytes, j1);
    const bool out_fast = whole(recv, x.bytes, j1); /* with every roff a multiple of 16 */
    /* Reductions in whole rounds of H * UR units, plain vectors and a sum:
     * no bounds checks and the operator known to the compiler (as ring.cu's
     * step_units). */
    const bool plain = REDUCE && (j1 - j0) % (H * UR) == 0 && own_fast && out_fast &&
                       x.roff[0] % sizeof(U) == 0 && !premul && plain_sum(red);
    auto units = [&](auto checked_t) {
      constexpr bool CHECKED = decltype(checked_t)::value;
      const int kind = CHECKED ? red.kind : CHORUS_RED_SUM;
      for (size_t j = j0 + t; j < j1; j += H * UR) {
        A acc[UR][E];
        bool first = true;
        for (int src = 0; src < n; src++) {
          if (!((x.recv_from >> src) & 1)) continue;
          U d[UR];
          if (src == me) {
            load_own<T, UR, H, CHECKED>(d, send + x.soff[me], x.bytes, j, j1, own_fast, premul,
                                        scalar);
          } else {
            const char *from =
                slot(c, c.arena[me], b, src, taken[src] + (uint32_t)s, chunk, nslots) -
                j0 * sizeof(U);
#pragma unroll
            for (int u = 0; u < UR; u++)
              if (!CHECKED || j + u * H < j1) d[u] = *(const U *)(from + (j + u * H) * sizeof(U));
          }
#pragma unroll
          for (int u = 0; u < UR; u++) {
            if (CHECKED && j + u * H >= j1) continue;
            if (REDUCE) {
              fold_unit<T, U>(acc[u], d[u], first, kind);
            } else {
              store_unit(recv + x.roff[src], x.bytes, j + u * H, d[u],
                         out_fast && x.roff[src] % sizeof(U) == 0);
            }
          }
          first = false;
        }
        if constexpr (REDUCE) {
#pragma unroll
          for (int u = 0; u < UR; u++) {
            if (CHECKED && j + u * H >= j1) continue;
            const U r = finish_unit<T, U>(acc[u], red, true);
            if (CHECKED)
              store_unit(recv + x.roff[0], x.bytes, j + u * H, r,
                         out_fast && x.roff[0] % sizeof(U) == 0);
            else
              ((U *)(recv + x.roff[0]))[j + u * H] = r;
          }
        }
      }
    };
    if (!REDUCE || !plain) /* copies take the checked loop alone */
      units(std::true_type{});
    else if constexpr (REDUCE)
      units(std::false_type{});
    group_sync(BAR_TAKE, H);
    if (t < n && t != me && ((x.recv_from >> t) & 1))
      st_release(done_word(c, c.arena[t], b, me), taken[t] + (uint32_t)s + 1);
  }
}

template <typename T, bool REDUCE, int H>
__global__ void __launch_bounds__(2 * H)
    pipe(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t chunk, uint32_t nslots,
         size_t nchunks) {
  board_post(c, x.seq, x.desc, true);
  __shared__ uint32_t s_sent[CHORUS_KERN_MAX_RANKS], s_taken[CHORUS_KERN_MAX_RANKS];
  __shared__ int s_failed;
  __shared__ uint32_t s_pushed;
  const int b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  /* This rank's totals for channel b: sent [dst], then taken [src]. */
  uint32_t *sent = (uint32_t *)(c.arena[me] + c.cnt_off) + (size_t)b * CHORUS_KERN_MAX_RANKS;
  uint32_t *taken = sent + CHORUS_KERN_MAX_CHANNELS * CHORUS_KERN_MAX_RANKS;
  if (threadIdx.x < CHORUS_KERN_MAX_RANKS) {
    s_sent[threadIdx.x] = sent[threadIdx.x];
    s_taken[threadIdx.x] = taken[threadIdx.x];
  }
  if (threadIdx.x == 0) {
    s_failed = 0;
    s_pushed = 0;
  }
  __syncthreads();
  const size_t nsteps = (size_t)b < nchunks ? (nchunks - 1 - b) / G + 1 : 0;
  if (threadIdx.x < H)
    push_steps<T, REDUCE, H>(c, red, x, chunk, nslots, nsteps, s_sent, &s_failed, &s_pushed);
  else
    take_steps<T, REDUCE, H>(c, red, x, chunk, nslots, nsteps, s_sent, s_taken, &s_failed,
                             &s_pushed);
  __syncthreads();
  const int p = threadIdx.x;
  if (p < n && ((x.send_to >> p) & 1)) sent[p] = s_sent[p] + (uint32_t)nsteps;
  if (p < n && p != me && ((x.recv_from >> p) & 1)) taken[p] = s_taken[p] + (uint32_t)nsteps;
}

#define WIDE_SLOTS 4

/* File-local (every kernel file has a launcher; shared names would be
 * folded into one by the linker). */
namespace {
template <typename T, bool REDUCE> struct launcher {
  static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, cudaStream_t stream) {
    const size_t chunk = pipe_chunk(*c, x->bytes, false);
    /* At most WIDE_SLOTS steps ahead: deeper FIFOs measured slower for
     * exchanges with every peer (2-GPU AllReduce at 128 MiB: 234 GB/s with 8
     * slots of 64 KiB, 253 with 4). */
    uint32_t nslots = (uint32_t)(c->fifo_bytes / chunk);
    if (nslots > WIDE_SLOTS) nslots = WIDE_SLOTS;
    size_t nchunks = (x->bytes + chunk - 1) / chunk;
    unsigned grid = nchunks < c->channels ? (unsigned)nchunks : c->channels;
    /* Copies with peers both ways (AlltoAll) from wide_from: 1024-thread
     * CTAs (2 x H200, 2 processes, AlltoAll 1.04-1.12x from 32 MiB;
     * 0.92-0.98x at 2-16 MiB, and Gather, Scatter no better). Both
     * halves of a CTA widen; reductions stay narrow (at 64 registers per
     * thread their accumulators spill). */
    if constexpr (!REDUCE) {
      const uint32_t peers = ~(1u << c->rank);
      const bool both_ways = (x->send_to & peers) && (x->recv_from & peers);
      /* Copies with peers from big_from also on twice the channels (the
       * added ones' FIFOs half the size, so every channel gets as many
       * slots as those): 2 x H200, 2 processes, AlltoAll 1.03x at 128
       * MiB and 1.10x at 1 GiB with 128 CTAs against 64, 0.98x at 64 MiB;
       * Gather and Scatter (one way) 1.02-1.04x at 128 MiB, 1.04-1.08x
       * from 256 MiB. Both ends of every pair decide alike: each has peers
       * to copy with, and the block size and the settings agree. */
      const uint32_t half_slots = (uint32_t)(c->fifo_bytes / 2 / chunk);
      if (c->big_from && ((x->send_to | x->recv_from) & peers) &&
          x->bytes * (size_t)c->nranks >= c->big_from && half_slots > 0 && nchunks > c->channels) {
        nslots = half_slots < nslots ? half_slots : nslots;
        grid = nchunks < 2 * c->channels ? (unsigned)nchunks : 2 * c->channels;
      }
      if (c->wide_from && both_ways && x->bytes * (size_t)c->nranks >= c->wide_from) {
        pipe<T, false, 2 * GROUP>
            <<<grid, 2 * THREADS, 0, stream>>>(*c, *red, *x, chunk, nslots, nchunks);
        return cudaGetLastError();
      }
    }
    pipe<T, REDUCE, GROUP><<<grid, THREADS, 0, stream>>>(*c, *red, *x, chunk, nslots, nchunks);
    return cudaGetLastError();
  }
};
} // namespace

extern "C" int chorus_kern_pipe(const chorus_kern_comm *c, const chorus_kern_red *red,
                                const chorus_kern_xchg *x, void *stream) {
  return launch_exchange<launcher>::run("launching the pipelined exchange kernel", c, red, x,
                                        stream);
}

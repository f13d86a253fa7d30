/*
 * twoshot.cu - AllReduce as ReduceScatter then AllGather in one launch
 * (kernels.h, chorus_kern_twoshot), for the sizes between the one-shot
 * exchange (every rank sends the whole buffer to every peer) and the ring
 * (a step per hop): each byte crosses a link twice, 2 (n - 1) / n of the
 * buffer per rank, with two hops of latency instead of 2 n - 1.
 *
 * Channel (CTA) b handles chunk positions b, b + G, ... of every block.
 * Its threads form three groups, each with its own named barrier, so the
 * phases of successive positions overlap:
 *
 *   pushers, position i: wait for room in each peer p's ReduceScatter
 *     FIFO (channel b), copy chunk i of this rank's block p into it, then
 *     announce it (release store into p's head word);
 *   reducers, position i: wait for chunk i of this rank's own block from
 *     every peer and for room in each peer's AllGather FIFO (channel
 *     b + H), reduce the peers' chunks and the rank's own input in rank
 *     order into the output, copy the result into every peer's AllGather
 *     FIFO, then hand the ReduceScatter slots back and announce the
 *     AllGather ones;
 *   gatherers, position i: wait for every peer's reduced chunk i, copy it
 *     into the output, hand the slots back.
 *
 * Each block is reduced by one rank only, so every rank ends with bitwise
 * the same result. In place, a gatherer overwrites block p only after
 * rank p reduced it, which needs this rank's pushed chunk of block p: the
 * pushers have read it by then. The FIFOs and counters are the pipelined
 * kernel's (pipe.cu), so launches of every kind follow each other freely;
 * no system fence precedes a release store (as in the ring kernel: the
 * group barrier makes the group's writes visible to the releasing thread,
 * and release is cumulative). Every wait watches the abort word and the
 * deadline.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}
#include "device/pipe_util.cuh"

/* Threads of the three groups (pushers, reducers, gatherers); the reducers
 * read n sources and write n outputs per unit, the others one each. */
#define NP 128
#define NR 256
#define NG 128
#define NT (NP + NR + NG)
enum { BAR_P = 1, BAR_R = 2, BAR_G = 3 };

/* Where a channel's counters and FIFO totals sit, and what each group
 * needs of them. */
struct lanes {
  int rs, ag;                   /* channels of the two halves */
  uint32_t *sent_rs, *taken_rs; /* [peer] totals of this rank, ReduceScatter half */
  uint32_t *sent_ag, *taken_ag; /* AllGather half */
};

static __device__ __forceinline__ uint32_t *sent_total(const chorus_kern_comm &c, int ch) {
  return (uint32_t *)(c.arena[c.rank] + c.cnt_off) + (size_t)ch * CHORUS_KERN_MAX_RANKS;
}
static __device__ __forceinline__ uint32_t *taken_total(const chorus_kern_comm &c, int ch) {
  return sent_total(c, CHORUS_KERN_MAX_CHANNELS + ch);
}

/* Bytes of block p (clipped to the buffer), and its units. */
static __device__ __forceinline__ size_t block_len(const chorus_kern_xchg &x, int p) {
  const size_t start = (size_t)p * x.bytes;
  return start >= x.total ? 0 : x.total - start < x.bytes ? x.total - start : x.bytes;
}
static __device__ __forceinline__ size_t units_of(size_t len) {
  return (len + sizeof(U) - 1) / sizeof(U);
}

template <typename T>
static __device__ void push(const chorus_kern_comm &c, const chorus_kern_red &red,
                            const chorus_kern_xchg &x, const lanes &l, const uint32_t *sent,
                            size_t chunk, uint32_t nslots, size_t npos, volatile int *failed) {
  const int t = threadIdx.x, b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  const size_t cu = chunk / sizeof(U);
  const bool premul = red.kind == CHORUS_RED_PREMULSUM;
  const typename elem<T>::acc scalar = premul_scalar<T>(red);
  for (size_t i = 0; i < npos; i++) {
    if (t < n && t != me)
      wait_at_least(done_word(c, c.arena[me], l.rs, t), room_needed(sent[t], (uint32_t)i, nslots),
                    c, t, failed);
    if (group_any(BAR_P, *failed, NP)) break;
    const size_t j0 = (b + i * G) * cu;
    for (int k = 0; k < n - 1; k++) { /* channels start on different links */
      const int p = (me + 1 + (k + b) % (n - 1)) % n;
      const size_t len = block_len(x, p), nu = units_of(len), j1 = j0 + cu < nu ? j0 + cu : nu;
      const char *from = (const char *)x.send + (size_t)p * x.bytes;
      const bool fast = whole(from, len, j1);
      char *to =
          slot(c, c.arena[p], l.rs, me, sent[p] + (uint32_t)i, chunk, nslots) - j0 * sizeof(U);
      for (size_t j = j0 + t; j < j1; j += NP * UNROLL) {
        U d[UNROLL];
        load_units<UNROLL, NP>(d, from, len, j, j1, fast);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
          if (j + u * NP < j1)
            *(U *)(to + (j + u * NP) * sizeof(U)) = premul ? scaled<T, U>(d[u], scalar) : d[u];
      }
    }
    group_sync(BAR_P, NP);
    if (t < n && t != me) {
      if (i == 0) put_call(c, l.rs, t, sent[t], x.desc);
      st_release(head_word(c, c.arena[t], l.rs, me), sent[t] + (uint32_t)i + 1);
    }
  }
}

template <typename T>
static __device__ void reduce(const chorus_kern_comm &c, const chorus_kern_red &red,
                              const chorus_kern_xchg &x, const lanes &l, const uint32_t *taken_rs,
                              const uint32_t *sent_ag, size_t chunk, uint32_t nslots, size_t npos,
                              volatile int *failed) {
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  constexpr int UR = E >= 16 ? UNROLL / 4 : E >= 8 ? UNROLL / 2 : UNROLL; /* UR x E accumulators */
  const int t = threadIdx.x - NP, b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  const size_t cu = chunk / sizeof(U);
  const bool premul = red.kind == CHORUS_RED_PREMULSUM;
  const A scalar = premul_scalar<T>(red);
  const size_t len = block_len(x, me), nu = units_of(len);
  const char *own = (const char *)x.send + (size_t)me * x.bytes;
  char *out = (char *)x.recv + (size_t)me * x.bytes;
  for (size_t i = 0; i < npos; i++) {
    if (t < n && t != me &&
        wait_at_least(head_word(c, c.arena[me], l.rs, t), taken_rs[t] + (uint32_t)i + 1, c, t,
                      failed) &&
        i == 0)
      check_call(c, l.rs, t, taken_rs[t], x.desc, failed);
    if (t >= 32 && t < 32 + n && t - 32 != me)
      wait_at_least(done_word(c, c.arena[me], l.ag, t - 32),
                    room_needed(sent_ag[t - 32], (uint32_t)i, nslots), c, t - 32, failed);
    if (group_any(BAR_R, *failed, NR)) break;
    const size_t j0 = (b + i * G) * cu, j1 = j0 + cu < nu ? j0 + cu : nu;
    const bool own_fast = whole(own, len, j1), out_fast = whole(out, len, j1);
    /* Whole rounds of NR * UR units, plain vectors and a sum: no bounds
     * checks and the operator known to the compiler (as ring.cu's
     * step_units). */
    const bool plain =
        (j1 - j0) % (NR * UR) == 0 && own_fast && out_fast && !premul && plain_sum(red);
    auto units = [&](auto checked_t) {
      constexpr bool CHECKED = decltype(checked_t)::value;
      const int kind = CHECKED ? red.kind : CHORUS_RED_SUM;
      for (size_t j = j0 + t; j < j1; j += NR * UR) {
        A acc[UR][E];
        for (int src = 0; src < n; src++) {
          U d[UR];
          if (src == me) {
            load_own<T, UR, NR, CHECKED>(d, own, len, j, j1, own_fast, premul, scalar);
          } else {
            const char *from =
                slot(c, c.arena[me], l.rs, src, taken_rs[src] + (uint32_t)i, chunk, nslots) -
                j0 * sizeof(U);
#pragma unroll
            for (int u = 0; u < UR; u++)
              if (!CHECKED || j + u * NR < j1) d[u] = *(const U *)(from + (j + u * NR) * sizeof(U));
          }
#pragma unroll
          for (int u = 0; u < UR; u++)
            if (!CHECKED || j + u * NR < j1) fold_unit<T, U>(acc[u], d[u], src == 0, kind);
        }
#pragma unroll
        for (int u = 0; u < UR; u++) {
          if (CHECKED && j + u * NR >= j1) continue;
          const U r = finish_unit<T, U>(acc[u], red, true);
          if (CHECKED)
            store_unit(out, len, j + u * NR, r, out_fast);
          else
            ((U *)out)[j + u * NR] = r;
          for (int k = 0; k < n - 1; k++) {
            const int p = (me + 1 + (k + b) % (n - 1)) % n;
            char *to = slot(c, c.arena[p], l.ag, me, sent_ag[p] + (uint32_t)i, chunk, nslots) -
                       j0 * sizeof(U);
            *(U *)(to + (j + u * NR) * sizeof(U)) = r;
          }
        }
      }
    };
    if (plain)
      units(std::false_type{});
    else
      units(std::true_type{});
    group_sync(BAR_R, NR);
    if (t < n && t != me)
      st_release(done_word(c, c.arena[t], l.rs, me), taken_rs[t] + (uint32_t)i + 1);
    if (t >= 32 && t < 32 + n && t - 32 != me)
      st_release(head_word(c, c.arena[t - 32], l.ag, me), sent_ag[t - 32] + (uint32_t)i + 1);
  }
}

static __device__ void gather(const chorus_kern_comm &c, const chorus_kern_xchg &x, const lanes &l,
                              const uint32_t *taken, size_t chunk, uint32_t nslots, size_t npos,
                              volatile int *failed) {
  const int t = threadIdx.x - NP - NR, b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  const size_t cu = chunk / sizeof(U);
  for (size_t i = 0; i < npos; i++) {
    if (t < n && t != me)
      wait_at_least(head_word(c, c.arena[me], l.ag, t), taken[t] + (uint32_t)i + 1, c, t, failed);
    if (group_any(BAR_G, *failed, NG)) break;
    const size_t j0 = (b + i * G) * cu;
    for (int k = 0; k < n - 1; k++) {
      const int src = (me + 1 + (k + b) % (n - 1)) % n;
      const size_t len = block_len(x, src), nu = units_of(len), j1 = j0 + cu < nu ? j0 + cu : nu;
      char *to = (char *)x.recv + (size_t)src * x.bytes;
      const bool fast = whole(to, len, j1);
      const char *from =
          slot(c, c.arena[me], l.ag, src, taken[src] + (uint32_t)i, chunk, nslots) - j0 * sizeof(U);
      for (size_t j = j0 + t; j < j1; j += NG * UNROLL) {
        U d[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
          if (j + u * NG < j1) d[u] = *(const U *)(from + (j + u * NG) * sizeof(U));
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
          if (j + u * NG < j1) store_unit(to, len, j + u * NG, d[u], fast);
      }
    }
    group_sync(BAR_G, NG);
    if (t < n && t != me)
      st_release(done_word(c, c.arena[t], l.ag, me), taken[t] + (uint32_t)i + 1);
  }
}

template <typename T>
__global__ void __launch_bounds__(NT)
    twoshot(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t chunk,
            uint32_t nslots, size_t nchunks, int half) {
  board_post(c, x.seq, x.desc, true);
  __shared__ uint32_t s_cnt[4][CHORUS_KERN_MAX_RANKS];
  __shared__ int s_failed;
  const int b = blockIdx.x, G = gridDim.x, n = c.nranks, me = c.rank;
  lanes l;
  l.rs = b;
  l.ag = b + half;
  l.sent_rs = sent_total(c, l.rs);
  l.taken_rs = taken_total(c, l.rs);
  l.sent_ag = sent_total(c, l.ag);
  l.taken_ag = taken_total(c, l.ag);
  const int t = threadIdx.x;
  if (t < CHORUS_KERN_MAX_RANKS) {
    s_cnt[0][t] = l.sent_rs[t];
    s_cnt[1][t] = l.taken_rs[t];
    s_cnt[2][t] = l.sent_ag[t];
    s_cnt[3][t] = l.taken_ag[t];
  }
  if (t == 0) s_failed = 0;
  __syncthreads();
  const size_t npos = (size_t)b < nchunks ? (nchunks - 1 - b) / G + 1 : 0;
  if (t < NP)
    push<T>(c, red, x, l, s_cnt[0], chunk, nslots, npos, &s_failed);
  else if (t < NP + NR)
    reduce<T>(c, red, x, l, s_cnt[1], s_cnt[2], chunk, nslots, npos, &s_failed);
  else
    gather(c, x, l, s_cnt[3], chunk, nslots, npos, &s_failed);
  __syncthreads();
  if (t < n && t != me) {
    l.sent_rs[t] = s_cnt[0][t] + (uint32_t)npos;
    l.taken_rs[t] = s_cnt[1][t] + (uint32_t)npos;
    l.sent_ag[t] = s_cnt[2][t] + (uint32_t)npos;
    l.taken_ag[t] = s_cnt[3][t] + (uint32_t)npos;
  }
}

/* File-local (every kernel file has a launcher; shared names would be
 * folded into one by the linker). */
namespace {
template <typename T, bool REDUCE> struct launcher {
  static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, cudaStream_t stream) {
    /* Every channel gets chunks while the block has enough, whole pages, at
     * most twoshot_chunk and half a FIFO. */
    const unsigned half = c->channels / 2;
    unsigned channels = c->twoshot_channels < half ? c->twoshot_channels : half;
    const fifo_cut k = cut_for_fifo(x->bytes, channels, c->twoshot_chunk, c->fifo_bytes);
    twoshot<T><<<k.grid, NT, 0, stream>>>(*c, *red, *x, k.chunk, k.nslots, k.nchunks, (int)half);
    return cudaGetLastError();
  }
};

/* Two-shot only reduces: no copy instance. */
template <> struct launcher<uint8_t, false> {
  static cudaError_t run(const chorus_kern_comm *, const chorus_kern_red *,
                         const chorus_kern_xchg *, cudaStream_t) {
    return cudaErrorInvalidValue;
  }
};
} // namespace

extern "C" int chorus_kern_twoshot(const chorus_kern_comm *c, const chorus_kern_red *red,
                                   const chorus_kern_xchg *x, void *stream) {
  if (c->channels < 2)
    return chorus_dev_fail((int)cudaErrorInvalidValue,
                           "the two-shot kernel needs 2+ pipeline channels");
  return launch_exchange<launcher>::run("launching the two-shot kernel", c, red, x, stream);
}

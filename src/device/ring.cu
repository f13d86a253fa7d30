/*
 * ring.cu - rings and chains in one launch: AllGather, ReduceScatter and
 * AllReduce rings, Broadcast and Reduce chains, at bandwidth-bound sizes
 * (kernels.h, chorus_ring_*).
 *
 * Every rank streams only to the next rank, which is what the links carry
 * fastest (one peer at a time reaches the link rate where pushing to every
 * peer at once does not), and every chunk goes around the ring within the
 * same launch, so the steps overlap across ranks instead of costing a
 * launch each. Channel (CTA) b handles chunk positions b, b + G, ... of
 * every block; for each position it runs its steps in order (every step
 * of a ring, its own place of a chain), all its threads together:
 *
 *   wait for the previous rank's chunk of this step (its head word here,
 *   except at step 0) and for room at the next rank (its done word here,
 *   except at the last step; at the first send of the launch, for every
 *   chunk of earlier launches to be consumed, as their slots may have been
 *   cut differently); combine the previous rank's chunk with this rank's
 *   own input where the step reduces, write the output where it writes
 *   one, copy the result into the next rank's slot; then hand the slot
 *   back (release store into the previous rank's done word) and announce
 *   the new one (release store into the next rank's head word).
 *
 * Or, where few channels move a copy that does not reduce (WARPS), each
 * warp runs the steps on its own share of the chunk with no barrier of
 * the CTA between them: it waits for the same words itself, copies, and
 * counts itself done with the step; the last warp to do so hands the
 * slot back and announces the new one while the others have gone on to
 * the next step, so the time a step's stores take to drain and its flags
 * to travel overlaps the other warps' copies instead of stopping the CTA.
 *
 * The FIFOs and counters are those of the pipelined kernel (pipe.cu), so
 * the kinds of launch follow each other on a communicator freely. No
 * system fence precedes the release store (a stream to one peer measured
 * faster without, as Send/Recv does). Every wait watches the abort word
 * and the deadline.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}
#include "device/pipe_util.cuh"

/* Threads per CTA: 512 measured faster than 256 (4xH200, ReduceScatter
 * at 128 MiB: 330 against 293 GB/s); the chunk of a step is NT * UR
 * units at a time. */
#define NT THREADS
/* Steps a warp may run ahead of the last one handed on: the arrival
 * counts are a ring of LEAD, and a count is reused only once every warp
 * has arrived at the step LEAD before. */
#define LEAD 32
/* The most ring channels at which non-reducing launches take that flow
 * (the launcher says why). */
#define WARPS_UPTO 8

/* Built with -DCHORUS_STEP_TIMING (scripts/gpu_steps.sh), thread 0 of
 * each rank's CTA 0 sums the time of its first STEP_TIMES steps of a
 * position over the launch, waiting (for the words) apart from working
 * (copy, then hand-off), and prints them at the end: where a launch's
 * time goes, since Nsight Compute cannot profile kernels that wait for
 * each other across processes. */
#ifdef CHORUS_STEP_TIMING
#include <stdio.h>
#define STEP_TIMES 4
#endif

/* A warp's arrival (its lane 0, after __syncwarp) at a step's count;
 * true for the CTA's last. acq_rel at CTA scope: every warp's copies come
 * before the last one's release stores that hand the slots on. */
static __device__ __forceinline__ bool arrive_last(uint32_t *count) {
  uint32_t old;
  asm volatile("atom.acq_rel.cta.shared.add.u32 %0, [%1], 1;"
               : "=r"(old)
               : "r"((uint32_t)__cvta_generic_to_shared(count))
               : "memory");
  return old % (NT / 32) == NT / 32 - 1;
}

/* A step's two sources combined: through T's accumulators, or where the
 * plain loop sums (PLAIN) added straight by add_units, the same result
 * (bfloat16 and half in pairs, a quarter of the instructions). Under a cap
 * of 8 CTAs, where the CTAs' issue rate bounds the reduction: 2xH200,
 * bfloat16 ReduceScatter 1.3x and Reduce 1.4-1.6x faster than through
 * float accumulators; 4xH200, float ReduceScatter 1.12x, Reduce 1.15x,
 * AllReduce 1.05x, uncapped level (bench/results/
 * gpu_ab_4xh200_2026-11-30_ring_add_units.txt). SUMPOSTDIV's final step
 * takes one branch a unit here: a loop of its own for it made bfloat16
 * averages 1.26x slower there. */
template <typename T, bool PLAIN>
static __device__ __forceinline__ U combine2(U d, U o, const chorus_kern_red &red, bool final,
                                             int kind) {
  if constexpr (PLAIN)
    if (!final || red.kind != CHORUS_RED_SUMPOSTDIV) return add_units<T, U>(d, o);
  typename elem<T>::acc acc[sizeof(U) / sizeof(T)];
  fold_unit<T, U>(acc, d, true, kind);
  fold_unit<T, U>(acc, o, false, kind);
  return finish_unit<T, U>(acc, red, final);
}

/* One step's units from j (this thread's first) to j1 of a chunk: the
 * previous rank's (from) and this rank's own (own, where loads_own) into
 * the output (dst, where write) and the next rank's slot (to, where tx),
 * combined where combine. CHECKED: any operator, units past j1 skipped,
 * buffers of any alignment; else a sum in whole rounds of plain vectors. */
template <typename T, bool REDUCE, int H, int UR, bool CHECKED>
static __device__ __forceinline__ void
step_units(size_t j, size_t j1, const char *from, const char *own, char *dst, char *to, bool rx,
           bool tx, bool loads_own, bool combine, bool write, bool final, bool premul,
           typename elem<T>::acc scalar, const chorus_kern_red &red, size_t nbytes, bool own_fast,
           bool dst_fast) {
  const int kind = CHECKED ? red.kind : CHORUS_RED_SUM;
  for (; j < j1; j += H * UR) {
    U d[UR];
    if (rx) {
#pragma unroll
      for (int u = 0; u < UR; u++)
        if (!CHECKED || j + u * H < j1) d[u] = *(const U *)(from + (j + u * H) * sizeof(U));
    }
    if (loads_own) {
      U o[UR];
      if (CHECKED) {
        load_units<UR, H>(o, own, nbytes, j, j1, own_fast);
      } else {
#pragma unroll
        for (int u = 0; u < UR; u++) o[u] = ((const U *)own)[j + u * H];
      }
#pragma unroll
      for (int u = 0; u < UR; u++) {
        if (CHECKED && j + u * H >= j1) continue;
        if (CHECKED && premul) o[u] = scaled<T, U>(o[u], scalar);
        if (!REDUCE || !combine)
          d[u] = o[u];
        else
          d[u] = combine2<T, !CHECKED>(d[u], o[u], red, final, kind);
      }
    }
#pragma unroll
    for (int u = 0; u < UR; u++) {
      if (CHECKED && j + u * H >= j1) continue;
      if (write) {
        if (CHECKED)
          store_unit(dst, nbytes, j + u * H, d[u], dst_fast);
        else
          ((U *)dst)[j + u * H] = d[u];
      }
      if (tx) *(U *)(to + (j + u * H) * sizeof(U)) = d[u];
    }
  }
}

template <typename T, bool REDUCE, bool WARPS>
__global__ void __launch_bounds__(NT)
    ring(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t chunk, uint32_t nslots,
         size_t nchunks) {
  board_post(c, x.seq, x.desc, true);
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  constexpr int UR = !REDUCE || E <= 8 ? UNROLL : UNROLL / 2; /* 16 1-byte accumulators a unit */
  __shared__ int s_failed;
  __shared__ uint32_t s_arrived[LEAD]; /* warps done with step z, at z % LEAD */
  __shared__ uint32_t s_posted;        /* steps handed on, in order */
  const int t = threadIdx.x, lane = t % 32, b = blockIdx.x, G = gridDim.x, n = c.nranks,
            me = c.rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n, S = chorus_kern_ring_steps(x.ring, n);
  const int first = chorus_kern_ring_first(x.ring, me, n, x.root),
            last = chorus_kern_ring_last(x.ring, me, n, x.root);
  /* Chunks this rank sends to next and takes from prev per position. */
  const uint32_t sends = (uint32_t)((last < S - 1 ? last : S - 2) - first + 1),
                 takes = (uint32_t)(last - (first > 0 ? first : 1) + 1);
  uint32_t *sent = (uint32_t *)(c.arena[me] + c.cnt_off) + (size_t)b * CHORUS_KERN_MAX_RANKS + next;
  uint32_t *taken = (uint32_t *)(c.arena[me] + c.cnt_off) +
                    (size_t)(CHORUS_KERN_MAX_CHANNELS + b) * CHORUS_KERN_MAX_RANKS + prev;
  const uint32_t sent0 = *sent, taken0 = *taken;
#ifdef CHORUS_STEP_TIMING
  uint64_t waited[STEP_TIMES] = {0}, worked[STEP_TIMES] = {0};
#endif
  if (t < LEAD) s_arrived[t] = 0;
  if (t == 0) s_failed = 0, s_posted = 0;
  __syncthreads();
  const size_t cu = chunk / sizeof(U), nunits = (x.bytes + sizeof(U) - 1) / sizeof(U);
  const size_t npos = (size_t)b < nchunks ? (nchunks - 1 - b) / G + 1 : 0;
  const bool premul = REDUCE && red.kind == CHORUS_RED_PREMULSUM;
  const A scalar = premul_scalar<T>(red);
  const char *in = (const char *)x.send;
  char *out = (char *)x.recv;
  const bool in_blocks = chorus_kern_ring_in_blocks(x.ring),
             out_blocks = chorus_kern_ring_out_blocks(x.ring);
  /* Chunks sent and taken so far in this launch, and steps run. */
  uint32_t ks = 0, kr = 0, z = 0;
  for (size_t i = 0; i < npos; i++) {
    const size_t j0 = (b + i * G) * cu, j1 = j0 + cu < nunits ? j0 + cu : nunits;
    for (int s = first; s <= last; s++, z++) {
#ifdef CHORUS_STEP_TIMING
      const uint64_t step_t0 = now_ns();
#endif
      const bool rx = s > 0, tx = s < S - 1;
      /* One waiter per word: each warp's lane 0 in the warps' flow, else
       * threads 0 (rx) and 32 (tx) of the CTA, waiting side by side. */
      const bool waits_rx = WARPS ? lane == 0 : t == 0, waits_tx = WARPS ? lane == 0 : t == 32;
      bool ok = true;
      if (WARPS && lane == 0)
        while (ok && (int32_t)(z - *(volatile uint32_t *)&s_posted) >= LEAD)
          ok = !*(volatile int *)&s_failed;
      if (ok && rx && waits_rx)
        ok = wait_at_least(head_word(c, c.arena[me], b, prev), taken0 + kr + 1, c, prev, &s_failed);
      if (ok && rx && kr == 0 && t == 0) check_call(c, b, prev, taken0, x.desc, &s_failed);
      if (ok && tx && waits_tx)
        ok = wait_at_least(done_word(c, c.arena[me], b, next), room_needed(sent0, ks, nslots), c,
                           next, &s_failed);
      const bool go = WARPS ? __shfl_sync(~0u, ok && !*(volatile int *)&s_failed, 0)
                            : !__syncthreads_or(s_failed);
      if (!go) goto out;
#ifdef CHORUS_STEP_TIMING
      const uint64_t step_t1 = now_ns();
#endif
      {
        const int blk = chorus_kern_ring_block(x.ring, me, n, s);
        const bool red_step = REDUCE && chorus_kern_ring_reduces(x.ring, n, s);
        const bool write = chorus_kern_ring_writes(x.ring, n, s);
        /* The final result of a reduction: SUMPOSTDIV divides it once. */
        const bool final = red_step && s == n - 1;
        const char *own = in + (in_blocks ? (size_t)blk * x.bytes : 0);
        char *dst = out + (out_blocks ? (size_t)blk * x.bytes : 0);
        const char *from =
            rx ? slot(c, c.arena[me], b, prev, taken0 + kr, chunk, nslots) - j0 * sizeof(U) : NULL;
        char *to =
            tx ? slot(c, c.arena[next], b, me, sent0 + ks, chunk, nslots) - j0 * sizeof(U) : NULL;
        const bool own_fast = whole(own, x.bytes, j1), dst_fast = whole(dst, x.bytes, j1);
        const bool loads_own = s == 0 || red_step;
        /* Whole rounds of NT * UR units, plain vectors and a sum (or a
         * copy): no bounds checks, and the operator known to the compiler
         * instead of chosen per element. Under a cap of 8 CTAs, where a
         * CTA's issue rate bounds the reduction, 2 x H200, 2 processes,
         * 16 MiB-1 GiB: ReduceScatter 1.27-1.33x, Reduce 1.30-1.33x,
         * AllReduce 1.16-1.17x faster than the checked loop; uncapped
         * 1.00-1.10x; copies level (bench/results/
         * gpu_ab_2xh200_2026-11-30_ring_plain.txt). */
        const bool plain = (j1 - j0) % (NT * UR) == 0 && (!loads_own || own_fast) &&
                           (!write || dst_fast) && !premul && (!red_step || plain_sum(red));
        if (plain)
          step_units<T, REDUCE, NT, UR, false>(j0 + t, j1, from, own, dst, to, rx, tx, loads_own,
                                               red_step && s > 0, write, final, false, scalar, red,
                                               x.bytes, true, true);
        else
          step_units<T, REDUCE, NT, UR, true>(j0 + t, j1, from, own, dst, to, rx, tx, loads_own,
                                              red_step && s > 0, write, final, premul, scalar, red,
                                              x.bytes, own_fast, dst_fast);
      }
      /* The CTA's share is done (in the warps' flow: this warp's, and the
       * last warp of the step posts): hand the slot back and announce the
       * new one. */
      if (WARPS)
        __syncwarp();
      else
        __syncthreads();
      if (WARPS ? lane == 0 && arrive_last(&s_arrived[z % LEAD]) : t == 0 || t == 32) {
        if (rx && (WARPS || t == 0))
          st_release(done_word(c, c.arena[prev], b, me), taken0 + kr + 1);
        if (tx && (WARPS || t == 32)) {
          if (ks == 0) put_call(c, b, next, sent0, x.desc);
          st_release(head_word(c, c.arena[next], b, me), sent0 + ks + 1);
        }
        if (WARPS) *(volatile uint32_t *)&s_posted = z + 1;
      }
#ifdef CHORUS_STEP_TIMING
      if (s - first < STEP_TIMES)
        waited[s - first] += step_t1 - step_t0, worked[s - first] += now_ns() - step_t1;
#endif
      ks += tx;
      kr += rx;
    }
  }
#ifdef CHORUS_STEP_TIMING
  if (b == 0 && t == 0)
    printf("chorus steps: rank %d, CTA 0 of %d, %llu positions of %llu bytes, %s: wait/work us "
           "%.1f/%.1f %.1f/%.1f %.1f/%.1f %.1f/%.1f\n",
           me, G, (unsigned long long)npos, (unsigned long long)chunk, WARPS ? "warps" : "barriers",
           waited[0] / 1e3, worked[0] / 1e3, waited[1] / 1e3, worked[1] / 1e3, waited[2] / 1e3,
           worked[2] / 1e3, waited[3] / 1e3, worked[3] / 1e3);
#endif
out:
  __syncthreads();
  if (t == 0) {
    *sent = sent0 + (uint32_t)npos * sends;
    *taken = taken0 + (uint32_t)npos * takes;
  }
}

/* File-local (every kernel file has a launcher; shared names would be
 * folded into one by the linker). */
namespace {
template <typename T, bool REDUCE> struct launcher {
  static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, cudaStream_t stream) {
    fifo_cut k = cut_for_fifo(x->bytes, c->ring_channels, c->ring_chunk, c->fifo_bytes);
    /* From big_from (the whole call's bytes), on twice the CTAs where the
     * channels a big copy adds (FIFOs half the size, pipe_util.cuh) still
     * hold two chunks: every CTA then cuts its FIFO into the slots those
     * hold. 2 x H200, 2 processes, 128 CTAs against 64 from 256 MiB:
     * Broadcast and Reduce chains 1.04-1.05x, AllReduce 1.06-1.08x,
     * AllGather 1.04-1.07x, ReduceScatter 1.07-1.12x; at 128 MiB
     * 1.01-1.05x, at 64 MiB 0.99-1.05x. Every rank decides alike from the
     * size and the settings. */
    const size_t total = chorus_kern_ring_in_blocks(x->ring) || chorus_kern_ring_out_blocks(x->ring)
                             ? x->bytes * (size_t)c->nranks
                             : x->bytes;
    if (c->big_from && total >= c->big_from && k.chunk <= c->fifo_bytes / 4 && k.nchunks > k.grid) {
      const unsigned most = 2 * c->ring_channels;
      k.grid = k.nchunks < most ? (unsigned)k.nchunks : most;
      if (k.grid > c->channels) k.nslots = (uint32_t)(c->fifo_bytes / 2 / k.chunk);
    }
    /* Warps on their own where few channels move a copy that does not
     * reduce (AllGather rings, Broadcast chains): 2 x H200, 2 processes,
     * 8 CTAs, against CTA barriers from 64 MiB, AllGather 1.02-1.04x and
     * Broadcast 1.06-1.07x; with 32 CTAs AllGather 0.93-1.00x from 256
     * MiB; AllReduce and ReduceScatter 0.96-1.00x with 8, AllReduce
     * 0.92-0.98x by default (64-128 CTAs): those keep the barriers. */
    /* !REDUCE is true in this branch; as the flag it keeps the reducing
     * kernels from being built in both flows. */
    if (!REDUCE && c->ring_channels <= WARPS_UPTO)
      ring<T, REDUCE, !REDUCE>
          <<<k.grid, NT, 0, stream>>>(*c, *red, *x, k.chunk, k.nslots, k.nchunks);
    else
      ring<T, REDUCE, false><<<k.grid, NT, 0, stream>>>(*c, *red, *x, k.chunk, k.nslots, k.nchunks);
    return cudaGetLastError();
  }
};
} // namespace

extern "C" int chorus_kern_ring(const chorus_kern_comm *c, const chorus_kern_red *red,
                                const chorus_kern_xchg *x, void *stream) {
  return launch_exchange<launcher>::run("launching the ring kernel", c, red, x, stream);
}

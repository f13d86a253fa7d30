/*
 * p2p.cu - Send/Recv on GPU communicators (kernels.h): the transfers of
 * one round of a group in at most two launches, small ones as LL lines,
 * the rest through the FIFOs and counters of the pipelined kernel
 * (pipe.cu). Which way a transfer goes follows from its size, so both
 * ends agree (chorus_gpu_p2p_split, gpu/p2p.c).
 *
 * Small transfers (sendrecv_ll): each is cut into parts of about 4 KiB
 * (chorus_kern_p2p_parts, at most p2p_ll_parts of them), part k moved by
 * CTA k, so a 128 KiB transfer has 32 CTAs pushing lines at once. Each
 * ordered pair of ranks has its own epoch per part, which only the two ends
 * advance (the sender's send epoch for the peer and the receiver's recv
 * epoch for it step together, as sends and receives pair in call order),
 * and a slot pair per part in the receiver's arena. The k-th message goes
 * to slot parity k % 2 as flagged lines: a header with its size, then 8
 * bytes per line. The receiver takes each line once it carries the epoch,
 * checks the size against its own call, and acks the epoch; a sender reuses
 * a slot once epoch k - 2 is acked. Collectives' LL epochs are per CTA and
 * shared by all ranks, which a Send/Recv between two of them would put out
 * of step; these involve only the pair.
 *
 * With CHORUS_GPU_P2P_PULL the FIFOs are the sender's: the pushing half
 * copies into its own arena's FIFO [channel][destination] and the taking
 * half loads from the sender's arena (as NCCL's P2P read mode on NVLink
 * does; an SM pull measured 366 GB/s against 353 pushing between two
 * H200s). The area [channel][peer] of an arena then carries collectives'
 * data from the peer and Send/Recv data to it, never at once: a rank's
 * kernels run one after another, each takes everything pushed to it
 * before it ends, and a peer pushes into that area only after its own
 * Send/Recv kernel has pulled everything from it.
 *
 * Larger transfers (sendrecv): a transfer of `bytes` with peer p is cut
 * into chunks of pipe_chunk(bytes, narrow) (each pair is a narrow stream:
 * large steps, no fence before a release), the FIFO into as many slots as
 * fit, and chunk k travels on channel k % channels: the configured channel
 * count, or twice it from big_from (cut_transfer), never the grid, so the
 * two ends agree whatever else each of them moves in the same launch.
 * Channel b's pushing half copies its chunks of every send into the peers'
 * FIFOs, step by step, each once the peer has handed that slot back, and
 * announces them on the head counters; its taking half waits for each
 * source's head, copies the chunk into the receive buffer and hands the
 * slot back. Sizes differ per peer, so step s
 * involves only the peers that have more than s chunks on this channel.
 * The taking half never overtakes the pushing half, so a receive into the
 * buffer being sent (an in-place ring shift) reads each chunk before
 * overwriting it.
 *
 * The LL launch goes first (gpu.c): it waits only for other ranks' LL
 * launches of the same round, which come first on their streams too.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}
#include "device/pipe_util.cuh"

#define R CHORUS_KERN_MAX_RANKS

/* How a transfer of nbytes travels: its chunk, chunks and channels. From
 * big_from a transfer takes twice the channels, the added ones with FIFOs
 * of half the size (pipe_util.cuh, slot), and chunks that leave every
 * channel as many slots in half a FIFO as the others have in a whole one
 * (a 128-channel build: 1.035x at 1 GiB between 2 processes on 2 x H200).
 * Both ends compute it from the size alone. */
struct p2p_cut {
  size_t chunk, nchunks;
  unsigned channels;
};
static __host__ __device__ __forceinline__ p2p_cut cut_transfer(const chorus_kern_comm &c,
                                                                size_t nbytes) {
  p2p_cut k = {4096, 0, c.channels};
  if (!nbytes) return k;
  const size_t half = narrow_slot(c, c.fifo_bytes / 2);
  if (c.big_from && nbytes >= c.big_from && half >= 4096) {
    k.channels = 2 * c.channels;
    k.chunk = chunk_of(nbytes, k.channels, half);
  } else {
    k.chunk = pipe_chunk(c, nbytes, true);
  }
  k.nchunks = (nbytes + k.chunk - 1) / k.chunk;
  return k;
}

/* What one half of a channel does with each peer: chunk size, the
 * transfer's channels, slots per FIFO and steps. */
struct p2p_side {
  size_t chunk[R];
  uint32_t channels[R];
  uint32_t nslots[R];
  uint32_t steps[R];
  uint32_t max_steps;
};

/* Entry p of S for a transfer of nbytes with peer p, on channel b. */
static __device__ void plan_side(const chorus_kern_comm &c, p2p_side &S, int p, size_t nbytes,
                                 int b) {
  const p2p_cut k = cut_transfer(c, nbytes);
  const size_t fifo = (unsigned)b < c.channels ? c.fifo_bytes : c.fifo_bytes / 2;
  S.chunk[p] = k.chunk;
  S.channels[p] = k.channels;
  S.nslots[p] = (uint32_t)(fifo / k.chunk);
  S.steps[p] = (size_t)b < k.channels && (size_t)b < k.nchunks
                   ? (uint32_t)((k.nchunks - 1 - b) / k.channels + 1)
                   : 0;
}

/* Copies units [j0, j1) of a chunk from `from` to `to` (to is nbytes long
 * and indexed like the whole transfer; from is already offset so). */
static __device__ __forceinline__ void copy_chunk(char *to, const char *from, size_t nbytes,
                                                  size_t j0, size_t j1, bool from_fast, int t) {
  const bool to_fast = whole(to, nbytes, j1);
  for (size_t j = j0 + t; j < j1; j += GROUP * UNROLL) {
    U d[UNROLL];
    load_units<UNROLL>(d, from, nbytes, j, j1, from_fast);
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
      if (j + u * GROUP < j1) store_unit(to, nbytes, j + u * GROUP, d[u], to_fast);
  }
}

/* Slot k of the FIFO that carries channel b's chunks from `sender` to
 * `receiver`: in the receiver's arena, [b][sender] (pushed), or with
 * p2p_pull in the sender's, [b][receiver] (pulled). */
static __device__ __forceinline__ char *pair_slot(const chorus_kern_comm &c, int b, int sender,
                                                  int receiver, uint32_t k, size_t chunk,
                                                  uint32_t nslots) {
  return c.p2p_pull ? slot(c, c.arena[sender], b, receiver, k, chunk, nslots)
                    : slot(c, c.arena[receiver], b, sender, k, chunk, nslots);
}

static __device__ void push_sends(const chorus_kern_comm &c, const chorus_kern_p2p &P,
                                  const p2p_side &S, const uint32_t *sent, volatile int *failed,
                                  volatile uint32_t *pushed) {
  const int t = threadIdx.x, b = blockIdx.x, n = c.nranks, me = c.rank;
  for (uint32_t s = 0; s < S.max_steps; s++) {
    if (t < n && s < S.steps[t])
      wait_at_least(done_word(c, c.arena[me], b, t), room_needed(sent[t], s, S.nslots[t]), c, t,
                    failed);
    if (group_any(BAR_PUSH, *failed)) break;
    for (int k = 0; k < n - 1; k++) { /* channels start on different links */
      const int p = (me + 1 + (k + b) % (n - 1)) % n;
      if (s >= S.steps[p]) continue;
      const size_t cu = S.chunk[p] / sizeof(U), nunits = (P.sbytes[p] + sizeof(U) - 1) / sizeof(U);
      const size_t j0 = (b + (size_t)s * S.channels[p]) * cu,
                   j1 = j0 + cu < nunits ? j0 + cu : nunits;
      const char *from = (const char *)P.send[p];
      char *to = pair_slot(c, b, me, p, sent[p] + s, S.chunk[p], S.nslots[p]) - j0 * sizeof(U);
      copy_chunk(to, from, P.sbytes[p], j0, j1, whole(from, P.sbytes[p], j1), t);
    }
    group_sync(BAR_PUSH);
    if (t < n && s < S.steps[t]) {
      if (s == 0) put_call(c, b, t, sent[t], P.send_desc | (uint64_t)P.sbytes[t] << 15);
      st_release(head_word(c, c.arena[t], b, me), sent[t] + s + 1);
    }
    if (t == 0) *pushed = s + 1; /* every pushing thread has read step s */
  }
  if (t == 0) *pushed = 0xffffffffu;
}

/* The call header of src's first chunk on channel b (pipe_util.cuh): a
 * Send of another size is a point-to-point mismatch, anything else a call
 * mismatch. */
static __device__ void check_transfer(const chorus_kern_comm &c, const chorus_kern_p2p &P, int b,
                                      int src, uint32_t start, volatile int *failed) {
  const uint64_t matching = P.send_desc | (uint64_t)P.rbytes[src] << 15;
  uint64_t theirs;
  if (*failed || !other_call(c, b, src, start, matching, &theirs)) return;
  if ((theirs & 0x7fff) == P.send_desc)
    record_failure(c, CHORUS_KERN_MISMATCH, src, theirs >> 15, P.rbytes[src]);
  else
    record_failure(c, CHORUS_KERN_CALL_MISMATCH, src, theirs,
                   P.recv_desc | (uint64_t)P.rbytes[src] << 15);
  *failed = 1;
}

static __device__ void take_recvs(const chorus_kern_comm &c, const chorus_kern_p2p &P,
                                  const p2p_side &S, bool sends, const uint32_t *taken,
                                  volatile int *failed, volatile uint32_t *pushed) {
  const int t = threadIdx.x - GROUP, b = blockIdx.x, n = c.nranks, me = c.rank;
  for (uint32_t s = 0; s < S.max_steps; s++) {
    if (t < n && t != me && s < S.steps[t] &&
        wait_at_least(head_word(c, c.arena[me], b, t), taken[t] + s + 1, c, t, failed) && s == 0)
      check_transfer(c, P, b, t, taken[t], failed);
    if (t == 64 && sends)
      while (*pushed < s + 1 && !*failed) {
      }
    if (group_any(BAR_TAKE, *failed)) break;
    for (int src = 0; src < n; src++) {
      if (s >= S.steps[src]) continue;
      const size_t nbytes = P.rbytes[src];
      const size_t cu = S.chunk[src] / sizeof(U), nunits = (nbytes + sizeof(U) - 1) / sizeof(U);
      const size_t j0 = (b + (size_t)s * S.channels[src]) * cu,
                   j1 = j0 + cu < nunits ? j0 + cu : nunits;
      char *to = (char *)P.recv[src];
      if (src == me) {
        const char *own = (const char *)P.send[me];
        if (own != to) copy_chunk(to, own, nbytes, j0, j1, whole(own, nbytes, j1), t);
      } else {
        const char *from =
            pair_slot(c, b, src, me, taken[src] + s, S.chunk[src], S.nslots[src]) - j0 * sizeof(U);
        copy_chunk(to, from, nbytes, j0, j1, true, t);
      }
    }
    group_sync(BAR_TAKE);
    if (t < n && t != me && s < S.steps[t])
      st_release(done_word(c, c.arena[t], b, me), taken[t] + s + 1);
  }
}

__global__ void __launch_bounds__(THREADS) sendrecv(chorus_kern_comm c, chorus_kern_p2p P) {
  __shared__ uint32_t s_sent[R], s_taken[R];
  __shared__ p2p_side s_push, s_take;
  __shared__ int s_failed;
  __shared__ uint32_t s_pushed;
  const int t = threadIdx.x, b = blockIdx.x, n = c.nranks, me = c.rank;
  /* This rank's totals for channel b: sent [dst], then taken [src]. */
  uint32_t *sent = (uint32_t *)(c.arena[me] + c.cnt_off) + (size_t)b * R;
  uint32_t *taken = sent + CHORUS_KERN_MAX_CHANNELS * R;
  if (t < R) {
    s_sent[t] = sent[t];
    s_taken[t] = taken[t];
    plan_side(c, s_push, t, t < n && t != me ? P.sbytes[t] : 0, b); /* own copy: taking half */
    plan_side(c, s_take, t, t < n ? P.rbytes[t] : 0, b);
  }
  if (t == 0) {
    s_failed = 0;
    s_pushed = 0;
  }
  __syncthreads();
  if (t == 0) {
    uint32_t ms = 0, mr = 0;
    for (int p = 0; p < n; p++) {
      ms = s_push.steps[p] > ms ? s_push.steps[p] : ms;
      mr = s_take.steps[p] > mr ? s_take.steps[p] : mr;
    }
    s_push.max_steps = ms;
    s_take.max_steps = mr;
  }
  __syncthreads();
  if (t < GROUP)
    push_sends(c, P, s_push, s_sent, &s_failed, &s_pushed);
  else
    take_recvs(c, P, s_take, s_push.max_steps > 0, s_taken, &s_failed, &s_pushed);
  __syncthreads();
  if (t < n && t != me && s_push.steps[t]) sent[t] = s_sent[t] + s_push.steps[t];
  if (t < n && t != me && s_take.steps[t]) taken[t] = s_taken[t] + s_take.steps[t];
}

/* ---- small transfers: LL lines, one epoch per pair, direction and part - */

#define PARTS CHORUS_KERN_P2P_PARTS

/* Slot [src][parity of epoch][part] in the arena at `arena`: a header line, then
 * the part's payload lines. */
static __device__ __forceinline__ char *p2p_slot(const chorus_kern_comm &c, char *arena, int src,
                                                 uint32_t epoch, uint32_t part) {
  const size_t k = ((size_t)src * 2 + (epoch & 1)) * c.p2p_ll_parts + part;
  return arena + c.p2p_ll_off + k * ((size_t)c.p2p_ll_lines + 1) * CHORUS_KERN_LINE;
}

static __device__ __forceinline__ uint4 flagged(uint2 d, uint32_t flag) {
  return make_uint4(d.x, flag, d.y, flag);
}

/* Part b of a transfer of nbytes: units [*j0, *j1) of sizeof(U) bytes.
 * False when the transfer has no part b. */
template <typename U>
static __device__ __forceinline__ bool part_units(const chorus_kern_comm &c, size_t nbytes,
                                                  uint32_t b, size_t *j0, size_t *j1) {
  size_t part;
  if (b >= chorus_kern_p2p_parts(nbytes, c.p2p_ll_parts, &part)) return false;
  const size_t units = (nbytes + sizeof(U) - 1) / sizeof(U), pu = part / sizeof(U);
  *j0 = b * pu;
  *j1 = *j0 + pu < units ? *j0 + pu : units;
  return true;
}

/* Every CTA of the launch reaches this before any goes on. Words at
 * p2p_bar_off of the own arena: the barrier's generation (CTA 0 writes
 * it), then one arrival word per CTA. CTA b > 0 announces generation g + 1
 * in its word and waits for the generation to become g + 1; CTA 0 waits
 * for every arrival, then advances it. Plain loads and stores, no atomics:
 * a staged arena is host memory. The launch's CTAs are few (at most
 * PARTS), so they are resident together. */
static __device__ void grid_sync(const chorus_kern_comm &c, volatile int *failed) {
  __syncthreads();
  const unsigned nb = gridDim.x;
  if (nb > 1) {
    volatile uint32_t *gen = (volatile uint32_t *)(c.arena[c.rank] + c.p2p_bar_off);
    volatile uint32_t *arrived = gen + 1;
    const uint32_t g = *gen + 1; /* CTA 0 cannot advance it before this CTA arrives */
    const unsigned t = threadIdx.x, b = blockIdx.x;
    uint64_t since = 0;
    __threadfence_system();
    if (b > 0 && t == 0) {
      arrived[b] = g;
      for (unsigned spins = 0; *gen != g && !*failed; spins++)
        if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &since, -1, failed)) break;
    } else if (b == 0 && t > 0 && t < nb) {
      for (unsigned spins = 0; arrived[t] != g && !*failed; spins++)
        if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &since, -1, failed)) break;
    }
    if (b == 0) {
      __syncthreads();
      if (t == 0) *gen = g;
    }
    __threadfence_system();
  }
  __syncthreads();
}

/* CTA b moves part b of every LL transfer of the launch: first the sends,
 * each as the epoch e that follows its last one for that peer and part,
 * once the peer has acked epoch e - 2 (the same slot): a header line with
 * the transfer's size, then 8 bytes per line, every line flagged with e;
 * then its part of the own copy; then the receives, each line taken once
 * it carries the epoch, a header of another size than this rank's call
 * being a mismatch; then the acks. A part's epochs advance only in launches
 * whose transfer with that peer has the part, which both ends know from the
 * size. Where a receive buffer overlaps a send buffer (P.overlap), every
 * CTA finishes reading its sends, and then its own copy, before any writes
 * what it received. */
__global__ void __launch_bounds__(THREADS) sendrecv_ll(chorus_kern_comm c, chorus_kern_p2p P) {
  __shared__ uint32_t s_send[R], s_recv[R]; /* this CTA's epochs of this launch, per peer */
  __shared__ int s_failed;
  volatile int *failed = &s_failed;
  const int t = threadIdx.x, n = c.nranks, me = c.rank;
  const uint32_t b = blockIdx.x;
  pdl_enter();
  uint32_t *send_ep = (uint32_t *)(c.arena[me] + c.p2p_ep_off), *recv_ep = send_ep + R * PARTS;
  const uint32_t *acks = (const uint32_t *)(c.arena[me] + c.p2p_ack_off);
  size_t j0, j1;
  if (t == 0) *failed = 0;
  if (t < R) {
    s_send[t] = send_ep[t * PARTS + b] + 1;
    s_recv[t] = recv_ep[t * PARTS + b] + 1;
  }
  __syncthreads();
  if (t < n && t != me && part_units<uint2>(c, P.sbytes[t], b, &j0, &j1))
    wait_at_least(&acks[t * PARTS + b], s_send[t] - 2, c, t, failed);
  __syncthreads();
  if (*failed) return;
  for (int q = 0; q < n; q++) {
    const size_t nbytes = P.sbytes[q];
    if (q == me || !part_units<uint2>(c, nbytes, b, &j0, &j1)) continue;
    const uint32_t e = s_send[q];
    char *slot = p2p_slot(c, c.arena[q], me, e, b) + CHORUS_KERN_LINE;
    const char *from = (const char *)P.send[q];
    if (t == 0)
      st_line(slot - CHORUS_KERN_LINE,
              flagged(make_uint2((uint32_t)nbytes, (uint32_t)(nbytes >> 32)), e));
    for (size_t j = j0 + t; j < j1; j += THREADS)
      st_line(slot + (j - j0) * CHORUS_KERN_LINE, flagged(load_unit<uint2>(from, nbytes, j), e));
  }
  if (P.overlap) grid_sync(c, failed);
  {
    const size_t nbytes = P.sbytes[me];
    const char *from = (const char *)P.send[me];
    char *to = (char *)P.recv[me];
    if (from != to && part_units<uint4>(c, nbytes, b, &j0, &j1))
      for (size_t j = j0 + t; j < j1; j += THREADS)
        put_unit<uint4>(to, nbytes, j, load_unit<uint4>(from, nbytes, j));
  }
  if (P.overlap) grid_sync(c, failed);
  for (int q = 0; q < n && !*failed; q++) {
    const size_t nbytes = P.rbytes[q];
    if (q == me || !part_units<uint2>(c, nbytes, b, &j0, &j1)) continue;
    const uint32_t e = s_recv[q];
    const char *slot = p2p_slot(c, c.arena[me], q, e, b) + CHORUS_KERN_LINE;
    if (t == 0) {
      const uint2 h = poll_line(slot - CHORUS_KERN_LINE, e, c, q, failed);
      const uint64_t sent = h.x | (uint64_t)h.y << 32;
      if (!*failed && sent != nbytes) {
        record_failure(c, CHORUS_KERN_MISMATCH, q, sent, nbytes);
        *failed = 1;
      }
    }
    char *to = (char *)P.recv[q];
    for (size_t j = j0 + t; j < j1 && !*failed; j += THREADS) {
      const uint2 d = poll_line(slot + (j - j0) * CHORUS_KERN_LINE, e, c, q, failed);
      if (!*failed) put_unit<uint2>(to, nbytes, j, d);
    }
  }
  __syncthreads();
  if (*failed || t >= n || t == me) return;
  if (part_units<uint2>(c, P.sbytes[t], b, &j0, &j1)) send_ep[t * PARTS + b] = s_send[t];
  if (part_units<uint2>(c, P.rbytes[t], b, &j0, &j1)) {
    *(volatile uint32_t *)((uint32_t *)(c.arena[t] + c.p2p_ack_off) + me * PARTS + b) = s_recv[t];
    recv_ep[t * PARTS + b] = s_recv[t];
  }
}

extern "C" int chorus_kern_sendrecv_ll(const chorus_kern_comm *c, const chorus_kern_p2p *p,
                                       void *stream) {
  /* A CTA per part of the transfer with the most. */
  uint32_t grid = 0;
  size_t part;
  for (int q = 0; q < c->nranks; q++) {
    const uint32_t ns = chorus_kern_p2p_parts(p->sbytes[q], c->p2p_ll_parts, &part),
                   nr = chorus_kern_p2p_parts(p->rbytes[q], c->p2p_ll_parts, &part);
    grid = ns > grid ? ns : grid;
    grid = nr > grid ? nr : grid;
  }
  if (grid == 0) return 0;
  cudaError_t e = chorus_launch(c->pdl, sendrecv_ll, grid, THREADS, (cudaStream_t)stream, *c, *p);
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the LL Send/Recv kernel");
  return 0;
}

extern "C" int chorus_kern_sendrecv(const chorus_kern_comm *c, const chorus_kern_p2p *p,
                                    void *stream) {
  /* Enough channels for every transfer's chunks, at most its channels. */
  size_t grid = 0;
  for (int q = 0; q < c->nranks; q++) {
    const p2p_cut ks = cut_transfer(*c, q == c->rank ? 0 : p->sbytes[q]),
                  kr = cut_transfer(*c, p->rbytes[q]);
    const size_t gs = ks.nchunks < ks.channels ? ks.nchunks : ks.channels,
                 gr = kr.nchunks < kr.channels ? kr.nchunks : kr.channels;
    grid = gs > grid ? gs : grid;
    grid = gr > grid ? gr : grid;
  }
  if (grid == 0) return 0;
  sendrecv<<<(unsigned)grid, THREADS, 0, (cudaStream_t)stream>>>(*c, *p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the Send/Recv kernel");
  return 0;
}

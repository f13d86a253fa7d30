/*
 * pipe_util.cuh - what the FIFO kernels share (pipe.cu for collectives,
 * p2p.cu for Send/Recv): the CTA split into a pushing and a taking half
 * with their own named barriers, where the head/done counters and FIFO
 * slots of a channel sit in an arena (kernels.h), the chunk size both
 * ends of a pair compute from the size alone, and 16-byte unit copies.
 * Included by the .cu files only.
 */
#ifndef CHORUS_DEVICE_PIPE_UTIL_CUH
#define CHORUS_DEVICE_PIPE_UTIL_CUH

#include "device/kern_util.cuh"

#define GROUP   256 /* threads per half */
#define THREADS (2 * GROUP)
#define UNROLL  8 /* 16-byte units in flight per thread (copies) */

enum { BAR_PUSH = 1, BAR_TAKE = 2 };

static __device__ __forceinline__ void group_sync(int id, int nt = GROUP) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nt) : "memory");
}
/* A barrier of the half (or of the nt threads of group id) that also
 * returns whether any of its threads saw pred: the group leaves its loop
 * together or not at all. */
static __device__ __forceinline__ bool group_any(int id, bool pred, int nt = GROUP) {
  int r;
  asm volatile("{\n\t.reg .pred p, q;\n\t"
               "setp.ne.s32 p, %1, 0;\n\t"
               "bar.red.or.pred q, %2, %3, p;\n\t"
               "selp.s32 %0, 1, 0, q;\n\t}"
               : "=r"(r)
               : "r"((int)pred), "r"(id), "r"(nt)
               : "memory");
  return r != 0;
}

/* Counters peers write, in the arena at `arena`: head[b][src], done[b][dst]. */
static __device__ __forceinline__ uint32_t *head_word(const chorus_kern_comm &c, char *arena, int b,
                                                      int src) {
  return (uint32_t *)(arena + c.ctl_off +
                      ((size_t)b * CHORUS_KERN_MAX_RANKS + src) * CHORUS_KERN_CTL_STRIDE);
}
static __device__ __forceinline__ uint32_t *done_word(const chorus_kern_comm &c, char *arena, int b,
                                                      int dst) {
  return (uint32_t *)(arena + c.ctl_off +
                      ((size_t)(CHORUS_KERN_MAX_CHANNELS + b) * CHORUS_KERN_MAX_RANKS + dst) *
                          CHORUS_KERN_CTL_STRIDE);
}
/* Call headers of the FIFO kernels. With its first chunk of a launch on
 * channel b to rank dst, a sender leaves beside the head counter (in the
 * same line, 16 bytes on) the count its launch started from on that
 * channel and pair (its `sent`) and the call's description
 * (chorus_kern_xchg.desc), before it releases the head. A receiver that has
 * taken its first chunk from src on channel b compares: where the header's
 * count is the one its own launch started from (its `taken`), the header
 * is its counterpart's, and another description means the ranks called
 * different things. Matched launches that move chunks on a channel and
 * pair advance its count, so no two of them start from the same one; a
 * sender already in a later launch has left a later count, which is not
 * checked (no stale or future header is ever compared). */
static __device__ __forceinline__ void put_call(const chorus_kern_comm &c, int b, int dst,
                                                uint32_t start, uint64_t desc) {
  st_line((char *)head_word(c, c.arena[dst], b, c.rank) + 16,
          make_uint4(start, 0, (uint32_t)desc, (uint32_t)(desc >> 32)));
}
/* Whether src's header on channel b is this launch's (started from start)
 * and describes another call than desc (then *theirs holds it). */
static __device__ __forceinline__ bool other_call(const chorus_kern_comm &c, int b, int src,
                                                  uint32_t start, uint64_t desc, uint64_t *theirs) {
  const uint4 v = ld_line((const char *)head_word(c, c.arena[c.rank], b, src) + 16);
  *theirs = v.z | (uint64_t)v.w << 32;
  return v.x == start && *theirs != desc;
}
/* The check of a collective's launch: a different call fails it at once
 * (CHORUS_KERN_CALL_MISMATCH, both descriptions). */
static __device__ __forceinline__ void check_call(const chorus_kern_comm &c, int b, int src,
                                                  uint32_t start, uint64_t desc,
                                                  volatile int *failed) {
  uint64_t theirs;
  if (!*failed && other_call(c, b, src, start, desc, &theirs)) {
    record_failure(c, CHORUS_KERN_CALL_MISMATCH, src, theirs, desc);
    *failed = 1;
  }
}

/* Slot k of the FIFO from src on channel b, in the arena at `arena`; the
 * channels a big copy adds have theirs, half as large, past the others. */
static __device__ __forceinline__ char *slot(const chorus_kern_comm &c, char *arena, int b, int src,
                                             uint32_t k, size_t chunk, uint32_t nslots) {
  const size_t cn = c.channels, n = c.nranks, f = c.fifo_bytes;
  const size_t fifo = (size_t)b < cn ? ((size_t)b * n + src) * f
                                     : cn * n * f + (((size_t)b - cn) * n + src) * (f / 2);
  return arena + c.pipe_off + fifo + (k % nslots) * chunk;
}
/* The done count a destination must have reached before step s (of a
 * launch that started at `sent` chunks and cuts its FIFO into nslots)
 * may be written: the slot's previous chunk consumed, and at step 0 every
 * chunk of earlier launches, whose slots may have been cut differently. */
static __device__ __forceinline__ uint32_t room_needed(uint32_t sent, uint32_t s, uint32_t nslots) {
  return sent + (s + 1 > nslots ? s + 1 - nslots : 0);
}

typedef uint4 U; /* the 16-byte unit every thread moves */

/* Units j + u * NT (< j1) of buf (nbytes long) into d, NT threads
 * striding together. `fast` (buf 16-byte aligned, the units whole) makes
 * them plain vector loads that are all in flight at once; otherwise each
 * is assembled as it can be. */
template <int UR, int NT = GROUP>
static __device__ __forceinline__ void load_units(U (&d)[UR], const char *buf, size_t nbytes,
                                                  size_t j, size_t j1, bool fast) {
  if (fast) {
#pragma unroll
    for (int u = 0; u < UR; u++)
      if (j + u * NT < j1) d[u] = ((const U *)buf)[j + u * NT];
  } else {
#pragma unroll
    for (int u = 0; u < UR; u++)
      if (j + u * NT < j1) d[u] = load_unit<U>(buf, nbytes, j + u * NT);
  }
}
/* A rank's own UR units of a reduction from unit j, NT threads apart:
 * CHECKED, as load_units loads them and scaled for PreMulSum (premul);
 * else whole plain vectors (the plain-sum loops). */
template <typename T, int UR, int NT, bool CHECKED>
static __device__ __forceinline__ void load_own(U (&d)[UR], const char *own, size_t nbytes,
                                                size_t j, size_t j1, bool fast, bool premul,
                                                typename elem<T>::acc scalar) {
  if (CHECKED) {
    load_units<UR, NT>(d, own, nbytes, j, j1, fast);
    if (premul)
#pragma unroll
      for (int u = 0; u < UR; u++) d[u] = scaled<T, U>(d[u], scalar);
  } else {
#pragma unroll
    for (int u = 0; u < UR; u++) d[u] = ((const U *)own)[j + u * NT];
  }
}
/* The store of d[u] to unit j + u * GROUP of buf, as load_units loads. */
static __device__ __forceinline__ void store_unit(char *buf, size_t nbytes, size_t j, U d,
                                                  bool fast) {
  if (fast)
    ((U *)buf)[j] = d;
  else
    put_unit<U>(buf, nbytes, j, d);
}
/* Whether units [.., j1) of buf can move as plain vectors. */
static __device__ __forceinline__ bool whole(const void *buf, size_t nbytes, size_t j1) {
  return (uintptr_t)buf % sizeof(U) == 0 && j1 * sizeof(U) <= nbytes;
}

/* A block of `bytes` cut for `channels` channels: chunks small enough that
 * every channel gets one, whole 4 KiB pages, at most `most`. Every rank
 * computes the same from the same size, which is what pairs a sender with a
 * receiver. */
static __host__ __device__ __forceinline__ size_t chunk_of(size_t bytes, unsigned channels,
                                                           size_t most) {
  size_t chunk = (bytes + channels - 1) / channels;
  chunk = (chunk + 4095) / 4096 * 4096;
  return chunk > most ? most : chunk;
}

/* The largest Send/Recv chunk a FIFO of fifo bytes holds p2p_slots (at
 * least 2) of, in whole pages (0: not one page). */
static __host__ __device__ __forceinline__ size_t narrow_slot(const chorus_kern_comm &c,
                                                              size_t fifo) {
  return fifo / (c.p2p_slots > 2 ? c.p2p_slots : 2) / 4096 * 4096;
}

/* The chunk of the pipeline kernels: at most chunk_bytes (wide), or a
 * FIFO's narrow slot (Send/Recv), a page at least. */
static __host__ __device__ __forceinline__ size_t pipe_chunk(const chorus_kern_comm &c,
                                                             size_t bytes, bool narrow) {
  const size_t slot = narrow_slot(c, c.fifo_bytes);
  return chunk_of(bytes, c.channels, narrow ? (slot > 4096 ? slot : 4096) : c.chunk_bytes);
}

/* How a launch of the ring or two-shot kernel cuts a block: its chunk (at
 * most `most` and half a FIFO), the FIFO slots that chunk gives, the number
 * of chunks and the grid (one CTA per channel that gets a chunk). */
struct fifo_cut {
  size_t chunk, nchunks;
  uint32_t nslots;
  unsigned grid;
};
static inline fifo_cut cut_for_fifo(size_t bytes, unsigned channels, size_t most,
                                    size_t fifo_bytes) {
  fifo_cut k;
  k.chunk = chunk_of(bytes, channels, most < fifo_bytes / 2 ? most : fifo_bytes / 2);
  k.nslots = (uint32_t)(fifo_bytes / k.chunk);
  k.nchunks = (bytes + k.chunk - 1) / k.chunk;
  k.grid = k.nchunks < channels ? (unsigned)k.nchunks : channels;
  return k;
}

#endif

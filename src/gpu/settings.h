/*
 * settings.h - the structural settings of a GPU communicator (arena sizes,
 * channels, steps), read once at init for its rank count, and what the
 * planner learns from them. Which algorithm runs where is not among them:
 * that is the rules' (algo/rules.h).
 */
#ifndef CHORUS_GPU_SETTINGS_H
#define CHORUS_GPU_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"

typedef struct chorus_gpu_settings {
  size_t ll_bytes;       /* LL payload per peer slot (CHORUS_GPU_LL_BYTES) */
  uint32_t ll_cta_lines; /* lines per run of an LL CTA */
  uint32_t ll_blocks;    /* CTAs an LL launch deals its runs to */
  uint32_t pdl;          /* LL launches overlap the kernel before them */
  uint32_t channels;     /* CTAs of the FIFO kernels */
  uint32_t chunk_bytes;  /* an exchange's step per channel */
  uint32_t fifo_bytes;   /* FIFO per channel and peer */
  uint64_t wide_from; /* exchanges both ways from this many bytes per rank: wide CTAs (0: never) */
  uint64_t big_from;  /* copies, rings, Send/Recv of this many: twice the channels (0: never) */
  uint32_t ring_channels, ring_chunk;
  uint32_t twoshot_channels, twoshot_chunk;
  size_t p2p_ll_bytes;   /* the largest Send/Recv in LL lines (0: none) */
  uint32_t p2p_ll_parts; /* LL Send/Recv slots: parts per pair ... */
  uint32_t p2p_ll_lines; /* ... of this many payload lines each */
  uint32_t p2p_slots;    /* FIFO slots a FIFO Send/Recv streams through */
  uint32_t p2p_pull;     /* receivers pull from the sender's FIFO */
  uint32_t zc_channels;  /* zero-copy: most CTAs */
  size_t zc_cta_bytes;   /* zero-copy: least of a rank's block per CTA */
  size_t ce_chunk;       /* copy-engine Broadcast chain: bytes per copy on 3+ GPUs */
  int cumem;             /* arenas in cuMem memory */
} chorus_gpu_settings;

/* Staged arenas are host memory: fewer channels keep them small (a FIFO
 * per channel and peer). */
#define CHORUS_GPU_STAGED_CHANNELS 16

/* Reads the settings for a communicator of nranks GPUs (staged: arenas in
 * host memory), clamped to what the kernels take and, where cta_cap is
 * not 0 (the communicator's maxCTAs), so that no launch of a collective
 * or Send/Recv takes more than cta_cap CTAs. */
void chorus_gpu_settings_read(chorus_gpu_settings *s, int nranks, int staged, int cta_cap);
/* The planner's view of them (the shape fields of *p). */
void chorus_gpu_settings_plan(const chorus_gpu_settings *s, chorus_plan_comm *p);

#endif

/*
 * layout.h - where everything lives in a rank's GPU arena, built region by
 * region (name, size, alignment) instead of fixed offsets, pure and
 * tested; logged at INFO when a communicator is set up.
 *
 * Peers write only the slots, FIFOs, counters and test words indexed by
 * their own rank; the owner alone reads them and alone touches its epochs
 * and totals. Regions written by different agents start on separate lines
 * (the alignments below), so a peer's store never shares a 128-byte line
 * with a word the owner polls for something else.
 */
#ifndef CHORUS_GPU_LAYOUT_H
#define CHORUS_GPU_LAYOUT_H

#include <stddef.h>

#include "gpu/settings.h"

#define CHORUS_LAYOUT_MAX 24

typedef struct chorus_layout_region {
  const char *name;
  size_t off, bytes, align;
} chorus_layout_region;

typedef struct chorus_layout {
  chorus_layout_region region[CHORUS_LAYOUT_MAX];
  int n;
  size_t end; /* bytes in all */
} chorus_layout;

/* Appends a region of `bytes` at the next multiple of align (a power of
 * two); returns its offset. */
size_t chorus_layout_add(chorus_layout *l, const char *name, size_t bytes, size_t align);

/* A rank's arena: the offset of each region. */
typedef struct chorus_gpu_arena_layout {
  size_t epochs;      /* LL epoch per block (owner) */
  size_t zc_epochs;   /* zero-copy epoch per CTA (owner) */
  size_t test;        /* init-time test words, one per writing rank */
  size_t acks;        /* LL acks [block][source rank] (peers) */
  size_t totals;      /* FIFO totals: sent [channel][dst], taken [channel][src] (owner) */
  size_t counters;    /* FIFO counters, a line each: head [channel][src], done [channel][dst] */
  size_t p2p_epochs;  /* Send/Recv LL epochs: send [dst][part], recv [src][part] (owner) */
  size_t p2p_acks;    /* Send/Recv LL acks [dst][part] (peers) */
  size_t p2p_barrier; /* Send/Recv LL barrier across CTAs: generation, arrivals [part] */
  size_t failures;    /* failures other ranks found: [src] x 32 B (peers) */
  size_t board;       /* the call board [source rank][slot] x 16 B (peers) */
  size_t ll_headers;  /* LL call headers [parity 2][source rank][block] x 16 B (peers) */
  size_t zc_lines;    /* zero-copy barrier lines [CTA][source rank] x 32 B (peers) */
  size_t ll_slots;    /* LL slots [parity 2][source rank n][ll lines] x 16 B (peers) */
  size_t p2p_slots;   /* Send/Recv LL slots [source rank][parity 2][part][1 + lines] x 16 B */
  size_t fifos;       /* FIFOs [channel][source rank] x fifo_bytes (peers) */
  size_t bytes;       /* the whole arena */
  chorus_layout regions;
} chorus_gpu_arena_layout;

/* The arena of a rank of nranks with settings s. */
void chorus_gpu_arena_layout_make(const chorus_gpu_settings *s, int nranks,
                                  chorus_gpu_arena_layout *out);

#endif

/*
 * layout.c - see layout.h.
 */
#include "gpu/layout.h"

#include <string.h>

#include "device/kernels.h"

size_t chorus_layout_add(chorus_layout *l, const char *name, size_t bytes, size_t align) {
  const size_t off = (l->end + align - 1) & ~(align - 1);
  if (l->n < CHORUS_LAYOUT_MAX) l->region[l->n++] = (chorus_layout_region){name, off, bytes, align};
  l->end = off + bytes;
  return off;
}

#define R CHORUS_KERN_MAX_RANKS
#define B CHORUS_KERN_MAX_BLOCKS
#define C CHORUS_KERN_MAX_CHANNELS
#define P CHORUS_KERN_P2P_PARTS

void chorus_gpu_arena_layout_make(const chorus_gpu_settings *s, int nranks,
                                  chorus_gpu_arena_layout *a) {
  memset(a, 0, sizeof *a);
  chorus_layout *l = &a->regions;
  /* Words sized for the most ranks, blocks and channels any launch uses,
   * so that the control area does not move with the settings. */
  a->epochs = chorus_layout_add(l, "LL epochs", 4 * B, 256);
  a->zc_epochs = chorus_layout_add(l, "zero-copy epochs", 4 * B, 256);
  a->test = chorus_layout_add(l, "test words", 4 * R, 256);
  a->acks = chorus_layout_add(l, "LL acks", 4 * (size_t)B * R, 1024);
  a->totals = chorus_layout_add(l, "FIFO totals", 2 * 4 * (size_t)C * R, 4096);
  a->counters =
      chorus_layout_add(l, "FIFO counters", 2 * (size_t)C * R * CHORUS_KERN_CTL_STRIDE, 8192);
  a->p2p_epochs = chorus_layout_add(l, "Send/Recv LL epochs", 2 * 4 * (size_t)R * P, 1024);
  a->p2p_acks = chorus_layout_add(l, "Send/Recv LL acks", 4 * (size_t)R * P, 1024);
  a->p2p_barrier = chorus_layout_add(l, "Send/Recv LL barrier", 4 * (1 + (size_t)P), 1024);
  a->failures = chorus_layout_add(l, "failures", 32 * (size_t)R, 1024);
  a->board = chorus_layout_add(l, "call board",
                               (size_t)R * CHORUS_KERN_BOARD_SLOTS * CHORUS_KERN_LINE, 1024);
  a->ll_headers =
      chorus_layout_add(l, "LL call headers", 2 * (size_t)R * B * CHORUS_KERN_LINE, 65536);
  a->zc_lines = chorus_layout_add(l, "zero-copy barrier lines", 32 * (size_t)B * R, 16384);
  /* Slots and FIFOs grow with the rank count and the settings. */
  const size_t ll_lines = s->ll_bytes / 8;
  a->ll_slots =
      chorus_layout_add(l, "LL slots", 2 * (size_t)nranks * ll_lines * CHORUS_KERN_LINE, 65536);
  a->p2p_slots = chorus_layout_add(
      l, "Send/Recv LL slots",
      (size_t)nranks * 2 * s->p2p_ll_parts * (1 + (size_t)s->p2p_ll_lines) * CHORUS_KERN_LINE, 16);
  /* Then, for copies on twice the channels, FIFOs of half the size for
   * the added ones (kernels.h, big_from). */
  const size_t fifos = (size_t)s->channels * (size_t)nranks * s->fifo_bytes;
  a->fifos = chorus_layout_add(l, "FIFOs", s->big_from ? fifos + fifos / 2 : fifos, 65536);
  a->bytes = l->end;
}

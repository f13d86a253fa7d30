/*
 * cut.h - how a staged call across hosts is cut (gpu/proxy.c): into L
 * lanes that run at once, each over connections of its own, and P pieces
 * that run in turn, so that one piece's copies between the GPU and the
 * staging overlap the others' network steps. The call's elements are cut
 * into P * L shares; piece j is shares [j * L, (j + 1) * L), lane k runs
 * share j * L + k. Where the call is cut, a side that holds one block per
 * rank (AllGather's and Gather's output, ReduceScatter's and Scatter's
 * input, both of AlltoAll's) is staged share by share (a share's rows of
 * every block together), so that each share runs as a call on contiguous
 * memory.
 *
 * A call in pieces need not stage all of itself at once: piece j's part
 * of each side is one range of the whole staging (chorus_cut_piece_span),
 * so two slots of the largest piece's size, piece j in slot j % 2, hold
 * what is in flight (the stream copies piece j + 1 in and piece j - 1 out
 * while the host runs piece j), and the pinned memory a call needs stops
 * growing with its size.
 */
#ifndef CHORUS_GPU_CUT_H
#define CHORUS_GPU_CUT_H

#include <stddef.h>

#define CHORUS_CUT_MAX_PIECES 64
/* A call of at least this many bytes that makes fewer than two pieces
 * still goes in two halves: the copies of one half then overlap the
 * other's network step, which on PCIe hosts that copy at 15 GB/s is most
 * of a 2-8 MiB call's time. */
#define CHORUS_CUT_HALVES_FROM ((size_t)2 << 20)

typedef struct chorus_cut {
  int func;     /* chorus_func */
  size_t count; /* the call's count */
  size_t esize; /* bytes per element */
  int nranks;   /* of the communicator the shares run on */
  int lanes;    /* L */
  int pieces;   /* P */
} chorus_cut;

/* Share k of n of `count` elements: [*first, + *len). */
void chorus_cut_share(size_t count, int k, int n, size_t *first, size_t *len);
/* Where the share starting at element `first` begins in the staged send
 * and receive buffers, in elements. */
void chorus_cut_offsets(const chorus_cut *c, size_t first, size_t *soff, size_t *roff);
/* Is the staged receive side (recv) or send side laid out share by share? */
int chorus_cut_laid(const chorus_cut *c, int recv);
/* How many pieces a call of func moves in on `lanes`: one per piece_bytes
 * of its whole size (count x esize, x nranks where a side holds a block
 * per rank), at least 2 from CHORUS_CUT_HALVES_FROM, at most
 * CHORUS_CUT_MAX_PIECES and at most count / lanes (no empty share); 1
 * where that is less than 2, piece_bytes is 0, or func is not cut element
 * by element. Depends on the call alone, so it is
 * alike on every rank. */
int chorus_cut_pieces(int func, size_t count, size_t esize, int nranks, int lanes,
                      size_t piece_bytes);

/* Where piece j's part of one side (recv or send) lies in that side's
 * whole staging: [*off, + *len) elements. */
void chorus_cut_piece_span(const chorus_cut *c, int recv, int j, size_t *off, size_t *len);
/* The most elements any piece spans on that side: a slot's size. */
size_t chorus_cut_slot_elems(const chorus_cut *c, int recv);

/* Copies rows of width bytes, pitches apart (a copy engine's 2-D copy). */
typedef int (*chorus_cut_rows_fn)(void *arg, void *dst, size_t dst_pitch, const void *src,
                                  size_t src_pitch, size_t width, size_t rows);
/* Queues through fn the copies of shares [s0, s1) of one side of the call
 * (`elems` elements on this rank; 0: nothing) between the user's buffer
 * dev and its staging: into the staging (in) or back. A side laid out
 * share by share moves as rows; another holds count elements, of which
 * the shares' range moves (the whole side where the call is not cut). */
int chorus_cut_copies(const chorus_cut *c, int recv, size_t elems, int s0, int s1, char *dev,
                      char *stage, int in, chorus_cut_rows_fn fn, void *arg);

#endif

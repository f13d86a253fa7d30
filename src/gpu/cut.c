/*
 * cut.c - see cut.h.
 */
#include "gpu/cut.h"

#include "algo/func.h"

void chorus_cut_share(size_t count, int k, int n, size_t *first, size_t *len) {
  const size_t per = count / (size_t)n, extra = count % (size_t)n;
  *first = (size_t)k * per + ((size_t)k < extra ? (size_t)k : extra);
  *len = per + ((size_t)k < extra ? 1 : 0);
}

/* Does func hold one block per rank on its receive (recv) or send side? */
static int blocks_on(int func, int recv) {
  switch (func) {
  case CHORUS_FUNC_ALLGATHER:
  case CHORUS_FUNC_GATHER:
    return recv;
  case CHORUS_FUNC_REDUCESCATTER:
  case CHORUS_FUNC_SCATTER:
    return !recv;
  case CHORUS_FUNC_ALLTOALL:
    return 1;
  default:
    return 0;
  }
}

void chorus_cut_offsets(const chorus_cut *c, size_t first, size_t *soff, size_t *roff) {
  const size_t h = (size_t)c->nranks;
  *soff = blocks_on(c->func, 0) ? h * first : first;
  *roff = blocks_on(c->func, 1) ? h * first : first;
}

int chorus_cut_laid(const chorus_cut *c, int recv) {
  return c->lanes * c->pieces > 1 && blocks_on(c->func, recv);
}

int chorus_cut_pieces(int func, size_t count, size_t esize, int nranks, int lanes,
                      size_t piece_bytes) {
  const int blocks = blocks_on(func, 0) || blocks_on(func, 1);
  if (!piece_bytes || lanes < 1 ||
      (!blocks && func != CHORUS_FUNC_ALLREDUCE && func != CHORUS_FUNC_BROADCAST &&
       func != CHORUS_FUNC_REDUCE))
    return 1;
  const size_t bytes = count * esize * (blocks ? (size_t)nranks : 1);
  size_t p = bytes / piece_bytes;
  if (p < 2 && bytes >= CHORUS_CUT_HALVES_FROM) p = 2;
  if (p > CHORUS_CUT_MAX_PIECES) p = CHORUS_CUT_MAX_PIECES;
  if (p > count / (size_t)lanes) p = count / (size_t)lanes;
  return p > 1 ? (int)p : 1;
}

void chorus_cut_piece_span(const chorus_cut *c, int recv, int j, size_t *off, size_t *len) {
  const int L = c->lanes, cut = L * c->pieces;
  size_t f0, l0, f1, l1;
  chorus_cut_share(c->count, j * L, cut, &f0, &l0);
  chorus_cut_share(c->count, (j + 1) * L - 1, cut, &f1, &l1);
  const size_t h = chorus_cut_laid(c, recv) ? (size_t)c->nranks : 1;
  *off = h * f0;
  *len = h * (f1 + l1 - f0);
}

size_t chorus_cut_slot_elems(const chorus_cut *c, int recv) {
  size_t most = 0;
  for (int j = 0; j < c->pieces; j++) {
    size_t off, len;
    chorus_cut_piece_span(c, recv, j, &off, &len);
    if (len > most) most = len;
  }
  return most;
}

int chorus_cut_copies(const chorus_cut *c, int recv, size_t elems, int s0, int s1, char *dev,
                      char *stage, int in, chorus_cut_rows_fn fn, void *arg) {
  if (!elems || s0 >= s1) return 0;
  const int cut = c->lanes * c->pieces;
  const size_t es = c->esize;
  if (chorus_cut_laid(c, recv)) {
    const size_t h = (size_t)c->nranks, pitch = c->count * es;
    for (int k = s0; k < s1; k++) {
      size_t first, len, soff, roff;
      chorus_cut_share(c->count, k, cut, &first, &len);
      if (!len) continue;
      chorus_cut_offsets(c, first, &soff, &roff);
      char *d = dev + first * es, *st = stage + (recv ? roff : soff) * es;
      const int rc = in ? fn(arg, st, len * es, d, pitch, len * es, h)
                        : fn(arg, d, pitch, st, len * es, len * es, h);
      if (rc != 0) return rc;
    }
    return 0;
  }
  size_t off = 0, bytes = elems * es;
  if (cut > 1) { /* a side of count elements: the shares' range */
    size_t f0, l0, f1, l1;
    chorus_cut_share(c->count, s0, cut, &f0, &l0);
    chorus_cut_share(c->count, s1 - 1, cut, &f1, &l1);
    off = f0 * es;
    bytes = (f1 + l1 - f0) * es;
  }
  if (!bytes) return 0;
  return in ? fn(arg, stage + off, bytes, dev + off, bytes, bytes, 1)
            : fn(arg, dev + off, bytes, stage + off, bytes, bytes, 1);
}

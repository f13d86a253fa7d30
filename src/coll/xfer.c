/*
 * xfer.c - see xfer.h.
 */
#include "coll/xfer.h"

#include <string.h>

#include "algo/func.h"
#include "coll/coll.h"
#include "coll/prims.h"
#include "host/copy.h"
#include "host/reduce.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

void chorus_xfer_init(chorus_xfer *x, chorus_conn *c, const void *buf, size_t bytes) {
  memset(x, 0, sizeof *x);
  x->conn = c;
  x->buf = (char *)buf;
  x->bytes = bytes;
}

/* The least bytes a send goes by reference. A Gather's root reading every
 * peer's block alone does the copying the senders would share through the
 * slots, so 32 KiB blocks lost there (0.79x on 4 ranks, Intel Xeon guest)
 * while a ring shift's Send/Recv gained 1.1-1.8x at 32 KiB and AlltoAll's
 * 32 KiB blocks 1.27x on 4 ranks. */
static size_t read_min(const chorus_op *op) {
  const int even = chorus_func_p2p(op->func) || op->func == CHORUS_FUNC_ALLTOALL;
  return even ? CHORUS_XFER_READ_MIN_EVEN : CHORUS_XFER_READ_MIN;
}

ncclResult_t chorus_xfer_send(chorus_op *op, chorus_xfer *x) {
  ncclResult_t res;
  size_t n;
  CORO_BEGIN(x->co);
  while (x->done < x->bytes) {
    CORO_AWAIT_RES(x->co, res, chorus_prim_send_slot(op, x->conn, &x->slot, &x->cap));
    if (op->by_ref && x->conn->peer_reads && x->bytes >= read_min(op)) {
      n = CHORUS_MIN(CHORUS_XFER_READ_UNIT, x->bytes - x->done);
      CHECK(chorus_prim_post_read(op, x->conn, x->buf + x->done, n));
      x->done += n;
      continue;
    }
    n = CHORUS_MIN(x->cap, x->bytes - x->done);
    if (x->conn->shared) {
      chorus_copy_tuned(&op->cc->slot_tuner, x->slot, x->buf + x->done, n);
      CHECK(chorus_prim_post(op, x->conn, n));
    } else {
      CHECK(chorus_prim_post_from(op, x->conn, x->slot, x->buf + x->done, n));
    }
    x->done += n;
  }
  if (x->bytes) CORO_AWAIT_RES(x->co, res, chorus_prim_flush(op, x->conn));
  CORO_END(x->co);
}

/* Message j of a transfer: slot j of its range. */
static char *xfer_place(const void *ctx, uint64_t j, size_t *bytes) {
  const chorus_xfer *x = ctx;
  const size_t at = (size_t)j * x->conn->slot_bytes;
  *bytes = CHORUS_MIN(x->conn->slot_bytes, x->bytes - at);
  return x->buf + at;
}

/* The next message: where the sender may post by reference, read straight
 * into its place (*read); else through the slots, placed ahead. */
static ncclResult_t recv_next(chorus_op *op, chorus_xfer *x, int *read) {
  *read = 0;
  if (x->conn->peer_reads)
    return chorus_prim_recv_read(op, x->conn, x->buf + x->done, x->bytes - x->done, &x->rbuf,
                                 &x->rbytes, read);
  return chorus_prim_recv_placed(op, x->conn, xfer_place, x,
                                 CHORUS_DIV_UP(x->bytes, x->conn->slot_bytes), &x->placed,
                                 x->done / x->conn->slot_bytes, &x->rbuf, &x->rbytes);
}

ncclResult_t chorus_xfer_recv(chorus_op *op, chorus_xfer *x) {
  ncclResult_t res;
  size_t want;
  int read;
  CORO_BEGIN(x->co);
  while (x->done < x->bytes) {
    CORO_AWAIT_RES(x->co, res, recv_next(op, x, &read));
    want = CHORUS_MIN(read ? CHORUS_XFER_READ_UNIT : x->conn->slot_bytes, x->bytes - x->done);
    if (x->rbytes != want) return chorus_prim_size_error(op, x->conn, x->rbytes, want);
    if (x->rbuf != x->buf + x->done) chorus_copy(x->buf + x->done, x->rbuf, x->rbytes, op->nt);
    x->done += x->rbytes;
    CHECK(chorus_prim_release(op, x->conn));
  }
  CORO_END(x->co);
}

ncclResult_t chorus_xfer_fold(chorus_op *op, chorus_xfer *x) {
  ncclResult_t res;
  size_t want;
  const void *src[2];
  CORO_BEGIN(x->co);
  while (x->done < x->bytes) {
    /* Into the slot, never placed: the range holds what it combines with. */
    CORO_AWAIT_RES(x->co, res, chorus_prim_recv(op, x->conn, &x->rbuf, &x->rbytes));
    want = CHORUS_MIN(x->conn->slot_bytes, x->bytes - x->done);
    if (x->rbytes != want) return chorus_prim_size_error(op, x->conn, x->rbytes, want);
    src[0] = x->buf + x->done;
    src[1] = x->rbuf;
    chorus_reduce(&op->red, x->buf + x->done, src, 2, x->rbytes / op->esize, 0, 0);
    x->done += x->rbytes;
    CHECK(chorus_prim_release(op, x->conn));
  }
  CORO_END(x->co);
}

/* The message before a device transfer. */
typedef struct dev_note {
  uint64_t magic;
  uint64_t bytes;
} dev_note;
#define DEV_NOTE_MAGIC 0x4445564d454d2121ull /* "DEVMEM!!" */

ncclResult_t chorus_xfer_send_dev(chorus_op *op, chorus_xfer *x) {
  ncclResult_t res;
  CORO_BEGIN(x->co);
  CORO_AWAIT_RES(x->co, res, chorus_prim_send_slot(op, x->conn, &x->slot, &x->cap));
  const dev_note note = {DEV_NOTE_MAGIC, x->bytes};
  memcpy(x->slot, &note, sizeof note);
  CHECK(chorus_prim_post(op, x->conn, sizeof note));
  CORO_AWAIT_RES(x->co, res, chorus_prim_dev_move(op, x->conn, (void *)x->buf, x->bytes));
  x->done = x->bytes;
  CORO_AWAIT_RES(x->co, res, chorus_prim_flush(op, x->conn));
  CORO_END(x->co);
}

ncclResult_t chorus_xfer_recv_dev(chorus_op *op, chorus_xfer *x) {
  ncclResult_t res;
  dev_note note;
  CORO_BEGIN(x->co);
  CORO_AWAIT_RES(x->co, res, chorus_prim_recv(op, x->conn, &x->rbuf, &x->rbytes));
  memset(&note, 0, sizeof note);
  if (x->rbytes == sizeof note) memcpy(&note, x->rbuf, sizeof note);
  if (note.magic != DEV_NOTE_MAGIC || note.bytes != x->bytes) {
    char me[160];
    chorus_op_describe(op, me, sizeof me);
    return chorus_error(ncclInvalidUsage,
                        "%s: rank %d sends %s where %zu bytes of GPU memory were expected (counts "
                        "or types differ between sender and receiver)",
                        me, x->conn->peer,
                        note.magic == DEV_NOTE_MAGIC ? "another size" : "host memory", x->bytes);
  }
  CHECK(chorus_prim_release(op, x->conn));
  CORO_AWAIT_RES(x->co, res, chorus_prim_dev_move(op, x->conn, (void *)x->buf, x->bytes));
  x->done = x->bytes;
  CORO_END(x->co);
}

ncclResult_t chorus_xfer_all(chorus_op *op, chorus_xfer *xs, const uint8_t *kind, int n) {
  ncclResult_t first_wait = ncclSuccess;
  chorus_conn *wc = NULL;
  int wd = 0;
  for (int i = 0; i < n; i++) {
    if (xs[i].co == -1) continue; /* done */
    ncclResult_t res = kind[i] == CHORUS_XFER_SEND   ? chorus_xfer_send(op, &xs[i])
                       : kind[i] == CHORUS_XFER_FOLD ? chorus_xfer_fold(op, &xs[i])
                                                     : chorus_xfer_recv(op, &xs[i]);
    if (res == ncclInProgress) {
      if (first_wait == ncclSuccess) wc = op->wait_conn, wd = op->wait_dir;
      first_wait = ncclInProgress;
      continue;
    }
    if (res != ncclSuccess) return res;
    xs[i].co = -1;
  }
  if (first_wait == ncclInProgress) {
    /* Report the first blocked transfer as what the op waits for. */
    op->wait_conn = wc;
    op->wait_dir = wd;
  }
  return first_wait;
}

ncclResult_t chorus_xfer_alloc(chorus_op *op, int n, size_t extra, chorus_xfer **xs, uint8_t **kind,
                               char **extra_at) {
  const size_t xbytes = CHORUS_ALIGN_UP((size_t)n * (sizeof(chorus_xfer) + 1), (size_t)64);
  if (!chorus_op_scratch(op, xbytes + extra))
    return chorus_error(ncclSystemError, "out of memory planning %s", chorus_func_name(op->func));
  *xs = op->scratch;
  *kind = (uint8_t *)(*xs + n);
  *extra_at = (char *)op->scratch + xbytes;
  return ncclSuccess;
}

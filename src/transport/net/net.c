/*
 * net.c - the TCP transport: ranks on different hosts (or any ranks, with
 * NCCL_SHM_DISABLE=1) exchange messages over sockets.
 *
 * One socket per (peer, channel) carries both directions. The lower rank
 * connects, the higher accepts, through the bootstrap's connection service
 * (so the job secret authenticates every socket).
 *
 * Each direction has nslots local staging slots. Sending: schedules fill a
 * slot and post it; the transport writes posted messages to the socket in
 * order (header, then payload) whenever the executor passes by (progress) or
 * the schedule touches the connection; a slot is free again once its bytes
 * are in the kernel. Receiving: on demand, the transport reads the next
 * header and payload into a free slot; the schedule reads it in place.
 *
 * Wire format of a message: net_wire_hdr (magic, payload bytes, meta), then
 * the payload. A wrong magic or an oversized length fails the connection.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/socket.h"

#define WIRE_MAGIC 0x4e455431u /* "NET1" */

typedef struct net_wire_hdr {
  uint32_t magic;
  uint32_t pad;
  uint64_t bytes;
  chorus_msg_meta meta;
} net_wire_hdr;

typedef struct net_conn {
  chorus_conn base;
  int fd; /* shared by the send and receive conns of a (peer, channel) */
  int dir;
  char *slots;
  uint32_t nslots;
  net_wire_hdr *hdr; /* per slot */
  uint64_t posted;   /* send: messages posted; recv: messages fully arrived */
  uint64_t done;     /* send: messages fully written; recv: messages released */
  size_t off;        /* bytes of the current message moved so far */
  int broken;
  /* recv: the peer closed (or reset) the stream at a message boundary. Not an
   * error until a message we still need is missing: a peer that finished
   * its part of a call may close before we read ahead. */
  int rx_closed;
  char rx_reason[96];
} net_conn;

typedef struct net_state {
  int rank, nranks;
  net_conn *conns; /* [peer][channel][dir] */
  uint8_t *is_peer;
  int *fds;        /* [peer][channel] */
  size_t slot_bytes;
} net_state;

static net_conn *conn_of(net_state *s, int peer, int ch, int dir) {
  return &s->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

static ncclResult_t broken(net_conn *c, const char *what, const char *detail) {
  if (!c->broken)
    snprintf(c->base.err, sizeof c->base.err, "connection to rank %d %s: %s", c->base.peer, what,
             detail);
  c->broken = 1;
  return ncclRemoteError;
}

/* Writes posted messages until the socket is full or none is left. */
static ncclResult_t push(net_conn *c) {
  if (c->broken) return ncclRemoteError;
  while (c->done < c->posted) {
    uint32_t i = (uint32_t)(c->done % c->nslots);
    net_wire_hdr *h = &c->hdr[i];
    size_t total = sizeof *h + h->bytes;
    struct iovec iov[2];
    int n = 0;
    if (c->off < sizeof *h) iov[n++] = (struct iovec){(char *)h + c->off, sizeof *h - c->off};
    size_t doff = c->off > sizeof *h ? c->off - sizeof *h : 0;
    if (h->bytes > doff)
      iov[n++] = (struct iovec){c->slots + (size_t)i * c->base.slot_bytes + doff, h->bytes - doff};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
      if (errno == EINTR) continue;
      return broken(c, "failed while sending", strerror(errno));
    }
    c->off += (size_t)w;
    if (c->off == total) {
      c->off = 0;
      c->done++;
    }
  }
  return ncclSuccess;
}

/* End of the stream: fine between messages (remembered), broken inside one. */
static ncclResult_t stream_ended(net_conn *c, const char *why) {
  if (c->off != 0) return broken(c, "was closed in the middle of a message", why);
  c->rx_closed = 1;
  snprintf(c->rx_reason, sizeof c->rx_reason, "%s", why);
  return ncclSuccess;
}

/* Reads into free slots until the socket is empty or the slots are full. */
static ncclResult_t pull(net_conn *c) {
  if (c->broken) return ncclRemoteError;
  while (!c->rx_closed && c->posted - c->done < c->nslots) {
    uint32_t i = (uint32_t)(c->posted % c->nslots);
    net_wire_hdr *h = &c->hdr[i];
    char *dst;
    size_t want;
    if (c->off < sizeof *h) {
      dst = (char *)h + c->off;
      want = sizeof *h - c->off;
    } else {
      dst = c->slots + (size_t)i * c->base.slot_bytes + (c->off - sizeof *h);
      want = sizeof *h + h->bytes - c->off;
    }
    ssize_t r = want ? recv(c->fd, dst, want, 0) : 0;
    if (want && r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
      if (errno == EINTR) continue;
      return stream_ended(c, strerror(errno));
    }
    if (want && r == 0) return stream_ended(c, "the peer exited or failed");
    c->off += (size_t)r;
    if (c->off == sizeof *h && (h->magic != WIRE_MAGIC || h->bytes > c->base.slot_bytes))
      return broken(c, "carried garbage", "bad message header");
    if (c->off >= sizeof *h && c->off == sizeof *h + h->bytes) {
      c->off = 0;
      c->posted++;
    }
  }
  return ncclSuccess;
}

static ncclResult_t net_send_slot(chorus_conn *cc, void **buf, size_t *cap) {
  net_conn *c = (net_conn *)cc;
  CHECK(push(c));
  if (c->posted - c->done >= c->nslots) return ncclInProgress;
  *buf = c->slots + (size_t)(c->posted % c->nslots) * c->base.slot_bytes;
  *cap = c->base.slot_bytes;
  return ncclSuccess;
}

static ncclResult_t net_send_post(chorus_conn *cc, size_t bytes, const chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  net_wire_hdr *h = &c->hdr[c->posted % c->nslots];
  h->magic = WIRE_MAGIC;
  h->pad = 0;
  h->bytes = bytes;
  h->meta = *meta;
  c->posted++;
  return push(c);
}

static ncclResult_t net_send_flush(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  CHECK(push(c));
  return c->done == c->posted ? ncclSuccess : ncclInProgress;
}

static ncclResult_t net_recv_slot(chorus_conn *cc, const void **buf, size_t *bytes,
                                  chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  if (c->posted == c->done) {
    CHECK(pull(c));
    if (c->posted == c->done)
      return c->rx_closed ? broken(c, "was closed", c->rx_reason) : ncclInProgress;
  }
  uint32_t i = (uint32_t)(c->done % c->nslots);
  *buf = c->slots + (size_t)i * c->base.slot_bytes;
  *bytes = c->hdr[i].bytes;
  *meta = c->hdr[i].meta;
  return ncclSuccess;
}

static ncclResult_t net_recv_release(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  c->done++;
  return ncclSuccess;
}

static void net_wait_info(chorus_conn *cc, int dir, chorus_waitset *ws) {
  net_conn *c = (net_conn *)cc;
  chorus_waitset_add_fd(ws, c->fd, dir == CHORUS_DIR_SEND ? POLLOUT : POLLIN);
}

static ncclResult_t net_check(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  if (c->dir == CHORUS_DIR_RECV && c->posted == c->done && !c->broken) {
    /* Nothing buffered: find out whether the stream ended. */
    if (pull(c) != ncclSuccess) return ncclRemoteError;
    if (c->posted == c->done && c->rx_closed) return broken(c, "was closed", c->rx_reason);
  }
  return c->broken ? ncclRemoteError : ncclSuccess;
}

static void net_fail(chorus_conn *cc, const char *reason) {
  net_conn *c = (net_conn *)cc;
  (void)reason;
  if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  if (!c->broken) broken(c, "was shut down", reason);
}

static const chorus_conn_ops net_ops = {
    .send_slot = net_send_slot,
    .send_post = net_send_post,
    .send_flush = net_send_flush,
    .recv_slot = net_recv_slot,
    .recv_release = net_recv_release,
    .wait_info = net_wait_info,
    .check = net_check,
    .fail = net_fail,
};

static void net_destroy(void *p) {
  net_state *s = p;
  if (!s) return;
  if (s->conns)
    for (size_t i = 0; i < (size_t)s->nranks * CHORUS_NCHANNELS * 2; i++) {
      chorus_free(s->conns[i].slots);
      chorus_free(s->conns[i].hdr);
    }
  if (s->fds)
    for (size_t i = 0; i < (size_t)s->nranks * CHORUS_NCHANNELS; i++)
      if (s->fds[i] >= 0) close(s->fds[i]);
  chorus_free(s->conns);
  chorus_free(s->is_peer);
  chorus_free(s->fds);
  chorus_free(s);
}

static ncclResult_t init_conn(net_state *s, const chorus_transport_ctx *ctx, int peer, int ch,
                              int dir) {
  net_conn *c = conn_of(s, peer, ch, dir);
  c->base.ops = &net_ops;
  c->base.transport = "NET";
  c->base.peer = peer;
  c->base.channel = ch;
  c->base.slot_bytes = s->slot_bytes;
  c->fd = s->fds[peer * CHORUS_NCHANNELS + ch];
  c->dir = dir;
  c->nslots = (uint32_t)ctx->nslots;
  c->slots = chorus_malloc((size_t)c->nslots * s->slot_bytes);
  c->hdr = chorus_calloc(c->nslots, sizeof *c->hdr);
  if (!c->slots || !c->hdr) return chorus_error(ncclSystemError, "NET transport: out of memory");
  return ncclSuccess;
}

static ncclResult_t net_setup(const chorus_transport_ctx *ctx, const int *peers, int npeers,
                              void **out) {
  *out = NULL;
  ncclResult_t res = ncclSuccess;
  net_state *s = chorus_calloc(1, sizeof *s);
  if (!s) return chorus_error(ncclSystemError, "NET transport: out of memory");
  s->rank = ctx->rank;
  s->nranks = ctx->nranks;
  s->slot_bytes = ctx->slot_bytes;
  s->conns = chorus_calloc((size_t)s->nranks * CHORUS_NCHANNELS * 2, sizeof *s->conns);
  s->is_peer = chorus_calloc((size_t)s->nranks, 1);
  s->fds = chorus_malloc((size_t)s->nranks * CHORUS_NCHANNELS * sizeof(int));
  if (!s->conns || !s->is_peer || !s->fds) {
    res = chorus_error(ncclSystemError, "NET transport: out of memory");
    goto fail;
  }
  for (size_t i = 0; i < (size_t)s->nranks * CHORUS_NCHANNELS; i++) s->fds[i] = -1;
  /* Connect to higher ranks first, then accept from lower ones: connects
   * complete in the kernel before the peer accepts, so no order deadlocks. */
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    s->is_peer[p] = 1;
    if (p <= s->rank) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      CHECK_GOTO(chorus_bootstrap_connect(ctx->bs, p, (uint64_t)ch, &s->fds[p * CHORUS_NCHANNELS + ch]),
                 res, fail);
  }
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    if (p >= s->rank) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      CHECK_GOTO(chorus_bootstrap_accept(ctx->bs, p, (uint64_t)ch, &s->fds[p * CHORUS_NCHANNELS + ch]),
                 res, fail);
  }
  for (int i = 0; i < npeers; i++) {
    if (peers[i] == s->rank) {
      res = chorus_error(ncclInternalError, "NET transport cannot connect a rank to itself");
      goto fail;
    }
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      CHECK_GOTO(init_conn(s, ctx, peers[i], ch, CHORUS_DIR_SEND), res, fail);
      CHECK_GOTO(init_conn(s, ctx, peers[i], ch, CHORUS_DIR_RECV), res, fail);
    }
  }
  INFO(CHORUS_NET | CHORUS_INIT, "NET transport: %d peer(s), %d sockets each", npeers,
       CHORUS_NCHANNELS);
  *out = s;
  return ncclSuccess;
fail:
  net_destroy(s);
  return res;
}

static ncclResult_t net_finish(void *p) {
  (void)p;
  return ncclSuccess;
}

static chorus_conn *net_conn_get(void *p, int peer, int ch, int dir) {
  net_state *s = p;
  if (!s->is_peer[peer]) return NULL;
  return &conn_of(s, peer, ch, dir)->base;
}

/* Pushes pending output on every connection. */
static ncclResult_t net_progress(void *p) {
  net_state *s = p;
  for (int peer = 0; peer < s->nranks; peer++) {
    if (!s->is_peer[peer]) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      net_conn *c = conn_of(s, peer, ch, CHORUS_DIR_SEND);
      if (c->done < c->posted) {
        ncclResult_t res = push(c);
        if (res != ncclSuccess) return chorus_error(res, "NET: %s", c->base.err);
      }
    }
  }
  return ncclSuccess;
}

static void net_state_wait_info(void *p, chorus_waitset *ws) {
  net_state *s = p;
  for (int peer = 0; peer < s->nranks; peer++) {
    if (!s->is_peer[peer]) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      net_conn *c = conn_of(s, peer, ch, CHORUS_DIR_SEND);
      if (c->done < c->posted) chorus_waitset_add_fd(ws, c->fd, POLLOUT);
    }
  }
}

static chorus_doorbell *net_doorbell(void *p) {
  (void)p;
  return NULL;
}

static chorus_node *net_node(void *p) {
  (void)p;
  return NULL;
}

const chorus_transport chorus_transport_net = {
    .name = "NET",
    .setup = net_setup,
    .finish = net_finish,
    .conn = net_conn_get,
    .progress = net_progress,
    .wait_info = net_state_wait_info,
    .doorbell = net_doorbell,
    .node = net_node,
    .destroy = net_destroy,
};

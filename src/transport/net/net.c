/*
 * net.c - the TCP transport: ranks on different hosts (or any ranks, with
 * NCCL_SHM_DISABLE=1) exchange messages over sockets.
 *
 * Each (peer, channel) pair has NCCL_NSOCKS_PERTHREAD sockets (streams),
 * each carrying both directions. The lower rank connects, the higher
 * accepts, through the bootstrap's connection service (so the job secret
 * authenticates every socket). Message i of a direction travels on stream
 * i % k, so consecutive messages move in parallel and a large transfer uses
 * every stream; each stream is in order, so the receiver reassembles the
 * sequence without extra headers.
 *
 * Each direction has nslots local staging slots. Sending: schedules fill a
 * slot and post it; the transport writes posted messages to their streams
 * whenever the executor passes by (progress) or the schedule touches the
 * connection; slots free up in order once their bytes are in the kernel.
 * Receiving: on demand, each stream reads its next message into its slot as
 * soon as that slot is free; the schedule reads slots in order, in place.
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
#include "util/param.h"
#include "util/socket.h"

#define WIRE_MAGIC  0x4e455431u /* "NET1" */
#define MAX_STREAMS 8

typedef struct net_wire_hdr {
  uint32_t magic;
  uint32_t pad;
  uint64_t bytes;
  chorus_msg_meta meta;
} net_wire_hdr;

/* One socket's progress in one direction. */
typedef struct net_stream {
  int fd;        /* shared by the send and receive conns of a (peer, channel) */
  uint64_t next; /* next message index this stream carries (s, s+k, s+2k...) */
  size_t off;    /* bytes of that message moved so far */
  int closed;    /* recv: the peer ended the stream at a message boundary */
} net_stream;

typedef struct net_conn {
  chorus_conn base;
  int dir;
  int nstreams;
  net_stream st[MAX_STREAMS];
  char *slots;
  uint32_t nslots;
  net_wire_hdr *hdr; /* per slot */
  uint8_t *ready;    /* per slot: send: written out; recv: arrived */
  uint64_t posted;   /* send: messages posted */
  uint64_t done;     /* send: messages freed (written, in order); recv: released */
  int broken;
  /* recv: why a stream ended. Not an error until a message still owed is
   * missing: a peer that finished its part of a call may close before we
   * read ahead. */
  char rx_reason[96];
} net_conn;

typedef struct net_state {
  int rank, nranks, nstreams;
  net_conn *conns; /* [peer][channel][dir] */
  uint8_t *is_peer;
  int *fds; /* [peer][channel][stream] */
  size_t slot_bytes;
} net_state;

static net_conn *conn_of(net_state *s, int peer, int ch, int dir) {
  return &s->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

static int *fd_of(net_state *s, int peer, int ch, int stream) {
  return &s->fds[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * MAX_STREAMS + (size_t)stream];
}

static ncclResult_t broken(net_conn *c, const char *what, const char *detail) {
  if (!c->broken)
    snprintf(c->base.err, sizeof c->base.err, "connection to rank %d %s: %s", c->base.peer, what,
             detail);
  c->broken = 1;
  return ncclRemoteError;
}

static char *slot_data(net_conn *c, uint64_t i) {
  return c->slots + (size_t)(i % c->nslots) * c->base.slot_bytes;
}

/* Writes one stream's posted messages until its socket is full. */
static ncclResult_t push_stream(net_conn *c, net_stream *st) {
  while (st->next < c->posted) {
    uint32_t i = (uint32_t)(st->next % c->nslots);
    net_wire_hdr *h = &c->hdr[i];
    size_t total = sizeof *h + h->bytes;
    struct iovec iov[2];
    int n = 0;
    if (st->off < sizeof *h) iov[n++] = (struct iovec){(char *)h + st->off, sizeof *h - st->off};
    size_t doff = st->off > sizeof *h ? st->off - sizeof *h : 0;
    if (h->bytes > doff) iov[n++] = (struct iovec){slot_data(c, st->next) + doff, h->bytes - doff};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(st->fd, &mh, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
      if (errno == EINTR) continue;
      return broken(c, "failed while sending", strerror(errno));
    }
    st->off += (size_t)w;
    if (st->off == total) {
      st->off = 0;
      c->ready[i] = 1;
      st->next += (uint64_t)c->nstreams;
    }
  }
  return ncclSuccess;
}

static ncclResult_t push(net_conn *c) {
  if (c->broken) return ncclRemoteError;
  for (int s = 0; s < c->nstreams; s++) CHECK(push_stream(c, &c->st[s]));
  while (c->done < c->posted && c->ready[c->done % c->nslots]) c->ready[c->done++ % c->nslots] = 0;
  return ncclSuccess;
}

/* Reads one stream's messages into their slots while those are free. */
static ncclResult_t pull_stream(net_conn *c, net_stream *st) {
  while (!st->closed && st->next < c->done + c->nslots) {
    uint32_t i = (uint32_t)(st->next % c->nslots);
    net_wire_hdr *h = &c->hdr[i];
    char *dst;
    size_t want;
    if (st->off < sizeof *h) {
      dst = (char *)h + st->off;
      want = sizeof *h - st->off;
    } else {
      dst = slot_data(c, st->next) + (st->off - sizeof *h);
      want = sizeof *h + h->bytes - st->off;
    }
    ssize_t r = want ? recv(st->fd, dst, want, 0) : 0;
    if (want && r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
      if (r < 0 && errno == EINTR) continue;
      const char *why = r == 0 ? "the peer exited or failed" : strerror(errno);
      if (st->off != 0) return broken(c, "was closed in the middle of a message", why);
      st->closed = 1;
      snprintf(c->rx_reason, sizeof c->rx_reason, "%s", why);
      return ncclSuccess;
    }
    st->off += (size_t)r;
    if (st->off == sizeof *h && (h->magic != WIRE_MAGIC || h->bytes > c->base.slot_bytes))
      return broken(c, "carried garbage", "bad message header");
    if (st->off >= sizeof *h && st->off == sizeof *h + h->bytes) {
      st->off = 0;
      c->ready[i] = 1;
      st->next += (uint64_t)c->nstreams;
    }
  }
  return ncclSuccess;
}

/* Is the next message here? Reads what it can first. ncclSuccess: yes;
 * ncclInProgress: not yet; error: its stream ended or broke. */
static ncclResult_t next_arrived(net_conn *c) {
  if (c->broken) return ncclRemoteError;
  if (c->ready[c->done % c->nslots]) return ncclSuccess;
  for (int s = 0; s < c->nstreams; s++) CHECK(pull_stream(c, &c->st[s]));
  if (c->ready[c->done % c->nslots]) return ncclSuccess;
  if (c->st[c->done % (uint64_t)c->nstreams].closed) return broken(c, "was closed", c->rx_reason);
  return ncclInProgress;
}

static ncclResult_t net_send_slot(chorus_conn *cc, void **buf, size_t *cap) {
  net_conn *c = (net_conn *)cc;
  CHECK(push(c));
  if (c->posted - c->done >= c->nslots) return ncclInProgress;
  *buf = slot_data(c, c->posted);
  *cap = c->base.slot_bytes;
  return ncclSuccess;
}

static ncclResult_t net_send_post(chorus_conn *cc, size_t bytes, const chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  uint32_t i = (uint32_t)(c->posted % c->nslots);
  c->hdr[i] = (net_wire_hdr){WIRE_MAGIC, 0, bytes, *meta};
  c->ready[i] = 0;
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
  ncclResult_t res = next_arrived(c);
  if (res != ncclSuccess) return res;
  uint32_t i = (uint32_t)(c->done % c->nslots);
  *buf = slot_data(c, c->done);
  *bytes = c->hdr[i].bytes;
  *meta = c->hdr[i].meta;
  return ncclSuccess;
}

static ncclResult_t net_recv_release(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  c->ready[c->done++ % c->nslots] = 0;
  return ncclSuccess;
}

static void net_wait_info(chorus_conn *cc, int dir, chorus_waitset *ws) {
  net_conn *c = (net_conn *)cc;
  for (int s = 0; s < c->nstreams; s++)
    if (dir == CHORUS_DIR_RECV ? !c->st[s].closed : c->st[s].next < c->posted)
      chorus_waitset_add_fd(ws, c->st[s].fd, dir == CHORUS_DIR_SEND ? POLLOUT : POLLIN);
}

static ncclResult_t net_check(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  if (c->dir == CHORUS_DIR_RECV && !c->broken) {
    ncclResult_t res = next_arrived(c);
    return res == ncclInProgress ? ncclSuccess : res;
  }
  return c->broken ? ncclRemoteError : ncclSuccess;
}

static void net_fail(chorus_conn *cc, const char *reason) {
  net_conn *c = (net_conn *)cc;
  for (int s = 0; s < c->nstreams; s++)
    if (c->st[s].fd >= 0) shutdown(c->st[s].fd, SHUT_RDWR);
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
      chorus_free(s->conns[i].ready);
    }
  if (s->fds)
    for (size_t i = 0; i < (size_t)s->nranks * CHORUS_NCHANNELS * MAX_STREAMS; i++)
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
  c->dir = dir;
  c->nstreams = s->nstreams;
  for (int k = 0; k < s->nstreams; k++)
    c->st[k] = (net_stream){*fd_of(s, peer, ch, k), (uint64_t)k, 0, 0};
  c->nslots = (uint32_t)ctx->nslots;
  c->slots = chorus_malloc((size_t)c->nslots * s->slot_bytes);
  c->hdr = chorus_calloc(c->nslots, sizeof *c->hdr);
  c->ready = chorus_calloc(c->nslots, 1);
  if (!c->slots || !c->hdr || !c->ready)
    return chorus_error(ncclSystemError, "NET transport: out of memory");
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
  s->nstreams = (int)CHORUS_MAX(1, CHORUS_MIN(MAX_STREAMS, ctx->nstreams));
  size_t nfds = (size_t)s->nranks * CHORUS_NCHANNELS * MAX_STREAMS;
  s->conns = chorus_calloc((size_t)s->nranks * CHORUS_NCHANNELS * 2, sizeof *s->conns);
  s->is_peer = chorus_calloc((size_t)s->nranks, 1);
  s->fds = chorus_malloc(nfds * sizeof(int));
  if (!s->conns || !s->is_peer || !s->fds) {
    res = chorus_error(ncclSystemError, "NET transport: out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nfds; i++) s->fds[i] = -1;
  /* Connect to higher ranks first, then accept from lower ones: connects
   * complete in the kernel before the peer accepts, so no order deadlocks. */
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    s->is_peer[p] = 1;
    if (p <= s->rank) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int k = 0; k < s->nstreams; k++)
        CHECK_GOTO(chorus_bootstrap_connect(ctx->bs, p, (uint64_t)(ch * MAX_STREAMS + k),
                                            fd_of(s, p, ch, k)),
                   res, fail);
  }
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    if (p >= s->rank) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int k = 0; k < s->nstreams; k++)
        CHECK_GOTO(chorus_bootstrap_accept(ctx->bs, p, (uint64_t)(ch * MAX_STREAMS + k),
                                           fd_of(s, p, ch, k)),
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
  INFO(CHORUS_NET | CHORUS_INIT, "NET transport: %d peer(s), %d channels x %d sockets each", npeers,
       CHORUS_NCHANNELS, s->nstreams);
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
      if (c->done < c->posted) net_wait_info(&c->base, CHORUS_DIR_SEND, ws);
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

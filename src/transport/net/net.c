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
 * Where a schedule only moves bytes, the kernel's copy can be the only one:
 * a slot posted by reference (send_post_ref) is written from the caller's
 * memory, and a message the receiver expects (recv_expect: its place, size
 * and call) is read straight into its place once its header matches. The
 * slot still counts, so the window of messages in flight is the same.
 *
 * Wire format: frames of a net_wire_hdr (magic, kind, payload bytes,
 * meta), then the payload. A wrong magic, kind or length fails the
 * connection. Besides messages (DATA), three kinds of frames:
 *   NOTE  an entry of the sender's call board (coll/calls.h): a call's
 *         description and the hash of the sender's calls so far. Notes
 *         have a socket of their own per pair of ranks, which carries no
 *         data: a rank that closes a socket with input it has not read
 *         resets the connection, which throws away its own output the
 *         peer has not received yet, and notes come unasked (a Gather's
 *         non-root may finish and close while its root, behind, still
 *         posts). The receiver keeps the last CHORUS_NODE_CALLS in the
 *         collective channel's `heard`.
 *   DATA_NOTE  a message that also carries the note of its call (the
 *         header's chain): a note still queued when the call posts data
 *         to the same peer goes with it, so a rooted call whose data
 *         reaches that peer sends one frame, not two (net_post_call).
 *   FAIL  the sender failed: the payload is why (its first cause), which
 *         the receiver reports as it is. Sent on every socket that is
 *         between frames when the sender fails, before it shuts them
 *         down; a stream that ends without one ends with "closed" (and
 *         the receiver looks for the reason on the peer's other sockets).
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/net/net_impl.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/param.h"
#include "util/socket.h"

#define WIRE_MAGIC 0x4e455432u /* "NET2" */
#define NOTE_QUEUE 256         /* notes held for a peer until its socket takes them */
#define NOTES_TAG  (CHORUS_NCHANNELS * NET_MAX_STREAMS) /* the notes socket's connection tag */

enum { FRAME_DATA = 0, FRAME_NOTE = 1, FRAME_FAIL = 2, FRAME_DATA_NOTE = 3 };

static int *fd_of(net_state *s, int peer, int ch, int stream) {
  return &s->fds[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * NET_MAX_STREAMS + (size_t)stream];
}

static ncclResult_t broken(net_conn *c, const char *what, const char *detail) {
  if (!c->broken && !c->peer_failed) {
    /* A lost host takes all its ranks: say which, as every survivor will. */
    char host[96];
    chorus_topo_host_words(c->state->topo, c->base.peer, host, sizeof host);
    snprintf(c->base.err, sizeof c->base.err, "connection to rank %d on %s %s: %s", c->base.peer,
             host, what, detail);
  }
  c->broken = 1;
  return ncclRemoteError;
}

static char *slot_data(net_conn *c, uint64_t i) {
  return c->slots + (size_t)(i % c->nslots) * c->base.slot_bytes;
}

static int ready_at(net_conn *c, uint64_t m) {
  return __atomic_load_n(&c->ready[m % c->nslots], __ATOMIC_ACQUIRE);
}

/* The stream ends: how, what and why (its lock held). */
static int stream_end(net_stream *st, int how, const char *what, const char *why) {
  st->what = what;
  snprintf(st->why, sizeof st->why, "%s", why);
  __atomic_store_n(&st->end, how, __ATOMIC_RELEASE);
  return 1;
}

/* A frame moved whole: its slot is ready, the stream moves to its next. */
static void frame_done(net_conn *c, net_stream *st, uint32_t i) {
  st->off = 0;
  __atomic_store_n(&c->ready[i], 1, __ATOMIC_RELEASE);
  __atomic_store_n(&st->next, st->next + (uint64_t)c->nstreams, __ATOMIC_RELAXED);
}

int net_push_stream(net_conn *c, net_stream *st, size_t limit) {
  int moved = 0;
  while (st->next < __atomic_load_n(&c->posted, __ATOMIC_ACQUIRE)) {
    uint32_t i = (uint32_t)(st->next % c->nslots);
    net_wire_hdr *h = &c->hdr[i];
    if (st->off == 0 && h->bytes > limit) break;
    size_t total = sizeof *h + h->bytes;
    struct iovec iov[2];
    int n = 0;
    if (st->off < sizeof *h) iov[n++] = (struct iovec){(char *)h + st->off, sizeof *h - st->off};
    size_t doff = st->off > sizeof *h ? st->off - sizeof *h : 0;
    const char *payload = c->place[i].ref ? c->place[i].ref : slot_data(c, st->next);
    if (h->bytes > doff) iov[n++] = (struct iovec){(char *)payload + doff, h->bytes - doff};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(st->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return stream_end(st, NET_BROKEN, "failed while sending", strerror(errno));
    }
    moved = 1;
    st->off += (size_t)w;
    if (st->off == total) frame_done(c, st, i);
  }
  return moved;
}

static void pull_notes(net_notes *nt);
static void push_notes(net_notes *nt);

/* A note that came (alone, or with its call's message) onto the board. */
static void heard_note(const net_notes *nt, const net_wire_hdr *h) {
  chorus_call_entry_write(&nt->board[h->meta.seq % CHORUS_NODE_CALLS], h->meta.seq + 1, h->chain,
                          &h->meta);
}

/* Reads the peer's notes socket; a FAIL frame there becomes c's news.
 * Returns whether it did. */
static int notes_tell_failure(net_conn *c) {
  net_notes *nt = &c->state->notes[c->base.peer];
  pull_notes(nt);
  if (nt->garbage) { /* authenticated, so a bug or corruption: the pair cannot go on */
    (void)broken(c, "sent a malformed frame on its notes socket", nt->fail);
    return 1;
  }
  if (!nt->peer_failed) return 0;
  snprintf(c->base.err, sizeof c->base.err, "%s", nt->fail);
  c->base.relayed = 1;
  return 1;
}

/* Turns how c's streams ended into c's state (the executor's). */
static void adopt(net_conn *c) {
  for (int k = 0; k < c->nstreams; k++) {
    net_stream *st = &c->st[k];
    const int end = __atomic_load_n(&st->end, __ATOMIC_ACQUIRE);
    if (end == NET_BROKEN) {
      (void)broken(c, st->what, st->why);
    } else if (end == NET_FAILED && !c->broken && !c->peer_failed) {
      snprintf(c->base.err, sizeof c->base.err, "%.*s", (int)st->fail_len, st->fail);
      c->base.relayed = c->peer_failed = 1;
    }
  }
}

/* The executor's turn at stream k of c, when no pump holds it: all of it
 * without pumps, else the frames small enough to move at once. Pending
 * output it leaves wakes the stream's pump. */
static void exec_push(net_conn *c, net_stream *st) {
  net_state *s = c->state;
  if (!net_try_lock(st)) return;
  const int helped = net_helped(s);
  if (!net_ended(st)) (void)net_push_stream(c, st, helped ? NET_EXEC_MAX : SIZE_MAX);
  const int left = st->next < __atomic_load_n(&c->posted, __ATOMIC_RELAXED) && !net_ended(st);
  net_unlock(st);
  if (left && helped) net_pump_kick_if_asleep(net_pump_of(s, (int)(st - c->st)));
}

static void exec_pull(net_conn *c, net_stream *st) {
  if (!net_try_lock(st)) return;
  if (!net_ended(st)) (void)net_pull_stream(c, st, net_helped(c->state) ? NET_EXEC_MAX : SIZE_MAX);
  net_unlock(st);
}

/* c broke without the peer's word: if the peer said why on another of its
 * sockets (its FAIL frames go on every stream between frames, and the
 * point-to-point channel is mostly idle), that is the news. */
static ncclResult_t borrow_cause(net_conn *c, ncclResult_t res) {
  (void)notes_tell_failure(c);
  for (int ch = 0; ch < CHORUS_NCHANNELS && !c->base.relayed; ch++) {
    net_conn *o = net_conn_of(c->state, c->base.peer, ch, CHORUS_DIR_RECV);
    if (o == c) continue;
    for (int k = 0; k < o->nstreams && !o->peer_failed && !o->broken; k++) exec_pull(o, &o->st[k]);
    adopt(o);
    if (o->peer_failed) {
      memcpy(c->base.err, o->base.err, sizeof c->base.err);
      c->base.relayed = 1;
    }
  }
  return res;
}

static ncclResult_t push(net_conn *c) {
  if (c->broken) return ncclRemoteError;
  for (int k = 0; k < c->nstreams; k++) exec_push(c, &c->st[k]);
  adopt(c);
  if (c->broken) return borrow_cause(c, ncclRemoteError);
  while (c->done < c->posted && ready_at(c, c->done)) {
    c->place[c->done % c->nslots].ref = NULL;
    __atomic_store_n(&c->ready[c->done % c->nslots], 0, __ATOMIC_RELAXED);
    c->done++;
  }
  return ncclSuccess;
}

/* Where message m's payload goes, its header just read: the caller's
 * place when it expects exactly this message there, else the slot. */
static void place_payload(net_conn *c, uint64_t m) {
  const net_wire_hdr *h = &c->hdr[m % c->nslots];
  net_place *pl = &c->place[m % c->nslots];
  pl->where = slot_data(c, m);
  if (__atomic_exchange_n(&pl->want_msg, 0, __ATOMIC_ACQ_REL) == m + 1 && h->kind == FRAME_DATA &&
      h->bytes == pl->want_bytes && chorus_meta_equal(&h->meta, &pl->want_meta))
    pl->where = pl->want_at;
}

/* Read-ahead per receiving stream: frames up to this size (header
 * included) come in one recv, not one for the header and one for the
 * payload. Allocated at a stream's first read. */
#define READ_AHEAD 4096

/* Up to want bytes of st's socket into dst, as recv does (MSG_DONTWAIT):
 * what was read ahead first; a want under READ_AHEAD through the
 * read-ahead, which takes what the socket holds up to its size, unless
 * the stream's last frame was larger (its payload would be copied out of
 * the read-ahead for nothing: 8-32 KiB Broadcasts 3-7% slower). A
 * read-ahead that got less than it asked for found the socket empty:
 * until the next pass (net_pull_stream), reads say EAGAIN without asking
 * again (a small frame then costs one recv, not a second that fails). */
static ssize_t stream_read(net_stream *st, char *dst, size_t want) {
  if (st->ra_off < st->ra_len) {
    const size_t n = CHORUS_MIN(want, (size_t)(st->ra_len - st->ra_off));
    memcpy(dst, st->ra + st->ra_off, n);
    st->ra_off += (uint32_t)n;
    return (ssize_t)n;
  }
  if (st->ra_dry) {
    errno = EAGAIN;
    return -1;
  }
  if (want >= READ_AHEAD || st->ra_big || (!st->ra && !(st->ra = chorus_malloc(READ_AHEAD))))
    return recv(st->fd, dst, want, MSG_DONTWAIT);
  const ssize_t r = recv(st->fd, st->ra, READ_AHEAD, MSG_DONTWAIT);
  if (r <= 0) return r;
  if (r < READ_AHEAD) st->ra_dry = 1;
  const size_t n = CHORUS_MIN(want, (size_t)r);
  memcpy(dst, st->ra, n);
  st->ra_off = (uint32_t)n;
  st->ra_len = (uint32_t)r;
  return (ssize_t)n;
}

int net_pull_stream(net_conn *c, net_stream *st, size_t limit) {
  int moved = 0;
  st->ra_dry = 0;
  while (st->next < __atomic_load_n(&c->done, __ATOMIC_ACQUIRE) + c->nslots) {
    uint32_t i = (uint32_t)(st->next % c->nslots);
    net_wire_hdr *h = &c->hdr[i];
    if (st->off == sizeof *h && h->bytes > limit) break;
    char *dst;
    size_t want;
    if (st->off < sizeof *h) {
      dst = (char *)h + st->off;
      want = sizeof *h - st->off;
    } else {
      dst = c->place[i].where + (st->off - sizeof *h);
      want = sizeof *h + h->bytes - st->off;
    }
    ssize_t r = want ? stream_read(st, dst, want) : 0;
    if (want && r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (r < 0 && errno == EINTR) continue;
      const char *why = r == 0 ? "the peer exited or failed" : strerror(errno);
      if (st->off != 0)
        return stream_end(st, NET_BROKEN, "was closed in the middle of a message", why);
      return stream_end(st, NET_CLOSED, "was closed", why);
    }
    moved = 1;
    st->off += (size_t)r;
    if (st->off == sizeof *h &&
        (h->magic != WIRE_MAGIC || h->bytes > c->base.slot_bytes ||
         (h->kind != FRAME_DATA && h->kind != FRAME_FAIL && h->kind != FRAME_DATA_NOTE) ||
         (h->kind == FRAME_FAIL && h->bytes >= CHORUS_REASON_MAX)))
      return stream_end(st, NET_BROKEN, "carried garbage", "bad message header");
    if (st->off == sizeof *h) {
      st->ra_big = sizeof *h + h->bytes > READ_AHEAD;
      if (h->kind == FRAME_DATA_NOTE) {
        heard_note(&c->state->notes[c->base.peer], h);
        h->kind = FRAME_DATA;
      }
      place_payload(c, st->next);
    }
    if (st->off < sizeof *h + h->bytes) continue;
    if (h->kind == FRAME_FAIL) { /* the stream ends here, with the peer's reason */
      st->off = 0;
      st->fail = c->place[i].where;
      st->fail_len = h->bytes;
      return stream_end(st, NET_FAILED, "failed", "");
    }
    frame_done(c, st, i);
  }
  return moved;
}

/* Is the next message here? Reads what it can first. ncclSuccess: yes;
 * ncclInProgress: not yet; error: its stream ended or broke. */
static ncclResult_t arrived(net_conn *c) {
  if (c->broken) return ncclRemoteError;
  if (ready_at(c, c->done)) return ncclSuccess;
  for (int k = 0; k < c->nstreams; k++) exec_pull(c, &c->st[k]);
  adopt(c);
  if (c->broken) return ncclRemoteError;
  /* How the stream ended before whether the message came: a mover marks
   * the message, then the end. */
  net_stream *st = &c->st[c->done % (uint64_t)c->nstreams];
  const int ended = net_ended(st);
  if (ready_at(c, c->done)) return ncclSuccess;
  if (ended) {
    if (c->peer_failed) return ncclRemoteError;
    return broken(c, "was closed", st->why);
  }
  return ncclInProgress;
}

static ncclResult_t next_arrived(net_conn *c) {
  ncclResult_t res = arrived(c);
  return res == ncclRemoteError && !c->base.relayed ? borrow_cause(c, res) : res;
}

static ncclResult_t net_send_slot(chorus_conn *cc, void **buf, size_t *cap) {
  net_conn *c = (net_conn *)cc;
  CHECK(push(c));
  if (c->posted - c->done >= c->nslots) return ncclInProgress;
  *buf = slot_data(c, c->posted);
  *cap = c->base.slot_bytes;
  return ncclSuccess;
}

/* Message h of a call whose note to the same peer is the last one queued,
 * and not begun, takes that note along (FRAME_DATA_NOTE). */
static void take_note(net_state *s, int peer, net_wire_hdr *h) {
  net_notes *nt = &s->notes[peer];
  const uint32_t queued = nt->tail - nt->head;
  if (!queued || (queued == 1 && nt->out_off)) return;
  const net_wire_hdr *n = &nt->out[(nt->tail - 1) % NOTE_QUEUE];
  if (!chorus_meta_equal(&n->meta, &h->meta) || n->meta.flags != h->meta.flags) return;
  h->kind = FRAME_DATA_NOTE;
  h->chain = n->chain;
  nt->tail--;
}

static ncclResult_t net_send_post(chorus_conn *cc, size_t bytes, const chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  uint32_t i = (uint32_t)(c->posted % c->nslots);
  c->hdr[i] = (net_wire_hdr){WIRE_MAGIC, FRAME_DATA, bytes, 0, *meta};
  take_note(c->state, c->base.peer, &c->hdr[i]);
  /* net_send_post_ref set place[i].ref first; a plain post leaves it NULL
   * (push clears it when the slot frees). Sequentially consistent: a pump
   * about to sleep looks at `posted` after announcing it (pump.c). */
  __atomic_store_n(&c->posted, c->posted + 1, __ATOMIC_SEQ_CST);
  return push(c);
}

static ncclResult_t net_send_post_ref(chorus_conn *cc, const void *src, size_t bytes,
                                      const chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  c->place[c->posted % c->nslots].ref = src;
  return net_send_post(cc, bytes, meta);
}

static ncclResult_t net_send_flush(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  CHECK(push(c));
  return c->done == c->posted ? ncclSuccess : ncclInProgress;
}

static uint64_t net_send_count(chorus_conn *cc, uint64_t *taken) {
  net_conn *c = (net_conn *)cc;
  *taken = c->done; /* freed in order once in the kernel whole (push) */
  return c->posted;
}

static ncclResult_t net_recv_slot(chorus_conn *cc, const void **buf, size_t *bytes,
                                  chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  ncclResult_t res = next_arrived(c);
  if (res != ncclSuccess) return res;
  uint32_t i = (uint32_t)(c->done % c->nslots);
  *buf = c->place[i].where;
  *bytes = c->hdr[i].bytes;
  *meta = c->hdr[i].meta;
  return ncclSuccess;
}

static ncclResult_t net_recv_release(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  __atomic_store_n(&c->ready[c->done % c->nslots], 0, __ATOMIC_RELAXED);
  /* The slot freed carries message done + nslots, on its stream. */
  __atomic_store_n(&c->done, c->done + 1, __ATOMIC_SEQ_CST);
  net_state *s = c->state;
  if (net_helped(s)) {
    const int k = (int)((c->done - 1 + c->nslots) % (uint64_t)c->nstreams);
    net_pump_kick_starved(net_pump_of(s, k), &c->st[k]);
  }
  return ncclSuccess;
}

static int net_recv_expect(chorus_conn *cc, unsigned ahead, void *dst, size_t bytes,
                           const chorus_msg_meta *meta) {
  net_conn *c = (net_conn *)cc;
  if (ahead >= c->nslots) return 0;
  const uint64_t m = c->done + ahead;
  net_place *pl = &c->place[m % c->nslots];
  /* The slot's earlier message is released, so its mover is done with
   * these fields; a mover that read m's header already took want_msg and
   * put m in the slot (recv_slot then returns the slot). */
  pl->want_at = dst;
  pl->want_bytes = bytes;
  pl->want_meta = *meta;
  __atomic_store_n(&pl->want_msg, m + 1, __ATOMIC_RELEASE);
  return 1;
}

static void net_wait_info(chorus_conn *cc, int dir, chorus_waitset *ws) {
  net_conn *c = (net_conn *)cc;
  if (net_helped(c->state)) { /* the pumps watch the sockets, and wake this one */
    chorus_waitset_add_fd(ws, c->state->wake_fd, POLLIN);
    return;
  }
  for (int k = 0; k < c->nstreams; k++)
    if (dir == CHORUS_DIR_RECV ? !net_ended(&c->st[k]) : c->st[k].next < c->posted)
      chorus_waitset_add_fd(ws, c->st[k].fd, dir == CHORUS_DIR_SEND ? POLLOUT : POLLIN);
}

/* Bytes of a peer's notes socket one read takes: 73 notes, or a FAIL
 * frame whole. */
#define NOTES_READ 4096

/* Feeds n bytes of a peer's notes socket to its frame parser: notes onto
 * its board, a FAIL frame's reason into fail. Returns 0 once nothing more
 * is to be heard (a FAIL frame, or garbage). */
static int feed_notes(net_notes *nt, const char *p, size_t n) {
  while (n) {
    net_wire_hdr *h = &nt->in;
    char *dst =
        nt->in_off < sizeof *h ? (char *)h + nt->in_off : nt->fail + (nt->in_off - sizeof *h);
    const size_t want =
        nt->in_off < sizeof *h ? sizeof *h - nt->in_off : sizeof *h + h->bytes - nt->in_off;
    const size_t take = CHORUS_MIN(want, n);
    memcpy(dst, p, take);
    p += take, n -= take;
    nt->in_off += take;
    if (nt->in_off == sizeof *h &&
        (h->magic != WIRE_MAGIC || (h->kind == FRAME_NOTE && h->bytes != 0) ||
         (h->kind == FRAME_FAIL && h->bytes >= CHORUS_REASON_MAX) ||
         (h->kind != FRAME_NOTE && h->kind != FRAME_FAIL))) {
      snprintf(nt->fail, sizeof nt->fail, "magic %#x, kind %u, %u bytes", (unsigned)h->magic,
               (unsigned)h->kind, (unsigned)h->bytes);
      nt->garbage = nt->in_closed = 1;
      return 0;
    }
    if (nt->in_off < sizeof *h + h->bytes) continue;
    nt->in_off = 0;
    if (h->kind == FRAME_FAIL) {
      nt->fail[h->bytes] = '\0';
      nt->peer_failed = nt->in_closed = 1;
      return 0;
    }
    heard_note(nt, h);
  }
  return 1;
}

/* Reads a peer's notes socket, what it holds up to NOTES_READ bytes a
 * recv: a read that comes back short found the socket drained, so the
 * pass ends without another that would find it empty (a rank that keeps
 * up with one peer's notes reads one a call, in one call to recv). */
static void pull_notes(net_notes *nt) {
  char buf[NOTES_READ];
  while (!nt->in_closed) {
    const ssize_t r = recv(nt->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (r < 0 && errno == EINTR) continue;
      nt->in_closed = 1; /* the data streams report how the peer went */
      return;
    }
    if (!feed_notes(nt, buf, (size_t)r) || (size_t)r < sizeof buf) return;
  }
}

/* The notes socket before the streams, and again after a stream broke:
 * a failing peer writes its reason there before it shuts the streams
 * (net_fail), so it may have come between the two reads. */
static ncclResult_t hear(net_conn *c) {
  if (c->broken || c->peer_failed) return ncclRemoteError;
  if (notes_tell_failure(c)) c->peer_failed = 1;
  for (int k = 0; k < c->nstreams && !c->peer_failed; k++) exec_pull(c, &c->st[k]);
  adopt(c);
  if (c->broken && !c->base.relayed) (void)borrow_cause(c, ncclRemoteError);
  return c->broken || c->peer_failed ? ncclRemoteError : ncclSuccess;
}

static ncclResult_t net_hear(chorus_conn *cc) {
  return hear((net_conn *)cc);
}

static ncclResult_t net_check(chorus_conn *cc) {
  net_conn *c = (net_conn *)cc;
  if (c->dir == CHORUS_DIR_RECV && !c->broken) {
    ncclResult_t res = next_arrived(c);
    return res == ncclInProgress ? ncclSuccess : res;
  }
  return c->broken ? ncclRemoteError : ncclSuccess;
}

/* Writes a FAIL frame saying why on fd (best effort: a frame the socket
 * takes in part leaves the stream cut mid-frame, which the peer reports
 * as a closed connection). */
static void send_fail(int fd, const char *reason) {
  const size_t n = CHORUS_MIN(strlen(reason), (size_t)CHORUS_REASON_MAX - 1);
  net_wire_hdr h = {WIRE_MAGIC, FRAME_FAIL, n, 0, {0}};
  struct iovec iov[2] = {{&h, sizeof h}, {(void *)reason, n}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
  (void)sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Takes a stream from its pump, which holds it only for a non-blocking
 * send or receive. */
static void lock_stream(net_stream *st) {
  while (!net_try_lock(st)) sched_yield();
}

static void net_fail(chorus_conn *cc, const char *reason) {
  net_conn *c = (net_conn *)cc;
  const int say = c->dir == CHORUS_DIR_SEND && !c->broken;
  /* The notes socket first (the calls, then why): a peer that finds a
   * data stream closed in the middle of a message looks for the reason
   * there, and must find it already (borrow_cause). */
  net_notes *nt = &c->state->notes[c->base.peer];
  if (say && c->base.channel == CHORUS_CH_COLL && nt->fd >= 0) {
    push_notes(nt);
    if (nt->out_off == 0) {
      send_fail(nt->fd, reason);
      shutdown(nt->fd, SHUT_RDWR);
    }
  }
  for (int k = 0; k < c->nstreams; k++) {
    net_stream *st = &c->st[k];
    if (st->fd < 0) continue;
    lock_stream(st);
    if (say && st->off == 0) send_fail(st->fd, reason);
    shutdown(st->fd, SHUT_RDWR);
    /* Ended, so no mover reads it again: bytes the kernel already holds
     * would still arrive after SHUT_RD, into a place in the caller's
     * memory that the failed call no longer owns (the caller may free it
     * once the call returns). */
    if (!net_ended(st)) (void)stream_end(st, NET_BROKEN, "was shut down", reason);
    net_unlock(st);
  }
  if (!c->broken) broken(c, "was shut down", reason);
}

static const chorus_conn_ops net_ops = {
    .send_slot = net_send_slot,
    .send_post = net_send_post,
    .send_flush = net_send_flush,
    .recv_slot = net_recv_slot,
    .recv_release = net_recv_release,
    .send_post_ref = net_send_post_ref,
    .recv_expect = net_recv_expect,
    .send_count = net_send_count,
    .wait_info = net_wait_info,
    .check = net_check,
    .fail = net_fail,
    .hear = net_hear,
};

static void net_destroy(void *p) {
  net_state *s = p;
  if (!s) return;
  net_pumps_stop(s); /* before the sockets and slots they move go */
  if (s->conns)
    for (size_t i = 0; i < (size_t)s->nranks * CHORUS_NCHANNELS * 2; i++) {
      chorus_free(s->conns[i].slots);
      chorus_free(s->conns[i].hdr);
      chorus_free(s->conns[i].ready);
      chorus_free(s->conns[i].place);
      chorus_free(s->conns[i].base.step_refs);
      for (int k = 0; s->conns[i].st && k < s->conns[i].nstreams; k++)
        chorus_free(s->conns[i].st[k].ra);
      chorus_free(s->conns[i].st);
    }
  if (s->fds)
    for (size_t i = 0; i < (size_t)s->nranks * CHORUS_NCHANNELS * NET_MAX_STREAMS; i++)
      if (s->fds[i] >= 0) close(s->fds[i]);
  if (s->notes)
    for (int r = 0; r < s->nranks; r++) {
      /* Held notes: a peer behind may yet compare its calls with them. */
      if (s->notes[r].fd >= 0 && s->notes[r].out) push_notes(&s->notes[r]);
      if (s->notes[r].fd >= 0) close(s->notes[r].fd);
      chorus_free(s->notes[r].out);
      chorus_free(s->notes[r].board);
    }
  chorus_free(s->notes);
  chorus_free(s->conns);
  chorus_free(s->is_peer);
  chorus_free(s->fds);
  chorus_free(s);
}

static ncclResult_t init_conn(net_state *s, const chorus_transport_ctx *ctx, int peer, int ch,
                              int dir) {
  net_conn *c = net_conn_of(s, peer, ch, dir);
  c->base.ops = &net_ops;
  c->base.transport = "NET";
  c->base.network = 1;
  c->base.peer = peer;
  c->base.channel = ch;
  c->base.slot_bytes = s->slot_bytes;
  c->dir = dir;
  c->state = s;
  c->nstreams = s->nstreams;
  if (!(c->st = chorus_calloc((size_t)s->nstreams, sizeof *c->st)))
    return chorus_error(ncclSystemError, "NET transport: out of memory");
  for (int k = 0; k < s->nstreams; k++) {
    c->st[k].fd = *fd_of(s, peer, ch, k);
    c->st[k].next = (uint64_t)k;
  }
  c->nslots = (uint32_t)ctx->nslots;
  c->slots = chorus_malloc((size_t)c->nslots * s->slot_bytes);
  c->hdr = chorus_calloc(c->nslots, sizeof *c->hdr);
  c->ready = chorus_calloc(c->nslots, 1);
  c->place = chorus_calloc(c->nslots, sizeof *c->place);
  if (ch == CHORUS_CH_COLL && dir == CHORUS_DIR_RECV) c->base.heard = s->notes[peer].board;
  if (!c->slots || !c->hdr || !c->ready || !c->place)
    return chorus_error(ncclSystemError, "NET transport: out of memory");
  return ncclSuccess;
}

/* Socket threads that this machine has cores for. Every rank on it (hosts
 * made with NCCL_HOSTID count) runs its executor and its pumps, and the
 * kernel's TCP work for their bytes needs cores too, so the threads of all
 * ranks may take half the CPUs at most. Past that, pumps take the cores of
 * the threads they hand messages to, and each message waits for a wake-up.
 * Measured (every rank a host over loopback, against none): 16 cores, 2
 * ranks with 2-4 pumps: AlltoAll 2x faster; 8 ranks with 2 pumps each
 * (24 threads): AllGather and AllReduce 2-7x slower, with 1 each (16
 * threads) still 0.6-0.9x; 2 cores, 2 ranks with 1 pump each: a 1 MiB
 * AllGather 17x slower. */
static int pumps_that_fit(const net_state *s, int want) {
  const long cpus = s->topo ? s->topo->machine_cpus : sysconf(_SC_NPROCESSORS_ONLN);
  const long ranks = s->topo && s->topo->nmachine > 0 ? s->topo->nmachine : 1;
  if (want <= 0 || cpus <= 0 || !chorus_param_int(CHORUS_P_SOCKET_THREADS_FIT))
    return CHORUS_MAX(want, 0);
  const int fit = chorus_socket_threads_room(cpus, ranks);
  if (fit >= want) return want;
  if (s->rank == 0)
    WARN("NCCL_SOCKET_NTHREADS asks for %d socket thread(s) per rank, but %ld rank(s) on this "
         "machine share the %ld CPUs they may run on: %d thread(s) each%s",
         want, ranks, cpus, fit, fit ? "" : " (the calling thread moves the bytes)");
  return fit;
}

/* A peer of this machine (another network namespace, a container of the
 * same kernel) is reached over virtual links with no queue to pace for
 * (chorus_sock_unpace), whose receive side queues each packet on the
 * sending CPU: a stream that keeps megabytes unsent in the kernel is sent
 * both from the writer's CPU and from the CPU that takes its
 * acknowledgements, and arrives out of order. Measured between two
 * namespace hosts of a 2-vCPU guest (16 MiB AlltoAll, whose direct writes
 * filled the 4 MiB send buffer): 4 runs in 5 took 6.4-7.0 ms with
 * 4,000-9,000 spurious retransmissions, against 2.5-2.7 ms in 5 of 5 with
 * at most 128 KiB unsent; 64 MiB 1.8x faster, a 4-rank Broadcast 1.8-2.3x
 * from 1 MiB, AlltoAll over loopback 1.1-1.16x from 4 MiB, the rest level
 * within 6%; GPU calls of 2 hosts sharing an H200 over loopback (16 cores,
 * socket threads polling) 1.05-1.14x faster than with bbr throughout from
 * 8 MiB. A peer on another machine gets the system's congestion control
 * back on every stream. Counts the streams that run reno instead of the
 * system's bbr, those the kernel holds to the limit, and those given the
 * system's choice back. */
static void tune_streams(net_state *s, int p, int *unpaced, int *held, int *restored) {
  if (!s->topo || !s->topo->info || p == s->rank) return;
  const int local = s->topo->info[p].machine_hash == s->topo->info[s->rank].machine_hash;
  const int unsent = (int)CHORUS_MIN(chorus_param_int(CHORUS_P_SOCKET_LOCAL_UNSENT), INT_MAX);
  for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
    for (int k = 0; k < s->nstreams; k++) {
      const int fd = *fd_of(s, p, ch, k);
      if (!local) {
        *restored += chorus_sock_system_cc(fd);
        continue;
      }
      *unpaced += chorus_sock_unpace(fd);
      int got = 0;
      socklen_t len = sizeof got;
      if (unsent > 0 &&
          setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof unsent) == 0 &&
          getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &got, &len) == 0 && got == unsent)
        (*held)++;
    }
  if (local)
    *unpaced += chorus_sock_unpace(s->notes[p].fd);
  else
    *restored += chorus_sock_system_cc(s->notes[p].fd);
}

static ncclResult_t net_setup(const chorus_transport_ctx *ctx, const int *peers, int npeers,
                              void **out) {
  *out = NULL;
  ncclResult_t res = ncclSuccess;
  net_state *s = chorus_calloc(1, sizeof *s);
  if (!s) return chorus_error(ncclSystemError, "NET transport: out of memory");
  s->wake_fd = -1;
  s->rank = ctx->rank;
  s->nranks = ctx->nranks;
  s->topo = ctx->topo;
  s->slot_bytes = ctx->slot_bytes;
  s->nstreams = (int)CHORUS_MAX(1, CHORUS_MIN(NET_MAX_STREAMS, ctx->nstreams));
  size_t nfds = (size_t)s->nranks * CHORUS_NCHANNELS * NET_MAX_STREAMS;
  s->conns = chorus_calloc((size_t)s->nranks * CHORUS_NCHANNELS * 2, sizeof *s->conns);
  s->is_peer = chorus_calloc((size_t)s->nranks, 1);
  s->fds = chorus_malloc(nfds * sizeof(int));
  s->notes = chorus_calloc((size_t)s->nranks, sizeof *s->notes);
  if (!s->conns || !s->is_peer || !s->fds || !s->notes) {
    res = chorus_error(ncclSystemError, "NET transport: out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nfds; i++) s->fds[i] = -1;
  for (int p = 0; p < s->nranks; p++) s->notes[p].fd = -1;
  for (int i = 0; i < npeers; i++) {
    net_notes *nt = &s->notes[peers[i]];
    nt->out = chorus_calloc(NOTE_QUEUE, sizeof *nt->out);
    nt->board = chorus_calloc(CHORUS_NODE_CALLS, sizeof *nt->board);
    if (!nt->out || !nt->board) {
      res = chorus_error(ncclSystemError, "NET transport: out of memory");
      goto fail;
    }
  }
  /* Connect to higher ranks first, then accept from lower ones: connects
   * complete in the kernel before the peer accepts, so no order deadlocks. */
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    s->is_peer[p] = 1;
    s->npeers++;
    if (p <= s->rank) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int k = 0; k < s->nstreams; k++)
        CHECK_GOTO(chorus_bootstrap_connect(ctx->bs, p, (uint64_t)(ch * NET_MAX_STREAMS + k),
                                            fd_of(s, p, ch, k)),
                   res, fail);
    CHECK_GOTO(chorus_bootstrap_connect(ctx->bs, p, NOTES_TAG, &s->notes[p].fd), res, fail);
  }
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    if (p >= s->rank) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
      for (int k = 0; k < s->nstreams; k++)
        CHECK_GOTO(chorus_bootstrap_accept(ctx->bs, p, (uint64_t)(ch * NET_MAX_STREAMS + k),
                                           fd_of(s, p, ch, k)),
                   res, fail);
    CHECK_GOTO(chorus_bootstrap_accept(ctx->bs, p, NOTES_TAG, &s->notes[p].fd), res, fail);
  }
  int unpaced = 0, held = 0, restored = 0;
  for (int i = 0; i < npeers; i++) tune_streams(s, peers[i], &unpaced, &held, &restored);
  if (held)
    INFO(CHORUS_NET | CHORUS_INIT,
         "NET transport: %d data stream(s) to peers on this machine keep at most %lld bytes unsent "
         "(CHORUS_SOCKET_LOCAL_UNSENT)",
         held, (long long)chorus_param_int(CHORUS_P_SOCKET_LOCAL_UNSENT));
  if (unpaced)
    INFO(CHORUS_NET | CHORUS_INIT,
         "NET transport: %d stream(s) to peers on this machine run reno, not the system's bbr "
         "(pacing; CHORUS_SOCKET_UNPACE=0 keeps it)",
         unpaced);
  if (restored)
    INFO(CHORUS_NET | CHORUS_INIT,
         "NET transport: %d stream(s) to peers on other machines run the system's congestion "
         "control again",
         restored);
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
  /* A pump per stream at most: NCCL_SOCKET_NTHREADS threads, each with
   * NCCL_NSOCKS_PERTHREAD sockets of every peer and channel. */
  const int npumps = pumps_that_fit(s, CHORUS_MIN(ctx->nthreads, s->nstreams));
  s->on_hint = ctx->threads_on_hint;
  s->helped = !s->on_hint;
  if (npumps > 0 && s->npeers > 0) CHECK_GOTO(net_pumps_start(s, npumps), res, fail);
  if (s->npumps)
    INFO(CHORUS_NET | CHORUS_INIT,
         "NET transport: %d peer(s), %d channels x %d sockets each, moved by %d thread(s)%s",
         npeers, CHORUS_NCHANNELS, s->nstreams, s->npumps,
         s->on_hint ? " in calls that only move large messages" : "");
  else
    INFO(CHORUS_NET | CHORUS_INIT,
         "NET transport: %d peer(s), %d channels x %d sockets each, moved by the calling thread",
         npeers, CHORUS_NCHANNELS, s->nstreams);
  *out = s;
  return ncclSuccess;
fail:
  net_destroy(s);
  return res;
}

static void net_hint(void *p, int moves) {
  net_state *s = p;
  if (!s->on_hint || !s->npumps || __atomic_load_n(&s->helped, __ATOMIC_RELAXED) == moves) return;
  /* Sequentially consistent against a pump's `asleep` (pump_watch): it
   * sees the flag, or this sees it asleep and kicks it. */
  __atomic_store_n(&s->helped, moves, __ATOMIC_SEQ_CST);
  if (moves) net_pumps_kick(s);
}

static ncclResult_t net_finish(void *p) {
  (void)p;
  return ncclSuccess;
}

static chorus_conn *net_conn_get(void *p, int peer, int ch, int dir) {
  net_state *s = p;
  if (!s->is_peer[peer]) return NULL;
  return &net_conn_of(s, peer, ch, dir)->base;
}

static int has_output(const net_conn *c) {
  return c->done < c->posted;
}

static int has_notes(const net_notes *nt) {
  return !nt->out_closed && nt->head != nt->tail;
}

/* Whether peer's queued notes go now, all of them (transport/held.h), or
 * the rest of one the socket took in part. */
static int notes_go(const net_state *s, const net_notes *nt) {
  return has_notes(nt) && (nt->out_off || chorus_held_go(&s->held, s->npeers,
                                                         nt->out[nt->head % NOTE_QUEUE].meta.seq));
}

/* Writes peer's queued notes until its socket is full, as many in one
 * write as lie in a row in the queue. A peer that has closed its end takes
 * no more notes, and that is no error: a rank that needs nothing more from
 * this one may finish its calls and destroy its communicator first (a
 * Gather's non-root, say). */
static void push_notes(net_notes *nt) {
  while (!nt->out_closed && nt->head != nt->tail) {
    const uint32_t first = nt->head % NOTE_QUEUE;
    const uint32_t run = CHORUS_MIN(nt->tail - nt->head, NOTE_QUEUE - first);
    const char *from = (const char *)&nt->out[first] + nt->out_off;
    ssize_t w =
        send(nt->fd, from, run * sizeof *nt->out - nt->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      nt->out_closed = 1;
      return;
    }
    const size_t done = nt->out_off + (size_t)w;
    nt->head += (uint32_t)(done / sizeof *nt->out);
    nt->out_off = done % sizeof *nt->out;
  }
}

/* Queues e as a note to every peer, unless a message of the call to that
 * peer takes it along (take_note). Queued notes go together in one write
 * (net_progress, notes_go) when transport/held.h says, or when this rank
 * fails or the communicator goes. A peer that waits on this rank's data
 * finds the note once this rank waits too. A queue
 * full of notes the socket will not take drops its oldest one not in
 * flight: a peer that reads nothing of ours for that long is stuck on an
 * earlier call, which the checks report. */
static void net_post_call(void *p, const chorus_call_entry *e) {
  net_state *s = p;
  if (!s->npeers) return; /* every peer on this host: nothing to send per call */
  s->held.seq_now = e->meta.seq;
  for (int peer = 0; peer < s->nranks; peer++) {
    net_notes *nt = &s->notes[peer];
    if (!s->is_peer[peer] || nt->out_closed) continue;
    if (nt->tail - nt->head == NOTE_QUEUE) {
      if (nt->out_off) continue;
      nt->head++;
    }
    nt->out[nt->tail++ % NOTE_QUEUE] = (net_wire_hdr){WIRE_MAGIC, FRAME_NOTE, 0, e->chain, e->meta};
  }
}

/* Pushes pending output on every connection. */
static ncclResult_t net_progress(void *p) {
  net_state *s = p;
  if (!s->npeers) return ncclSuccess; /* every peer on this host: polled for nothing */
  net_wake_drain(s);
  for (int peer = 0; peer < s->nranks; peer++) {
    if (!s->is_peer[peer]) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      net_conn *c = net_conn_of(s, peer, ch, CHORUS_DIR_SEND);
      if (ch == CHORUS_CH_COLL && notes_go(s, &s->notes[peer])) push_notes(&s->notes[peer]);
      if (has_output(c)) {
        ncclResult_t res = push(c);
        if (res != ncclSuccess) return chorus_error(res, "NET: %s", c->base.err);
      }
    }
  }
  if (s->held.due) {
    int left = 0;
    for (int peer = 0; peer < s->nranks && !left; peer++) left = has_notes(&s->notes[peer]);
    s->held.due = left;
  }
  return ncclSuccess;
}

static void net_advance(void *p, uint64_t seq) {
  net_state *s = p;
  s->held.seq_now = seq;
}

static void net_stalled(void *p) {
  net_state *s = p;
  chorus_held_stall(&s->held, s->npeers);
}

static void net_state_wait_info(void *p, chorus_waitset *ws) {
  net_state *s = p;
  if (s->npumps) chorus_waitset_add_fd(ws, s->wake_fd, POLLIN);
  for (int peer = 0; peer < s->nranks; peer++) {
    if (!s->is_peer[peer]) continue;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      net_conn *c = net_conn_of(s, peer, ch, CHORUS_DIR_SEND);
      if (has_output(c)) net_wait_info(&c->base, CHORUS_DIR_SEND, ws);
      if (ch == CHORUS_CH_COLL && notes_go(s, &s->notes[peer]))
        chorus_waitset_add_fd(ws, s->notes[peer].fd, POLLOUT);
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

int chorus_net_notes_fd(void *state, int peer) {
  net_state *s = state;
  return s && s->notes && peer >= 0 && peer < s->nranks ? s->notes[peer].fd : -1;
}

const chorus_transport chorus_transport_net = {
    .name = "NET",
    .setup = net_setup,
    .finish = net_finish,
    .conn = net_conn_get,
    .progress = net_progress,
    .wait_info = net_state_wait_info,
    .doorbell = net_doorbell,
    .post_call = net_post_call,
    .advance = net_advance,
    .stalled = net_stalled,
    .node = net_node,
    .hint = net_hint,
    .destroy = net_destroy,
};

/*
 * net_impl.h - the TCP transport's state, shared by its connections
 * (net.c) and its pumps (pump.c).
 *
 * Who moves a stream's bytes: whoever holds the stream's lock. Without
 * pumps that is always the executor (the rank's thread that runs calls).
 * With NCCL_SOCKET_NTHREADS pumps, each pump thread owns streams k with
 * k % npumps == its id, of every peer and channel, and moves them whole;
 * the executor, when it finds a stream's lock free, still starts frames
 * of at most NET_EXEC_MAX payload bytes itself (a small message then
 * costs no hand-off between threads) and leaves larger ones to the pump.
 * With NCCL_SOCKET_NTHREADS=auto the pumps do so only while `helped` is
 * set (the executor's hint: its calls only move bytes, in large
 * messages); otherwise they sleep and the executor moves everything, as
 * without pumps. Either way any mover may take any frame up: the flag
 * only says who tries.
 *
 * Between the executor and a pump (atomics, see net.c and pump.c):
 *   send: the executor fills hdr[i] (and place[i].ref), then publishes
 *         `posted`; the mover sets ready[i] once the frame is in the
 *         kernel; the executor frees slots in order.
 *   recv: the executor publishes `done` (slots released); the mover reads
 *         a frame into a free slot (or the caller's place: want_msg is
 *         exchanged once per message), then sets ready[i].
 *   a stream that ends (closed, FAIL frame, error) says how in `end`,
 *         what and why written before; the executor turns that into the
 *         connection's error (adopt).
 *   sleeping: a pump with nothing to move sets `asleep` (or a receive
 *         stream's `starved` when its window is full) before it looks a
 *         last time and polls its sockets and its kick eventfd; the
 *         executor kicks it after publishing work it left to it. A pump
 *         that moved anything wakes the executor's eventfd (wake_fd) once
 *         until the executor drains it.
 */
#ifndef CHORUS_TRANSPORT_NET_IMPL_H
#define CHORUS_TRANSPORT_NET_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "transport/held.h"
#include "transport/transport.h"

#define NET_MAX_STREAMS                                                                            \
  16 /* per peer and channel: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD                         \
      */
#define NET_MAX_PUMPS 16
/* Frames the executor writes or reads itself while pumps run. */
#define NET_EXEC_MAX (32u << 10)

enum { NET_OPEN = 0, NET_CLOSED = 1, NET_FAILED = 2, NET_BROKEN = 3 };

typedef struct net_wire_hdr {
  uint32_t magic;
  uint32_t kind;  /* FRAME_* */
  uint64_t bytes; /* payload */
  uint64_t chain; /* NOTE: the sender's call-history hash */
  chorus_msg_meta meta;
} net_wire_hdr;

/* One socket's progress in one direction. */
typedef struct net_stream {
  int fd;        /* shared by the send and receive conns of a (peer, channel) */
  int lock;      /* atomic: held by whoever moves this stream */
  uint64_t next; /* next message index it carries (s, s+k, s+2k...); atomic */
  size_t off;    /* bytes of the frame being moved, so far */
  int end;       /* atomic: NET_*; what, why and fail are written before */
  int starved;   /* atomic, recv: its pump waits for a slot to free */
  const char *what;
  char why[96];
  const char *fail; /* NET_FAILED: the peer's reason, in a slot */
  size_t fail_len;
  /* recv: bytes read from the socket ahead of the frame being moved
   * (net.c, stream_read), [ra_off, ra_len) of ra; ra_dry: a recv of this
   * pass found the socket empty; ra_big: the last frame was larger than
   * the read-ahead. */
  char *ra;
  uint32_t ra_off, ra_len;
  int ra_dry, ra_big;
} net_stream;

/* What a caller's memory has to do with one slot's message: sending, the
 * bytes it was posted with (NULL: the slot's own); receiving, where its
 * payload is read to (the slot, or the caller's place) and the place the
 * caller expects message want_msg - 1 in (0: none; atomic), with its size
 * and call. */
typedef struct net_place {
  const char *ref;
  char *where;
  char *want_at;
  uint64_t want_msg;
  size_t want_bytes;
  chorus_msg_meta want_meta;
} net_place;

typedef struct net_conn {
  chorus_conn base;
  int dir;
  int nstreams;
  net_stream *st; /* nstreams */
  char *slots;
  uint32_t nslots;
  net_wire_hdr *hdr; /* per slot */
  uint8_t *ready;    /* per slot, atomic: send: written out; recv: arrived */
  net_place *place;  /* per slot */
  uint64_t posted;   /* send: messages posted (atomic) */
  uint64_t done;     /* send: messages freed (in order); recv: released (atomic) */
  int broken;
  int peer_failed; /* recv: a FAIL frame arrived; base.err holds its reason */
  struct net_state *state;
} net_conn;

/* The notes socket of one peer (both directions; the executor's alone). */
typedef struct net_notes {
  int fd;
  net_wire_hdr *out; /* notes not yet written, [head, tail) */
  uint32_t head, tail;
  size_t out_off; /* bytes of the first one written */
  int out_closed; /* the peer takes no more (push_notes) */
  net_wire_hdr in;
  size_t in_off;
  char fail[CHORUS_REASON_MAX]; /* a FAIL frame's payload being read; what garbage was */
  int in_closed;                /* ended, or carried garbage: nothing more to hear */
  int peer_failed;              /* a FAIL frame came: fail is why */
  int garbage;                  /* a frame no rank sends came: fail says what */
  chorus_call_entry *board;     /* what the peer posted (the collective conn's `heard`) */
} net_notes;

typedef struct net_pump {
  struct net_state *s;
  int id;
  pthread_t thread;
  int started;
  int kick_fd; /* eventfd: the executor left it work */
  int asleep;  /* atomic */
  int nitems;  /* its (peer, channel, stream) triples */
  struct net_pump_item {
    net_conn *send, *recv;
    int k;
  } * items;
  struct pollfd *pfd; /* nitems + 1 */
} net_pump;

typedef struct net_state {
  int rank, nranks, nstreams;
  const chorus_topo *topo; /* for naming a lost peer's host */
  int npeers;
  net_conn *conns; /* [peer][channel][dir] */
  uint8_t *is_peer;
  int *fds;         /* [peer][channel][stream] */
  net_notes *notes; /* [peer] */
  chorus_held held; /* when held notes go */
  size_t slot_bytes;
  /* Pumps (none: the executor moves every stream). */
  int npumps;
  net_pump *pumps;
  int on_hint;      /* NCCL_SOCKET_NTHREADS=auto: the pumps move while `helped` */
  int helped;       /* atomic: the pumps move the large frames (always, unless on_hint) */
  int stop;         /* atomic: pumps, end */
  int wake_fd;      /* eventfd: a pump moved something */
  int wake_pending; /* atomic: wake_fd written and not yet drained */
  int wake_drain;   /* the executor's: a drain found it empty, try again */
} net_state;

static inline net_conn *net_conn_of(net_state *s, int peer, int ch, int dir) {
  return &s->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

/* net.c: move one stream (its lock held) as far as its socket allows,
 * starting no frame with more than `limit` payload bytes. Return whether
 * anything moved; a stream that ends says how in st->end. */
int net_push_stream(net_conn *c, net_stream *st, size_t limit);
int net_pull_stream(net_conn *c, net_stream *st, size_t limit);

static inline int net_try_lock(net_stream *st) {
  return !__atomic_exchange_n(&st->lock, 1, __ATOMIC_ACQUIRE);
}
static inline void net_unlock(net_stream *st) {
  __atomic_store_n(&st->lock, 0, __ATOMIC_RELEASE);
}
static inline int net_ended(net_stream *st) {
  return __atomic_load_n(&st->end, __ATOMIC_ACQUIRE) != NET_OPEN;
}

/* Whether the pumps move the large frames now. */
static inline int net_helped(net_state *s) {
  return s->npumps && __atomic_load_n(&s->helped, __ATOMIC_ACQUIRE);
}

/* pump.c */
ncclResult_t net_pumps_start(net_state *s, int npumps);
/* Stops and joins the pumps; safe on a half-started set. */
void net_pumps_stop(net_state *s);
net_pump *net_pump_of(net_state *s, int stream);
/* The executor left stream work: wake its pump if it sleeps. */
void net_pump_kick_if_asleep(net_pump *p);
/* Wakes every pump that sleeps (the executor set `helped`). */
void net_pumps_kick(net_state *s);
/* The executor freed a slot of a starved receive stream. */
void net_pump_kick_starved(net_pump *p, net_stream *st);
/* The executor's side of wake_fd: drain it (each pass). */
void net_wake_drain(net_state *s);

#endif

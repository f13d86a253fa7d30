/*
 * pnet.c - the transport over a network plugin (netplug.h): ranks on
 * other hosts exchange messages through whatever network NCCL's plugin
 * drives (InfiniBand, EFA, libfabric ...), in place of the built-in TCP
 * transport (net/).
 *
 * Each pair of ranks has, per channel and direction, one plugin
 * connection, and one more each way for notes. The receiving side
 * listens; listen handles travel over the bootstrap; connect and accept
 * are non-blocking and driven together for all peers until every
 * connection is up.
 *
 * GPU memory: where the plugin takes CUDA memory (NCCL_PTR_CUDA) and
 * NCCL_NET_GDR_LEVEL allows it, each pair also has a direct connection
 * each way, on which point-to-point calls of a GPU communicator move the
 * user's device buffers as they are (dev_move): registered for the
 * transfer, sent and received in pieces of at most the plugin's largest
 * message, each received piece flushed (iflush) before the GPU reads it.
 * The transfer's size travels before it as an ordinary message, so the
 * receiver posts its receive only for a sender that has one.
 *
 * Slots: each connection has nslots slots of one header (pnet_hdr) and
 * slot_bytes of payload, registered once; a message is one isend of its
 * header and payload. Receivers keep a receive posted on every free slot,
 * so messages land in place and are read there. Plugins move bytes only
 * while their requests are tested: progress() tests every send in flight.
 *   NOTE  call board entries (coll/calls.h) on the notes connection, up
 *         to NOTE_BATCH in one message;
 *   FAIL  the sender failed: the payload is why, passed on unchanged.
 * A plugin error on a request breaks the connection, naming the peer and
 * the network. Nothing here has a descriptor to sleep on: wait_info asks
 * the executor to poll.
 */
#include <stdio.h>
#include <strings.h>
#include <string.h>

#include "transport/held.h"
#include "transport/plugin/ext_net.h"
#include "transport/plugin/netplug.h"
#include "transport/transport.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"

#define PNET_MAGIC   0x504e4554u /* "PNET" */
#define PNET_TAG     0x706e6574u /* bootstrap tag of the handle exchange */
#define MAX_INFLIGHT 8           /* requests per plugin connection (version 6 allows 8) */
#define NOTE_QUEUE   256
/* Per peer and direction: channels, notes, then (GPU memory) direct. */
#define NCOMMS_HOST (CHORUS_NCHANNELS + 1)
#define NCOMMS_DEV  (CHORUS_NCHANNELS + 2)
#define DIRECT      (CHORUS_NCHANNELS + 1) /* the direct connection's index */
#define DEV_PIECE   ((size_t)1 << 30)      /* a direct message at most (iflush takes int sizes) */
/* Notes in one message at most: where they wait to go together (notes_go),
 * CHORUS_CALLS_HELD calls' worth and one more. */
#define NOTE_BATCH (2 * CHORUS_CALLS_HELD)
/* How long a closing rank tests its last notes (notes_flush). */
#define NOTES_FLUSH_NS (100ll * 1000000)
/* How long a rank that failed tests its requests before it closes them
 * (settle_all): its peers' FAIL frames are on their way. */
#define FAIL_SETTLE_NS (250ll * 1000000)
/* How long a closing rank waits for its peers' goodbyes (notes_bye). */
#define BYE_WAIT_NS (100ll * 1000000)

/* On the notes: NOTE (a batch of them), FAIL (why, then closed), BYE (the
 * sender closes and sends nothing more). */
enum { FRAME_DATA = 0, FRAME_NOTE = 1, FRAME_FAIL = 2, FRAME_BYE = 3 };

typedef struct pnet_hdr {
  uint32_t magic, kind;
  uint64_t bytes;
  uint64_t chain; /* NOTE: the sender's call-history hash */
  chorus_msg_meta meta;
  uint64_t pad;
} pnet_hdr;

/* A notes message: NOTE_BATCH notes, or a FAIL with its reason. */
#define NOTE_BYTES CHORUS_MAX(NOTE_BATCH * sizeof(pnet_hdr), sizeof(pnet_hdr) + CHORUS_REASON_MAX)

/* A transfer of device memory on a direct connection (dev_move). */
typedef struct pnet_dev {
  int active;
  void *mh;          /* its registration */
  void *req, *flush; /* the piece in flight; its flush */
  size_t off, n;     /* bytes done; the piece's */
} pnet_dev;

typedef struct pnet_conn {
  chorus_conn base;
  int dir;
  struct pnet_state *s;
  void *comm;  /* the plugin's send or receive communicator */
  void *mh;    /* registration of slots */
  char *slots; /* nslots x stride: header, then payload */
  size_t stride;
  uint32_t nslots;
  void **req; /* per slot: the request in flight */
  chorus_step_ref *
      *ph;         /* send, per slot: a profiler's step of its message (chorus_conn.step_next) */
  uint64_t posted; /* send: messages the schedule posted */
  uint64_t issued; /* send: handed to the plugin; recv: receives posted */
  uint64_t done;   /* send: completed; recv: released */
  int arrived;     /* recv: the slot at done has arrived */
  ncclResult_t rx_err; /* recv: the plugin refused a receive; an error once none is left */
  int broken, peer_failed;
  int failing; /* fail() was called: no more use, but a FAIL frame still to push out */
  void *dcomm; /* point-to-point, GPU memory: the direct connection (or NULL) */
  pnet_dev dv;
} pnet_conn;

/* The notes of one peer: headers out (queued, then in flight) and in. */
typedef struct pnet_notes {
  void *send, *recv;
  void *smh, *rmh;
  pnet_hdr *out; /* NOTE_QUEUE, [head, tail) queued; [done, head) in flight */
  void *oreq[MAX_INFLIGHT];
  uint32_t onotes[MAX_INFLIGHT];           /* notes in each message in flight */
  uint64_t head, tail, done, osent, odone; /* osent, odone: messages */
  char (*in)[NOTE_BYTES];                  /* MAX_INFLIGHT receives */
  int no_more; /* the plugin refused a receive: test those posted, then stop */
  void *ireq[MAX_INFLIGHT];
  uint64_t iposted, idone;
  char fail_out[sizeof(pnet_hdr) + CHORUS_REASON_MAX];
  void *fail_req, *fail_mh;
  char fail[CHORUS_REASON_MAX];
  int peer_failed, broken, out_closed, garbage;
  int peer_bye; /* the peer closes: nothing more comes, nothing more goes */
  chorus_call_entry *board;
} pnet_notes;

typedef struct pnet_state {
  int rank, nranks, npeers;
  chorus_held held; /* when held notes go */
  chorus_net *net;
  void **listen;     /* [peer][ncomms] */
  pnet_conn *conns;  /* [peer][channel][dir] */
  pnet_notes *notes; /* [peer] */
  uint8_t *is_peer;
  size_t slot_bytes;
  int nslots;
  int ncomms;       /* NCOMMS_HOST, or NCOMMS_DEV with direct connections */
  size_t dev_piece; /* the largest direct message */
} pnet_state;

static pnet_conn *conn_of(pnet_state *s, int peer, int ch, int dir) {
  return &s->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

static pnet_hdr *slot_hdr(pnet_conn *c, uint64_t i) {
  return (pnet_hdr *)(c->slots + (size_t)(i % c->nslots) * c->stride);
}

static void notes_pull(pnet_state *s, pnet_notes *nt);

/* c broke. If the peer said why on its notes (it failed first and closed),
 * that is the news, passed on unchanged; else what broke. */
static ncclResult_t broken(pnet_conn *c, const char *what, ncclResult_t res) {
  if (!c->broken && !c->peer_failed && !c->failing) {
    pnet_notes *nt = &c->s->notes[c->base.peer];
    if (nt->recv) notes_pull(c->s, nt);
    if (nt->peer_failed) {
      snprintf(c->base.err, sizeof c->base.err, "%s", nt->fail);
      c->base.relayed = 1;
    } else {
      snprintf(c->base.err, sizeof c->base.err, "connection to rank %d over network %s %s (%s)",
               c->base.peer, chorus_net_name(c->s->net), what, ncclGetErrorString(res));
    }
  }
  c->broken = 1;
  return ncclRemoteError;
}

/* Tests request *req, forgotten once it is done or failed: a plugin may
 * free it then, so it is never tested again (settle_all). */
static ncclResult_t test_req(pnet_state *s, void **req, int *done, int *size) {
  const ncclResult_t res = chorus_net_test(s->net, *req, done, size);
  if (res != ncclSuccess || *done) *req = NULL;
  return res;
}

/* Sends: hands posted messages to the plugin, tests those in flight. */
static ncclResult_t push(pnet_conn *c) {
  if (c->broken) return ncclRemoteError;
  while (c->issued < c->posted && c->issued - c->done < MAX_INFLIGHT) {
    pnet_hdr *h = slot_hdr(c, c->issued);
    void **req = &c->req[c->issued % c->nslots];
    ncclResult_t res = chorus_net_isend(c->s->net, c->comm, h, sizeof *h + h->bytes, 0, c->mh,
                                        c->ph[c->issued % c->nslots], req);
    if (res != ncclSuccess) return broken(c, "failed a send", res);
    if (!*req) break; /* the plugin is full: later */
    c->issued++;
  }
  while (c->done < c->issued) {
    int done = 0, size = 0;
    ncclResult_t res = test_req(c->s, &c->req[c->done % c->nslots], &done, &size);
    if (res != ncclSuccess) return broken(c, "failed a send", res);
    if (!done) break;
    c->done++;
  }
  return ncclSuccess;
}

/* Receives: posts a receive on every free slot. A refusal is kept until
 * the receives already posted are used up: a peer that sent its last
 * message and closed ends the connection, and a plugin may then refuse
 * receives while messages that came before are still to be tested. */
static ncclResult_t arm(pnet_conn *c) {
  while (!c->rx_err && c->issued < c->done + c->nslots && c->issued - c->done < MAX_INFLIGHT) {
    void *data = slot_hdr(c, c->issued);
    size_t size = c->stride;
    int tag = 0;
    void **req = &c->req[c->issued % c->nslots];
    ncclResult_t res = chorus_net_irecv(c->s->net, c->comm, 1, &data, &size, &tag, &c->mh, req);
    if (res != ncclSuccess) {
      c->rx_err = res;
      break;
    }
    if (!*req) break;
    c->issued++;
  }
  return ncclSuccess;
}

/* Is the next message here? ncclSuccess: yes; ncclInProgress: not yet. */
static ncclResult_t next_arrived(pnet_conn *c) {
  if (c->broken || c->peer_failed || c->failing) return ncclRemoteError;
  if (c->arrived) return ncclSuccess;
  CHECK(arm(c));
  if (c->done == c->issued)
    return c->rx_err ? broken(c, "failed a receive", c->rx_err) : ncclInProgress;
  int done = 0, size = 0;
  ncclResult_t res = test_req(c->s, &c->req[c->done % c->nslots], &done, &size);
  if (res != ncclSuccess) return broken(c, "failed a receive", res);
  if (!done) return ncclInProgress;
  const pnet_hdr *h = slot_hdr(c, c->done);
  if ((size_t)size < sizeof *h || h->magic != PNET_MAGIC || h->bytes != (size_t)size - sizeof *h ||
      h->bytes > c->base.slot_bytes || (h->kind != FRAME_DATA && h->kind != FRAME_FAIL))
    return broken(c, "carried a malformed message", ncclRemoteError);
  if (h->kind == FRAME_FAIL) {
    snprintf(c->base.err, sizeof c->base.err, "%.*s",
             (int)CHORUS_MIN(h->bytes, (uint64_t)CHORUS_REASON_MAX - 1), (const char *)(h + 1));
    c->base.relayed = c->peer_failed = 1;
    return ncclRemoteError;
  }
  c->arrived = 1;
  return ncclSuccess;
}

/* Notes: queued headers out, and what arrived onto the board. */

static int has_notes(const pnet_notes *nt) {
  return !nt->out_closed && nt->head < nt->tail;
}

/* Whether peer's queued notes go now, all of them (transport/held.h). */
static int notes_go(const pnet_state *s, const pnet_notes *nt) {
  return has_notes(nt) &&
         chorus_held_go(&s->held, s->npeers, nt->out[nt->head % NOTE_QUEUE].meta.seq);
}

/* Hands the queued notes to the plugin, as many in a message as lie in a
 * row in the queue (NOTE_BATCH at most). */
static void notes_send(pnet_state *s, pnet_notes *nt) {
  /* A peer that said goodbye has closed, or soon will: nothing more to it
   * (a message would land in a receive its close left posted). */
  if (has_notes(nt) && nt->recv) notes_pull(s, nt);
  while (has_notes(nt) && nt->osent - nt->odone < MAX_INFLIGHT) {
    const uint64_t first = nt->head % NOTE_QUEUE;
    const uint32_t run =
        (uint32_t)CHORUS_MIN(CHORUS_MIN(nt->tail - nt->head, NOTE_QUEUE - first), NOTE_BATCH);
    void **req = &nt->oreq[nt->osent % MAX_INFLIGHT];
    if (chorus_net_isend(s->net, nt->send, &nt->out[first], run * sizeof(pnet_hdr), 0, nt->smh,
                         NULL, req) != ncclSuccess) {
      nt->out_closed = 1; /* the peer may have finished and gone: no error of ours */
      return;
    }
    if (!*req) return;
    nt->onotes[nt->osent++ % MAX_INFLIGHT] = run;
    nt->head += run;
  }
}

/* Tests the notes messages in flight. */
static void notes_test(pnet_state *s, pnet_notes *nt) {
  while (!nt->out_closed && nt->odone < nt->osent) {
    int done = 0, size = 0;
    if (test_req(s, &nt->oreq[nt->odone % MAX_INFLIGHT], &done, &size) != ncclSuccess) {
      nt->out_closed = 1;
      return;
    }
    if (!done) return;
    nt->done += nt->onotes[nt->odone++ % MAX_INFLIGHT];
  }
}

static void notes_push(pnet_state *s, pnet_notes *nt) {
  if (notes_go(s, nt)) notes_send(s, nt);
  notes_test(s, nt);
}

static void notes_pull(pnet_state *s, pnet_notes *nt) {
  while (!nt->broken && !nt->peer_failed && !nt->peer_bye) {
    while (!nt->no_more && nt->iposted < nt->idone + MAX_INFLIGHT) {
      void *data = nt->in[nt->iposted % MAX_INFLIGHT];
      size_t size = NOTE_BYTES;
      int tag = 0;
      void **req = &nt->ireq[nt->iposted % MAX_INFLIGHT];
      if (chorus_net_irecv(s->net, nt->recv, 1, &data, &size, &tag, &nt->rmh, req) != ncclSuccess)
        nt->no_more = 1;
      if (!*req) break;
      nt->iposted++;
    }
    if (nt->idone == nt->iposted) {
      nt->broken = nt->no_more; /* ended, without a word */
      return;
    }
    int done = 0, size = 0;
    if (test_req(s, &nt->ireq[nt->idone % MAX_INFLIGHT], &done, &size) != ncclSuccess) {
      nt->broken = 1;
      return;
    }
    if (!done) return;
    const char *raw = nt->in[nt->idone++ % MAX_INFLIGHT];
    pnet_hdr h;
    memcpy(&h, raw, sizeof h);
    const int fail = (size_t)size >= sizeof h && h.kind == FRAME_FAIL;
    const int bye = (size_t)size == sizeof h && h.kind == FRAME_BYE;
    int ok = (size_t)size >= sizeof h && h.magic == PNET_MAGIC &&
             (fail  ? h.bytes < CHORUS_REASON_MAX && (size_t)size == sizeof h + h.bytes
              : bye ? h.bytes == 0
                    : (size_t)size % sizeof h == 0);
    for (size_t off = 0; ok && !fail && !bye && off < (size_t)size; off += sizeof h) {
      memcpy(&h, raw + off, sizeof h);
      ok = h.magic == PNET_MAGIC && h.kind == FRAME_NOTE && h.bytes == 0;
    }
    if (!ok) {
      snprintf(nt->fail, sizeof nt->fail, "a malformed note (kind %u, %d bytes)", (unsigned)h.kind,
               size);
      nt->garbage = nt->broken = 1;
      return;
    }
    if (fail) { /* the peer failed: why, its first cause */
      snprintf(nt->fail, sizeof nt->fail, "%.*s", (int)h.bytes, raw + sizeof h);
      nt->peer_failed = 1;
      return;
    }
    if (bye) {
      nt->peer_bye = nt->out_closed = 1;
      return;
    }
    for (size_t off = 0; off < (size_t)size; off += sizeof h) {
      memcpy(&h, raw + off, sizeof h);
      chorus_call_entry_write(&nt->board[h.meta.seq % CHORUS_NODE_CALLS], h.meta.seq + 1, h.chain,
                              &h.meta);
    }
  }
}

static ncclResult_t pnet_send_slot(chorus_conn *cc, void **buf, size_t *cap) {
  pnet_conn *c = (pnet_conn *)cc;
  if (c->failing) return ncclRemoteError;
  CHECK(push(c));
  if (c->posted - c->done >= c->nslots) return ncclInProgress;
  *buf = slot_hdr(c, c->posted) + 1;
  *cap = c->base.slot_bytes;
  return ncclSuccess;
}

static ncclResult_t pnet_send_post(chorus_conn *cc, size_t bytes, const chorus_msg_meta *meta) {
  pnet_conn *c = (pnet_conn *)cc;
  if (c->failing) return ncclRemoteError;
  *slot_hdr(c, c->posted) = (pnet_hdr){PNET_MAGIC, FRAME_DATA, bytes, 0, *meta, 0};
  c->ph[c->posted % c->nslots] = c->base.step_next;
  c->posted++;
  return push(c);
}

static ncclResult_t pnet_send_flush(chorus_conn *cc) {
  pnet_conn *c = (pnet_conn *)cc;
  if (c->failing) return ncclRemoteError;
  CHECK(push(c));
  return c->done == c->posted ? ncclSuccess : ncclInProgress;
}

static uint64_t pnet_send_count(chorus_conn *cc, uint64_t *taken) {
  const pnet_conn *c = (const pnet_conn *)cc;
  *taken = c->done; /* the plugin's sends tested done, in order (push) */
  return c->posted;
}

static ncclResult_t pnet_recv_slot(chorus_conn *cc, const void **buf, size_t *bytes,
                                   chorus_msg_meta *meta) {
  pnet_conn *c = (pnet_conn *)cc;
  ncclResult_t res = next_arrived(c);
  if (res != ncclSuccess) return res;
  const pnet_hdr *h = slot_hdr(c, c->done);
  *buf = h + 1;
  *bytes = h->bytes;
  *meta = h->meta;
  return ncclSuccess;
}

static ncclResult_t pnet_recv_release(chorus_conn *cc) {
  pnet_conn *c = (pnet_conn *)cc;
  c->arrived = 0;
  c->done++;
  return arm(c);
}

static ncclResult_t pnet_dev_move(chorus_conn *cc, void *buf, size_t bytes) {
  pnet_conn *c = (pnet_conn *)cc;
  pnet_state *s = c->s;
  pnet_dev *d = &c->dv;
  const int sending = c->dir == CHORUS_DIR_SEND;
  if (c->failing || c->broken || c->peer_failed) return ncclRemoteError;
  if (!c->dcomm)
    return chorus_error(ncclInternalError, "NET: no direct connection to rank %d", c->base.peer);
  if (sending) CHECK(push(c)); /* the message that announces the transfer */
  ncclResult_t res;
  if (!d->active) {
    if (!bytes) return ncclSuccess;
    res = chorus_net_reg(s->net, c->dcomm, buf, bytes, NCCL_PTR_CUDA, &d->mh);
    if (res != ncclSuccess) return broken(c, "refused to register GPU memory", res);
    *d = (pnet_dev){1, d->mh, NULL, NULL, 0, 0};
  }
  while (d->off < bytes) {
    char *at = (char *)buf + d->off;
    if (!d->req && !d->flush) {
      const size_t n = CHORUS_MIN(bytes - d->off, s->dev_piece);
      if (sending) {
        res = chorus_net_isend(s->net, c->dcomm, at, n, 0, d->mh, NULL, &d->req);
      } else {
        void *data = at;
        size_t size = n;
        int tag = 0;
        res = chorus_net_irecv(s->net, c->dcomm, 1, &data, &size, &tag, &d->mh, &d->req);
      }
      if (res != ncclSuccess) return broken(c, sending ? "failed a send" : "failed a receive", res);
      if (!d->req) return ncclInProgress; /* the plugin is full: later */
      d->n = n;
    }
    if (d->req) {
      int done = 0, size = 0;
      res = test_req(s, &d->req, &done, &size);
      if (res != ncclSuccess) return broken(c, sending ? "failed a send" : "failed a receive", res);
      if (!done) return ncclInProgress;
      if (!sending) {
        if ((size_t)size != d->n) return broken(c, "carried a short GPU transfer", ncclRemoteError);
        void *data = at;
        int sz = (int)d->n;
        res = chorus_net_iflush(s->net, c->dcomm, 1, &data, &sz, &d->mh, &d->flush);
        if (res != ncclSuccess) return broken(c, "failed to flush a receive", res);
      }
    }
    if (d->flush) {
      int done = 0, size = 0;
      res = test_req(s, &d->flush, &done, &size);
      if (res != ncclSuccess) return broken(c, "failed to flush a receive", res);
      if (!done) return ncclInProgress;
    }
    d->off += d->n;
  }
  res = chorus_net_dereg(s->net, c->dcomm, d->mh);
  d->active = 0;
  d->mh = NULL;
  if (res != ncclSuccess) return broken(c, "failed to deregister GPU memory", res);
  return ncclSuccess;
}

static void pnet_wait_info(chorus_conn *cc, int dir, chorus_waitset *ws) {
  (void)cc;
  (void)dir;
  ws->must_poll = 1; /* a plugin has nothing to sleep on */
}

static ncclResult_t pnet_check(chorus_conn *cc) {
  pnet_conn *c = (pnet_conn *)cc;
  if (c->failing) return ncclRemoteError;
  if (c->dir == CHORUS_DIR_SEND) return push(c);
  ncclResult_t res = next_arrived(c);
  return res == ncclInProgress ? ncclSuccess : res;
}

static ncclResult_t pnet_hear(chorus_conn *cc) {
  pnet_conn *c = (pnet_conn *)cc;
  if (c->broken || c->peer_failed || c->failing) return ncclRemoteError;
  pnet_notes *nt = &c->s->notes[c->base.peer];
  notes_pull(c->s, nt);
  if (nt->garbage) {
    snprintf(c->base.err, sizeof c->base.err, "connection to rank %d over network %s: %s",
             c->base.peer, chorus_net_name(c->s->net), nt->fail);
    c->broken = 1;
    return ncclRemoteError;
  }
  if (nt->peer_failed) {
    snprintf(c->base.err, sizeof c->base.err, "%s", nt->fail);
    c->base.relayed = c->peer_failed = 1;
    return ncclRemoteError;
  }
  return ncclSuccess;
}

/* Best effort: a FAIL frame with the reason on the connection (pushed
 * out by progress() from here on), and on the notes, so the peer stops at
 * once with the first cause. */
static void pnet_fail(chorus_conn *cc, const char *reason) {
  pnet_conn *c = (pnet_conn *)cc;
  if (c->failing) return;
  /* A peer that said it failed needs no word: it closes (settle_all). */
  if (c->dir == CHORUS_DIR_SEND && !c->broken && c->posted - c->done < c->nslots &&
      !c->s->notes[c->base.peer].peer_failed) {
    const size_t n =
        CHORUS_MIN(strlen(reason), CHORUS_MIN(c->base.slot_bytes, (size_t)CHORUS_REASON_MAX - 1));
    pnet_hdr *h = slot_hdr(c, c->posted);
    *h = (pnet_hdr){PNET_MAGIC, FRAME_FAIL, n, 0, {0}, 0};
    memcpy(h + 1, reason, n);
    c->ph[c->posted % c->nslots] = NULL;
    c->posted++;
    (void)push(c);
    pnet_notes *nt = &c->s->notes[c->base.peer];
    if (c->base.channel == CHORUS_CH_COLL && !nt->fail_req && !nt->out_closed) {
      /* The calls before why: a peer compares its own with them first. */
      notes_send(c->s, nt);
      const size_t k = CHORUS_MIN(strlen(reason), (size_t)CHORUS_REASON_MAX - 1);
      const pnet_hdr fh = {PNET_MAGIC, FRAME_FAIL, k, 0, {0}, 0};
      memcpy(nt->fail_out, &fh, sizeof fh);
      memcpy(nt->fail_out + sizeof fh, reason, k);
      (void)chorus_net_isend(c->s->net, nt->send, nt->fail_out, sizeof fh + k, 0, nt->fail_mh, NULL,
                             &nt->fail_req);
      /* A plugin moves bytes while tested: a few tests, the rank may close soon. */
      for (int i = 0, done = 0, size = 0; i < 100 && nt->fail_req && !done; i++)
        if (test_req(c->s, &nt->fail_req, &done, &size) != ncclSuccess) break;
    }
  }
  if (!c->broken && !c->peer_failed)
    snprintf(c->base.err, sizeof c->base.err, "connection to rank %d was shut down: %s",
             c->base.peer, reason);
  c->failing = 1;
}

static const chorus_conn_ops pnet_ops = {
    .send_slot = pnet_send_slot,
    .send_post = pnet_send_post,
    .send_flush = pnet_send_flush,
    .recv_slot = pnet_recv_slot,
    .recv_release = pnet_recv_release,
    .send_count = pnet_send_count,
    .wait_info = pnet_wait_info,
    .check = pnet_check,
    .fail = pnet_fail,
    .hear = pnet_hear,
    .dev_move = pnet_dev_move,
};

/* Held notes out before the connections close: a peer behind may yet
 * compare its calls with them. A plugin moves them only while tested, so
 * this tests them for a while (a peer gone takes none). */
static void notes_flush(pnet_state *s) {
  if (!s->notes || !s->is_peer) return;
  s->held.due = 1;
  const int64_t deadline = chorus_now_ns() + NOTES_FLUSH_NS;
  for (int left = 1; left && !chorus_expired(deadline);) {
    left = 0;
    for (int peer = 0; peer < s->nranks; peer++) {
      pnet_notes *nt = &s->notes[peer];
      if (!s->is_peer[peer] || !nt->out || nt->out_closed) continue;
      notes_push(s, nt);
      left |= nt->done < nt->tail && !nt->out_closed;
    }
  }
}

/* Between passes that wait for peers at close: a plugin moves bytes only
 * when tested, but a rank spinning here takes the core from peers that
 * share it (a node of more ranks than cores), for up to FAIL_SETTLE_NS. */
static void settle_nap(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* Goodbyes before the notes close: a BYE to every peer still listening,
 * then up to BYE_WAIT_NS for theirs, so that a peer that runs behind sees
 * this rank go and sends it nothing more. A plugin's close need not
 * withdraw the receives posted on it (settle_all), so a peer's held notes
 * flushed after this rank closed would land in receives whose requests
 * the plugin freed. A peer that says nothing in time (it runs behind) reads
 * the goodbye before it next sends notes (notes_send). */
static void notes_bye(pnet_state *s) {
  for (int peer = 0; peer < s->nranks; peer++) {
    pnet_notes *nt = &s->notes[peer];
    if (!s->is_peer[peer] || !nt->send || !nt->recv) continue;
    notes_pull(s, nt);
    if (nt->out_closed || nt->fail_req || nt->peer_failed) continue;
    /* In the FAIL frame's registered buffer: nothing failed (pnet_destroy). */
    const pnet_hdr bh = {PNET_MAGIC, FRAME_BYE, 0, 0, {0}, 0};
    memcpy(nt->fail_out, &bh, sizeof bh);
    if (chorus_net_isend(s->net, nt->send, nt->fail_out, sizeof bh, 0, nt->fail_mh, NULL,
                         &nt->fail_req) != ncclSuccess)
      nt->fail_req = NULL;
  }
  const int64_t deadline = chorus_now_ns() + BYE_WAIT_NS;
  for (int left = 1; left && !chorus_expired(deadline);) {
    left = 0;
    for (int peer = 0; peer < s->nranks; peer++) {
      pnet_notes *nt = &s->notes[peer];
      if (!s->is_peer[peer] || !nt->send || !nt->recv) continue;
      int done = 0, size = 0;
      if (nt->fail_req) (void)test_req(s, &nt->fail_req, &done, &size);
      notes_pull(s, nt);
      left |= nt->fail_req != NULL || !(nt->peer_bye || nt->peer_failed || nt->broken);
    }
    if (left) settle_nap(50000);
  }
}

/* Did a connection of this communicator fail (here or at a peer)? */
static int failed_any(pnet_state *s) {
  int failed = 0;
  for (int peer = 0; peer < s->nranks && s->conns && s->is_peer && !failed; peer++)
    for (int i = 0; i < CHORUS_NCHANNELS * 2 && s->is_peer[peer]; i++) {
      const pnet_conn *c = conn_of(s, peer, i / 2, i % 2);
      failed |= c->failing || c->broken || c->peer_failed;
    }
  return failed;
}

static void settle(pnet_state *s, void **req) {
  int done = 0, size = 0;
  if (*req) (void)test_req(s, req, &done, &size);
}

/* After a failure, the requests still posted or in flight are tested for
 * FAIL_SETTLE_NS before the connections close. A plugin's close need not
 * withdraw the receives posted on it: aws-ofi-nccl 1.7.4 frees their
 * requests while libfabric keeps them, and a peer's FAIL frame that lands
 * in one afterwards is a write into freed memory, which crashed the next
 * communicator's connect in the same process (test_mismatch over it, at
 * its second trial). Messages that come while this rank still tests land
 * in live requests: they stay posted between passes, a pass a
 * millisecond (a pass tests every request: spinning on them took a core
 * for the whole wait). */
static void settle_all(pnet_state *s) {
  const int64_t deadline = chorus_now_ns() + FAIL_SETTLE_NS;
  for (; !chorus_expired(deadline); settle_nap(1000000))
    for (int peer = 0; peer < s->nranks; peer++) {
      if (!s->is_peer[peer]) continue;
      for (int i = 0; i < CHORUS_NCHANNELS * 2; i++) {
        pnet_conn *c = conn_of(s, peer, i / 2, i % 2);
        for (uint64_t k = c->done; c->req && k < c->issued; k++) settle(s, &c->req[k % c->nslots]);
        settle(s, &c->dv.req);
        settle(s, &c->dv.flush);
      }
      pnet_notes *nt = &s->notes[peer];
      for (uint64_t k = nt->odone; k < nt->osent; k++) settle(s, &nt->oreq[k % MAX_INFLIGHT]);
      for (uint64_t k = nt->idone; k < nt->iposted; k++) settle(s, &nt->ireq[k % MAX_INFLIGHT]);
      settle(s, &nt->fail_req);
    }
}

static void pnet_destroy(void *p) {
  pnet_state *s = p;
  if (!s) return;
  chorus_net *n = s->net;
  if (n) notes_flush(s);
  if (n && s->notes && s->is_peer) {
    if (failed_any(s))
      settle_all(s);
    else
      notes_bye(s);
  }
  for (int peer = 0; peer < s->nranks && n; peer++) {
    for (int ch = 0; ch < CHORUS_NCHANNELS && s->conns; ch++)
      for (int d = 0; d < 2; d++) {
        pnet_conn *c = conn_of(s, peer, ch, d);
        if (c->mh) (void)chorus_net_dereg(n, c->comm, c->mh);
        if (c->dv.active) (void)chorus_net_dereg(n, c->dcomm, c->dv.mh);
        if (c->dcomm && d == CHORUS_DIR_SEND) (void)chorus_net_close_send(n, c->dcomm);
        if (c->dcomm && d == CHORUS_DIR_RECV) (void)chorus_net_close_recv(n, c->dcomm);
        if (d == CHORUS_DIR_SEND)
          (void)chorus_net_close_send(n, c->comm);
        else
          (void)chorus_net_close_recv(n, c->comm);
        chorus_free(c->slots);
        chorus_free(c->req);
        chorus_free(c->ph);
        chorus_free(c->base.step_refs);
      }
    if (s->notes) {
      pnet_notes *nt = &s->notes[peer];
      if (nt->smh) (void)chorus_net_dereg(n, nt->send, nt->smh);
      if (nt->rmh) (void)chorus_net_dereg(n, nt->recv, nt->rmh);
      if (nt->fail_mh) (void)chorus_net_dereg(n, nt->send, nt->fail_mh);
      (void)chorus_net_close_send(n, nt->send);
      (void)chorus_net_close_recv(n, nt->recv);
      chorus_free(nt->out);
      chorus_free(nt->board);
      chorus_free(nt->in);
    }
    for (int k = 0; k < s->ncomms && s->listen; k++)
      (void)chorus_net_close_listen(n, s->listen[(size_t)peer * (size_t)s->ncomms + (size_t)k]);
  }
  chorus_net_close(n);
  chorus_free(s->listen);
  chorus_free(s->conns);
  chorus_free(s->notes);
  chorus_free(s->is_peer);
  chorus_free(s);
}

/* Slots and their registration for a connection that is up. */
static ncclResult_t init_conn(pnet_state *s, int peer, int ch, int dir, void *comm) {
  pnet_conn *c = conn_of(s, peer, ch, dir);
  c->base.ops = &pnet_ops;
  c->base.transport = "NET";
  c->base.network = 1;
  c->base.peer = peer;
  c->base.channel = ch;
  c->base.slot_bytes = s->slot_bytes;
  c->dir = dir;
  c->s = s;
  c->comm = comm;
  c->nslots = (uint32_t)s->nslots;
  c->stride = (sizeof(pnet_hdr) + s->slot_bytes + 63) & ~(size_t)63;
  c->slots = chorus_malloc((size_t)c->nslots * c->stride);
  c->req = chorus_calloc(c->nslots, sizeof *c->req);
  c->ph = chorus_calloc(c->nslots, sizeof *c->ph);
  if (!c->slots || !c->req || !c->ph)
    return chorus_error(ncclSystemError, "NET transport: out of memory");
  if (ch == CHORUS_CH_COLL && dir == CHORUS_DIR_RECV) c->base.heard = s->notes[peer].board;
  ncclResult_t res =
      chorus_net_reg(s->net, comm, c->slots, (size_t)c->nslots * c->stride, NCCL_PTR_HOST, &c->mh);
  if (res != ncclSuccess)
    return chorus_error(res, "NET/%s: registering %zu bytes of slots for rank %d failed",
                        chorus_net_name(s->net), (size_t)c->nslots * c->stride, peer);
  return dir == CHORUS_DIR_RECV ? arm(c) : ncclSuccess;
}

static ncclResult_t init_notes(pnet_state *s, int peer) {
  pnet_notes *nt = &s->notes[peer];
  nt->out = chorus_calloc(NOTE_QUEUE, sizeof *nt->out);
  nt->board = chorus_calloc(CHORUS_NODE_CALLS, sizeof *nt->board);
  nt->in = chorus_calloc(MAX_INFLIGHT, sizeof *nt->in);
  if (!nt->out || !nt->board || !nt->in)
    return chorus_error(ncclSystemError, "NET transport: out of memory");
  ncclResult_t res = chorus_net_reg(s->net, nt->send, nt->out, NOTE_QUEUE * sizeof *nt->out,
                                    NCCL_PTR_HOST, &nt->smh);
  if (res == ncclSuccess)
    res = chorus_net_reg(s->net, nt->recv, nt->in, MAX_INFLIGHT * sizeof *nt->in, NCCL_PTR_HOST,
                         &nt->rmh);
  if (res == ncclSuccess)
    res = chorus_net_reg(s->net, nt->send, nt->fail_out, sizeof nt->fail_out, NCCL_PTR_HOST,
                         &nt->fail_mh);
  if (res != ncclSuccess)
    return chorus_error(res, "NET/%s: registering the notes for rank %d failed",
                        chorus_net_name(s->net), peer);
  return ncclSuccess;
}

/* Handles of this rank's listens to peer, and peer's to this rank. */
static ncclResult_t swap_handles(const chorus_transport_ctx *ctx, int peer, int ncomms,
                                 const char *mine, char *theirs) {
  const size_t len = (size_t)ncomms * CHORUS_NET_HANDLE_BYTES;
  if (peer > ctx->rank) {
    CHECK(chorus_bootstrap_send(ctx->bs, peer, PNET_TAG, mine, len));
    return chorus_bootstrap_recv(ctx->bs, peer, PNET_TAG, theirs, len);
  }
  CHECK(chorus_bootstrap_recv(ctx->bs, peer, PNET_TAG, theirs, len));
  return chorus_bootstrap_send(ctx->bs, peer, PNET_TAG, mine, len);
}

/* NCCL_NET_GDR_LEVEL=LOC (or 0) keeps GPU memory away from the network, as
 * in NCCL; any other level allows it where the plugin takes it. */
static int gdr_allowed(void) {
  const char *v = chorus_param_str(CHORUS_P_NET_GDR_LEVEL);
  return !v || (strcasecmp(v, "LOC") != 0 && strcmp(v, "0") != 0);
}

/* Takes ctx->net over: closed with the state, or at once on failure. */
static ncclResult_t pnet_setup(const chorus_transport_ctx *ctx, const int *peers, int npeers,
                               void **out) {
  *out = NULL;
  chorus_net *net = ctx->net;
  if (!net) return chorus_error(ncclInternalError, "the plugin transport without a network");
  ncclResult_t res = ncclSuccess;
  pnet_state *s = chorus_calloc(1, sizeof *s);
  char *handles = NULL;
  void **send = NULL, **recv = NULL;
  if (!s) {
    chorus_net_close(net);
    return chorus_error(ncclSystemError, "NET transport: out of memory");
  }
  s->net = net;
  s->rank = ctx->rank;
  s->nranks = ctx->nranks;
  s->slot_bytes = ctx->slot_bytes;
  s->nslots = (int)CHORUS_MAX(2, CHORUS_MIN(ctx->nslots, 64));
  s->ncomms = NCOMMS_HOST;
  chorus_net_props props;
  if (gdr_allowed() && chorus_net_properties(net, 0, &props) == ncclSuccess &&
      (props.ptr_support & NCCL_PTR_CUDA)) {
    s->ncomms = NCOMMS_DEV;
    s->dev_piece = CHORUS_MAX((size_t)1, CHORUS_MIN(props.max_p2p_bytes, DEV_PIECE));
  }
  const size_t per = (size_t)s->ncomms;
  s->listen = chorus_calloc((size_t)s->nranks * per, sizeof *s->listen);
  s->conns = chorus_calloc((size_t)s->nranks * CHORUS_NCHANNELS * 2, sizeof *s->conns);
  s->notes = chorus_calloc((size_t)s->nranks, sizeof *s->notes);
  s->is_peer = chorus_calloc((size_t)s->nranks, 1);
  handles = chorus_calloc((size_t)npeers * per * 2, CHORUS_NET_HANDLE_BYTES);
  send = chorus_calloc((size_t)s->nranks * per, sizeof *send);
  recv = chorus_calloc((size_t)s->nranks * per, sizeof *recv);
  if (!s->listen || !s->conns || !s->notes || !s->is_peer || !handles || !send || !recv) {
    res = chorus_error(ncclSystemError, "NET transport: out of memory");
    goto out;
  }
  /* Listen for each peer's connections to this rank, swap handles. */
  for (int i = 0; i < npeers; i++) {
    const int p = peers[i];
    if (p == s->rank) {
      res = chorus_error(ncclInternalError, "NET transport cannot connect a rank to itself");
      goto out;
    }
    s->is_peer[p] = 1;
    s->npeers++;
    char *mine = handles + (size_t)i * per * 2 * CHORUS_NET_HANDLE_BYTES;
    for (size_t k = 0; k < per; k++) {
      res = chorus_net_listen(net, 0, mine + k * CHORUS_NET_HANDLE_BYTES,
                              &s->listen[(size_t)p * per + k]);
      if (res != ncclSuccess) {
        res = chorus_error(res, "NET/%s: listen failed", chorus_net_name(net));
        goto out;
      }
    }
    CHECK_GOTO(swap_handles(ctx, p, s->ncomms, mine, mine + per * CHORUS_NET_HANDLE_BYTES), res,
               out);
  }
  /* Connect and accept, all at once, none blocking. */
  const int64_t deadline = chorus_now_ns() + 120ll * 1000000000;
  for (int left = 1; left;) {
    left = 0;
    for (int i = 0; i < npeers; i++) {
      const int p = peers[i];
      char *theirs = handles + ((size_t)i * per * 2 + per) * CHORUS_NET_HANDLE_BYTES;
      for (size_t k = 0; k < per; k++) {
        void **sc = &send[(size_t)p * per + k], **rc = &recv[(size_t)p * per + k];
        if (!*sc) {
          res = chorus_net_connect(net, 0, theirs + k * CHORUS_NET_HANDLE_BYTES, sc);
          if (res != ncclSuccess) {
            res =
                chorus_error(res, "NET/%s: connecting to rank %d failed", chorus_net_name(net), p);
            goto out;
          }
        }
        if (!*rc) {
          res = chorus_net_accept(net, s->listen[(size_t)p * per + k], rc);
          if (res != ncclSuccess) {
            res = chorus_error(res, "NET/%s: accepting rank %d failed", chorus_net_name(net), p);
            goto out;
          }
        }
        left += !*sc + !*rc;
      }
    }
    if (left && chorus_expired(deadline)) {
      res = chorus_error(ncclRemoteError,
                         "NET/%s: %d connection(s) with other hosts did not come up within 120 s",
                         chorus_net_name(net), left);
      goto out;
    }
  }
  for (int i = 0; i < npeers; i++) {
    const int p = peers[i];
    pnet_notes *nt = &s->notes[p];
    nt->send = send[(size_t)p * per + CHORUS_NCHANNELS];
    nt->recv = recv[(size_t)p * per + CHORUS_NCHANNELS];
    send[(size_t)p * per + CHORUS_NCHANNELS] = recv[(size_t)p * per + CHORUS_NCHANNELS] = NULL;
    CHECK_GOTO(init_notes(s, p), res, out);
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      void *sc = send[(size_t)p * per + (size_t)ch], *rc = recv[(size_t)p * per + (size_t)ch];
      send[(size_t)p * per + (size_t)ch] = recv[(size_t)p * per + (size_t)ch] = NULL;
      CHECK_GOTO(init_conn(s, p, ch, CHORUS_DIR_SEND, sc), res, out);
      CHECK_GOTO(init_conn(s, p, ch, CHORUS_DIR_RECV, rc), res, out);
    }
    if (s->ncomms == NCOMMS_DEV) { /* point-to-point takes GPU memory directly */
      pnet_conn *cs = conn_of(s, p, CHORUS_CH_P2P, CHORUS_DIR_SEND);
      pnet_conn *cr = conn_of(s, p, CHORUS_CH_P2P, CHORUS_DIR_RECV);
      cs->dcomm = send[(size_t)p * per + DIRECT];
      cr->dcomm = recv[(size_t)p * per + DIRECT];
      send[(size_t)p * per + DIRECT] = recv[(size_t)p * per + DIRECT] = NULL;
      cs->base.dev_mem = cr->base.dev_mem = 1;
    }
  }
  INFO(CHORUS_NET | CHORUS_INIT,
       "NET/%s transport: %d peer(s), %d channels, %d slots of %zu bytes%s", chorus_net_name(net),
       npeers, CHORUS_NCHANNELS, s->nslots, s->slot_bytes,
       s->ncomms == NCOMMS_DEV ? "; GPU buffers of Send/Recv go to the plugin as they are" : "");
out:
  for (size_t i = 0; send && recv && i < (size_t)s->nranks * per; i++) {
    (void)chorus_net_close_send(net, send[i]);
    (void)chorus_net_close_recv(net, recv[i]);
  }
  chorus_free(send);
  chorus_free(recv);
  chorus_free(handles);
  if (res != ncclSuccess) {
    pnet_destroy(s);
    return res;
  }
  *out = s;
  return ncclSuccess;
}

static ncclResult_t pnet_finish(void *p) {
  (void)p;
  return ncclSuccess;
}

static chorus_conn *pnet_conn_get(void *p, int peer, int ch, int dir) {
  pnet_state *s = p;
  if (!s || !s->is_peer[peer]) return NULL;
  return &conn_of(s, peer, ch, dir)->base;
}

static void pnet_post_call(void *p, const chorus_call_entry *e) {
  pnet_state *s = p;
  s->held.seq_now = e->meta.seq;
  for (int peer = 0; peer < s->nranks && s->npeers; peer++) {
    pnet_notes *nt = &s->notes[peer];
    if (!s->is_peer[peer] || nt->out_closed) continue;
    /* A peer that took none of the last NOTE_QUEUE notes is stuck on an
     * earlier call, which the checks report: this one is dropped. */
    if (nt->tail - nt->done == NOTE_QUEUE) continue;
    nt->out[nt->tail++ % NOTE_QUEUE] = (pnet_hdr){PNET_MAGIC, FRAME_NOTE, 0, e->chain, e->meta, 0};
    notes_push(s, nt);
  }
}

static ncclResult_t pnet_progress(void *p) {
  pnet_state *s = p;
  int left = 0;
  for (int peer = 0; peer < s->nranks; peer++) {
    if (!s->is_peer[peer]) continue;
    notes_push(s, &s->notes[peer]);
    left |= has_notes(&s->notes[peer]);
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      pnet_conn *c = conn_of(s, peer, ch, CHORUS_DIR_SEND);
      if (c->done < c->posted && push(c) != ncclSuccess && !c->failing)
        return chorus_error(ncclRemoteError, "NET: %s", c->base.err);
    }
  }
  s->held.due &= left;
  return ncclSuccess;
}

static void pnet_advance(void *p, uint64_t seq) {
  pnet_state *s = p;
  s->held.seq_now = seq;
}

static void pnet_stalled(void *p) {
  pnet_state *s = p;
  chorus_held_stall(&s->held, s->npeers);
}

/* Output that moves only while this rank tests it: the executor polls. */
static void pnet_state_wait_info(void *p, chorus_waitset *ws) {
  pnet_state *s = p;
  for (int peer = 0; s && peer < s->nranks && !ws->must_poll; peer++) {
    if (!s->is_peer[peer]) continue;
    const pnet_notes *nt = &s->notes[peer];
    if (!nt->out_closed && (nt->odone < nt->osent || notes_go(s, nt))) ws->must_poll = 1;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      const pnet_conn *c = conn_of(s, peer, ch, CHORUS_DIR_SEND);
      if (c->done < c->posted) ws->must_poll = 1;
    }
  }
}

static chorus_doorbell *pnet_doorbell(void *p) {
  (void)p;
  return NULL;
}

static chorus_node *pnet_node(void *p) {
  (void)p;
  return NULL;
}

const chorus_transport chorus_transport_pnet = {
    .name = "NET",
    .setup = pnet_setup,
    .finish = pnet_finish,
    .conn = pnet_conn_get,
    .progress = pnet_progress,
    .wait_info = pnet_state_wait_info,
    .doorbell = pnet_doorbell,
    .post_call = pnet_post_call,
    .advance = pnet_advance,
    .stalled = pnet_stalled,
    .node = pnet_node,
    .destroy = pnet_destroy,
};

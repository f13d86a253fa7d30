/*
 * bootstrap.c - see bootstrap.h.
 */
#include "bootstrap/bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/root.h"
#include "bootstrap/wire.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"

static int aborted(const chorus_bootstrap *bs) {
  return bs->abort_flag && __atomic_load_n(bs->abort_flag, __ATOMIC_ACQUIRE);
}

static ncclResult_t abort_error(void) {
  return chorus_error(ncclInvalidUsage, "bootstrap: stopped because the communicator was aborted");
}

void chorus_bootstrap_destroy(chorus_bootstrap *bs) {
  if (!bs) return;
  chorus_sock_close(&bs->next_fd);
  chorus_sock_close(&bs->prev_fd);
  for (int i = 0; i < bs->nunexpected; i++) close(bs->unexpected[i].fd);
  chorus_free(bs->unexpected);
  chorus_acceptor_fini(&bs->acc);
  chorus_sock_close(&bs->listen_fd);
  chorus_free(bs->addrs);
  chorus_free(bs);
}

/* Chooses where this rank listens: the NCCL_SOCKET_IFNAME interface when
 * set, else the local address the kernel would use to reach the root (so a
 * job on loopback stays on loopback, and hosts pick the interface that can
 * actually reach the others). */
static ncclResult_t pick_listen_addr(const chorus_sockaddr *root, chorus_sockaddr *out) {
  char err[256] = "", ifname[IF_NAMESIZE];
  const char *ifs = chorus_param_str(CHORUS_P_SOCKET_IFNAME);
  ncclResult_t res = (ifs && *ifs) ? chorus_sock_pick_local(out, ifname, err, sizeof err)
                                   : chorus_sock_local_for(root, out, err, sizeof err);
  if (res != ncclSuccess) return chorus_error(res, "bootstrap: %s", err);
  return ncclSuccess;
}

/* Joins root k and receives the address table. */
/* One attempt at joining root k: connect, present ourselves, wait for the
 * table. *silent_close is set when the root closed before answering a
 * single byte: with a fixed address (NCCL_COMM_ID) that is the previous
 * communicator's root going away, and the caller tries again. */
/* A failed join's result: the root's own cause where that root is this
 * process's and failed by itself (root.h), else res. */
static ncclResult_t root_cause_or(const chorus_uid *uid, ncclResult_t res) {
  const ncclResult_t cause = chorus_root_local_cause(uid->secret);
  return cause != ncclSuccess ? cause : res;
}

static ncclResult_t join_once(chorus_bootstrap *bs, const chorus_uid *uids, int nids, int k,
                              int *silent_close) {
  char err[256] = "", a[CHORUS_ADDR_STRLEN];
  *silent_close = 0;
  const chorus_uid *uid = &uids[k];
  chorus_sock_str(&uid->root, a, sizeof a);
  chorus_root_join join;
  memset(&join, 0, sizeof join);
  join.listen = bs->listen_addr;
  join.nroots = nids;
  join.root_index = k;
  join.root0 = uids[0].root;
  memcpy(join.root0_secret, uids[0].secret, sizeof join.root0_secret);
  int fd = -1;
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  /* A unique id's root listens before the id exists: a refusal means it is
   * gone (its process exited), and waiting cannot help. A fixed address
   * (NCCL_COMM_ID) may simply not be up yet. */
  const int64_t refused_dl =
      (uid->flags & CHORUS_UID_FIXED_ROOT) ? dl : CHORUS_MIN(dl, chorus_now_ns() + 1000000000ll);
  ncclResult_t res = chorus_sock_connect_ex(&uid->root, dl, refused_dl, &fd, err, sizeof err);
  if (res == ncclSuccess) {
    res = chorus_hello_send(fd, CHORUS_HELLO_ROOT_RANK, uid->secret, bs->rank, bs->nranks, 0, &join,
                            sizeof join, dl, err, sizeof err);
    if (res != ncclSuccess && (uid->flags & CHORUS_UID_FIXED_ROOT)) {
      /* Closed before its challenge: the previous communicator's root
       * going away, as below. */
      chorus_sock_close(&fd);
      *silent_close = 1;
      return res;
    }
  }
  if (res != ncclSuccess) {
    chorus_sock_close(&fd);
    return chorus_error(root_cause_or(uid, res),
                        "bootstrap: cannot reach the rendezvous root at %s: %s. Is the process "
                        "that called ncclGetUniqueId (or rank 0, with NCCL_COMM_ID) alive and "
                        "reachable? CHORUS_BOOTSTRAP_TIMEOUT=%lld s",
                        a, err, (long long)(bs->timeout_ns / 1000000000));
  }
  /* The root answers when all ranks are in, or with an error after its own
   * timeout; wait a little longer than that, in slices to watch abort. */
  chorus_root_reply rep;
  int64_t final = chorus_now_ns() + 2 * bs->timeout_ns + 10ll * 1000000000;
  size_t got = 0;
  while (got < sizeof rep) {
    res = chorus_sock_recv_some(fd, &rep, sizeof rep, &got, err, sizeof err);
    if (res != ncclSuccess) break;
    if (got == sizeof rep) break;
    if (aborted(bs)) {
      chorus_sock_close(&fd);
      return abort_error();
    }
    if (chorus_expired(final)) {
      res = ncclRemoteError;
      snprintf(err, sizeof err, "no answer");
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, chorus_ms_left(final, 100));
  }
  if (res != ncclSuccess && got == 0 && (uid->flags & CHORUS_UID_FIXED_ROOT)) {
    chorus_sock_close(&fd);
    *silent_close = 1;
    return res;
  }
  if (res == ncclSuccess && rep.status != ncclSuccess) {
    chorus_sock_close(&fd);
    return chorus_error(root_cause_or(uid, ncclRemoteError), "bootstrap: the rendezvous failed: %s",
                        rep.msg);
  }
  if (res == ncclSuccess)
    res = chorus_sock_recv_all(fd, bs->addrs, (size_t)bs->nranks * sizeof *bs->addrs, final, err,
                               sizeof err);
  chorus_sock_close(&fd);
  if (res != ncclSuccess)
    return chorus_error(root_cause_or(uid, res), "bootstrap: lost the rendezvous root at %s: %s", a,
                        err);
  return ncclSuccess;
}

static ncclResult_t join_root(chorus_bootstrap *bs, const chorus_uid *uids, int nids, int k) {
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  for (;;) {
    int silent = 0;
    ncclResult_t res = join_once(bs, uids, nids, k, &silent);
    if (!silent || chorus_expired(dl) || aborted(bs)) {
      if (silent) /* join_once left it unreported */
        return chorus_error(res, "bootstrap: the rendezvous root at NCCL_COMM_ID kept closing "
                                 "connections without answering");
      return res;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
}

/* The error of a rank whose neighbour's init failed first (bs->cause). */
static ncclResult_t failed_elsewhere(const chorus_bootstrap *bs) {
  return chorus_error(ncclRemoteError, "bootstrap: the init failed on another rank: %s", bs->cause);
}

/* A neighbour's word that its init failed (the first one is kept): an
 * error carrying that first cause. */
static ncclResult_t heard_failure(chorus_bootstrap *bs, chorus_arrival *a) {
  if (!bs->cause[0]) {
    memcpy(bs->cause, a->payload, sizeof bs->cause);
    bs->cause[sizeof bs->cause - 1] = '\0';
  }
  close(a->fd);
  return failed_elsewhere(bs);
}

/* Keeps an arrival for whoever claims it; drops one that is not of this
 * communicator; a neighbour's failure ends the wait with its cause. */
static ncclResult_t stash(chorus_bootstrap *bs, chorus_arrival *a) {
  if (a->hello.kind == CHORUS_HELLO_PEER_FAIL && a->hello.nranks == bs->nranks)
    return heard_failure(bs, a);
  if (a->hello.nranks != bs->nranks || a->hello.from < 0 || a->hello.from >= bs->nranks) {
    close(a->fd);
    return ncclSuccess;
  }
  if (bs->nunexpected == bs->cap_unexpected) {
    int cap = bs->cap_unexpected ? 2 * bs->cap_unexpected : 8;
    chorus_arrival *u = chorus_calloc((size_t)cap, sizeof *u);
    if (!u) {
      close(a->fd);
      return chorus_error(ncclSystemError, "bootstrap: out of memory");
    }
    if (bs->nunexpected) memcpy(u, bs->unexpected, (size_t)bs->nunexpected * sizeof *u);
    chorus_free(bs->unexpected);
    bs->unexpected = u;
    bs->cap_unexpected = cap;
  }
  bs->unexpected[bs->nunexpected++] = *a;
  return ncclSuccess;
}

/* How long a failing rank tries to tell a neighbour that has to challenge
 * it (the ring not linked yet), and how long a rank whose ring ended
 * waits for that word: on a loaded 2-core machine (CI, five ranks as
 * threads beside other tests) 300 ms once passed without the word,
 * which the neighbour had sent before closing. Only a failing init waits
 * this long. */
#define TELL_NS (200ll * 1000000)
#define HEAR_NS (1000ll * 1000000)

/* How long a refused connect to a peer is tried again. Every peer listens
 * before it joins, and a full accept queue drops connects rather than
 * refusing them, so a refusal means the peer's listener is gone: its init
 * failed or it died. Retrying longer only delays hearing why (its word
 * waits in this rank's listener meanwhile). */
#define REFUSED_NS (500ll * 1000000)

/* " (loopback: ...)" after the address of the one of two ranks that listens
 * on loopback while the other does not: they are on different hosts (or
 * both would have chosen loopback), and the one on loopback cannot be
 * reached. */
static const char *loopback_note(const chorus_sockaddr *of, const chorus_sockaddr *other) {
  return chorus_sock_is_loopback(of) && !chorus_sock_is_loopback(other)
             ? " (loopback: other hosts cannot reach it; set NCCL_SOCKET_IFNAME)"
             : "";
}

/* Serves the listener until `until`: arrivals are kept for their claims,
 * a neighbour's failure is returned as this rank's error (ncclInProgress:
 * nothing of that kind came). */
static ncclResult_t serve_until(chorus_bootstrap *bs, int64_t until) {
  for (;;) {
    chorus_arrival a;
    ncclResult_t res = chorus_acceptor_poll(&bs->acc, until, bs->abort_flag, &a);
    if (res != ncclSuccess) return res; /* ncclInProgress: until came */
    CHECK(stash(bs, &a));
  }
}

ncclResult_t chorus_bootstrap_hear_failure(chorus_bootstrap *bs) {
  if (bs->cause[0]) return failed_elsewhere(bs);
  const ncclResult_t res = serve_until(bs, chorus_now_ns() + HEAR_NS);
  return bs->cause[0] ? res : ncclInProgress; /* heard: res is failed_elsewhere's */
}

/* Takes a matching arrival from the unexpected list, or waits for one. */
static ncclResult_t claim(chorus_bootstrap *bs, uint32_t kind, int from, uint64_t tag, int *fd,
                          uint8_t *nonce, const char *what) {
  for (int i = 0; i < bs->nunexpected; i++) {
    chorus_hello *h = &bs->unexpected[i].hello;
    if (h->kind == kind && h->from == from && h->tag == tag) {
      *fd = bs->unexpected[i].fd;
      if (nonce) memcpy(nonce, bs->unexpected[i].nonce, CHORUS_NONCE_BYTES);
      bs->unexpected[i] = bs->unexpected[--bs->nunexpected];
      return ncclSuccess;
    }
  }
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  for (;;) {
    chorus_arrival a;
    ncclResult_t res = chorus_acceptor_poll(&bs->acc, dl, bs->abort_flag, &a);
    if (res == ncclInProgress) {
      if (aborted(bs)) return abort_error();
      char addr[CHORUS_ADDR_STRLEN], mine[CHORUS_ADDR_STRLEN];
      return chorus_error(
          ncclRemoteError,
          "bootstrap: rank %d at %s%s never connected to rank %d at %s%s for %s within %lld s; it "
          "may have died or be stuck. CHORUS_BOOTSTRAP_TIMEOUT sets the limit",
          from, chorus_sock_str(&bs->addrs[from], addr, sizeof addr),
          loopback_note(&bs->addrs[from], &bs->listen_addr), bs->rank,
          chorus_sock_str(&bs->listen_addr, mine, sizeof mine),
          loopback_note(&bs->listen_addr, &bs->addrs[from]), what,
          (long long)(bs->timeout_ns / 1000000000));
    }
    CHECK(res);
    if (a.hello.nranks == bs->nranks && a.hello.kind == kind && a.hello.from == from &&
        a.hello.tag == tag) {
      *fd = a.fd;
      if (nonce) memcpy(nonce, a.nonce, CHORUS_NONCE_BYTES);
      return ncclSuccess;
    }
    CHECK(stash(bs, &a));
  }
}

/* Reads the challenge on a connection to a peer. The peer sends it once
 * it serves its listener, which it may not do while it waits for our
 * challenge in turn (the ring's connects, say): so this rank serves its
 * own listener meanwhile, keeping what arrives for later claims. */
static ncclResult_t await_challenge(chorus_bootstrap *bs, int fd, uint8_t *nonce, int64_t dl,
                                    char *err, size_t errlen) {
  size_t got = 0;
  for (;;) {
    ncclResult_t res = chorus_sock_recv_some(fd, nonce, CHORUS_NONCE_BYTES, &got, err, errlen);
    if (res != ncclSuccess || got == CHORUS_NONCE_BYTES) return res;
    if (aborted(bs)) return abort_error();
    if (chorus_expired(dl))
      return chorus_errmsg(err, errlen, ncclRemoteError, "no challenge came (the peer is stuck)");
    chorus_arrival a;
    res = chorus_acceptor_poll(&bs->acc, chorus_now_ns(), bs->abort_flag, &a);
    if (res == ncclSuccess) res = stash(bs, &a);
    if (res == ncclSuccess) continue;
    if (res != ncclInProgress)
      return chorus_errmsg(err, errlen, res, "%s",
                           bs->cause[0] ? bs->cause : "serving this rank's listener failed");
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, 1);
  }
}

/* Connects to peer's listener and answers its challenge, which *nonce
 * keeps when given. */
static ncclResult_t open_to(chorus_bootstrap *bs, int peer, uint32_t kind, uint64_t tag, int *fd,
                            uint8_t *nonce_out, const char *what) {
  char err[256] = "", a[CHORUS_ADDR_STRLEN];
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  *fd = -1;
  ncclResult_t res = chorus_sock_connect_ex(&bs->addrs[peer], dl, chorus_now_ns() + REFUSED_NS, fd,
                                            err, sizeof err);
  uint8_t nonce_buf[CHORUS_NONCE_BYTES], *nonce = nonce_out ? nonce_out : nonce_buf;
  if (res == ncclSuccess) res = await_challenge(bs, *fd, nonce, dl, err, sizeof err);
  if (res == ncclSuccess)
    res = chorus_hello_answer(*fd, nonce, kind, bs->secret, bs->rank, bs->nranks, tag, NULL, 0, dl,
                              err, sizeof err);
  if (res != ncclSuccess) {
    chorus_sock_close(fd);
    if (bs->cause[0]) /* a neighbour's failure came while this rank waited (recorded) */
      return ncclRemoteError;
    /* The peer failed, or one before it: its word of why comes in a
     * moment. */
    const ncclResult_t heard = serve_until(bs, chorus_now_ns() + HEAR_NS);
    if (heard != ncclInProgress) return heard;
    /* The loopback note said first: a message passed on may be cut. */
    char mine[CHORUS_ADDR_STRLEN];
    return chorus_error(res,
                        "bootstrap: rank %d at %s%s cannot connect to rank %d at %s%s for %s: %s",
                        bs->rank, chorus_sock_str(&bs->listen_addr, mine, sizeof mine),
                        loopback_note(&bs->listen_addr, &bs->addrs[peer]), peer,
                        chorus_sock_str(&bs->addrs[peer], a, sizeof a),
                        loopback_note(&bs->addrs[peer], &bs->listen_addr), what, err);
  }
  return ncclSuccess;
}

/* Tells the listener at `to` (a root, or a ring neighbour) that this rank
 * failed, and why: `cause` when given (a neighbour's, passed on), else
 * this thread's last error. Best effort, until `within` ns from now; a
 * refused connection is final after `refused_within`. Keyed by `link`
 * (a ring link's challenge, chorus_acceptor_stand) the word is written
 * as soon as the connection is up: the kernel queues it for the
 * listener, however long its rank takes to look; else it waits for the
 * listener to challenge it. */
static void tell_failure(const chorus_sockaddr *to, const uint64_t secret[2], uint32_t kind,
                         int rank, int nranks, const char *cause, const uint8_t *link,
                         int64_t within, int64_t refused_within) {
  char why[CHORUS_FAIL_BYTES], err[128];
  const chorus_log_ctx ctx = chorus_log_ctx_get();
  snprintf(why, sizeof why, "%s",
           cause && cause[0] ? cause
                             : (ctx.err_buf && ctx.err_buf[0] ? ctx.err_buf : "its init failed"));
  const int64_t now = chorus_now_ns();
  int fd = -1;
  if (chorus_sock_connect_ex(to, now + within, now + refused_within, &fd, err, sizeof err) !=
      ncclSuccess)
    return;
  if (link) {
    if (chorus_hello_answer(fd, link, kind, secret, rank, nranks, 0, why, sizeof why, now + within,
                            err, sizeof err) == ncclSuccess) {
      shutdown(fd, SHUT_WR); /* the word, then the end: nothing more comes */
      /* A challenge left unread would make the close a reset. */
      uint8_t challenge[CHORUS_NONCE_BYTES];
      (void)!recv(fd, challenge, sizeof challenge, MSG_DONTWAIT);
    }
  } else {
    (void)chorus_hello_send(fd, kind, secret, rank, nranks, 0, why, sizeof why, now + within, err,
                            sizeof err);
  }
  chorus_sock_close(&fd);
}

void chorus_bootstrap_give_up(const chorus_uid *uids, int nids, int nranks, int rank) {
  if (uids[0].flags & CHORUS_UID_FIXED_ROOT) nids = 1;
  const chorus_uid *uid = &uids[chorus_root_of_rank(nranks, nids, rank)];
  tell_failure(&uid->root, uid->secret, CHORUS_HELLO_ROOT_FAIL, rank, nranks, NULL, NULL,
               1000000000ll, 1000000000ll);
}

void chorus_bootstrap_fail(chorus_bootstrap *bs) {
  if (!bs) return;
  /* The word first, then the ring's end: a neighbour whose ring broke
   * waits HEAR_NS for the word. On linked rings the words go at once;
   * before, telling the other neighbour first can take TELL_NS. */
  const int n = bs->nranks, next = (bs->rank + 1) % n, prev = (bs->rank + n - 1) % n;
  for (int k = 0; k < 2 && n > 1 && bs->addrs; k++) {
    if (k && prev == next) break;
    tell_failure(&bs->addrs[k ? prev : next], bs->secret, CHORUS_HELLO_PEER_FAIL, bs->rank, n,
                 bs->cause, bs->ring_linked ? bs->ring_nonce[k] : NULL, TELL_NS, 0);
  }
  if (bs->next_fd >= 0) shutdown(bs->next_fd, SHUT_RDWR);
  if (bs->prev_fd >= 0) shutdown(bs->prev_fd, SHUT_RDWR);
  if (bs->listen_fd >= 0) shutdown(bs->listen_fd, SHUT_RDWR);
}

ncclResult_t chorus_bootstrap_init(chorus_bootstrap **out, const chorus_uid *uids, int nids,
                                   int nranks, int rank, const int *abort_flag) {
  *out = NULL;
  chorus_bootstrap *bs = chorus_calloc(1, sizeof *bs);
  if (!bs) {
    ncclResult_t res = chorus_error(ncclSystemError, "bootstrap: out of memory");
    chorus_bootstrap_give_up(uids, nids, nranks, rank);
    return res;
  }
  int reached_root = 0; /* from here on the root learns of a failure by itself */
  int joined = 0;       /* and from here on the ranks have each other's addresses */
  bs->listen_fd = bs->next_fd = bs->prev_fd = -1;
  bs->rank = rank;
  bs->nranks = nranks;
  bs->abort_flag = abort_flag;
  bs->timeout_ns = chorus_param_int(CHORUS_P_BOOTSTRAP_TIMEOUT) * 1000000000ll;
  if (bs->timeout_ns <= 0) bs->timeout_ns = 300ll * 1000000000;
  if (uids[0].flags & CHORUS_UID_FIXED_ROOT) nids = 1; /* NCCL_COMM_ID: one root */
  int k = chorus_root_of_rank(nranks, nids, rank);
  memcpy(bs->secret, uids[0].secret, sizeof bs->secret);
  ncclResult_t res = ncclSuccess;
  char err[256] = "";
  bs->addrs = chorus_calloc((size_t)nranks, sizeof *bs->addrs);
  if (!bs->addrs) {
    res = chorus_error(ncclSystemError, "bootstrap: out of memory");
    goto fail;
  }
  if ((uids[0].flags & CHORUS_UID_FIXED_ROOT) && rank == 0) {
    chorus_sockaddr bound;
    CHECK_GOTO(chorus_root_start(&uids[0].root, uids[0].secret, &bound), res, fail);
  }
  CHECK_GOTO(pick_listen_addr(&uids[k].root, &bs->listen_addr), res, fail);
  res = chorus_sock_listen(&bs->listen_addr, &bs->listen_fd, &bs->listen_addr, err, sizeof err);
  if (res != ncclSuccess) {
    res = chorus_error(res, "bootstrap: %s", err);
    goto fail;
  }
  chorus_acceptor_init(&bs->acc, bs->listen_fd, bs->secret);
  /* Every peer may connect its transports here at once, a few sockets
   * each (the ring, the network's streams and notes). */
  chorus_acceptor_expect(&bs->acc, 4 * nranks);
  bs->acc.payload_size[CHORUS_HELLO_PEER_FAIL] = CHORUS_FAIL_BYTES;
  reached_root = 1;
  CHECK_GOTO(join_root(bs, uids, nids, k), res, fail);
  joined = 1;
  if (nranks > 1) {
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    CHECK_GOTO(open_to(bs, next, CHORUS_HELLO_PEER_RING, 0, &bs->next_fd, bs->ring_nonce[0],
                       "the bootstrap ring"),
               res, fail);
    CHECK_GOTO(claim(bs, CHORUS_HELLO_PEER_RING, prev, 0, &bs->prev_fd, bs->ring_nonce[1],
                     "the bootstrap ring"),
               res, fail);
    chorus_acceptor_stand(&bs->acc, CHORUS_HELLO_PEER_FAIL, next, bs->ring_nonce[0]);
    chorus_acceptor_stand(&bs->acc, CHORUS_HELLO_PEER_FAIL, prev, bs->ring_nonce[1]);
    bs->ring_linked = 1;
  }
  char a[CHORUS_ADDR_STRLEN];
  INFO(CHORUS_BOOTSTRAP, "bootstrap: rank %d of %d listening on %s, ring connected", rank, nranks,
       chorus_sock_str(&bs->listen_addr, a, sizeof a));
  *out = bs;
  return ncclSuccess;
fail:
  if (joined) chorus_bootstrap_fail(bs); /* the others learn why, not only that */
  chorus_bootstrap_destroy(bs);
  if (!reached_root && !((uids[0].flags & CHORUS_UID_FIXED_ROOT) && rank == 0))
    chorus_bootstrap_give_up(uids, nids, nranks, rank);
  return res;
}

/* The ring ended under this rank: the neighbour's word of why, when it
 * comes in a moment, else what the socket said. */
static ncclResult_t ring_broke(chorus_bootstrap *bs, ncclResult_t res, const char *what, int peer,
                               const char *err) {
  const ncclResult_t heard = serve_until(bs, chorus_now_ns() + HEAR_NS);
  if (heard != ncclInProgress) return heard;
  return chorus_error(res, "bootstrap: %s rank %d failed: %s", what, peer, err);
}

/* Sends sbuf to next and receives rbuf from prev at the same time, so large
 * blocks cannot deadlock on full socket buffers; serves the listener
 * meanwhile (a neighbour's failure ends the wait with its cause). */
static ncclResult_t ring_exchange(chorus_bootstrap *bs, const void *sbuf, void *rbuf, size_t size) {
  size_t sent = 0, got = 0;
  char err[256] = "";
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  while (sent < size || got < size) {
    ncclResult_t res = chorus_sock_send_some(bs->next_fd, sbuf, size, &sent, err, sizeof err);
    if (res != ncclSuccess)
      return ring_broke(bs, res, "sending to", (bs->rank + 1) % bs->nranks, err);
    res = chorus_sock_recv_some(bs->prev_fd, rbuf, size, &got, err, sizeof err);
    if (res != ncclSuccess)
      return ring_broke(bs, res, "receiving from", (bs->rank + bs->nranks - 1) % bs->nranks, err);
    if (sent == size && got == size) break;
    if (aborted(bs)) return abort_error();
    if (chorus_expired(dl))
      return chorus_error(ncclRemoteError,
                          "bootstrap: ring exchange with ranks %d/%d stalled for %lld s (a rank "
                          "may have died or stopped calling the same init/split)",
                          (bs->rank + bs->nranks - 1) % bs->nranks, (bs->rank + 1) % bs->nranks,
                          (long long)(bs->timeout_ns / 1000000000));
    struct pollfd p[3] = {{bs->next_fd, sent < size ? POLLOUT : 0, 0},
                          {bs->prev_fd, got < size ? POLLIN : 0, 0},
                          {bs->listen_fd, POLLIN, 0}};
    poll(p, 3, chorus_ms_left(dl, 100));
    res = serve_until(bs, chorus_now_ns());
    if (res != ncclInProgress) return res;
  }
  return ncclSuccess;
}

ncclResult_t chorus_bootstrap_allgather(chorus_bootstrap *bs, void *data, size_t size) {
  int n = bs->nranks, r = bs->rank;
  char *d = data;
  for (int s = 0; s < n - 1; s++) {
    int sblk = (r - s + n) % n, rblk = (r - s - 1 + n) % n;
    CHECK(ring_exchange(bs, d + (size_t)sblk * size, d + (size_t)rblk * size, size));
  }
  return ncclSuccess;
}

ncclResult_t chorus_bootstrap_barrier(chorus_bootstrap *bs) {
  /* n-1 steps of a one-byte token around the ring: a step starts only after
   * the previous one completed on this rank, so the token received in the
   * last step depends on every rank having entered the barrier. */
  char token = 1, in = 0;
  for (int s = 0; s < bs->nranks - 1; s++) CHECK(ring_exchange(bs, &token, &in, 1));
  return ncclSuccess;
}

ncclResult_t chorus_bootstrap_send(chorus_bootstrap *bs, int peer, uint64_t tag, const void *data,
                                   size_t size) {
  int fd;
  char err[256] = "";
  CHECK(open_to(bs, peer, CHORUS_HELLO_PEER_P2P, tag, &fd, NULL, "a bootstrap message"));
  uint64_t len = size;
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  ncclResult_t res = chorus_sock_send_all(fd, &len, sizeof len, dl, err, sizeof err);
  if (res == ncclSuccess) res = chorus_sock_send_all(fd, data, size, dl, err, sizeof err);
  close(fd);
  if (res != ncclSuccess)
    return chorus_error(res, "bootstrap: sending a message to rank %d failed: %s", peer, err);
  return ncclSuccess;
}

ncclResult_t chorus_bootstrap_recv(chorus_bootstrap *bs, int peer, uint64_t tag, void *data,
                                   size_t size) {
  int fd;
  char err[256] = "";
  CHECK(claim(bs, CHORUS_HELLO_PEER_P2P, peer, tag, &fd, NULL, "a bootstrap message"));
  uint64_t len = 0;
  int64_t dl = chorus_now_ns() + bs->timeout_ns;
  ncclResult_t res = chorus_sock_recv_all(fd, &len, sizeof len, dl, err, sizeof err);
  if (res == ncclSuccess && len != size) {
    close(fd);
    return chorus_error(ncclInternalError,
                        "bootstrap: rank %d sent %llu bytes where %zu were expected (tag %llu)",
                        peer, (unsigned long long)len, size, (unsigned long long)tag);
  }
  if (res == ncclSuccess) res = chorus_sock_recv_all(fd, data, size, dl, err, sizeof err);
  close(fd);
  if (res != ncclSuccess)
    return chorus_error(res, "bootstrap: receiving a message from rank %d failed: %s", peer, err);
  return ncclSuccess;
}

ncclResult_t chorus_bootstrap_connect(chorus_bootstrap *bs, int peer, uint64_t tag, int *fd) {
  return open_to(bs, peer, CHORUS_HELLO_PEER_DATA, tag, fd, NULL, "a data connection");
}

ncclResult_t chorus_bootstrap_accept(chorus_bootstrap *bs, int peer, uint64_t tag, int *fd) {
  return claim(bs, CHORUS_HELLO_PEER_DATA, peer, tag, fd, NULL, "a data connection");
}

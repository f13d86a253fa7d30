/*
 * hello.c - see hello.h.
 */
#include "bootstrap/hello.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/misc.h"
#include "util/siphash.h"
#include "util/socket.h"

/* How long a new connection may take to deliver its hello. */
#define HELLO_LIMIT_NS (10ll * 1000000000)

void chorus_acceptor_init(chorus_acceptor *a, int listen_fd, const uint64_t secret[2]) {
  memset(a, 0, sizeof *a);
  a->listen_fd = listen_fd;
  a->secret[0] = secret[0];
  a->secret[1] = secret[1];
  a->max_pending = CHORUS_ACCEPT_MAX_PENDING;
}

void chorus_acceptor_expect(chorus_acceptor *a, int n) {
  if (n > (1 << 16)) n = 1 << 16; /* a bound on descriptors all the same */
  if (n > a->max_pending) a->max_pending = n;
}

void chorus_acceptor_stand(chorus_acceptor *a, uint32_t kind, int from,
                           const uint8_t nonce[CHORUS_NONCE_BYTES]) {
  if (a->nstanding == CHORUS_ACCEPT_STANDING) return;
  chorus_standing *s = &a->standing[a->nstanding++];
  s->kind = kind;
  s->from = from;
  memcpy(s->nonce, nonce, sizeof s->nonce);
}

/* Whether h's mac answers p's challenge or, for a standing kind and
 * sender, that link's (p->standing says which). */
static int answers(const chorus_acceptor *a, chorus_pending *p, const chorus_hello *h) {
  p->standing = -1;
  if (h->mac == chorus_hello_mac(a->secret, p->nonce, h)) return 1;
  for (int i = 0; i < a->nstanding; i++) {
    const chorus_standing *s = &a->standing[i];
    if (s->kind == h->kind && s->from == h->from &&
        h->mac == chorus_hello_mac(a->secret, s->nonce, h)) {
      p->standing = i;
      return 1;
    }
  }
  return 0;
}

void chorus_acceptor_fini(chorus_acceptor *a) {
  for (int i = 0; i < a->npending; i++) close(a->pending[i].fd);
  chorus_free(a->pending);
  a->pending = NULL;
  a->npending = a->cap = 0;
}

/* Dropped connections are news (a stranger, a port scanner, another job
 * with a stale id), but a flood of them must not flood the log: one WARN
 * at most every 10 s per process, counting those it did not show. */
#define DROP_WARN_EVERY_NS (10ll * 1000000000)
static int64_t drop_warned_at;
static uint64_t drops_unshown;

static void drop(chorus_acceptor *a, int i, const char *why) {
  const int64_t now = chorus_now_ns();
  int64_t last = __atomic_load_n(&drop_warned_at, __ATOMIC_RELAXED);
  if ((last == 0 || now - last >= DROP_WARN_EVERY_NS) &&
      __atomic_compare_exchange_n(&drop_warned_at, &last, now, 0, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED)) {
    const uint64_t more = __atomic_exchange_n(&drops_unshown, 0, __ATOMIC_RELAXED);
    WARN("bootstrap: dropped an incoming connection that did not prove it belongs to this job: "
         "%s%s",
         why, more ? " (and more since the last such message)" : "");
    if (more) INFO(CHORUS_BOOTSTRAP, "bootstrap: %llu more dropped", (unsigned long long)more);
  } else {
    __atomic_add_fetch(&drops_unshown, 1, __ATOMIC_RELAXED);
  }
  close(a->pending[i].fd);
  a->pending[i] = a->pending[--a->npending];
}

ncclResult_t chorus_acceptor_adopt(chorus_acceptor *a, int fd) {
  if (a->npending >= a->max_pending) {
    int oldest = 0;
    for (int i = 1; i < a->npending; i++)
      if (a->pending[i].deadline < a->pending[oldest].deadline) oldest = i;
    drop(a, oldest, "too many connections waiting for their hello");
  }
  if (a->npending == a->cap) {
    int cap = a->cap ? 2 * a->cap : 16;
    chorus_pending *p = chorus_calloc((size_t)cap, sizeof *p);
    if (!p) {
      close(fd);
      return chorus_error(ncclSystemError, "bootstrap: out of memory accepting a connection");
    }
    if (a->npending) memcpy(p, a->pending, (size_t)a->npending * sizeof *p);
    chorus_free(a->pending);
    a->pending = p;
    a->cap = cap;
  }
  chorus_pending *p = &a->pending[a->npending++];
  p->fd = fd;
  p->got = 0;
  p->standing = -1;
  p->deadline = chorus_now_ns() + HELLO_LIMIT_NS;
  /* The challenge: a fresh socket takes these few bytes at once. */
  ncclResult_t res = chorus_random_bytes(p->nonce, sizeof p->nonce);
  if (res != ncclSuccess) {
    close(fd);
    a->npending--;
    return res;
  }
  if (send(fd, p->nonce, sizeof p->nonce, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof p->nonce)
    drop(a, a->npending - 1, "gone before its challenge");
  return ncclSuccess;
}

uint64_t chorus_hello_mac(const uint64_t secret[2], const uint8_t nonce[CHORUS_NONCE_BYTES],
                          const chorus_hello *h) {
  struct {
    uint8_t nonce[CHORUS_NONCE_BYTES];
    uint32_t magic, kind;
    int32_t from, nranks;
    uint64_t tag;
  } m;
  memset(&m, 0, sizeof m);
  memcpy(m.nonce, nonce, sizeof m.nonce);
  m.magic = h->magic;
  m.kind = h->kind;
  m.from = h->from;
  m.nranks = h->nranks;
  m.tag = h->tag;
  return chorus_siphash(secret, &m, sizeof m);
}

/* Reads what is available on pending[i]. Returns 1 when complete and valid
 * (moved to out), 0 when more is needed, -1 when the connection was dropped. */
static int advance(chorus_acceptor *a, int i, chorus_arrival *out) {
  chorus_pending *p = &a->pending[i];
  size_t want = sizeof(chorus_hello);
  if (p->got >= sizeof(chorus_hello)) {
    chorus_hello h;
    memcpy(&h, p->buf, sizeof h);
    want += a->payload_size[h.kind < 8 ? h.kind : 0];
  }
  for (;;) {
    ssize_t n = recv(p->fd, p->buf + p->got, want - p->got, 0);
    if (n > 0) {
      p->got += (size_t)n;
    } else if (n == 0) {
      drop(a, i, "closed before its hello");
      return -1;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else {
      drop(a, i, strerror(errno));
      return -1;
    }
    if (p->got == sizeof(chorus_hello)) {
      chorus_hello h;
      memcpy(&h, p->buf, sizeof h);
      if (h.magic != CHORUS_HELLO_MAGIC) {
        drop(a, i, "not a Chorus hello (wrong magic)");
        return -1;
      }
      if (!answers(a, p, &h)) {
        drop(a, i, "wrong answer to its challenge (another job, a stale id or a replay)");
        return -1;
      }
      if (h.kind == 0 || h.kind >= 8 || a->payload_size[h.kind] > CHORUS_HELLO_MAX_PAYLOAD) {
        drop(a, i, "unknown hello kind");
        return -1;
      }
      want += a->payload_size[h.kind];
    }
    if (p->got == want && want >= sizeof(chorus_hello)) {
      memcpy(&out->hello, p->buf, sizeof out->hello);
      memcpy(out->payload, p->buf + sizeof(chorus_hello), want - sizeof(chorus_hello));
      memcpy(out->nonce, p->standing < 0 ? p->nonce : a->standing[p->standing].nonce,
             sizeof out->nonce);
      out->fd = p->fd;
      a->pending[i] = a->pending[--a->npending];
      return 1;
    }
  }
}

ncclResult_t chorus_acceptor_poll(chorus_acceptor *a, int64_t deadline, const int *abort_flag,
                                  chorus_arrival *out) {
  for (;;) {
    if (abort_flag && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE)) return ncclInProgress;
    /* Accept everything waiting. */
    for (;;) {
      int fd;
      char err[128];
      if (chorus_sock_accept(a->listen_fd, 0, &fd, err, sizeof err) != ncclSuccess) break;
      CHECK(chorus_acceptor_adopt(a, fd));
    }
    int64_t now = chorus_now_ns();
    for (int i = 0; i < a->npending;) {
      int r = advance(a, i, out);
      if (r == 1) return ncclSuccess;
      if (r == -1) continue;
      if (now > a->pending[i].deadline) {
        drop(a, i, "no complete hello within 10 s");
        continue;
      }
      i++;
    }
    if (chorus_expired(deadline)) return ncclInProgress;
    /* Sleep until the listener or a pending connection has something. */
    struct pollfd fds[65];
    int nf = 0;
    fds[nf++] = (struct pollfd){a->listen_fd, POLLIN, 0};
    for (int i = 0; i < a->npending && nf < 65; i++)
      fds[nf++] = (struct pollfd){a->pending[i].fd, POLLIN, 0};
    poll(fds, (nfds_t)nf, chorus_ms_left(deadline, 100));
  }
}

ncclResult_t chorus_hello_send(int fd, uint32_t kind, const uint64_t secret[2], int from,
                               int nranks, uint64_t tag, const void *payload, size_t size,
                               int64_t deadline, char *err, size_t errlen) {
  uint8_t nonce[CHORUS_NONCE_BYTES];
  ncclResult_t res = chorus_sock_recv_all(fd, nonce, sizeof nonce, deadline, err, errlen);
  if (res != ncclSuccess) return res;
  return chorus_hello_answer(fd, nonce, kind, secret, from, nranks, tag, payload, size, deadline,
                             err, errlen);
}

ncclResult_t chorus_hello_answer(int fd, const uint8_t nonce[CHORUS_NONCE_BYTES], uint32_t kind,
                                 const uint64_t secret[2], int from, int nranks, uint64_t tag,
                                 const void *payload, size_t size, int64_t deadline, char *err,
                                 size_t errlen) {
  unsigned char buf[sizeof(chorus_hello) + CHORUS_HELLO_MAX_PAYLOAD];
  chorus_hello h = {CHORUS_HELLO_MAGIC, kind, 0, 0, from, nranks, tag};
  h.mac = chorus_hello_mac(secret, nonce, &h);
  memcpy(buf, &h, sizeof h);
  if (size) memcpy(buf + sizeof h, payload, size);
  return chorus_sock_send_all(fd, buf, sizeof h + size, deadline, err, errlen);
}

/*
 * pump.c - the TCP transport's pump threads (NCCL_SOCKET_NTHREADS): each
 * moves its share of every peer's streams whole, so that a rank's bytes
 * go to and come from the kernel on several cores at once while the
 * executor reduces and copies. The protocol between them is in
 * net_impl.h.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "transport/net/net_impl.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"

#define NAP_MS 100 /* a pump's longest sleep: it looks at `stop` between */
/* A pump polls its sockets this long after it last moved bytes before it
 * sleeps: waking a thread for each message of a transfer costs about as
 * much as moving the message. */
#define SPIN_NS (1000 * 1000ll)

static void kick(int fd) {
  const uint64_t one = 1;
  while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

net_pump *net_pump_of(net_state *s, int stream) {
  return &s->pumps[stream % s->npumps];
}

void net_pump_kick_if_asleep(net_pump *p) {
  if (__atomic_load_n(&p->asleep, __ATOMIC_SEQ_CST) &&
      __atomic_exchange_n(&p->asleep, 0, __ATOMIC_SEQ_CST))
    kick(p->kick_fd);
}

void net_pump_kick_starved(net_pump *p, net_stream *st) {
  if (__atomic_load_n(&st->starved, __ATOMIC_SEQ_CST) &&
      __atomic_exchange_n(&st->starved, 0, __ATOMIC_SEQ_CST))
    kick(p->kick_fd);
}

/* Once until the executor drains it: its poll returns, its next pass
 * looks at what moved. */
static void wake_exec(net_state *s) {
  if (!__atomic_exchange_n(&s->wake_pending, 1, __ATOMIC_SEQ_CST)) kick(s->wake_fd);
}

void net_wake_drain(net_state *s) {
  if (!s->npumps) return;
  if (__atomic_load_n(&s->wake_pending, __ATOMIC_RELAXED) &&
      __atomic_exchange_n(&s->wake_pending, 0, __ATOMIC_SEQ_CST))
    s->wake_drain = 1;
  uint64_t v;
  /* A pump that set wake_pending writes just after: until its write is
   * read, try again each pass. */
  if (s->wake_drain && read(s->wake_fd, &v, sizeof v) == sizeof v) s->wake_drain = 0;
}

void net_pumps_kick(net_state *s) {
  for (int id = 0; id < s->npumps; id++) net_pump_kick_if_asleep(&s->pumps[id]);
}

/* Moves every stream of p that no one else holds, while the executor
 * leaves the large frames to the pumps. Returns whether any bytes moved. */
static int pump_pass(net_pump *p) {
  int moved = 0;
  if (!net_helped(p->s)) return 0;
  for (int i = 0; i < p->nitems; i++) {
    const struct net_pump_item *it = &p->items[i];
    net_stream *ss = &it->send->st[it->k], *rs = &it->recv->st[it->k];
    if (net_try_lock(ss)) {
      if (!net_ended(ss)) moved |= net_push_stream(it->send, ss, SIZE_MAX);
      net_unlock(ss);
    }
    if (net_try_lock(rs)) {
      if (!net_ended(rs)) moved |= net_pull_stream(it->recv, rs, SIZE_MAX);
      net_unlock(rs);
    }
  }
  return moved;
}

static uint64_t next_of(net_stream *st) {
  return __atomic_load_n(&st->next, __ATOMIC_RELAXED);
}

/* What each socket of p waits for, read after p announced its sleep (so
 * work published later comes with a kick): nothing while the executor
 * moves every frame itself (setting `helped` kicks). */
static void pump_watch(net_pump *p) {
  const int helped = __atomic_load_n(&p->s->helped, __ATOMIC_SEQ_CST);
  for (int i = 0; i < p->nitems; i++) {
    if (!helped) {
      p->pfd[i] = (struct pollfd){-1, 0, 0};
      continue;
    }
    const struct net_pump_item *it = &p->items[i];
    net_conn *sc = it->send, *rc = it->recv;
    net_stream *ss = &sc->st[it->k], *rs = &rc->st[it->k];
    short ev = 0;
    if (!net_ended(ss) && next_of(ss) < __atomic_load_n(&sc->posted, __ATOMIC_SEQ_CST))
      ev |= POLLOUT;
    if (!net_ended(rs)) {
      if (next_of(rs) >= __atomic_load_n(&rc->done, __ATOMIC_SEQ_CST) + rc->nslots)
        __atomic_store_n(&rs->starved, 1, __ATOMIC_SEQ_CST);
      if (next_of(rs) < __atomic_load_n(&rc->done, __ATOMIC_SEQ_CST) + rc->nslots) ev |= POLLIN;
    }
    /* No events: not watched (a hung-up socket would report at once). */
    p->pfd[i] = (struct pollfd){ev ? ss->fd : -1, ev, 0};
  }
  p->pfd[p->nitems] = (struct pollfd){p->kick_fd, POLLIN, 0};
}

static void *pump_main(void *arg) {
  net_pump *p = arg;
  net_state *s = p->s;
  int64_t moved_at = chorus_now_ns();
  while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
    if (pump_pass(p)) {
      wake_exec(s);
      moved_at = chorus_now_ns();
      continue;
    }
    if (chorus_now_ns() - moved_at < SPIN_NS) {
      sched_yield(); /* polite to a rank that shares the core */
      continue;
    }
    __atomic_store_n(&p->asleep, 1, __ATOMIC_SEQ_CST);
    pump_watch(p);
    const int n = poll(p->pfd, (nfds_t)p->nitems + 1, NAP_MS);
    __atomic_store_n(&p->asleep, 0, __ATOMIC_SEQ_CST);
    uint64_t v;
    if (n > 0 && (p->pfd[p->nitems].revents & POLLIN)) (void)!read(p->kick_fd, &v, sizeof v);
  }
  return NULL;
}

ncclResult_t net_pumps_start(net_state *s, int npumps) {
  if ((s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
    return chorus_error(ncclSystemError, "NET transport: eventfd: %s", strerror(errno));
  if (!(s->pumps = chorus_calloc((size_t)npumps, sizeof *s->pumps)))
    return chorus_error(ncclSystemError, "NET transport: out of memory");
  s->npumps = npumps;
  for (int id = 0; id < npumps; id++) s->pumps[id].kick_fd = -1;
  const int per = (s->nstreams + npumps - 1) / npumps; /* streams per pump, at most */
  for (int id = 0; id < npumps; id++) {
    net_pump *p = &s->pumps[id];
    p->s = s;
    p->id = id;
    if ((p->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
      return chorus_error(ncclSystemError, "NET transport: eventfd: %s", strerror(errno));
    const size_t cap = (size_t)s->npeers * CHORUS_NCHANNELS * (size_t)per;
    p->items = chorus_calloc(cap, sizeof *p->items);
    p->pfd = chorus_calloc(cap + 1, sizeof *p->pfd);
    if (!p->items || !p->pfd) return chorus_error(ncclSystemError, "NET transport: out of memory");
    for (int peer = 0; peer < s->nranks; peer++) {
      if (!s->is_peer[peer]) continue;
      for (int ch = 0; ch < CHORUS_NCHANNELS; ch++)
        for (int k = id; k < s->nstreams; k += npumps)
          p->items[p->nitems++] =
              (struct net_pump_item){net_conn_of(s, peer, ch, CHORUS_DIR_SEND),
                                     net_conn_of(s, peer, ch, CHORUS_DIR_RECV), k};
    }
  }
  for (int id = 0; id < npumps; id++) {
    net_pump *p = &s->pumps[id];
    if (pthread_create(&p->thread, NULL, pump_main, p) != 0)
      return chorus_error(ncclSystemError, "NET transport: cannot start a socket thread");
    p->started = 1;
  }
  return ncclSuccess;
}

void net_pumps_stop(net_state *s) {
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
  for (int id = 0; s->pumps && id < s->npumps; id++) {
    net_pump *p = &s->pumps[id];
    if (p->started) {
      kick(p->kick_fd);
      pthread_join(p->thread, NULL);
    }
    if (p->kick_fd >= 0) close(p->kick_fd);
    chorus_free(p->items);
    chorus_free(p->pfd);
  }
  chorus_free(s->pumps);
  s->pumps = NULL;
  s->npumps = 0;
  if (s->wake_fd >= 0) close(s->wake_fd);
  s->wake_fd = -1;
}

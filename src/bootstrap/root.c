/*
 * root.c - the rendezvous root thread (see root.h).
 */
#include "bootstrap/root.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/hello.h"
#include "bootstrap/wire.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/misc.h"
#include "util/param.h"

typedef struct root {
  int listen_fd;
  chorus_sockaddr addr;
  uint64_t secret[2];
  chorus_acceptor acc;
  int64_t timeout_ns;
  int64_t deadline; /* set at the first arrival */
  /* Learned from the first arrival; later ones must agree. */
  int nranks, nroots, index, first, count;
  chorus_sockaddr root0;
  uint64_t root0_secret[2];
  /* Per rank of this root's block: socket (-1 until arrived). Root 0 also
   * tracks the sub-roots' sockets. */
  int *rank_fd;
  int *subroot_fd;
  chorus_sockaddr *table; /* nranks entries */
  char failure[300];      /* set when the rendezvous must fail */
  ncclResult_t cause;     /* a failure of the root itself (out of memory), or success */
  int fixed;              /* bound to a fixed address (NCCL_COMM_ID) */
} root;

static void root_free(root *r) {
  if (r->rank_fd)
    for (int i = 0; i < r->count; i++)
      if (r->rank_fd[i] >= 0) close(r->rank_fd[i]);
  if (r->subroot_fd)
    for (int i = 0; i < r->nroots; i++)
      if (r->subroot_fd[i] >= 0) close(r->subroot_fd[i]);
  chorus_acceptor_fini(&r->acc);
  if (r->listen_fd >= 0) close(r->listen_fd);
  chorus_free(r->rank_fd);
  chorus_free(r->subroot_fd);
  chorus_free(r->table);
  chorus_free(r);
}

/* Sends status + (on success) the table to one socket; errors are ignored:
 * a rank that vanished will notice on its own. */
static void reply(root *r, int fd, int status) {
  if (fd < 0) return;
  chorus_root_reply rep;
  memset(&rep, 0, sizeof rep);
  rep.status = status;
  snprintf(rep.msg, sizeof rep.msg, "%s", r->failure);
  char err[128];
  int64_t dl = chorus_now_ns() + r->timeout_ns;
  if (chorus_sock_send_all(fd, &rep, sizeof rep, dl, err, sizeof err) != ncclSuccess) return;
  if (status == ncclSuccess)
    chorus_sock_send_all(fd, r->table, (size_t)r->nranks * sizeof *r->table, dl, err, sizeof err);
}

static void reply_all(root *r, int status) {
  for (int i = 0; i < r->count; i++) reply(r, r->rank_fd[i], status);
  if (r->subroot_fd)
    for (int i = 1; i < r->nroots; i++) reply(r, r->subroot_fd[i], status);
}

static int fail(root *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(root *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->failure, sizeof r->failure, fmt, ap);
  va_end(ap);
  return -1;
}

/* The roots this process hosts, by secret, so that its own ranks can ask
 * for a root's cause: a failure of the root itself (out of memory) is a
 * failure of their process, which they return as it is, not as
 * ncclRemoteError. A ring: a root's entry lives from its start until 64
 * roots later. */
#define ROOTS_KEPT 64
static struct {
  pthread_mutex_t lock;
  pthread_cond_t done;
  struct {
    uint64_t secret[2];
    int running;
    ncclResult_t cause;
  } ring[ROOTS_KEPT];
  unsigned next;
} local_roots = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {{{0, 0}, 0, ncclSuccess}}, 0};

static void roots_started(const uint64_t secret[2]) {
  pthread_mutex_lock(&local_roots.lock);
  const unsigned i = local_roots.next++ % ROOTS_KEPT;
  memcpy(local_roots.ring[i].secret, secret, sizeof local_roots.ring[i].secret);
  local_roots.ring[i].running = 1;
  local_roots.ring[i].cause = ncclSuccess;
  pthread_mutex_unlock(&local_roots.lock);
}

static int roots_find(const uint64_t secret[2]) {
  for (int i = 0; i < ROOTS_KEPT; i++)
    if ((local_roots.ring[i].running || local_roots.ring[i].cause != ncclSuccess) &&
        !memcmp(local_roots.ring[i].secret, secret, sizeof local_roots.ring[i].secret))
      return i;
  return -1;
}

static void roots_ended(const root *r) {
  pthread_mutex_lock(&local_roots.lock);
  const int i = roots_find(r->secret);
  if (i >= 0) {
    local_roots.ring[i].running = 0;
    local_roots.ring[i].cause = r->cause;
  }
  pthread_cond_broadcast(&local_roots.done);
  pthread_mutex_unlock(&local_roots.lock);
}

ncclResult_t chorus_root_local_cause(const uint64_t secret[2]) {
  const int64_t dl = chorus_now_ns() + 2000000000ll; /* it is ending: its ranks heard */
  ncclResult_t cause = ncclSuccess;
  pthread_mutex_lock(&local_roots.lock);
  for (int i; (i = roots_find(secret)) >= 0;) {
    if (!local_roots.ring[i].running) {
      cause = local_roots.ring[i].cause;
      break;
    }
    if (chorus_expired(dl)) break;
    const struct timespec ts = chorus_realtime_in_ms(10);
    pthread_cond_timedwait(&local_roots.done, &local_roots.lock, &ts);
  }
  pthread_mutex_unlock(&local_roots.lock);
  return cause;
}

/* First arrival fixes the job's shape. Returns -1 if inconsistent. */
static int learn_shape(root *r, const chorus_hello *h, const chorus_root_join *j) {
  if (r->rank_fd) {
    if (h->nranks != r->nranks || j->nroots != r->nroots || j->root_index != r->index)
      return fail(r, "ranks disagree on the communicator size or the number of ids");
    return 0;
  }
  if (h->nranks < 1 || j->nroots < 1 || j->nroots > h->nranks || j->root_index < 0 ||
      j->root_index >= j->nroots)
    return fail(r, "invalid rank count or id count in a join request");
  r->nranks = h->nranks;
  r->nroots = j->nroots;
  r->index = j->root_index;
  r->root0 = j->root0;
  memcpy(r->root0_secret, j->root0_secret, sizeof r->root0_secret);
  chorus_root_block(r->nranks, r->nroots, r->index, &r->first, &r->count);
  r->rank_fd = chorus_malloc((size_t)r->count * sizeof(int));
  r->table = chorus_calloc((size_t)r->nranks, sizeof *r->table);
  if (r->index == 0 && r->nroots > 1)
    r->subroot_fd = chorus_malloc((size_t)r->nroots * sizeof(int));
  if (!r->rank_fd || !r->table || (r->index == 0 && r->nroots > 1 && !r->subroot_fd)) {
    r->cause = ncclSystemError;
    return fail(r, "root out of memory");
  }
  for (int i = 0; i < r->count; i++) r->rank_fd[i] = -1;
  if (r->subroot_fd)
    for (int i = 0; i < r->nroots; i++) r->subroot_fd[i] = -1;
  r->deadline = chorus_now_ns() + r->timeout_ns;
  return 0;
}

static int add_rank(root *r, chorus_arrival *a) {
  const chorus_root_join *j = (const chorus_root_join *)a->payload;
  if (learn_shape(r, &a->hello, j) != 0) {
    close(a->fd);
    return -1;
  }
  int rank = a->hello.from;
  if (rank < r->first || rank >= r->first + r->count) {
    close(a->fd);
    return fail(r, "rank %d is outside the range this id serves", rank);
  }
  if (r->rank_fd[rank - r->first] >= 0) {
    close(a->fd);
    return fail(r, "rank %d joined twice (two processes were given the same rank)", rank);
  }
  r->rank_fd[rank - r->first] = a->fd;
  r->table[rank] = j->listen;
  return 0;
}

/* Root 0 receiving root k's block. The sub-root may be complete before any
 * rank of root 0's own block has arrived, so it can teach the shape too. */
static int add_subroot(root *r, chorus_arrival *a) {
  int k = a->hello.from;
  int32_t hdr[3];
  memcpy(hdr, a->payload, sizeof hdr);
  chorus_root_join shape;
  memset(&shape, 0, sizeof shape);
  shape.nroots = hdr[2];
  shape.root_index = 0;
  if (learn_shape(r, &a->hello, &shape) != 0) {
    close(a->fd);
    return -1;
  }
  if (!r->subroot_fd || k <= 0 || k >= r->nroots || r->subroot_fd[k] >= 0) {
    close(a->fd);
    return fail(r, "unexpected sub-root connection");
  }
  int first, count;
  chorus_root_block(r->nranks, r->nroots, k, &first, &count);
  char err[128];
  if (chorus_sock_recv_all(a->fd, r->table + first, (size_t)count * sizeof *r->table,
                           chorus_now_ns() + r->timeout_ns, err, sizeof err) != ncclSuccess) {
    close(a->fd);
    return fail(r, "a sub-root failed while sending its block: %s", err);
  }
  r->subroot_fd[k] = a->fd;
  return 0;
}

static int complete(const root *r) {
  if (!r->rank_fd) return 0;
  for (int i = 0; i < r->count; i++)
    if (r->rank_fd[i] < 0) return 0;
  if (r->subroot_fd)
    for (int i = 1; i < r->nroots; i++)
      if (r->subroot_fd[i] < 0) return 0;
  return 1;
}

/* Names the ranks that never arrived, e.g. "2, 5, 6". */
static void describe_missing(root *r) {
  char list[200] = "";
  size_t o = 0;
  int n = 0;
  for (int i = 0; i < r->count; i++) {
    if (r->rank_fd[i] >= 0) continue;
    if (n++ < 16 && o < sizeof list - 16)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", o ? ", " : "", r->first + i);
  }
  int subs = 0;
  if (r->subroot_fd)
    for (int i = 1; i < r->nroots; i++) subs += r->subroot_fd[i] < 0;
  char a[CHORUS_ADDR_STRLEN];
  snprintf(r->failure, sizeof r->failure,
           "%d rank(s) never reached the rendezvous at %s within %lld s: %s%s%s. Check that "
           "every rank was started with the same id and can reach this address; raise "
           "CHORUS_BOOTSTRAP_TIMEOUT if they start slowly",
           n, chorus_sock_str(&r->addr, a, sizeof a), (long long)(r->timeout_ns / 1000000000),
           n ? list : "-", n > 16 ? ", ..." : "", subs ? " (and some sub-roots)" : "");
}

/* Sub-root: hand the block to root 0 and wait for the full table. */
static int exchange_with_root0(root *r) {
  char err[200];
  int fd = -1;
  int64_t dl = chorus_now_ns() + r->timeout_ns;
  int32_t hdr[3] = {r->first, r->count, r->nroots};
  chorus_root_reply rep;
  if (chorus_sock_connect(&r->root0, dl, &fd, err, sizeof err) != ncclSuccess ||
      chorus_hello_send(fd, CHORUS_HELLO_ROOT_SUBROOT, r->root0_secret, r->index, r->nranks, 0, hdr,
                        sizeof hdr, dl, err, sizeof err) != ncclSuccess ||
      chorus_sock_send_all(fd, r->table + r->first, (size_t)r->count * sizeof *r->table, dl, err,
                           sizeof err) != ncclSuccess ||
      chorus_sock_recv_all(fd, &rep, sizeof rep, dl + r->timeout_ns, err, sizeof err) !=
          ncclSuccess) {
    if (fd >= 0) close(fd);
    return fail(r, "sub-root could not exchange its block with root 0: %s", err);
  }
  if (rep.status != ncclSuccess) {
    close(fd);
    return fail(r, "%s", rep.msg);
  }
  ncclResult_t res =
      chorus_sock_recv_all(fd, r->table, (size_t)r->nranks * sizeof *r->table, dl, err, sizeof err);
  close(fd);
  return res == ncclSuccess ? 0 : fail(r, "root 0 failed while sending the table: %s", err);
}

/* After a failed rendezvous the root stays a while to tell ranks that come
 * late that it failed, at once, instead of leaving them to retry until
 * their own timeout. A fixed address (NCCL_COMM_ID) is released sooner:
 * the program's next communicator needs it. */
#define LINGER_NS       (30ll * 1000000000)
#define LINGER_FIXED_NS (2ll * 1000000000)

static void linger(root *r) {
  const int64_t dl =
      chorus_now_ns() + CHORUS_MIN(r->timeout_ns, r->fixed ? LINGER_FIXED_NS : LINGER_NS);
  for (;;) {
    chorus_arrival a;
    if (chorus_acceptor_poll(&r->acc, dl, NULL, &a) != ncclSuccess) return;
    if (a.hello.kind == CHORUS_HELLO_ROOT_RANK || a.hello.kind == CHORUS_HELLO_ROOT_SUBROOT)
      reply(r, a.fd, ncclRemoteError);
    close(a.fd);
  }
}

static void *root_main(void *arg) {
  root *r = arg;
  chorus_log_ctx_set((chorus_log_ctx){-1, 0, NULL, 0});
  int failed = 0;
  while (!complete(r) && !failed) {
    chorus_arrival a;
    int64_t dl = r->rank_fd ? r->deadline : CHORUS_NO_DEADLINE;
    ncclResult_t res = chorus_acceptor_poll(&r->acc, dl, NULL, &a);
    if (res == ncclInProgress) { /* deadline */
      describe_missing(r);
      failed = 1;
      break;
    }
    if (res != ncclSuccess) {
      r->cause = res;
      fail(r, "root accept loop failed");
      failed = 1;
      break;
    }
    if (a.hello.kind == CHORUS_HELLO_ROOT_RANK) {
      /* The rest of the job may arrive at once. */
      chorus_acceptor_expect(&r->acc, a.hello.nranks + 16);
      failed = add_rank(r, &a) != 0;
    } else if (a.hello.kind == CHORUS_HELLO_ROOT_SUBROOT) {
      failed = add_subroot(r, &a) != 0;
    } else if (a.hello.kind == CHORUS_HELLO_ROOT_FAIL) {
      char why[CHORUS_FAIL_BYTES];
      memcpy(why, a.payload, sizeof why);
      why[sizeof why - 1] = '\0';
      close(a.fd);
      failed = fail(r, "rank %d gave up before the rendezvous ended: %s", a.hello.from, why);
    } else {
      close(a.fd);
    }
  }
  if (!failed && r->index != 0) failed = exchange_with_root0(r) != 0;
  if (failed) WARN("bootstrap root: %s", r->failure);
  roots_ended(r); /* before the answers: a rank of this process may ask for its cause */
  if (r->rank_fd) reply_all(r, failed ? ncclRemoteError : ncclSuccess);
  if (failed) linger(r);
  INFO(CHORUS_BOOTSTRAP, "bootstrap root %d of %d: rendezvous of %d ranks %s", r->index, r->nroots,
       r->nranks, failed ? "failed" : "done");
  root_free(r);
  return NULL;
}

ncclResult_t chorus_root_start(const chorus_sockaddr *bind_addr, const uint64_t secret[2],
                               chorus_sockaddr *bound) {
  char err[256];
  root *r = chorus_calloc(1, sizeof *r);
  if (!r) return chorus_error(ncclSystemError, "bootstrap: out of memory starting the root");
  r->listen_fd = -1;
  r->secret[0] = secret[0];
  r->secret[1] = secret[1];
  r->timeout_ns = chorus_param_int(CHORUS_P_BOOTSTRAP_TIMEOUT) * 1000000000ll;
  r->fixed = chorus_sock_port(bind_addr) != 0;
  if (r->timeout_ns <= 0) r->timeout_ns = 300ll * 1000000000;
  /* A fixed address (NCCL_COMM_ID) may still be held by the previous
   * communicator's root for a moment: retry the bind briefly. */
  ncclResult_t res;
  int64_t dl = chorus_now_ns() + 5ll * 1000000000;
  while ((res = chorus_sock_listen(bind_addr, &r->listen_fd, &r->addr, err, sizeof err)) !=
             ncclSuccess &&
         chorus_sock_port(bind_addr) != 0 && !chorus_expired(dl)) {
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  if (res != ncclSuccess) {
    chorus_free(r);
    return chorus_error(res, "bootstrap: cannot start the rendezvous root: %s", err);
  }
  chorus_acceptor_init(&r->acc, r->listen_fd, secret);
  r->acc.payload_size[CHORUS_HELLO_ROOT_RANK] = sizeof(chorus_root_join);
  r->acc.payload_size[CHORUS_HELLO_ROOT_SUBROOT] = 3 * sizeof(int32_t);
  r->acc.payload_size[CHORUS_HELLO_ROOT_FAIL] = CHORUS_FAIL_BYTES;
  *bound = r->addr;
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  roots_started(secret);
  int rc = pthread_create(&th, &attr, root_main, r);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    roots_ended(r);
    root_free(r);
    return chorus_error(ncclSystemError, "bootstrap: cannot start the root thread");
  }
  char a[CHORUS_ADDR_STRLEN];
  INFO(CHORUS_BOOTSTRAP, "bootstrap root listening on %s", chorus_sock_str(bound, a, sizeof a));
  return ncclSuccess;
}

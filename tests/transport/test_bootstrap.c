/*
 * test_bootstrap.c - the bootstrap on its own: rendezvous with one and with
 * several roots, allgather/barrier/tagged messages/connection service for
 * 1..8 ranks, and robustness: garbage, silent and wrong-secret connections
 * to the root and to rank listeners are dropped without disturbing the job;
 * a unique id whose root is gone fails at once; a rank that gives up
 * before the rendezvous fails it for the others at once; a rank whose
 * init fails after it is named, with its cause, by every other rank.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "unit.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/socket.h"

typedef struct {
  chorus_uid uids[3];
  int nids, rank, nranks;
  int ok;
  chorus_bootstrap *bs;
} rank_arg;

static int silent_fds[16], nsilent;

/* Opens connections that misbehave: random bytes, a hello with a wrong
 * mac, and one that never says anything (kept open during the test). */
static void misbehave(const chorus_sockaddr *addr) {
  char err[128];
  int fd;
  if (chorus_sock_connect(addr, chorus_now_ns() + 1000000000ll, &fd, err, sizeof err) ==
      ncclSuccess) {
    char junk[100];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
    chorus_sock_send_all(fd, junk, sizeof junk, chorus_now_ns() + 1000000000ll, err, sizeof err);
    close(fd);
  }
  if (chorus_sock_connect(addr, chorus_now_ns() + 1000000000ll, &fd, err, sizeof err) ==
      ncclSuccess) {
    chorus_hello h = {CHORUS_HELLO_MAGIC, CHORUS_HELLO_ROOT_RANK, 12345, 0, 0, 2, 0};
    chorus_sock_send_all(fd, &h, sizeof h, chorus_now_ns() + 1000000000ll, err, sizeof err);
    close(fd);
  }
  if (nsilent < 16 && chorus_sock_connect(addr, chorus_now_ns() + 1000000000ll, &fd, err,
                                          sizeof err) == ncclSuccess)
    silent_fds[nsilent++] = fd;
}

static void *rank_main(void *p) {
  rank_arg *a = p;
  chorus_log_ctx_set((chorus_log_ctx){a->rank, a->nranks, NULL, 0});
  if (chorus_bootstrap_init(&a->bs, a->uids, a->nids, a->nranks, a->rank, NULL) != ncclSuccess)
    return NULL;
  chorus_bootstrap *bs = a->bs;
  int n = a->nranks, r = a->rank, ok = 1;
  /* Allgather of a block larger than a socket buffer. */
  size_t blk = 300000;
  unsigned char *data = calloc((size_t)n, blk);
  for (size_t i = 0; i < blk; i++) data[(size_t)r * blk + i] = (unsigned char)(r * 7 + i);
  if (chorus_bootstrap_allgather(bs, data, blk) != ncclSuccess) ok = 0;
  for (int q = 0; q < n && ok; q++)
    for (size_t i = 0; i < blk; i += 997)
      if (data[(size_t)q * blk + i] != (unsigned char)(q * 7 + i)) ok = 0;
  free(data);
  /* Rank 0 gets garbage on its listener before the tagged exchange. */
  if (r == 1 % n) misbehave(&bs->addrs[0]);
  if (chorus_bootstrap_barrier(bs) != ncclSuccess) ok = 0;
  /* Tagged messages: each rank sends two tags to its right neighbour and
   * receives them from its left in the opposite order. */
  if (n > 1) {
    int right = (r + 1) % n, left = (r + n - 1) % n;
    int v1 = r * 10 + 1, v2 = r * 10 + 2, g1 = 0, g2 = 0;
    if (chorus_bootstrap_send(bs, right, 1, &v1, sizeof v1) != ncclSuccess) ok = 0;
    if (chorus_bootstrap_send(bs, right, 2, &v2, sizeof v2) != ncclSuccess) ok = 0;
    if (chorus_bootstrap_recv(bs, left, 2, &g2, sizeof g2) != ncclSuccess) ok = 0;
    if (chorus_bootstrap_recv(bs, left, 1, &g1, sizeof g1) != ncclSuccess) ok = 0;
    if (g1 != left * 10 + 1 || g2 != left * 10 + 2) ok = 0;
    /* Connection service: lower rank connects, higher accepts. */
    int fd = -1;
    char err[128];
    if (r < right) {
      if (chorus_bootstrap_connect(bs, right, 77, &fd) != ncclSuccess) ok = 0;
      int x = 42;
      if (fd >= 0 && chorus_sock_send_all(fd, &x, sizeof x, CHORUS_NO_DEADLINE, err, sizeof err))
        ok = 0;
    }
    if (left < r) {
      int fd2 = -1, x = 0;
      if (chorus_bootstrap_accept(bs, left, 77, &fd2) != ncclSuccess) ok = 0;
      if (fd2 >= 0 && chorus_sock_recv_all(fd2, &x, sizeof x, CHORUS_NO_DEADLINE, err, sizeof err))
        ok = 0;
      if (x != 42) ok = 0;
      if (fd2 >= 0) close(fd2);
    }
    if (fd >= 0) close(fd);
  }
  if (chorus_bootstrap_barrier(bs) != ncclSuccess) ok = 0;
  a->ok = ok;
  return NULL;
}

static int run(int nranks, int nids, int garbage_to_root) {
  rank_arg a[8];
  pthread_t th[8];
  chorus_uid uids[3];
  for (int i = 0; i < nids; i++)
    if (chorus_uid_create(&uids[i]) != ncclSuccess) return 0;
  if (garbage_to_root) misbehave(&uids[0].root);
  for (int r = 0; r < nranks; r++) {
    memset(&a[r], 0, sizeof a[r]);
    memcpy(a[r].uids, uids, sizeof uids);
    a[r].nids = nids, a[r].rank = r, a[r].nranks = nranks;
    pthread_create(&th[r], NULL, rank_main, &a[r]);
  }
  int ok = 1;
  for (int r = 0; r < nranks; r++) {
    pthread_join(th[r], NULL);
    ok &= a[r].ok;
  }
  for (int r = 0; r < nranks; r++) chorus_bootstrap_destroy(a[r].bs);
  for (int i = 0; i < nsilent; i++) close(silent_fds[i]);
  nsilent = 0;
  return ok;
}

static void one_root(void) {
  for (int n = 1; n <= 8; n++) EXPECT(run(n, 1, 0));
}

static void several_roots(void) {
  EXPECT(run(5, 2, 0));
  EXPECT(run(7, 3, 0));
  EXPECT(run(3, 3, 0));
}

static void garbage_is_ignored(void) {
  EXPECT(run(4, 1, 1));
  EXPECT(run(3, 2, 1));
}

/* A unique id whose root is gone (nobody listens at its address any
 * more): a rank fails within seconds, not after CHORUS_BOOTSTRAP_TIMEOUT,
 * since such a root listened before the id existed. */
static void refused_root_is_final(void) {
  chorus_uid u;
  memset(&u, 0, sizeof u);
  u.tag = CHORUS_UID_TAG;
  u.version = CHORUS_UID_VERSION;
  u.secret[0] = 1, u.secret[1] = 2;
  char err[128];
  chorus_sockaddr any;
  int fd = -1;
  REQUIRE(chorus_sock_parse("127.0.0.1:0", &any, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_listen(&any, &fd, &u.root, err, sizeof err) == ncclSuccess);
  close(fd); /* the root's process is gone */
  setenv("CHORUS_BOOTSTRAP_TIMEOUT", "30", 1);
  chorus_bootstrap *bs = NULL;
  const int64_t t0 = chorus_now_ns();
  ncclResult_t r = chorus_bootstrap_init(&bs, &u, 1, 2, 1, NULL);
  const double took = (double)(chorus_now_ns() - t0) / 1e9;
  unsetenv("CHORUS_BOOTSTRAP_TIMEOUT");
  EXPECT(r != ncclSuccess);
  EXPECT(took < 5);
  if (bs) chorus_bootstrap_destroy(bs);
}

typedef struct joiner {
  chorus_uid uid;
  int rank, nranks;
  ncclResult_t res;
  double took;
  char err[512];
} joiner;

static void *join_main(void *p) {
  joiner *j = p;
  chorus_log_ctx_set((chorus_log_ctx){j->rank, j->nranks, j->err, sizeof j->err});
  chorus_bootstrap *bs = NULL;
  const int64_t t0 = chorus_now_ns();
  j->res = chorus_bootstrap_init(&bs, &j->uid, 1, j->nranks, j->rank, NULL);
  j->took = (double)(chorus_now_ns() - t0) / 1e9;
  chorus_bootstrap_destroy(bs);
  return NULL;
}

/* A rank that fails before it reaches the rendezvous tells the root: the
 * others fail at once, told which rank gave up and why, instead of
 * waiting for it until the bootstrap timeout. */
static void give_up_fails_the_rendezvous(void) {
  chorus_uid u;
  REQUIRE(chorus_uid_create(&u) == ncclSuccess);
  setenv("CHORUS_BOOTSTRAP_TIMEOUT", "30", 1);
  joiner j[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    memset(&j[r], 0, sizeof j[r]);
    j[r].uid = u, j[r].rank = r, j[r].nranks = 3;
    pthread_create(&th[r], NULL, join_main, &j[r]);
  }
  char why[256] = "rank 2 of 3: out of memory (a test)";
  chorus_log_ctx old = chorus_log_ctx_set((chorus_log_ctx){2, 3, why, sizeof why});
  chorus_bootstrap_give_up(&u, 1, 3, 2);
  chorus_log_ctx_set(old);
  for (int r = 0; r < 2; r++) {
    pthread_join(th[r], NULL);
    EXPECT(j[r].res == ncclRemoteError);
    EXPECT(j[r].took < 5);
    EXPECT(strstr(j[r].err, "rank 2 gave up") && strstr(j[r].err, "out of memory (a test)"));
  }
  unsetenv("CHORUS_BOOTSTRAP_TIMEOUT");
}

typedef struct failer {
  chorus_uid uid;
  int rank, nranks;
  int hear;      /* the others fail on their own, and listen for a first cause */
  int none_fail; /* (with hear) the last rank does not fail either */
  int nap_ms;    /* looks away this long first: a rank the scheduler left out */
  int connect;   /* the others connect to the failing rank (gone by then) */
  ncclResult_t res;
  double took;
  char err[512];
} failer;

/* After init, the last rank fails (its last error says why) and the
 * others, in an allgather, fail as a communicator's init does: each with
 * the first cause, passed on along the ring (every rank, then, the
 * failing one's neighbours included, calls chorus_bootstrap_fail). */
static void *fail_main(void *p) {
  failer *f = p;
  chorus_log_ctx_set((chorus_log_ctx){f->rank, f->nranks, f->err, sizeof f->err});
  chorus_bootstrap *bs = NULL;
  f->res = chorus_bootstrap_init(&bs, &f->uid, 1, f->nranks, f->rank, NULL);
  if (f->res == ncclSuccess) f->res = chorus_bootstrap_barrier(bs);
  if (f->res != ncclSuccess) {
    /* A barrier can fail here too: the failing rank may leave it, and its
     * word arrive, before a slow one has; that one passes the word on. */
    chorus_bootstrap_fail(bs);
    chorus_bootstrap_destroy(bs);
    return NULL;
  }
  if (f->nap_ms) {
    struct timespec ts = {0, f->nap_ms * 1000000l};
    nanosleep(&ts, NULL);
  }
  const int64_t t0 = chorus_now_ns();
  if (f->rank == f->nranks - 1 && !f->none_fail) {
    snprintf(f->err, sizeof f->err, "rank %d of %d: a test cause", f->rank, f->nranks);
    f->res = ncclSystemError;
  } else if (f->hear) {
    f->res = chorus_bootstrap_hear_failure(bs); /* ncclInProgress: no word came */
  } else if (f->connect) {
    int fd = -1;
    f->res = chorus_bootstrap_connect(bs, f->nranks - 1, 7, &fd);
    if (fd >= 0) close(fd);
  } else {
    int data[8] = {0};
    f->res = chorus_bootstrap_allgather(bs, data, sizeof data[0]);
  }
  if (f->res != ncclSuccess && f->res != ncclInProgress) chorus_bootstrap_fail(bs);
  f->took = (double)(chorus_now_ns() - t0) / 1e9;
  chorus_bootstrap_destroy(bs);
  return NULL;
}

static void run_failers_ex(failer *f, int n, int hear, int none_fail, int nap_ms, int connect) {
  chorus_uid u;
  REQUIRE(chorus_uid_create(&u) == ncclSuccess);
  setenv("CHORUS_BOOTSTRAP_TIMEOUT", "30", 1);
  pthread_t th[8];
  for (int r = 0; r < n; r++) {
    memset(&f[r], 0, sizeof f[r]);
    f[r].uid = u, f[r].rank = r, f[r].nranks = n, f[r].hear = hear, f[r].none_fail = none_fail;
    f[r].nap_ms = r == 0 || r == n - 2 ? nap_ms : 0; /* the failing rank's neighbours */
    f[r].connect = connect;
    if (connect && r < n - 1) f[r].nap_ms = nap_ms; /* all: the failing rank goes first */
    pthread_create(&th[r], NULL, fail_main, &f[r]);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  unsetenv("CHORUS_BOOTSTRAP_TIMEOUT");
}

static void run_failers(failer *f, int n, int hear, int none_fail) {
  run_failers_ex(f, n, hear, none_fail, 0, 0);
}

/* Every rank but the last failed at once with the last one's cause. */
static void expect_last_named(const failer *f, int n) {
  char want[64];
  snprintf(want, sizeof want, "rank %d of %d: a test cause", n - 1, n);
  for (int r = 0; r < n - 1; r++) {
    EXPECT(f[r].res == ncclRemoteError);
    EXPECT(f[r].took < 2);
    EXPECT(strstr(f[r].err, want) != NULL);
  }
}

static void init_failure_names_its_rank(void) {
  failer f[4];
  run_failers(f, 4, 0, 0);
  expect_last_named(f, 4);
}

/* The failing rank's neighbours look away for longer than a teller that
 * must be challenged would wait (TELL_NS, 200 ms): the word waits for
 * them in their listeners' queues, keyed by the ring's links, and they
 * still name the cause, not the ring's end. */
static void init_failure_reaches_busy_neighbours(void) {
  failer f[4];
  run_failers_ex(f, 4, 0, 0, 600, 0);
  expect_last_named(f, 4);
}

/* The others connect to the failing rank after it has gone: the connect
 * is refused, and each names its cause within seconds (the word waits in
 * its listener, or comes from a neighbour), not after the bootstrap
 * timeout (30 s here). */
static void connect_to_a_failed_rank_hears_why(void) {
  failer f[4];
  run_failers_ex(f, 4, 0, 0, 300, 1);
  char want[64];
  snprintf(want, sizeof want, "rank 3 of 4: a test cause");
  for (int r = 0; r < 3; r++) {
    EXPECT(f[r].res == ncclRemoteError);
    EXPECT(f[r].took < 4);
    EXPECT(strstr(f[r].err, want) != NULL);
  }
}

/* Ranks whose own failure a peer's earlier one may explain (its shared
 * memory gone) wait for the word: each names the rank that failed first,
 * the ring neighbours of rank 4 told by it, the others by them. Where no
 * rank failed, the wait ends empty-handed (ncclInProgress) in about
 * 0.3 s. */
static void consequent_failures_name_the_first(void) {
  failer f[5];
  run_failers(f, 5, 1, 0);
  expect_last_named(f, 5);
  run_failers(f, 3, 1, 1);
  for (int r = 0; r < 3; r++) {
    EXPECT(f[r].res == ncclInProgress);
    EXPECT(f[r].took > 0.2 && f[r].took < 2);
  }
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  RUN(one_root);
  RUN(several_roots);
  RUN(garbage_is_ignored);
  RUN(refused_root_is_final);
  RUN(give_up_fails_the_rendezvous);
  RUN(init_failure_names_its_rank);
  RUN(init_failure_reaches_busy_neighbours);
  RUN(connect_to_a_failed_rank_hears_why);
  RUN(consequent_failures_name_the_first);
  return unit_report();
}

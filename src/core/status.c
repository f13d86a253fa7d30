/*
 * status.c - see status.h.
 *
 * Two threads, started with the first holder and joined with the last:
 * the server answers queries (one per connection, each bounded in time
 * and size, garbage closed unanswered); the reporter looks at every
 * registered communicator's progress record every REPORT_TICK_MS and
 * makes the reports. They are apart so that two processes reporting at
 * once still answer each other. The registry, the listeners and the
 * threads' state are `lock`'s; a report works on copies, so a
 * communicator may go while its report is being written.
 */
#include "core/status.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "algo/func.h"
#include "coll/progress.h"
#include "core/comm.h"
#include "device/device.h"
#include "gpu/gpu.h"
#include "transport/transport.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"
#include "util/proc.h"
#include "util/siphash.h"

#define STATUS_MAGIC      0x43485354u /* "CHST" */
#define STATUS_VERSION    1u
#define MAX_LISTENERS     8
#define MAX_CONNS         256
#define CONN_DEADLINE_NS  (2000ll * 1000000)
#define QUERY_DEADLINE_NS (1000ll * 1000000)
#define QUERY_BATCH       64
#define REPORT_TICK_MS    100
#define LABEL_MAX         48
#define GPU_FOLLOW_NS     (1000ll * 1000) /* at most one event record a millisecond */

typedef struct query {
  uint32_t magic, version;
  uint64_t key; /* the communicator's (secret-derived) */
  int32_t rank; /* which of its ranks */
  int32_t pad;
  uint64_t index; /* the collective the asker is stalled in */
} query;

typedef struct answer {
  uint32_t magic, version;
  int32_t found, failed;
  int32_t device, stalled; /* stalled: in a call on this communicator that does not move */
  int32_t stall_p2p, wait_peer, wait_dir, has_asked, has_last, other;
  uint64_t issued, ended, p2p_issued, p2p_ended;
  chorus_call_desc last, asked, stall, other_call;
  int64_t last_ms, stall_ms, other_ms; /* how long ago / how long */
  int32_t other_peer, other_dir;
  char other_comm[LABEL_MAX];
} answer;

typedef struct entry {
  ncclComm_t comm;
  uint64_t key;
  chorus_status_peer *peers;
  uint64_t reported; /* the stall_id last reported */
  int gpu_stalled;   /* a GPU stall the reporter marked (gpu_check's kind), 0: none */
  uint64_t gpu_call; /* of that call */
  char label[LABEL_MAX];
} entry;

typedef struct listener {
  chorus_sockaddr addr;
  int fd;
} listener;

/* Held by whoever starts or stops the service (never by its threads), so
 * a stop's joins never meet a start. */
static pthread_mutex_t life = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *entries;
static int nentries, cap_entries;
static listener lis[MAX_LISTENERS];
static int nlis;
static int holders;
static int wake_fd = -1;
static int stopping;
static pthread_t server_thread, reporter_thread;
static int running;
static pthread_cond_t tick = PTHREAD_COND_INITIALIZER;
/* CHORUS_DUMP_SIGNAL: the handler asks the server thread for a dump. */
static volatile sig_atomic_t dump_wanted, dump_fd = -1;
static int dump_sig;
static struct sigaction dump_old;

static int64_t warn_ns(void) {
  return chorus_param_int(CHORUS_P_STUCK_WARN) * 1000000000ll;
}

int chorus_status_signal(const char *v) {
  if (!v || !*v || !strcmp(v, "off") || !strcmp(v, "0")) return 0;
  static const struct {
    const char *name;
    int sig;
  } names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
               {"QUIT", SIGQUIT}, {"PWR", SIGPWR},   {"WINCH", SIGWINCH}};
  const char *n = strncmp(v, "SIG", 3) ? v : v + 3;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(n, names[i].name)) return names[i].sig;
  char *end;
  const long k = strtol(v, &end, 10);
  return *end || k <= 0 || k >= NSIG || k == SIGKILL || k == SIGSTOP ? -1 : (int)k;
}

/* CHORUS_DUMP_SIGNAL's number; 0 unset or unusable (said once). */
static int dump_signal(void) {
  const char *v = chorus_param_str(CHORUS_P_DUMP_SIGNAL);
  const int sig = chorus_status_signal(v);
  static int warned;
  if (sig < 0 && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
    WARN("CHORUS_DUMP_SIGNAL=%s is not a signal this process can catch (USR1, USR2, HUP, QUIT, "
         "PWR, WINCH or a number); no state dumps",
         v);
  return sig > 0 ? sig : 0;
}

/* ---- answers --------------------------------------------------------------------- */

static int64_t ms_since(int64_t now, int64_t t) {
  return t ? (now - t) / 1000000 : -1;
}

/* What rank e answers about itself, under lock. */
static void fill_answer(const entry *e, uint64_t asked, answer *a) {
  chorus_progress_view v;
  const int64_t now = chorus_now_ns();
  chorus_progress_read(&e->comm->progress, &v);
  a->found = 1;
  a->failed = __atomic_load_n(&e->comm->cc.failed, __ATOMIC_RELAXED) != ncclSuccess;
  a->device = e->comm->device;
  a->issued = v.issued;
  a->ended = e->comm->device >= 0 ? v.gpu_done : v.ended;
  a->p2p_issued = v.p2p_issued, a->p2p_ended = v.p2p_ended;
  int64_t t;
  if (v.issued && chorus_progress_recent(&v, v.issued - 1, &a->last, &t)) {
    a->has_last = 1;
    a->last_ms = ms_since(now, t);
  }
  a->has_asked = chorus_progress_recent(&v, asked, &a->asked, &t);
  if (v.stall_since && v.stall_gpu != 2) { /* a suspect (gpu_check) is no stall to tell */
    a->stalled = 1;
    a->stall = v.stall_call;
    a->stall_p2p = v.stall_p2p;
    a->stall_ms = ms_since(now, v.stall_since);
    a->wait_peer = v.wait_peer, a->wait_dir = v.wait_dir;
  }
  /* The longest stall of this process elsewhere. */
  for (int i = 0; i < nentries; i++) {
    if (entries[i].key == e->key) continue;
    chorus_progress_view o;
    chorus_progress_read(&entries[i].comm->progress, &o);
    if (!o.stall_since || o.stall_gpu == 2 ||
        (a->other && ms_since(now, o.stall_since) <= a->other_ms))
      continue;
    a->other = 1;
    a->other_call = o.stall_call;
    a->other_ms = ms_since(now, o.stall_since);
    a->other_peer = o.wait_peer, a->other_dir = o.wait_dir;
    snprintf(a->other_comm, sizeof a->other_comm, "%s", entries[i].label);
  }
}

static void answer_query(int fd, const query *q) {
  answer a;
  memset(&a, 0, sizeof a);
  a.magic = STATUS_MAGIC;
  a.version = STATUS_VERSION;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nentries; i++)
    if (entries[i].key == q->key && entries[i].comm->rank == q->rank) {
      fill_answer(&entries[i], q->index, &a);
      break;
    }
  pthread_mutex_unlock(&lock);
  /* A small answer into an empty socket: it goes at once or not at all. */
  (void)send(fd, &a, sizeof a, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---- the state dump ---------------------------------------------------------------- */

/* The payload bytes c's connections to peer r moved, both channels, and
 * their transport (NULL: no connection). */
static const char *peer_bytes(const struct ncclComm *c, int r, uint64_t *sent, uint64_t *got) {
  const char *how = NULL;
  *sent = *got = 0;
  for (int ch = 0; ch < CHORUS_NCHANNELS && c->cc.conns; ch++)
    for (int dir = 0; dir < 2; dir++) {
      const chorus_conn *cn = chorus_cc_conn(&c->cc, r, ch, dir);
      if (!cn) continue;
      if (!how) how = cn->transport;
      *(dir == CHORUS_DIR_SEND ? sent : got) += __atomic_load_n(&cn->bytes_moved, __ATOMIC_RELAXED);
    }
  return how;
}

static void dump_entry(FILE *f, const entry *e, int64_t now) {
  const ncclComm_t c = e->comm;
  chorus_progress_view v;
  chorus_progress_read(&c->progress, &v);
  const ncclResult_t failed = __atomic_load_n(&c->cc.failed, __ATOMIC_RELAXED);
  char d[160];
  fprintf(f, "comm %s: rank %d of %d on %d host(s), %s", e->label, c->rank, c->nranks,
          c->topo.nhosts, c->device >= 0 ? "GPU" : "host memory");
  if (c->device >= 0) fprintf(f, " (device %d)", c->device);
  fprintf(f, "; %s\n", failed == ncclSuccess ? "working" : ncclGetErrorString(failed));
  if (c->device >= 0)
    fprintf(f, "  collectives: %llu issued, %llu known finished on the GPU",
            (unsigned long long)v.issued, (unsigned long long)v.gpu_done);
  else
    fprintf(f, "  collectives: %llu issued, %llu ended", (unsigned long long)v.issued,
            (unsigned long long)v.ended);
  fprintf(f, "; Send/Recv: %llu issued, %llu ended\n", (unsigned long long)v.p2p_issued,
          (unsigned long long)v.p2p_ended);
  if (v.stall_since) {
    chorus_call_desc_str(&v.stall_call, d, sizeof d);
    fprintf(f, "  %s: %s for %.1f s",
            v.stall_gpu == 2 ? "not seen to finish on the GPU" : "stalled", d,
            (double)(now - v.stall_since) / 1e9);
    if (v.wait_peer >= 0 && v.wait_peer < c->nranks)
      fprintf(f, ", waiting for %s rank %d (host %s, pid %d)",
              v.wait_dir == CHORUS_DIR_RECV ? "data from" : "room at", v.wait_peer,
              c->topo.info[v.wait_peer].hostname, (int)c->topo.info[v.wait_peer].pid);
    fputc('\n', f);
  }
  fprintf(f, "  recent collectives:");
  int any = 0;
  for (uint64_t k = v.issued; k-- > 0 && v.issued - k <= CHORUS_PROGRESS_RECENT;) {
    chorus_call_desc cd;
    int64_t t;
    if (!chorus_progress_recent(&v, k, &cd, &t)) continue;
    chorus_call_desc_str(&cd, d, sizeof d);
    fprintf(f, "%s %s %.1f s ago", any++ ? ";" : "", d, (double)(now - t) / 1e9);
  }
  fprintf(f, "%s\n", any ? "" : " none");
  if (v.p2p_issued && v.last_p2p.seq) {
    chorus_call_desc_str(&v.last_p2p.d, d, sizeof d);
    fprintf(f, "  last Send/Recv: %s %.1f s ago\n", d, (double)(now - v.last_p2p.ns) / 1e9);
  }
  fprintf(f, "  peers:");
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    uint64_t sent, got;
    const char *how;
    if (c->cc.gpu) { /* its data moves between the GPUs (gpu.h), not on its connections */
      chorus_gpu_peer_bytes(c->cc.gpu, r, &sent, &got);
      how = chorus_gpu_direct(c->cc.gpu) ? "GPU peer access (NVLink or PCIe)"
                                         : "GPUs through pinned host memory";
    } else {
      how = peer_bytes(c, r, &sent, &got);
    }
    fprintf(f, " %d (host %s, pid %d, %s", r, c->topo.info[r].hostname, (int)c->topo.info[r].pid,
            how ? how : "no connection");
    if (how)
      fprintf(f, ", sent %llu B, received %llu B", (unsigned long long)sent,
              (unsigned long long)got);
    fputc(')', f);
    if (r >= 64 && c->nranks > 66) {
      fprintf(f, " ... %d in all", c->nranks);
      break;
    }
  }
  fputc('\n', f);
  if (c->cc.node)
    fprintf(f, "  node memory: %llu B staged for the peers to read\n",
            (unsigned long long)__atomic_load_n(&c->cc.node->staged_bytes, __ATOMIC_RELAXED));
  /* A GPU communicator across hosts moves its inter-host bytes through
   * host-memory parts, one rank per host in each lane. */
  for (int l = 0; l < c->nlanes; l++) {
    const ncclComm_t x = c->part_cross[l];
    if (!x) continue;
    fprintf(f, "  across hosts, lane %d:", l);
    for (int h = 0; h < x->nranks && h < 64; h++) {
      if (h == x->rank) continue;
      uint64_t sent, got;
      if (!peer_bytes(x, h, &sent, &got)) continue;
      fprintf(f, " host %s (sent %llu B, received %llu B)", x->topo.info[h].hostname,
              (unsigned long long)sent, (unsigned long long)got);
    }
    fputc('\n', f);
  }
}

/* Writes every registered communicator's state to CHORUS_DUMP_FILE
 * (under lock), and says where. */
static void dump_all(void) {
  char path[4096], tmp[4200];
  const char *pattern = chorus_param_str(CHORUS_P_DUMP_FILE);
  chorus_log_expand_path(pattern ? pattern : "", path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    WARN("state dump: cannot write %s: %s", tmp, strerror(errno));
    return;
  }
  const int64_t now = chorus_now_ns();
  const time_t wall = time(NULL);
  struct tm tm;
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&wall, &tm));
  fprintf(f, "Chorus state of pid %d at %s: %d communicator(s)\n", (int)getpid(), when, nentries);
  for (int i = 0; i < nentries; i++) dump_entry(f, &entries[i], now);
  if (fclose(f) == 0 && rename(tmp, path) == 0)
    WARN("state dump: %d communicator(s) written to %s", nentries, path);
  else
    WARN("state dump: cannot write %s: %s", path, strerror(errno));
}

static void on_dump_signal(int sig) {
  (void)sig;
  const int saved = errno;
  dump_wanted = 1;
  const int fd = dump_fd;
  if (fd >= 0) {
    const uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
  }
  errno = saved;
}

typedef struct conn {
  int fd;
  size_t got;
  int64_t deadline;
  query q;
} conn;

static void *server_main(void *arg) {
  (void)arg;
  conn *cs = calloc(MAX_CONNS, sizeof *cs);
  int ncs = 0;
  struct pollfd pf[1 + MAX_LISTENERS + MAX_CONNS];
  for (;;) {
    pthread_mutex_lock(&lock);
    const int stop = stopping, nl = nlis;
    int lfd[MAX_LISTENERS];
    for (int i = 0; i < nl; i++) lfd[i] = lis[i].fd;
    pthread_mutex_unlock(&lock);
    if (stop || !cs) break;
    int n = 0;
    pf[n++] = (struct pollfd){wake_fd, POLLIN, 0};
    for (int i = 0; i < nl; i++) pf[n++] = (struct pollfd){lfd[i], POLLIN, 0};
    for (int i = 0; i < ncs; i++) pf[n++] = (struct pollfd){cs[i].fd, POLLIN, 0};
    if (poll(pf, (nfds_t)n, 200) < 0 && errno != EINTR) break;
    if (pf[0].revents) {
      uint64_t v;
      (void)!read(wake_fd, &v, sizeof v);
    }
    if (dump_wanted) {
      dump_wanted = 0;
      pthread_mutex_lock(&lock);
      dump_all();
      pthread_mutex_unlock(&lock);
    }
    for (int i = 0; i < nl; i++) {
      if (!pf[1 + i].revents) continue;
      for (int k = 0; k < 16; k++) {
        const int fd = accept4(lfd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (ncs == MAX_CONNS) {
          close(fd);
          continue;
        }
        cs[ncs++] = (conn){fd, 0, chorus_now_ns() + CONN_DEADLINE_NS, {0, 0, 0, 0, 0, 0}};
      }
    }
    const int64_t now = chorus_now_ns();
    /* Connections polled this pass come first in cs; those accepted since
     * are read on the next. */
    const int polled = n - 1 - nl;
    unsigned char ready[MAX_CONNS];
    for (int i = 0; i < ncs; i++) ready[i] = i < polled && pf[1 + nl + i].revents;
    for (int i = 0; i < ncs;) {
      conn *c = &cs[i];
      int done = now > c->deadline;
      if (!done && ready[i]) {
        const ssize_t r = recv(c->fd, (char *)&c->q + c->got, sizeof c->q - c->got, 0);
        if (r > 0) c->got += (size_t)r;
        done = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
        if (c->got == sizeof c->q) {
          if (c->q.magic == STATUS_MAGIC && c->q.version == STATUS_VERSION)
            answer_query(c->fd, &c->q);
          done = 1;
        }
      }
      if (!done) {
        i++;
        continue;
      }
      close(c->fd);
      cs[i] = cs[--ncs];
      ready[i] = ready[ncs];
    }
  }
  for (int i = 0; i < ncs; i++) close(cs[i].fd);
  free(cs);
  return NULL;
}

/* ---- queries --------------------------------------------------------------------- */

typedef enum { Q_NONE, Q_CONNECTING, Q_SENDING, Q_RECEIVING, Q_DONE, Q_FAILED } qstate;

typedef struct qslot {
  int fd;
  qstate st;
  size_t moved;
  query q;
  answer a;
} qslot;

/* Asks peers[ranks[i]] about (key, ranks[i], index) for i < n, in
 * parallel, a second at most: ok[i] 1 and out[i] filled when answered. */
static void ask(const chorus_status_peer *peers, const int *ranks, int n, uint64_t key,
                uint64_t index, answer *out, int *ok) {
  qslot *s = calloc((size_t)n, sizeof *s);
  struct pollfd *pf = calloc((size_t)n, sizeof *pf);
  if (!s || !pf) {
    free(s);
    free(pf);
    for (int i = 0; i < n; i++) ok[i] = 0;
    return;
  }
  for (int b = 0; b < n; b += QUERY_BATCH) {
    const int e = b + QUERY_BATCH < n ? b + QUERY_BATCH : n;
    for (int i = b; i < e; i++) {
      const chorus_sockaddr *addr = &peers[ranks[i]].addr;
      s[i].fd = -1;
      s[i].st = Q_FAILED;
      s[i].q = (query){STATUS_MAGIC, STATUS_VERSION, key, ranks[i], 0, index};
      if (!addr->sa.sa_family) continue;
      const int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      s[i].fd = fd;
      if (connect(fd, &addr->sa, chorus_sock_len(addr)) == 0)
        s[i].st = Q_SENDING;
      else if (errno == EINPROGRESS)
        s[i].st = Q_CONNECTING;
    }
    const int64_t deadline = chorus_now_ns() + QUERY_DEADLINE_NS;
    for (;;) {
      int np = 0;
      int map[QUERY_BATCH];
      for (int i = b; i < e; i++) {
        if (s[i].st == Q_DONE || s[i].st == Q_FAILED) continue;
        pf[np] = (struct pollfd){s[i].fd, s[i].st == Q_RECEIVING ? POLLIN : POLLOUT, 0};
        map[np++] = i;
      }
      const int64_t left = (deadline - chorus_now_ns()) / 1000000;
      if (!np || left <= 0) break;
      if (poll(pf, (nfds_t)np, (int)left) < 0 && errno != EINTR) break;
      for (int j = 0; j < np; j++) {
        qslot *q = &s[map[j]];
        if (!pf[j].revents) continue;
        if (q->st == Q_CONNECTING) {
          int err = 0;
          socklen_t len = sizeof err;
          getsockopt(q->fd, SOL_SOCKET, SO_ERROR, &err, &len);
          q->st = err ? Q_FAILED : Q_SENDING;
          continue;
        }
        if (q->st == Q_SENDING) {
          const ssize_t r =
              send(q->fd, (const char *)&q->q + q->moved, sizeof q->q - q->moved, MSG_NOSIGNAL);
          if (r < 0 && errno != EAGAIN && errno != EINTR) q->st = Q_FAILED;
          if (r > 0 && (q->moved += (size_t)r) == sizeof q->q) q->st = Q_RECEIVING, q->moved = 0;
          continue;
        }
        const ssize_t r = recv(q->fd, (char *)&q->a + q->moved, sizeof q->a - q->moved, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) q->st = Q_FAILED;
        if (r > 0 && (q->moved += (size_t)r) == sizeof q->a)
          q->st = q->a.magic == STATUS_MAGIC && q->a.version == STATUS_VERSION ? Q_DONE : Q_FAILED;
      }
    }
    for (int i = b; i < e; i++) {
      if (s[i].fd >= 0) close(s[i].fd);
      ok[i] = s[i].st == Q_DONE;
      if (ok[i]) out[i] = s[i].a;
    }
  }
  free(s);
  free(pf);
}

/* ---- reports --------------------------------------------------------------------- */

/* A report's text, grown as needed (cut at its cap). */
typedef struct text {
  char buf[8192];
  size_t n;
} text;

static void say(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(text *t, const char *fmt, ...) {
  if (t->n >= sizeof t->buf - 1) return;
  va_list ap;
  va_start(ap, fmt);
  const int k = vsnprintf(t->buf + t->n, sizeof t->buf - t->n, fmt, ap);
  va_end(ap);
  if (k > 0) t->n = t->n + (size_t)k < sizeof t->buf ? t->n + (size_t)k : sizeof t->buf - 1;
}

/* "0-3,5,7" for the ranks r with in[r] set. */
static void say_ranks(text *t, const unsigned char *in, int n) {
  int first = 1;
  for (int r = 0; r < n; r++) {
    if (!in[r]) continue;
    int e = r;
    while (e + 1 < n && in[e + 1]) e++;
    say(t, "%s%d", first ? "" : ",", r);
    if (e > r) say(t, "%s%d", e == r + 1 ? "," : "-", e);
    first = 0;
    r = e;
  }
  if (first) say(t, "none");
}

typedef struct job {
  uint64_t key;
  int rank, nranks;
  char label[LABEL_MAX];
  chorus_status_peer *peers;
  chorus_rank_info *info;
  chorus_progress_view me;
} job;

static void say_rank(text *t, const job *j, int r) {
  say(t, "rank %d (host %s, pid %d)", r, j->info[r].hostname, (int)j->info[r].pid);
}

static const char *waits_for(int dir) {
  return dir == CHORUS_DIR_RECV ? "data from" : dir == CHORUS_DIR_SEND ? "room at" : "a peer,";
}

/* Why peer r did not answer: what /proc says of a process of this
 * machine and PID namespace, else nothing known. */
static void say_silent(text *t, const job *j, int r) {
  say_rank(t, j, r);
  const chorus_rank_info *mine = &j->info[j->rank], *it = &j->info[r];
  char state = 0;
  if (it->machine_hash == mine->machine_hash && j->peers[r].pid_ns == chorus_proc_pid_ns() &&
      j->peers[r].pid_ns) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)it->pid);
    FILE *f = fopen(path, "r");
    if (f) {
      const char *paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
      if (paren && paren[1] == ' ') state = paren[2];
      fclose(f);
    } else {
      state = 'X';
    }
  }
  if (!j->peers[r].addr.sa.sa_family)
    say(t, " has no status service (CHORUS_STUCK_WARN=off there)");
  else if (state == 'T' || state == 't')
    say(t, " is stopped (SIGSTOP, or a debugger holds it) and does not answer");
  else if (state == 'X' || state == 'Z')
    say(t, " has exited");
  else
    say(t, " does not answer within %lld ms (stopped, hung, or unreachable)",
        (long long)(QUERY_DEADLINE_NS / 1000000));
}

static void say_other(text *t, const answer *a) {
  if (!a->other) return;
  char d[160];
  chorus_call_desc_str(&a->other_call, d, sizeof d);
  say(t, "; its process waits in %s on comm %s for %.1f s", d, a->other_comm,
      (double)a->other_ms / 1e3);
  if (a->other_peer >= 0) say(t, " (for %s rank %d)", waits_for(a->other_dir), a->other_peer);
}

/* Peer r's own state in a line (a point-to-point stall's report). */
static void say_state(text *t, const answer *a) {
  char d[160];
  if (a->failed) say(t, " has failed on this communicator");
  if (a->stalled) {
    chorus_call_desc_str(&a->stall, d, sizeof d);
    say(t, " waits in %s for %.1f s", d, (double)a->stall_ms / 1e3);
    if (a->wait_peer >= 0) say(t, " (for %s rank %d)", waits_for(a->wait_dir), a->wait_peer);
  } else if (a->has_last) {
    chorus_call_desc_str(&a->last, d, sizeof d);
    say(t, " is not stalled here; its last collective was %s, %.1f s ago", d,
        (double)a->last_ms / 1e3);
  } else {
    say(t, " is not stalled here and issued no collective on it");
  }
  say_other(t, a);
}

static int same_call(const chorus_call_desc *a, const chorus_call_desc *b) {
  return a->func == b->func && a->count == b->count && a->dtype == b->dtype &&
         a->redop == b->redop && a->root == b->root;
}

static void report(job *j) {
  const int n = j->nranks;
  const chorus_call_desc *call = &j->me.stall_call;
  const int p2p = j->me.stall_p2p;
  int *ranks = calloc((size_t)n, sizeof *ranks);
  int *ok = calloc((size_t)n, sizeof *ok);
  answer *ans = calloc((size_t)n, sizeof *ans);
  unsigned char *cls = calloc((size_t)n * 4, 1); /* per class, per rank */
  text *t = malloc(sizeof *t);
  if (!ranks || !ok || !ans || !cls || !t) goto out;
  t->n = 0;
  /* A point-to-point call asks its peer; a collective every rank. */
  int m = 0;
  if (p2p) {
    if (call->root >= 0 && call->root < n && call->root != j->rank) ranks[m++] = call->root;
  } else {
    for (int r = 0; r < n; r++)
      if (r != j->rank) ranks[m++] = r;
  }
  ask(j->peers, ranks, m, j->key, call->index, ans, ok);
  char d[160];
  chorus_call_desc_str(call, d, sizeof d);
  const int64_t now = chorus_now_ns();
  static const char *const how[3] = {"made no progress", "not finished on the GPU",
                                     "not been seen to finish on the GPU"};
  say(t, "stuck: %s on comm %s has %s for %.1f s", d, j->label, how[j->me.stall_gpu % 3],
      (double)(now - j->me.stall_since) / 1e9);
  if (j->me.wait_peer >= 0 && j->me.wait_peer < n) {
    say(t, ", waiting for %s ", waits_for(j->me.wait_dir));
    say_rank(t, j, j->me.wait_peer);
  }
  say(t, ".");
  if (p2p) {
    for (int i = 0; i < m; i++) {
      say(t, "\n  ");
      if (!ok[i])
        say_silent(t, j, ranks[i]);
      else {
        say_rank(t, j, ranks[i]);
        say_state(t, &ans[i]);
      }
    }
    goto print;
  }
  /* Classes: 0 not issued, 1 inside, 2 finished, 3 did not answer or a
   * different call (the culprits, with 0). */
  unsigned char *not_issued = cls, *inside = cls + n, *finished = cls + 2 * n, *odd = cls + 3 * n;
  inside[j->rank] = 1;
  int nculprits = 0;
  for (int i = 0; i < m; i++) {
    const int r = ranks[i];
    const answer *a = &ans[i];
    const int silent = !ok[i] || !a->found;
    if (silent || a->issued <= call->index || (a->has_asked && !same_call(&a->asked, call)))
      nculprits++;
    if (silent || (a->has_asked && !same_call(&a->asked, call)))
      odd[r] = 1;
    else if (a->issued <= call->index)
      not_issued[r] = 1;
    else if (a->ended > call->index)
      finished[r] = 1;
    else
      inside[r] = 1;
  }
  /* The culprits first, eight at most, then the classes. */
  int said = 0;
  for (int i = 0; i < m && said < 8; i++) {
    const int r = ranks[i];
    const answer *a = &ans[i];
    if (!not_issued[r] && !odd[r]) continue;
    said++;
    say(t, "\n  culprit: ");
    if (!ok[i]) {
      say_silent(t, j, r);
      continue;
    }
    say_rank(t, j, r);
    if (!a->found) {
      say(t, " does not know this communicator (destroyed, or never made there)");
      continue;
    }
    if (odd[r]) {
      chorus_call_desc_str(&a->asked, d, sizeof d);
      say(t, " issued a different call as #%llu: %s", (unsigned long long)call->index, d);
      continue;
    }
    say(t, " has not issued %s #%llu", chorus_func_name(call->func),
        (unsigned long long)call->index);
    if (a->has_last) {
      chorus_call_desc_str(&a->last, d, sizeof d);
      say(t, "; its last call was %s, %.1f s ago", d, (double)a->last_ms / 1e3);
    } else if (!a->issued) {
      say(t, "; it has issued no collective on this communicator");
    }
    if (a->stalled) {
      chorus_call_desc_str(&a->stall, d, sizeof d);
      say(t, "; it waits in %s", d);
    }
    if (a->failed) say(t, "; its communicator has failed");
    say_other(t, a);
  }
  if (nculprits > said) say(t, "\n  ... and %d more", nculprits - said);
  /* A call not seen to finish is only reported with a culprit: without
   * one it most likely finished. */
  if (!nculprits && j->me.stall_gpu == 2) goto out;
  if (!nculprits) {
    say(t, "\n  every rank has issued it; the waits:");
    for (int i = 0; i < m; i++) {
      const answer *a = &ans[i];
      if (!a->stalled || a->wait_peer < 0) continue;
      say(t, " %d->%d", ranks[i], a->wait_peer);
    }
  }
  say(t, "\n  not issued: ");
  say_ranks(t, not_issued, n);
  say(t, "; inside: ");
  say_ranks(t, inside, n);
  say(t, "; finished: ");
  say_ranks(t, finished, n);
  say(t, "; silent or different: ");
  say_ranks(t, odd, n);
print : {
  chorus_log_ctx old = chorus_log_ctx_set((chorus_log_ctx){j->rank, n, NULL, 0});
  WARN("%s", t->buf);
  chorus_log_ctx_set(old);
}
out:
  free(ranks);
  free(ok);
  free(ans);
  free(cls);
  free(t);
}

void chorus_status_gpu_launched(ncclComm_t comm, uint64_t index, void *stream) {
  chorus_progress *p = &comm->progress;
  if (!comm->status_held || comm->device < 0) return;
  /* An event record costs about a microsecond: one a millisecond at most.
   * The launches between are the tail, which gpu_check handles. */
  const int64_t now = chorus_coarse_now_ns();
  __atomic_store_n(&p->gpu_tail_ns, now, __ATOMIC_RELAXED);
  __atomic_store_n(&p->gpu_tail, index + 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&p->gpu_follow, __ATOMIC_RELAXED) &&
      now - __atomic_load_n(&p->gpu_since, __ATOMIC_RELAXED) < GPU_FOLLOW_NS)
    return;
  if (chorus_dev_stream_capturing(stream) != 0) return;
  const int was = chorus_dev_current();
  if (was != comm->device) chorus_dev_use(comm->device);
  if (!p->gpu_event && chorus_dev_event_new(&p->gpu_event) != 0) p->gpu_event = NULL;
  if (p->gpu_event && chorus_dev_event_record(p->gpu_event, stream) == 0) {
    __atomic_store_n(&p->gpu_since, now, __ATOMIC_RELAXED);
    __atomic_store_n(&p->gpu_follow, index + 1, __ATOMIC_RELEASE);
  }
  if (was >= 0 && was != comm->device) chorus_dev_use(was);
}

/* What e's GPU finished (under lock). A followed call whose event has not
 * completed for `warn` is a stall (1). Launches after the last followed
 * one are not seen to finish: quiet for `warn`, the last of them is a
 * suspect (2), reported only when a peer shows a culprit. Either ends
 * with the next launch or completion. */
static void gpu_check(entry *e, int64_t now, int64_t warn) {
  chorus_progress *p = &e->comm->progress;
  const uint64_t follow = __atomic_load_n(&p->gpu_follow, __ATOMIC_ACQUIRE);
  const uint64_t tail = __atomic_load_n(&p->gpu_tail, __ATOMIC_ACQUIRE);
  if (!follow) return;
  const int64_t since = __atomic_load_n(&p->gpu_since, __ATOMIC_RELAXED),
                tail_ns = __atomic_load_n(&p->gpu_tail_ns, __ATOMIC_RELAXED);
  chorus_dev_use(e->comm->device);
  const int done = chorus_dev_event_done(p->gpu_event);
  if (done == 1 && __atomic_load_n(&p->gpu_done, __ATOMIC_RELAXED) < follow)
    __atomic_store_n(&p->gpu_done, follow, __ATOMIC_RELAXED);
  int kind = 0;
  uint64_t k = 0;
  int64_t from = 0;
  if (done == 0 && now - since >= warn)
    kind = 1, k = follow - 1, from = since;
  else if (done == 1 && tail > follow && now - tail_ns >= warn)
    kind = 2, k = tail - 1, from = tail_ns;
  if (e->gpu_stalled && (e->gpu_stalled != kind || e->gpu_call != k)) {
    chorus_progress_unstall(p);
    e->gpu_stalled = 0;
  }
  if (!kind || e->gpu_stalled) return;
  chorus_progress_view v;
  chorus_progress_read(p, &v);
  chorus_call_desc d = {k, 0, 0, 0, -1, -1};
  int64_t t;
  (void)chorus_progress_recent(&v, k, &d, &t);
  chorus_progress_stall(p, &d, 0, kind, from, -1, -1);
  e->gpu_stalled = kind;
  e->gpu_call = k;
}

/* The first registered communicator whose stall is due a report, copied
 * into *j (under lock); 0 when none. */
static int next_job(job *j, int64_t warn) {
  const int64_t now = chorus_now_ns();
  for (int i = 0; i < nentries; i++) {
    entry *e = &entries[i];
    chorus_progress_view v;
    chorus_progress_read(&e->comm->progress, &v);
    if (!v.stall_since || now - v.stall_since < warn || v.stall_id == e->reported) continue;
    /* A GPU communicator's report is its GPU's (gpu_check); a host thread
     * that stalls beside it (the proxy across hosts) only adds whom it
     * waits for, in the answers. */
    if (e->comm->device >= 0 && !v.stall_gpu) continue;
    if (__atomic_load_n(&e->comm->cc.failed, __ATOMIC_RELAXED) != ncclSuccess) continue;
    e->reported = v.stall_id;
    const int n = e->comm->nranks;
    j->peers = chorus_malloc((size_t)n * sizeof *j->peers);
    j->info = chorus_malloc((size_t)n * sizeof *j->info);
    if (!j->peers || !j->info) {
      chorus_free(j->peers);
      chorus_free(j->info);
      return 0;
    }
    memcpy(j->peers, e->peers, (size_t)n * sizeof *j->peers);
    memcpy(j->info, e->comm->topo.info, (size_t)n * sizeof *j->info);
    j->key = e->key;
    j->rank = e->comm->rank;
    j->nranks = n;
    j->me = v;
    memcpy(j->label, e->label, sizeof j->label);
    return 1;
  }
  return 0;
}

static void *reporter_main(void *arg) {
  (void)arg;
  const int64_t warn = warn_ns();
  pthread_mutex_lock(&lock);
  while (!stopping) {
    const struct timespec until = chorus_realtime_in_ms(REPORT_TICK_MS);
    (void)pthread_cond_timedwait(&tick, &lock, &until);
    const int64_t now = chorus_now_ns();
    for (int i = 0; i < nentries; i++)
      if (entries[i].comm->device >= 0) gpu_check(&entries[i], now, warn);
    job j;
    while (!stopping && next_job(&j, warn)) {
      pthread_mutex_unlock(&lock);
      report(&j);
      chorus_free(j.peers);
      chorus_free(j.info);
      pthread_mutex_lock(&lock);
    }
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* ---- the service's life ------------------------------------------------------------ */

/* Starts the threads (under life, not lock): 0, or -1 (logged). */
static int start(void) {
  if (running) return 0;
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    WARN("stuck report: no eventfd (%s); this process does not answer or report", strerror(errno));
    return -1;
  }
  pthread_mutex_lock(&lock);
  wake_fd = fd;
  stopping = 0;
  pthread_mutex_unlock(&lock);
  int ok = pthread_create(&server_thread, NULL, server_main, NULL) == 0;
  if (ok && pthread_create(&reporter_thread, NULL, reporter_main, NULL) != 0) {
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_mutex_unlock(&lock);
    const uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
    pthread_join(server_thread, NULL);
    ok = 0;
  }
  if (!ok) {
    pthread_mutex_lock(&lock);
    wake_fd = -1;
    pthread_mutex_unlock(&lock);
    close(fd);
    WARN("stuck report: cannot start its threads; this process does not answer or report");
    return -1;
  }
  running = 1;
  dump_fd = fd;
  if ((dump_sig = dump_signal()) > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_dump_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(dump_sig, &sa, &dump_old) != 0) dump_sig = 0;
  }
  return 0;
}

static int same_host_addr(const chorus_sockaddr *a, const chorus_sockaddr *b) {
  if (a->sa.sa_family != b->sa.sa_family) return 0;
  if (a->sa.sa_family == AF_INET) return a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
  return !memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof a->sin6.sin6_addr) &&
         a->sin6.sin6_scope_id == b->sin6.sin6_scope_id;
}

void chorus_status_listen(ncclComm_t comm, const chorus_sockaddr *near, chorus_status_peer *out) {
  memset(out, 0, sizeof *out);
  const int stuck = warn_ns() > 0 && comm->nranks > 1;
  if (comm->is_part || (!stuck && !dump_signal())) return;
  pthread_mutex_lock(&life);
  int k = 0;
  while (k < nlis && !same_host_addr(&lis[k].addr, near)) k++;
  if (stuck && k == nlis && nlis < MAX_LISTENERS) {
    chorus_sockaddr at = *near;
    chorus_sock_set_port(&at, 0);
    char err[256];
    listener l;
    if (chorus_sock_listen(&at, &l.fd, &l.addr, err, sizeof err) == ncclSuccess) {
      char a[CHORUS_ADDR_STRLEN];
      INFO(CHORUS_INIT, "stuck report: this process answers its peers on %s",
           chorus_sock_str(&l.addr, a, sizeof a));
      pthread_mutex_lock(&lock);
      lis[nlis++] = l;
      if (wake_fd >= 0) {
        const uint64_t one = 1;
        (void)!write(wake_fd, &one, sizeof one);
      }
      pthread_mutex_unlock(&lock);
    } else {
      WARN("stuck report: %s; rank %d does not answer its peers", err, comm->rank);
    }
  }
  if (start() == 0) {
    if (stuck && k < nlis) {
      out->addr = lis[k].addr;
      out->pid_ns = chorus_proc_pid_ns();
    }
    comm->status_held = 1;
    holders++;
  }
  pthread_mutex_unlock(&life);
}

void chorus_status_register(ncclComm_t comm, chorus_status_peer *peers) {
  if (!comm->status_held) {
    chorus_free(peers);
    return;
  }
  entry e;
  memset(&e, 0, sizeof e);
  e.comm = comm;
  e.peers = peers;
  const uint64_t key[2] = {comm->init.uids[0].secret[0], comm->init.uids[0].secret[1]};
  e.key = chorus_siphash(key, "status query key", 16);
  if (comm->config.commName && comm->config.commName[0])
    snprintf(e.label, sizeof e.label, "%.40s", comm->config.commName);
  else
    snprintf(e.label, sizeof e.label, "%016llx",
             (unsigned long long)chorus_siphash(key, "status label", 12));
  pthread_mutex_lock(&lock);
  if (nentries == cap_entries) {
    const int ncap = cap_entries ? 2 * cap_entries : 8;
    entry *t = realloc(entries, (size_t)ncap * sizeof *t);
    if (!t) {
      pthread_mutex_unlock(&lock);
      WARN("stuck report: out of memory; rank %d is not watched", comm->rank);
      chorus_free(peers);
      return;
    }
    entries = t, cap_entries = ncap;
  }
  entries[nentries++] = e;
  pthread_mutex_unlock(&lock);
}

void chorus_status_unregister(ncclComm_t comm) {
  if (!comm->status_held) return;
  chorus_status_peer *peers = NULL;
  pthread_mutex_lock(&life);
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nentries; i++)
    if (entries[i].comm == comm) {
      peers = entries[i].peers;
      entries[i] = entries[--nentries];
      break;
    }
  comm->status_held = 0;
  const int last = --holders == 0, stop = last && running;
  if (stop) {
    stopping = 1;
    const uint64_t one = 1;
    (void)!write(wake_fd, &one, sizeof one);
    pthread_cond_broadcast(&tick);
  }
  pthread_mutex_unlock(&lock);
  chorus_free(peers);
  if (comm->progress.gpu_event) { /* the reporter no longer sees it */
    const int was = chorus_dev_current();
    if (was != comm->device) chorus_dev_use(comm->device);
    chorus_dev_event_free(comm->progress.gpu_event);
    comm->progress.gpu_event = NULL;
    if (was >= 0 && was != comm->device) chorus_dev_use(was);
  }
  if (stop) {
    if (dump_sig > 0) sigaction(dump_sig, &dump_old, NULL);
    dump_sig = 0;
    dump_fd = -1;
    pthread_join(server_thread, NULL);
    pthread_join(reporter_thread, NULL);
    running = 0;
  }
  if (last) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nlis; i++) close(lis[i].fd);
    nlis = 0;
    if (wake_fd >= 0) close(wake_fd);
    wake_fd = -1;
    free(entries);
    entries = NULL;
    nentries = cap_entries = 0;
    pthread_mutex_unlock(&lock);
  }
  pthread_mutex_unlock(&life);
}

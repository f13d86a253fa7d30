/*
 * test_fdpass.c - descriptors handed between processes (util/fdpass).
 *
 * Three child processes each make a memfd holding "rank r", listen, send
 * their listener's name through the parent (standing in for the
 * bootstrap), and run one round in which everyone fetches everyone's
 * descriptor; each then reads every peer's memfd and checks its contents.
 * With a stranger (a fourth process, not a peer) connecting to rank 0 and
 * claiming to be rank 1, with rank 1's process id, the round must still succeed and the stranger
 * must get no descriptor. With one rank that never takes part, the others
 * must fail within their deadline with a message naming it; so must a
 * round whose peer's listener has a full backlog. Every wait is
 * bounded; the parent kills its own children by pid if they overrun.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "util/clock.h"
#include "util/fdpass.h"

#define N 3

typedef struct card {
  char name[CHORUS_FDPASS_NAME];
  int32_t pid;
} card;

enum { ALL = 0, STRANGER = 1, MISSING = 2 };

static int write_all(int fd, const void *p, size_t n) {
  return write(fd, p, n) == (ssize_t)n ? 0 : -1;
}
static int read_all(int fd, void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, (char *)p + got, n - got);
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return 0;
}

/* Rank r's body; its exit status: 0 when it behaved as the mode wants. */
static int rank_main(int r, int mode, int to_parent, int from_parent) {
  alarm(20);
  char text[32];
  snprintf(text, sizeof text, "rank %d", r);
  int mem = memfd_create("fdpass-test", MFD_CLOEXEC);
  if (mem < 0 || pwrite(mem, text, strlen(text) + 1, 0) != (ssize_t)strlen(text) + 1) return 10;
  chorus_fdpass fp;
  char err[256];
  if (chorus_fdpass_listen(&fp, err, sizeof err) != ncclSuccess) return 11;
  card mine;
  memset(&mine, 0, sizeof mine);
  snprintf(mine.name, sizeof mine.name, "%s", fp.name);
  mine.pid = (int32_t)getpid();
  card all[N];
  if (write_all(to_parent, &mine, sizeof mine) || read_all(from_parent, all, sizeof all)) return 12;
  if (mode == MISSING && r == N - 1) return 0; /* never takes part */
  chorus_fdpass_peer peers[N];
  int np = 0;
  for (int q = 0; q < N; q++)
    if (q != r) peers[np++] = (chorus_fdpass_peer){all[q].name, all[q].pid, q, 1, 1};
  int fds[N];
  const int64_t t0 = chorus_now_ns();
  ncclResult_t res = chorus_fdpass_exchange(
      &fp, mem, r, peers, np, fds, t0 + (mode == MISSING ? 2 : 10) * 1000000000ll, err, sizeof err);
  const double took = (double)(chorus_now_ns() - t0) * 1e-9;
  chorus_fdpass_close(&fp);
  if (mode == MISSING) {
    char want[32];
    snprintf(want, sizeof want, "rank %d", N - 1);
    if (res != ncclRemoteError || !strstr(err, want) || took > 5) {
      fprintf(stderr, "rank %d: missing peer: result %d after %.1f s: %s\n", r, (int)res, took,
              err);
      return 13;
    }
    return 0;
  }
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, err);
    return 14;
  }
  int bad = 0;
  for (int i = 0; i < np; i++) {
    char got[32] = {0}, want[32];
    snprintf(want, sizeof want, "rank %d", peers[i].rank);
    if (fds[i] < 0 || pread(fds[i], got, sizeof got - 1, 0) <= 0 || strcmp(got, want) != 0) {
      fprintf(stderr, "rank %d: the descriptor from rank %d reads \"%s\"\n", r, peers[i].rank, got);
      bad = 1;
    }
    if (fds[i] >= 0) close(fds[i]);
  }
  close(mem);
  return bad ? 15 : 0;
}

/* Connects to `name` and claims to be rank 1 (process `pid`): must get
 * no descriptor, since the socket's credentials say who it really is. */
static int stranger_main(const char *name, int32_t pid) {
  alarm(20);
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa;
  socklen_t len = chorus_fdpass_addr(name, &sa);
  if (c < 0 || connect(c, (struct sockaddr *)&sa, len) != 0) return 20;
  struct {
    uint32_t magic;
    int32_t rank, pid;
  } h = {0x43464450u, 1, pid};
  if (write(c, &h, sizeof h) != (ssize_t)sizeof h) return 21;
  char buf[64];
  char ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t k = recvmsg(c, &m, 0);
  return k > 0 || m.msg_controllen > 0 ? 22 : 0; /* refused: end of stream, nothing */
}

/* Runs N ranks (and a stranger) in child processes; returns how many
 * failed or overran. */
static int run(int mode) {
  int up[N][2], down[N][2];
  pid_t pid[N + 1];
  for (int r = 0; r < N; r++) {
    if (pipe(up[r]) || pipe(down[r])) return N;
    pid[r] = fork();
    if (pid[r] == 0) _exit(rank_main(r, mode, up[r][1], down[r][0]));
    close(up[r][1]);
    close(down[r][0]);
  }
  card all[N];
  for (int r = 0; r < N; r++)
    if (read_all(up[r][0], &all[r], sizeof all[r])) memset(&all[r], 0, sizeof all[r]);
  pid[N] = -1;
  if (mode == STRANGER) { /* before the ranks start their round */
    pid[N] = fork();
    if (pid[N] == 0) _exit(stranger_main(all[0].name, all[1].pid));
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  for (int r = 0; r < N; r++) {
    if (write_all(down[r][1], all, sizeof all)) fprintf(stderr, "cannot reach rank %d\n", r);
    close(down[r][1]);
    close(up[r][0]);
  }
  int failed = 0;
  const int64_t deadline = chorus_now_ns() + 30 * 1000000000ll;
  for (int i = 0; i <= N; i++) {
    if (pid[i] <= 0) continue;
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid[i], &st, WNOHANG)) == 0 && chorus_now_ns() < deadline) usleep(10000);
    if (w == 0) {
      kill(pid[i], SIGKILL);
      waitpid(pid[i], &st, 0);
      fprintf(stderr, "process %d overran\n", i);
      failed++;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "process %d (%s) exited with status %d\n", i, i == N ? "stranger" : "rank",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
      failed++;
    }
  }
  return failed;
}

static void everyone(void) {
  EXPECT_EQ_INT(run(ALL), 0);
}
static void stranger(void) {
  EXPECT_EQ_INT(run(STRANGER), 0);
}
static void missing(void) {
  EXPECT_EQ_INT(run(MISSING), 0);
}
/* A peer whose listener's backlog is full (it never accepts): the round
 * gives up by its deadline instead of blocking in connect. */
static void full_backlog(void) {
  const char *name = "chorus-fd-test-full-backlog";
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa;
  socklen_t len = chorus_fdpass_addr(name, &sa);
  REQUIRE(s >= 0 && bind(s, (struct sockaddr *)&sa, len) == 0 && listen(s, 0) == 0);
  int fill[64], nfill = 0;
  while (nfill < 64) { /* until the backlog refuses more */
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&sa, len) != 0) {
      if (c >= 0) close(c);
      break;
    }
    fill[nfill++] = c;
  }
  EXPECT(nfill < 64);
  chorus_fdpass_peer peer = {name, (int32_t)getpid(), 1, 1, 0};
  int fd = -1;
  char err[256] = "";
  alarm(20); /* a connect that blocks would end the test here */
  const int64_t t0 = chorus_now_ns();
  ncclResult_t res =
      chorus_fdpass_exchange(NULL, -1, 0, &peer, 1, &fd, t0 + 1000000000ll, err, sizeof err);
  alarm(0);
  EXPECT_EQ_INT(res, ncclRemoteError);
  EXPECT(fd == -1 && strstr(err, "rank 1") != NULL);
  EXPECT(chorus_now_ns() - t0 < 5000000000ll);
  for (int i = 0; i < nfill; i++) close(fill[i]);
  close(s);
}

static void closed_is_safe(void) {
  int null = open("/dev/null", O_RDONLY);
  REQUIRE(null >= 0 && dup2(null, 0) == 0);
  chorus_fdpass fp;
  memset(&fp, 0, sizeof fp);
  chorus_fdpass_close(&fp); /* a zeroed struct: nothing to close (not stdin) */
  EXPECT(fcntl(0, F_GETFD) != -1);
  close(null);
}

int main(void) {
  RUN(everyone);
  RUN(stranger);
  RUN(missing);
  RUN(full_backlog);
  RUN(closed_is_safe);
  return unit_report();
}

/*
 * fdpass.c - see fdpass.h.
 */
#include "util/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/misc.h"

#define MAGIC      0x43464450u /* "CFDP" */
#define HELLO_WAIT 2000        /* ms a caller gets to say who it is */

typedef struct hello {
  uint32_t magic;
  int32_t rank;
  int32_t pid;
} hello;

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* A message of one hello and room for one descriptor beside it. */
typedef struct fd_msg {
  hello h;
  struct iovec iov;
  _Alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  struct msghdr m;
} fd_msg;

static void fd_msg_init(fd_msg *x) {
  memset(x, 0, sizeof *x);
  x->iov.iov_base = &x->h;
  x->iov.iov_len = sizeof x->h;
  x->m.msg_iov = &x->iov;
  x->m.msg_iovlen = 1;
  x->m.msg_control = x->ctl;
  x->m.msg_controllen = sizeof x->ctl;
}

socklen_t chorus_fdpass_addr(const char *name, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  const size_t len = strnlen(name, CHORUS_FDPASS_NAME);
  memcpy(sa->sun_path + 1, name, len); /* sun_path[0] = 0: abstract */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

ncclResult_t chorus_fdpass_listen(chorus_fdpass *fp, char *err, size_t errlen) {
  memset(fp, 0, sizeof *fp);
  fp->listen_fd = -1;
  uint64_t r = 0;
  ncclResult_t res = chorus_random_bytes(&r, sizeof r);
  if (res != ncclSuccess) {
    fail(err, errlen, "no random bytes for a socket name");
    return res;
  }
  char name[CHORUS_FDPASS_NAME];
  snprintf(name, sizeof name, "chorus-fd-%d-%016llx", (int)getpid(), (unsigned long long)r);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    fail(err, errlen, "socket(AF_UNIX): %s", strerror(errno));
    return ncclSystemError;
  }
  struct sockaddr_un sa;
  socklen_t len = chorus_fdpass_addr(name, &sa);
  if (bind(s, (struct sockaddr *)&sa, len) != 0 || listen(s, 64) != 0) {
    fail(err, errlen, "listening on the Unix socket @%s: %s", name, strerror(errno));
    close(s);
    return ncclSystemError;
  }
  fp->listen_fd = s;
  snprintf(fp->name, sizeof fp->name, "%s", name);
  return ncclSuccess;
}

void chorus_fdpass_close(chorus_fdpass *fp) {
  if (!fp->name[0]) return;
  close(fp->listen_fd);
  fp->listen_fd = -1;
  fp->name[0] = 0;
}

/* Waits until fd is ready for `events`, at most until deadline (and ms). */
static int wait_fd(int fd, short events, int64_t deadline, int cap_ms) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int ms = chorus_ms_left(deadline, cap_ms);
    int k = poll(&p, 1, ms);
    if (k > 0) return 0;
    if (k < 0 && errno == EINTR) continue;
    return -1; /* timed out, or poll failed */
  }
}

/* Reads exactly len bytes (a hello), by the deadline. */
static int read_exact(int fd, void *buf, size_t len, int64_t deadline, int cap_ms) {
  size_t got = 0;
  while (got < len) {
    if (wait_fd(fd, POLLIN, deadline, cap_ms) != 0) return -1;
    ssize_t k = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
    if (k == 0) return -1;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    got += (size_t)k;
  }
  return 0;
}

/* The peer a caller of pid claiming rank is, if it is one that wants our
 * descriptor; -1 otherwise. */
static int expected(const chorus_fdpass_peer *peers, int npeers, int32_t pid, int32_t rank) {
  for (int i = 0; i < npeers; i++)
    if (peers[i].serve && peers[i].pid == pid && peers[i].rank == rank) return i;
  return -1;
}

/* Accepts the callers that want fd and answers each with it. */
static int serve_all(chorus_fdpass *fp, int fd, int my_rank, const chorus_fdpass_peer *peers,
                     int npeers, int64_t deadline, char *err, size_t errlen) {
  int want = 0, served = 0;
  unsigned char done[64] = {0};
  for (int i = 0; i < npeers; i++) want += peers[i].serve != 0;
  while (served < want) {
    if (wait_fd(fp->listen_fd, POLLIN, deadline, 1 << 30) != 0) {
      int missing = -1;
      for (int i = 0; i < npeers && missing < 0; i++)
        if (peers[i].serve && !done[i]) missing = i;
      return fail(err, errlen,
                  "rank %d (pid %d) never came for this process's descriptor (%d of %d served)",
                  missing >= 0 ? peers[missing].rank : -1, missing >= 0 ? peers[missing].pid : -1,
                  served, want);
    }
    int c = accept4(fp->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      return fail(err, errlen, "accept on @%s: %s", fp->name, strerror(errno));
    }
    struct ucred cred;
    socklen_t clen = sizeof cred;
    hello h;
    int who = -1;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 &&
        read_exact(c, &h, sizeof h, deadline, HELLO_WAIT) == 0 && h.magic == MAGIC &&
        h.pid == cred.pid)
      who = expected(peers, npeers, cred.pid, h.rank);
    if (who < 0 || done[who]) { /* a stranger, or a repeat: refused */
      close(c);
      continue;
    }
    fd_msg x;
    fd_msg_init(&x);
    x.h = (hello){MAGIC, my_rank, (int32_t)getpid()};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&x.m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    ssize_t k;
    do {
      k = sendmsg(c, &x.m, MSG_NOSIGNAL);
    } while (k < 0 && errno == EINTR);
    close(c);
    if (k != (ssize_t)sizeof x.h)
      return fail(err, errlen, "handing the descriptor to rank %d (pid %d): %s", peers[who].rank,
                  peers[who].pid, k < 0 ? strerror(errno) : "short write");
    done[who] = 1;
    served++;
  }
  return 0;
}

/* Reads peer i's answer on connection c: its descriptor, or -1. */
static int fetch_one(int c, const chorus_fdpass_peer *p, int64_t deadline, char *err,
                     size_t errlen) {
  if (wait_fd(c, POLLIN, deadline, 1 << 30) != 0)
    return fail(err, errlen, "rank %d (pid %d) did not hand over its descriptor in time", p->rank,
                p->pid);
  fd_msg x;
  fd_msg_init(&x);
  const hello *answer = &x.h;
  ssize_t k;
  do {
    k = recvmsg(c, &x.m, MSG_CMSG_CLOEXEC);
  } while (k < 0 && errno == EINTR);
  int got = -1;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&x.m); cm; cm = CMSG_NXTHDR(&x.m, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
      memcpy(&got, CMSG_DATA(cm), sizeof got);
  if (k != (ssize_t)sizeof *answer || answer->magic != MAGIC || answer->rank != p->rank ||
      answer->pid != p->pid || got < 0) {
    if (got >= 0) close(got);
    return fail(err, errlen, "rank %d (pid %d) answered without a descriptor (%s)", p->rank, p->pid,
                k < 0 ? strerror(errno) : "a malformed answer");
  }
  return got;
}

ncclResult_t chorus_fdpass_exchange(chorus_fdpass *fp, int fd, int my_rank,
                                    const chorus_fdpass_peer *peers, int npeers, int *fds,
                                    int64_t deadline, char *err, size_t errlen) {
  if (npeers > 64) {
    fail(err, errlen, "%d peers: at most 64", npeers);
    return ncclInternalError;
  }
  int conn[64];
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < npeers; i++) fds[i] = conn[i] = -1;
  /* 1. Connect to every peer whose descriptor we want, and say who we are. */
  for (int i = 0; i < npeers && res == ncclSuccess; i++) {
    if (!peers[i].fetch) continue;
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa;
    socklen_t len = chorus_fdpass_addr(peers[i].name, &sa);
    hello h = {MAGIC, my_rank, (int32_t)getpid()};
    int ok = c >= 0;
    while (ok && connect(c, (struct sockaddr *)&sa, len) != 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == ECONNREFUSED) && !chorus_expired(deadline)) {
        usleep(1000); /* a full backlog (non-blocking: never waits past the deadline), or the
                         peer closed its listener (then: time out) */
        continue;
      }
      ok = 0;
    }
    if (ok) ok = send(c, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h;
    if (!ok) {
      fail(err, errlen, "connecting to rank %d (pid %d) at @%s: %s", peers[i].rank, peers[i].pid,
           peers[i].name, strerror(errno));
      if (c >= 0) close(c);
      res = ncclRemoteError;
      break;
    }
    conn[i] = c;
  }
  /* 2. Answer the peers that want ours. 3. Read the answers we asked for. */
  if (res == ncclSuccess && fp && serve_all(fp, fd, my_rank, peers, npeers, deadline, err, errlen))
    res = ncclRemoteError;
  for (int i = 0; i < npeers && res == ncclSuccess; i++) {
    if (conn[i] < 0) continue;
    fds[i] = fetch_one(conn[i], &peers[i], deadline, err, errlen);
    if (fds[i] < 0) res = ncclRemoteError;
  }
  for (int i = 0; i < npeers; i++) {
    if (conn[i] >= 0) close(conn[i]);
    if (res != ncclSuccess && fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
  }
  return res;
}

/*
 * socket.c - see socket.h.
 */
#include "util/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/check.h"
#include "util/clock.h"
#include "util/param.h"

socklen_t chorus_sock_len(const chorus_sockaddr *a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int chorus_sock_is_loopback(const chorus_sockaddr *a) {
  if (a->sa.sa_family == AF_INET) return (ntohl(a->sin.sin_addr.s_addr) >> 24) == 127;
  if (a->sa.sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr);
  return 0;
}

int chorus_sock_port(const chorus_sockaddr *a) {
  return ntohs(a->sa.sa_family == AF_INET6 ? a->sin6.sin6_port : a->sin.sin_port);
}

void chorus_sock_set_port(chorus_sockaddr *a, int port) {
  if (a->sa.sa_family == AF_INET6)
    a->sin6.sin6_port = htons((uint16_t)port);
  else
    a->sin.sin_port = htons((uint16_t)port);
}

const char *chorus_sock_str(const chorus_sockaddr *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof host);
    snprintf(buf, len, "[%s]:%d", host, chorus_sock_port(a));
  } else if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof host);
    snprintf(buf, len, "%s:%d", host, chorus_sock_port(a));
  } else {
    snprintf(buf, len, "<no address>");
  }
  return buf;
}

ncclResult_t chorus_sock_split(const char *text, char host[CHORUS_HOST_MAX], int *port, char *err,
                               size_t errlen) {
  const char *port_s;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':' || (size_t)(close - text - 1) >= CHORUS_HOST_MAX)
      return chorus_errmsg(err, errlen, ncclInvalidArgument, "\"%s\" is not [<ipv6>]:<port>", text);
    memcpy(host, text + 1, (size_t)(close - text - 1));
    host[close - text - 1] = '\0';
    port_s = close + 2;
  } else {
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= CHORUS_HOST_MAX)
      return chorus_errmsg(err, errlen, ncclInvalidArgument, "\"%s\" is not <host>:<port>", text);
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    port_s = colon + 1;
  }
  char *end = NULL;
  errno = 0;
  long p = strtol(port_s, &end, 10);
  if (!*port_s || *end || errno || p < 0 || p > 65535)
    return chorus_errmsg(err, errlen, ncclInvalidArgument, "bad port in \"%s\"", text);
  *port = (int)p;
  return ncclSuccess;
}

ncclResult_t chorus_sock_parse(const char *text, chorus_sockaddr *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  char host[CHORUS_HOST_MAX];
  int port = 0;
  ncclResult_t sres = chorus_sock_split(text, host, &port, err, errlen);
  if (sres != ncclSuccess) return sres;
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || !res)
    return chorus_errmsg(err, errlen, ncclInvalidArgument, "cannot resolve \"%s\": %s", host,
                         gai_strerror(rc));
  memcpy(out, res->ai_addr, res->ai_addrlen < sizeof *out ? res->ai_addrlen : sizeof *out);
  freeaddrinfo(res);
  chorus_sock_set_port(out, (int)port);
  return ncclSuccess;
}

/* One entry of NCCL_SOCKET_IFNAME matches name? exact: whole name; else prefix. */
static int list_matches(const char *list, const char *name, int exact) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", list);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (exact ? strcmp(tok, name) == 0 : strncmp(tok, name, strlen(tok)) == 0) return 1;
  }
  return 0;
}

int chorus_sock_ifname_allowed(const char *spec, const char *name) {
  int exclude = 0, exact = 0;
  if (*spec == '^') exclude = 1, spec++;
  if (*spec == '=') exact = 1, spec++;
  return list_matches(spec, name, exact) != exclude;
}

static int family_allowed(int fam) {
  const char *f = chorus_param_str(CHORUS_P_SOCKET_FAMILY);
  if (!f || !*f) return 1;
  if (strcasecmp(f, "AF_INET") == 0) return fam == AF_INET;
  if (strcasecmp(f, "AF_INET6") == 0) return fam == AF_INET6;
  return 1;
}

static int usable_addr(const struct ifaddrs *ifa) {
  if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) return 0;
  int fam = ifa->ifa_addr->sa_family;
  if (fam != AF_INET && fam != AF_INET6) return 0;
  if (!family_allowed(fam)) return 0;
  if (fam == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ifa->ifa_addr;
    if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) return 0;
  }
  return 1;
}

int chorus_sock_default_pass(const char *name) {
  if (strncmp(name, "ib", 2) == 0) return 0;
  /* Bridges and container ends: on a host they lead to its own containers,
   * not to other hosts; inside a network namespace they may be all there
   * is, and still beat loopback. */
  static const char *const virt[] = {"docker", "veth", "virbr", "br-"};
  for (size_t i = 0; i < sizeof virt / sizeof virt[0]; i++)
    if (strncmp(name, virt[i], strlen(virt[i])) == 0) return 2;
  if (strncmp(name, "lo", 2) == 0) return 3;
  return 1;
}

ncclResult_t chorus_sock_pick_local(chorus_sockaddr *out, char ifname[IF_NAMESIZE], char *err,
                                    size_t errlen) {
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0)
    return chorus_errmsg(err, errlen, ncclSystemError, "getifaddrs failed: %s", strerror(errno));
  const char *spec = chorus_param_str(CHORUS_P_SOCKET_IFNAME);
  const struct ifaddrs *best = NULL;
  int best_rank = 1 << 30;
  for (const struct ifaddrs *ifa = ifs; ifa; ifa = ifa->ifa_next) {
    if (!usable_addr(ifa)) continue;
    int rank;
    if (spec && *spec) {
      if (!chorus_sock_ifname_allowed(spec, ifa->ifa_name)) continue;
      rank = 0;
    } else {
      rank = chorus_sock_default_pass(ifa->ifa_name) * 2;
    }
    if (ifa->ifa_addr->sa_family == AF_INET6) rank += 1;
    if (rank < best_rank) best = ifa, best_rank = rank;
  }
  if (!best) {
    freeifaddrs(ifs);
    return chorus_errmsg(
        err, errlen, ncclSystemError,
        "no usable network interface matches NCCL_SOCKET_IFNAME=\"%s\"%s%s; "
        "list interfaces with `ip addr` and set NCCL_SOCKET_IFNAME",
        spec ? spec : "",
        chorus_param_str(CHORUS_P_SOCKET_FAMILY) ? " and NCCL_SOCKET_FAMILY=" : "",
        chorus_param_str(CHORUS_P_SOCKET_FAMILY) ? chorus_param_str(CHORUS_P_SOCKET_FAMILY) : "");
  }
  memset(out, 0, sizeof *out);
  memcpy(out, best->ifa_addr,
         best->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in));
  chorus_sock_set_port(out, 0);
  snprintf(ifname, IF_NAMESIZE, "%s", best->ifa_name);
  freeifaddrs(ifs);
  return ncclSuccess;
}

ncclResult_t chorus_sock_local_for(const chorus_sockaddr *remote, chorus_sockaddr *out, char *err,
                                   size_t errlen) {
  /* Ask the kernel which source address it would use: connect a UDP socket
   * (sends nothing) and read its name. */
  int fd = socket(remote->sa.sa_family, SOCK_DGRAM, 0);
  if (fd < 0)
    return chorus_errmsg(err, errlen, ncclSystemError, "socket failed: %s", strerror(errno));
  chorus_sockaddr probe = *remote;
  if (chorus_sock_port(&probe) == 0) chorus_sock_set_port(&probe, 9);
  socklen_t len = sizeof *out;
  if (connect(fd, &probe.sa, chorus_sock_len(&probe)) != 0 || getsockname(fd, &out->sa, &len)) {
    int e = errno;
    close(fd);
    char a[CHORUS_ADDR_STRLEN];
    return chorus_errmsg(err, errlen, ncclSystemError, "no route to %s: %s",
                         chorus_sock_str(remote, a, sizeof a), strerror(e));
  }
  close(fd);
  chorus_sock_set_port(out, 0);
  return ncclSuccess;
}

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Every stream: no Nagle delay; and a peer whose host vanishes (power,
 * link down) is noticed by the kernel within about 15 s instead of the
 * minutes of TCP's retransmissions, idle or not: keepalive probes after
 * 5 s of silence (the peer's kernel answers them whatever its process
 * does), and data left unacknowledged 15 s aborts the stream (a live peer
 * that does not read acknowledges the window probes, so it stays). */
#define KEEPALIVE_IDLE_S  5
#define KEEPALIVE_INTVL_S 1
#define KEEPALIVE_COUNT   5
#define USER_TIMEOUT_MS   15000

static void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_COUNT;
  unsigned user = USER_TIMEOUT_MS;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user);
}

/* A stream inside this machine crosses no queue, so pacing only delays
 * it. Where the system's congestion control paces (bbr), such a stream
 * runs reno, which every process may choose and which keeps no
 * delay-based state. It has to start so: a socket moved off bbr once
 * established keeps pacing (the kernel's own, at twice the window per
 * round trip): 2 namespace hosts of a 2-vCPU guest, one stream of 20 MiB:
 * 2.0 GB/s started with reno, 1.3 moved to it, 1.4 with bbr; the network
 * probe at init 3.7 GB/s against 0.6, and a 4-rank AllReduce of 64-256
 * KiB 2x faster. So every socket starts with reno where the system's
 * choice is bbr (listeners too: what they accept starts with their
 * choice), and the net transport gives its streams to other machines the
 * system's choice back (chorus_sock_system_cc). Measured on bbr's guest:
 * one stream between two network namespaces joined by veth moved 2.1
 * GB/s with bbr, 9.4 with reno (10.7 with cubic); an AllGather between
 * two such hosts took half the time with reno from 1 MiB (2.3 against 5.2
 * ms at 16 MiB), while with cubic it retransmitted and took 1.3-2.6x
 * bbr's time at 256 KiB-4 MiB; over loopback, AllReduce took 1.2-2.1x
 * less time from 1 MiB with reno than with cubic, the others level. */
static int paces(const char *cc) {
  return strncmp(cc, "bbr", 3) == 0;
}

static int get_cc(int fd, char cc[16]) {
  memset(cc, 0, 16);
  socklen_t n = 15;
  return getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &n);
}

/* The congestion control new sockets get here ("" where unknown), read
 * once: a process's network namespace, whose setting it is, stays. */
static char system_cc_name[16];
static pthread_once_t system_cc_once = PTHREAD_ONCE_INIT;

static void read_system_cc(void) {
  FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  if (!f) return;
  if (fgets(system_cc_name, sizeof system_cc_name, f))
    system_cc_name[strcspn(system_cc_name, "\n")] = '\0';
  fclose(f);
}

static const char *system_cc(void) {
  pthread_once(&system_cc_once, read_system_cc);
  return system_cc_name;
}

/* A new socket, before it connects or listens. */
static void start_unpaced(int fd) {
  if (chorus_param_int(CHORUS_P_SOCKET_UNPACE) && paces(system_cc()))
    (void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
}

int chorus_sock_unpace(int fd) {
  char cc[16];
  if (!chorus_param_int(CHORUS_P_SOCKET_UNPACE) || get_cc(fd, cc) != 0) return 0;
  if (paces(cc) &&
      (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4) != 0 || get_cc(fd, cc) != 0))
    return 0;
  return strcmp(cc, "reno") == 0 && paces(system_cc());
}

int chorus_sock_system_cc(int fd) {
  char cc[16];
  const char *sys = system_cc();
  if (!chorus_param_int(CHORUS_P_SOCKET_UNPACE) || !paces(sys) || get_cc(fd, cc) != 0 ||
      strcmp(cc, sys) == 0)
    return 0;
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, sys, (socklen_t)strlen(sys)) == 0 &&
         get_cc(fd, cc) == 0 && strcmp(cc, sys) == 0;
}

ncclResult_t chorus_sock_listen(const chorus_sockaddr *addr, int *fd_out, chorus_sockaddr *bound,
                                char *err, size_t errlen) {
  char a[CHORUS_ADDR_STRLEN];
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return chorus_errmsg(err, errlen, ncclSystemError, "socket failed: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  start_unpaced(fd);
  if (bind(fd, &addr->sa, chorus_sock_len(addr)) != 0 || listen(fd, 1024) != 0) {
    int e = errno;
    close(fd);
    return chorus_errmsg(err, errlen, ncclSystemError, "cannot listen on %s: %s",
                         chorus_sock_str(addr, a, sizeof a), strerror(e));
  }
  socklen_t len = sizeof *bound;
  getsockname(fd, &bound->sa, &len);
  set_nonblock(fd);
  *fd_out = fd;
  return ncclSuccess;
}

/* Waits for events on fd until the deadline; returns 1 ready, 0 timeout. */
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int ms = chorus_ms_left(deadline, 1000);
    int rc = poll(&p, 1, ms);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return 1; /* let the caller's syscall report it */
    if (chorus_expired(deadline)) return 0;
  }
}

ncclResult_t chorus_sock_connect(const chorus_sockaddr *addr, int64_t deadline, int *fd_out,
                                 char *err, size_t errlen) {
  return chorus_sock_connect_ex(addr, deadline, deadline, fd_out, err, errlen);
}

ncclResult_t chorus_sock_connect_ex(const chorus_sockaddr *addr, int64_t deadline,
                                    int64_t refused_deadline, int *fd_out, char *err,
                                    size_t errlen) {
  char a[CHORUS_ADDR_STRLEN];
  chorus_sock_str(addr, a, sizeof a);
  int delay_ms = 10;
  int last_errno = 0;
  for (;;) {
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      return chorus_errmsg(err, errlen, ncclSystemError, "socket failed: %s", strerror(errno));
    start_unpaced(fd);
    int rc = connect(fd, &addr->sa, chorus_sock_len(addr));
    int e = rc == 0 ? 0 : errno;
    if (e == EINPROGRESS) {
      if (!wait_fd(fd, POLLOUT, deadline)) {
        close(fd);
        return chorus_errmsg(err, errlen, ncclRemoteError,
                             "connecting to %s timed out (nobody answered)", a);
      }
      socklen_t len = sizeof e;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
    }
    if (e == 0) {
      set_nodelay(fd);
      *fd_out = fd;
      return ncclSuccess;
    }
    close(fd);
    last_errno = e;
    int retryable = e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH ||
                    e == ECONNRESET || e == EAGAIN || e == EINTR;
    if (!retryable) break;
    if (chorus_expired(deadline) || (e == ECONNREFUSED && chorus_expired(refused_deadline))) break;
    struct timespec ts = {0, (long)delay_ms * 1000000};
    nanosleep(&ts, NULL);
    if (delay_ms < 200) delay_ms *= 2;
  }
  return chorus_errmsg(err, errlen, ncclRemoteError, "cannot connect to %s: %s", a,
                       strerror(last_errno));
}

ncclResult_t chorus_sock_accept(int lfd, int64_t deadline, int *fd_out, char *err, size_t errlen) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      set_nodelay(fd);
      *fd_out = fd;
      return ncclSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return chorus_errmsg(err, errlen, ncclSystemError, "accept failed: %s", strerror(errno));
    if (!wait_fd(lfd, POLLIN, deadline))
      return chorus_errmsg(err, errlen, ncclRemoteError, "no connection arrived in time");
  }
}

ncclResult_t chorus_sock_send_some(int fd, const void *buf, size_t len, size_t *done, char *err,
                                   size_t errlen) {
  while (*done < len) {
    ssize_t n = send(fd, (const char *)buf + *done, len - *done, MSG_NOSIGNAL);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n < 0 && errno == EINTR) continue;
    return chorus_errmsg(err, errlen, ncclRemoteError, "send failed: %s",
                         n < 0 ? strerror(errno) : "connection closed");
  }
  return ncclSuccess;
}

ncclResult_t chorus_sock_recv_some(int fd, void *buf, size_t len, size_t *done, char *err,
                                   size_t errlen) {
  while (*done < len) {
    ssize_t n = recv(fd, (char *)buf + *done, len - *done, 0);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n < 0 && errno == EINTR) continue;
    return chorus_errmsg(err, errlen, ncclRemoteError, "%s",
                         n == 0 ? "connection closed by peer" : strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t chorus_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline, char *err,
                                  size_t errlen) {
  size_t done = 0;
  for (;;) {
    CHECK(chorus_sock_send_some(fd, buf, len, &done, err, errlen));
    if (done == len) return ncclSuccess;
    if (!wait_fd(fd, POLLOUT, deadline))
      return chorus_errmsg(err, errlen, ncclRemoteError, "send timed out (%zu of %zu bytes)", done,
                           len);
  }
}

ncclResult_t chorus_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline, char *err,
                                  size_t errlen) {
  size_t done = 0;
  for (;;) {
    CHECK(chorus_sock_recv_some(fd, buf, len, &done, err, errlen));
    if (done == len) return ncclSuccess;
    if (!wait_fd(fd, POLLIN, deadline))
      return chorus_errmsg(err, errlen, ncclRemoteError,
                           "receive timed out (%zu of %zu bytes arrived)", done, len);
  }
}

void chorus_sock_close(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

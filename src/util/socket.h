/*
 * socket.h - TCP helpers: addresses, interface choice, connect/accept/send/recv
 * with deadlines.
 *
 * Every socket is non-blocking; the *_all helpers poll until done or until the
 * deadline. None of them prints: they return ncclSystemError (local
 * problem), ncclRemoteError (the peer closed or reset the connection, or the
 * deadline passed while waiting for it) or ncclInvalidArgument (bad address
 * text) and describe the problem in err.
 */
#ifndef CHORUS_UTIL_SOCKET_H
#define CHORUS_UTIL_SOCKET_H

#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nccl.h"

typedef union chorus_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} chorus_sockaddr;

#define CHORUS_ADDR_STRLEN 64

/* Parses "<ipv4>:<port>", "[<ipv6>]:<port>" or "<hostname>:<port>". */
ncclResult_t chorus_sock_parse(const char *text, chorus_sockaddr *out, char *err, size_t errlen);
/* Its first half, without resolving: host and port of text. */
#define CHORUS_HOST_MAX 256
ncclResult_t chorus_sock_split(const char *text, char host[CHORUS_HOST_MAX], int *port, char *err,
                               size_t errlen);
/* Whether NCCL_SOCKET_IFNAME's value spec (not empty) lets interface name
 * be used: a comma list of prefixes, "^" first to exclude them, "=" for
 * whole names. */
int chorus_sock_ifname_allowed(const char *spec, const char *name);
/* "1.2.3.4:5678" or "[::1]:5678". */
const char *chorus_sock_str(const chorus_sockaddr *addr, char *buf, size_t len);
socklen_t chorus_sock_len(const chorus_sockaddr *addr);
/* Whether addr is a loopback address (127.0.0.0/8, ::1). */
int chorus_sock_is_loopback(const chorus_sockaddr *addr);
int chorus_sock_port(const chorus_sockaddr *addr);
void chorus_sock_set_port(chorus_sockaddr *addr, int port);

/* Picks the local address to listen on: NCCL_SOCKET_IFNAME (prefixes, "^"
 * to exclude, "=" for exact names) and NCCL_SOCKET_FAMILY; by default the
 * lowest pass of chorus_sock_default_pass, IPv4 before IPv6 within one.
 * ifname receives the interface name. */
/* Where an interface comes in the default choice: 0 InfiniBand (ib*),
 * 1 any other, 2 bridges and container links (docker*, veth*, virbr*,
 * br-*), 3 loopback (lo*). */
int chorus_sock_default_pass(const char *name);
ncclResult_t chorus_sock_pick_local(chorus_sockaddr *out, char ifname[IF_NAMESIZE], char *err,
                                    size_t errlen);
/* The local interface address in the same family that can reach `remote`
 * (used when a fixed NCCL_COMM_ID decides the family). */
ncclResult_t chorus_sock_local_for(const chorus_sockaddr *remote, chorus_sockaddr *out, char *err,
                                   size_t errlen);

/* Listens on addr (port 0: any). bound receives the real address. */
ncclResult_t chorus_sock_listen(const chorus_sockaddr *addr, int *fd, chorus_sockaddr *bound,
                                char *err, size_t errlen);
/* Connects, retrying refused/unreachable attempts until the deadline. */
/* As chorus_sock_connect, but a refusal (nobody listens) stops the retries
 * at refused_deadline. */
ncclResult_t chorus_sock_connect_ex(const chorus_sockaddr *addr, int64_t deadline,
                                    int64_t refused_deadline, int *fd, char *err, size_t errlen);
ncclResult_t chorus_sock_connect(const chorus_sockaddr *addr, int64_t deadline, int *fd, char *err,
                                 size_t errlen);
/* Accepts one connection, waiting until the deadline. */
ncclResult_t chorus_sock_accept(int listen_fd, int64_t deadline, int *fd, char *err, size_t errlen);
/* Where the system's TCP congestion control paces (bbr), sockets made
 * here (listeners, and connections before they connect) start with reno,
 * unless CHORUS_SOCKET_UNPACE=0; streams that stay inside this machine
 * keep it (pacing only delays them), streams to other machines get the
 * system's choice back from their owner (chorus_sock_system_cc).
 * chorus_sock_unpace: a stream inside this machine moves off bbr if it
 * runs it; returns 1 where it runs reno and the system's choice paces. */
int chorus_sock_unpace(int fd);
/* A stream to another machine: the system's congestion control where it
 * paces and the stream runs another; returns 1 where it changed. */
int chorus_sock_system_cc(int fd);
ncclResult_t chorus_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline, char *err,
                                  size_t errlen);
ncclResult_t chorus_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline, char *err,
                                  size_t errlen);

/* Non-blocking partial I/O: *done grows by what moved. Returns ncclSuccess
 * (possibly moving nothing), or ncclRemoteError when the peer closed. */
ncclResult_t chorus_sock_send_some(int fd, const void *buf, size_t len, size_t *done, char *err,
                                   size_t errlen);
ncclResult_t chorus_sock_recv_some(int fd, void *buf, size_t len, size_t *done, char *err,
                                   size_t errlen);

void chorus_sock_close(int *fd);

#endif

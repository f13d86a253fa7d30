/*
 * fdpass.h - file descriptors handed between the processes of one host
 * over Unix sockets (SCM_RIGHTS), as GPU windows exported by cuMem as
 * POSIX file descriptors are.
 *
 * Each process listens on an abstract Unix socket of a fresh random name
 * (no file to clean up; it goes with the process). After the names are
 * exchanged by other means (the bootstrap), one round hands descriptors
 * out: every process connects to each peer whose descriptor it wants and
 * says who it is, accepts the connections of the peers that want its
 * descriptor, checks each caller's process id (SO_PEERCRED) against the
 * peers it expects, so no other process receives the descriptor, and
 * answers with it; then it reads each descriptor it asked for. Connecting
 * first and answering after cannot deadlock: a connection completes in
 * the listener's backlog before it is accepted. Every wait ends by the
 * deadline. Nothing here prints; errors are described in err.
 */
#ifndef CHORUS_UTIL_FDPASS_H
#define CHORUS_UTIL_FDPASS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "nccl.h"

#define CHORUS_FDPASS_NAME 48

typedef struct chorus_fdpass {
  int listen_fd;                 /* valid while name[0] is set */
  char name[CHORUS_FDPASS_NAME]; /* the abstract name, without its leading NUL */
} chorus_fdpass;

/* A peer of the round: its listener's name and process id, its rank (for
 * messages and checks), whether this process wants its descriptor and
 * whether it wants this process's. */
typedef struct chorus_fdpass_peer {
  const char *name;
  int32_t pid;
  int32_t rank;
  int fetch; /* this process wants the peer's descriptor */
  int serve; /* the peer wants this process's descriptor */
} chorus_fdpass_peer;

/* Listens on a fresh abstract socket. */
ncclResult_t chorus_fdpass_listen(chorus_fdpass *fp, char *err, size_t errlen);

/* One round: offers fd to the peers with serve set, and puts the
 * descriptor of each peer with fetch set into fds[i] (-1 for the others;
 * the caller closes them). Connections from processes that are not such a
 * peer are refused and do not count. On failure no descriptor is left
 * open in fds. */
ncclResult_t chorus_fdpass_exchange(chorus_fdpass *fp, int fd, int my_rank,
                                    const chorus_fdpass_peer *peers, int npeers, int *fds,
                                    int64_t deadline, char *err, size_t errlen);

/* Stops listening (idempotent; safe on a zeroed struct). */
void chorus_fdpass_close(chorus_fdpass *fp);

/* The abstract Unix socket address of `name` (sun_path[0] = 0, then the
 * name) in *sa; returns its length, for bind and connect. */
socklen_t chorus_fdpass_addr(const char *name, struct sockaddr_un *sa);

#endif

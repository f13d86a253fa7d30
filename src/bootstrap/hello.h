/*
 * hello.h - reading chorus_hello (plus a fixed payload) from many incoming
 * connections at once, without letting a slow or hostile one block the rest.
 *
 * A chorus_acceptor owns a listening socket and the connections accepted from
 * it that have not finished their hello yet. chorus_acceptor_poll waits (up
 * to a deadline) until one connection has delivered a complete, valid hello
 * and payload, and hands it over. Connections with a wrong magic or mac,
 * that stay silent past the per-connection limit, or that the pending limit
 * pushes out are closed with a WARN (at most one per 10 s per process,
 * counting the others); they never surface as errors.
 */
#ifndef CHORUS_BOOTSTRAP_HELLO_H
#define CHORUS_BOOTSTRAP_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/wire.h"
#include "nccl.h"

#define CHORUS_HELLO_MAX_PAYLOAD 256
/* Connections an acceptor keeps waiting for their hello, at least; a
 * newer one pushes out the oldest (strangers cannot exhaust descriptors).
 * Owners that know how many ranks may connect at once raise it
 * (chorus_acceptor_expect). */
#define CHORUS_ACCEPT_MAX_PENDING 128

/* A link both ends already proved themselves on: a hello of `kind` from
 * rank `from` keyed by that link's challenge needs no fresh one (see
 * chorus_acceptor_stand). */
typedef struct chorus_standing {
  uint32_t kind;
  int32_t from;
  uint8_t nonce[CHORUS_NONCE_BYTES];
} chorus_standing;
#define CHORUS_ACCEPT_STANDING 2

typedef struct chorus_pending {
  int fd;
  size_t got;
  int64_t deadline;
  uint8_t nonce[CHORUS_NONCE_BYTES]; /* the challenge sent to it */
  int standing;                      /* its hello answered standing[i], or -1: the challenge */
  unsigned char buf[sizeof(chorus_hello) + CHORUS_HELLO_MAX_PAYLOAD];
} chorus_pending;

typedef struct chorus_acceptor {
  int listen_fd;
  uint64_t secret[2];
  chorus_standing standing[CHORUS_ACCEPT_STANDING];
  int nstanding;
  /* Payload size expected after a hello of each kind (index = kind). */
  size_t payload_size[8];
  chorus_pending *pending;
  int npending, cap;
  int max_pending;
} chorus_acceptor;

/* Returned connection: the hello, its payload, and the socket (now owned by
 * the caller). */
typedef struct chorus_arrival {
  chorus_hello hello;
  uint8_t nonce[CHORUS_NONCE_BYTES]; /* the challenge it answered */
  unsigned char payload[CHORUS_HELLO_MAX_PAYLOAD];
  int fd;
} chorus_arrival;

void chorus_acceptor_init(chorus_acceptor *a, int listen_fd, const uint64_t secret[2]);
/* Up to n legitimate connections may arrive at once (a rendezvous of n
 * ranks, a rank's peers connecting their transports): keep that many
 * waiting, beyond the default. */
void chorus_acceptor_expect(chorus_acceptor *a, int n);
/* Accepts, besides answers to fresh challenges, hellos of `kind` from
 * rank `from` keyed by `nonce`: the challenge of an earlier connection
 * between the two (a ring link). The sender then writes its hello at
 * once, without waiting for this side to accept and challenge it, so a
 * word sent while this rank is descheduled or busy elsewhere lies
 * waiting in the listener's queue. Replaying it can only repeat the
 * same word from the same rank to this acceptor. At most
 * CHORUS_ACCEPT_STANDING; further ones are ignored. */
void chorus_acceptor_stand(chorus_acceptor *a, uint32_t kind, int from,
                           const uint8_t nonce[CHORUS_NONCE_BYTES]);
/* Waits for one valid arrival. ncclInProgress when the deadline (or
 * *abort_flag) stops the wait first; ncclSystemError on a local failure. */
ncclResult_t chorus_acceptor_poll(chorus_acceptor *a, int64_t deadline, const int *abort_flag,
                                  chorus_arrival *out);
/* Takes fd, a connected socket (non-blocking), as if accepted: its hello
 * is read by the next polls. On failure fd is closed. */
ncclResult_t chorus_acceptor_adopt(chorus_acceptor *a, int fd);
/* Closes pending connections (not the listener). */
void chorus_acceptor_fini(chorus_acceptor *a);

/* The mac a hello carries: SipHash keyed by secret of the challenge and
 * the hello's kind, from, nranks and tag. */
uint64_t chorus_hello_mac(const uint64_t secret[2], const uint8_t nonce[CHORUS_NONCE_BYTES],
                          const chorus_hello *h);

/* Writes a hello (plus payload) that answers the challenge nonce. */
ncclResult_t chorus_hello_answer(int fd, const uint8_t nonce[CHORUS_NONCE_BYTES], uint32_t kind,
                                 const uint64_t secret[2], int from, int nranks, uint64_t tag,
                                 const void *payload, size_t size, int64_t deadline, char *err,
                                 size_t errlen);

/* On a fresh connection: reads the challenge, then answers it (for a
 * listener that is always served, such as a root's). */
ncclResult_t chorus_hello_send(int fd, uint32_t kind, const uint64_t secret[2], int from,
                               int nranks, uint64_t tag, const void *payload, size_t size,
                               int64_t deadline, char *err, size_t errlen);

#endif

/*
 * wire.h - the bootstrap's messages on the wire.
 *
 * Every TCP connection Chorus opens, to a root or to a peer, begins with a
 * challenge and a chorus_hello: the accepting side sends CHORUS_NONCE_BYTES
 * of fresh randomness, the connecting side answers with a hello whose mac
 * is SipHash, keyed by the job's secret, of the nonce and the hello's
 * fields (chorus_hello_mac). The secret never travels, a recorded hello
 * does not open another connection (but for a ring neighbour's failure
 * word, keyed by its link's challenge: chorus_acceptor_stand), and the
 * receiver checks magic and mac
 * before reading anything else, so a stray or hostile connection is closed
 * after at most sizeof(chorus_hello) bytes. Integers are in host byte
 * order: all ranks of a job are assumed to share one byte order.
 */
#ifndef CHORUS_BOOTSTRAP_WIRE_H
#define CHORUS_BOOTSTRAP_WIRE_H

#include <stdint.h>

#include "util/socket.h"

#define CHORUS_HELLO_MAGIC 0x43485331u /* "CHS1" */

enum {
  CHORUS_HELLO_ROOT_RANK = 1, /* rank -> its root: payload chorus_root_join */
  CHORUS_HELLO_ROOT_SUBROOT =
      2,                      /* root k -> root 0: payload {first, count, nroots}, then the block */
  CHORUS_HELLO_PEER_RING = 3, /* rank -> next rank: bootstrap ring */
  CHORUS_HELLO_PEER_P2P = 4,  /* rank -> rank: one bootstrap message, tag chosen by caller */
  CHORUS_HELLO_PEER_DATA = 5, /* rank -> rank: a transport connection, tag = channel/stream */
  CHORUS_HELLO_ROOT_FAIL = 6, /* rank -> its root: it gives up before the rendezvous ended;
                                 payload: why, CHORUS_FAIL_BYTES of text */
  CHORUS_HELLO_PEER_FAIL = 7  /* rank -> its ring neighbours: its init failed; payload: the
                                 first cause, CHORUS_FAIL_BYTES of text */
};
#define CHORUS_FAIL_BYTES 200

#define CHORUS_NONCE_BYTES 16

typedef struct chorus_hello {
  uint32_t magic;
  uint32_t kind;
  uint64_t mac; /* chorus_hello_mac of the fields below and the challenge */
  uint64_t reserved;
  int32_t from;   /* sending rank (root index for SUBROOT) */
  int32_t nranks; /* communicator size as the sender sees it */
  uint64_t tag;
} chorus_hello;

/* Payload of CHORUS_HELLO_ROOT_RANK. */
typedef struct chorus_root_join {
  chorus_sockaddr listen; /* the rank's bootstrap listener */
  int32_t nroots;         /* ncclCommInitRankScalable: number of ids */
  int32_t root_index;     /* which of them this root is */
  chorus_sockaddr root0;  /* root 0's address and secret, for sub-roots */
  uint64_t root0_secret[2];
} chorus_root_join;

/* Root -> rank (and root 0 -> sub-root) reply header; on status 0 the
 * address table follows (nranks chorus_sockaddr). */
typedef struct chorus_root_reply {
  int32_t status; /* ncclResult_t */
  char msg[300];
} chorus_root_reply;

/* Ranks served by root k of nroots: [first, first + count). */
static inline void chorus_root_block(int nranks, int nroots, int k, int *first, int *count) {
  int lo = (int)((int64_t)k * nranks / nroots);
  int hi = (int)((int64_t)(k + 1) * nranks / nroots);
  *first = lo;
  *count = hi - lo;
}

static inline int chorus_root_of_rank(int nranks, int nroots, int rank) {
  int k = (int)((int64_t)rank * nroots / nranks);
  int first, count;
  for (;;) {
    chorus_root_block(nranks, nroots, k, &first, &count);
    if (rank < first)
      k--;
    else if (rank >= first + count)
      k++;
    else
      return k;
  }
}

#endif

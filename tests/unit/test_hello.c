/*
 * test_hello.c - what guards every bootstrap listener (bootstrap/hello.h):
 * SipHash against the reference vectors; a hello that answers its
 * challenge is handed over with its payload; a wrong secret, a replayed
 * hello and junk are dropped (the sender sees its connection closed); a
 * standing link's key opens it for its kind and sender alone; a
 * crowd of silent connections is held to CHORUS_ACCEPT_MAX_PENDING.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/hello.h"
#include "unit.h"
#include "util/clock.h"
#include "util/siphash.h"
#include "util/socket.h"

/* SipHash-2-4 of the messages 0, 1, ..., n-1 (n bytes) under the key
 * 00 01 .. 0f: entries of the reference implementation's vector table. */
static void siphash_vectors(void) {
  static const struct {
    size_t n;
    uint64_t want;
  } v[] = {{0, 0x726fdb47dd0e0e31ull},  {1, 0x74f839c593dc67fdull},  {7, 0xab0200f58b01d137ull},
           {8, 0x93f5f5799a932462ull},  {15, 0xa129ca6149be45e5ull}, {16, 0x3f2acc7f57c29bdbull},
           {63, 0x958a324ceb064572ull}, {31, 0x32d892fad841c342ull}};
  const uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  unsigned char msg[64];
  for (int i = 0; i < 64; i++) msg[i] = (unsigned char)i;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    EXPECT(chorus_siphash(key, msg, v[i].n) == v[i].want);
}

static const uint64_t secret[2] = {0x1111222233334444ull, 0x5555666677778888ull};

typedef struct listener {
  int fd;
  chorus_sockaddr addr;
  chorus_acceptor acc;
} listener;

static void listener_start(listener *l) {
  chorus_sockaddr any;
  char err[128];
  REQUIRE(chorus_sock_parse("127.0.0.1:0", &any, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_listen(&any, &l->fd, &l->addr, err, sizeof err) == ncclSuccess);
  chorus_acceptor_init(&l->acc, l->fd, secret);
  l->acc.payload_size[CHORUS_HELLO_PEER_P2P] = 8;
}

static void listener_stop(listener *l) {
  chorus_acceptor_fini(&l->acc);
  close(l->fd);
}

/* Connects, and lets the acceptor take the connection in (it sends its
 * challenge then). */
static int dial(listener *l) {
  int fd = -1;
  char err[128];
  if (chorus_sock_connect(&l->addr, chorus_now_ns() + 2000000000ll, &fd, err, sizeof err) !=
      ncclSuccess)
    return -1;
  chorus_arrival none;
  if (chorus_acceptor_poll(&l->acc, chorus_now_ns() + 5000000ll, NULL, &none) == ncclSuccess)
    close(none.fd);
  return fd;
}

/* Polls the acceptor for up to ms: 1 with *out, or 0. */
static int arrival(listener *l, int ms, chorus_arrival *out) {
  return chorus_acceptor_poll(&l->acc, chorus_now_ns() + ms * 1000000ll, NULL, out) == ncclSuccess;
}

/* Whether the acceptor closed fd's connection (EOF within ms). */
static int closed_by_peer(int fd, int ms) {
  char c[64];
  struct pollfd p = {fd, POLLIN, 0};
  int64_t dl = chorus_now_ns() + ms * 1000000ll;
  while (!chorus_expired(dl)) {
    if (poll(&p, 1, 10) > 0) {
      ssize_t r = recv(fd, c, sizeof c, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN)) return 1;
    }
  }
  return 0;
}

static void answer_and_replay(void) {
  listener l;
  listener_start(&l);
  char err[128];
  /* A real hello, through chorus_hello_send, recorded on its way. */
  int a = dial(&l);
  REQUIRE(a >= 0);
  const uint64_t payload = 0xfeedfacecafebeefull;
  REQUIRE(chorus_hello_send(a, CHORUS_HELLO_PEER_P2P, secret, 3, 8, 77, &payload, sizeof payload,
                            chorus_now_ns() + 2000000000ll, err, sizeof err) == ncclSuccess);
  chorus_arrival got;
  REQUIRE(arrival(&l, 2000, &got));
  EXPECT_EQ_INT(got.hello.from, 3);
  EXPECT_EQ_INT(got.hello.tag, 77);
  uint64_t p;
  memcpy(&p, got.payload, sizeof p);
  EXPECT(p == payload);
  /* Its bytes as sent: the mac answers the first challenge only. */
  chorus_hello sent = got.hello;
  close(got.fd);
  close(a);
  int b = dial(&l);
  REQUIRE(b >= 0);
  uint8_t nonce[CHORUS_NONCE_BYTES];
  REQUIRE(chorus_sock_recv_all(b, nonce, sizeof nonce, chorus_now_ns() + 2000000000ll, err,
                               sizeof err) == ncclSuccess);
  unsigned char replay[sizeof sent + sizeof payload];
  memcpy(replay, &sent, sizeof sent);
  memcpy(replay + sizeof sent, &payload, sizeof payload);
  REQUIRE(chorus_sock_send_all(b, replay, sizeof replay, chorus_now_ns() + 2000000000ll, err,
                               sizeof err) == ncclSuccess);
  EXPECT(!arrival(&l, 200, &got));
  EXPECT(closed_by_peer(b, 1000));
  close(b);
  /* The right fields under another secret. */
  const uint64_t other[2] = {secret[0], secret[1] ^ 1};
  int c = dial(&l);
  REQUIRE(c >= 0);
  REQUIRE(chorus_hello_send(c, CHORUS_HELLO_PEER_P2P, other, 3, 8, 77, &payload, sizeof payload,
                            chorus_now_ns() + 2000000000ll, err, sizeof err) == ncclSuccess);
  EXPECT(!arrival(&l, 200, &got));
  EXPECT(closed_by_peer(c, 1000));
  close(c);
  /* Junk of hello size. */
  int d = dial(&l);
  REQUIRE(d >= 0);
  char junk[sizeof(chorus_hello) + 8];
  memset(junk, 'x', sizeof junk);
  REQUIRE(chorus_sock_send_all(d, junk, sizeof junk, chorus_now_ns() + 2000000000ll, err,
                               sizeof err) == ncclSuccess);
  EXPECT(!arrival(&l, 200, &got));
  EXPECT(closed_by_peer(d, 1000));
  close(d);
  EXPECT_EQ_INT(l.acc.npending, 0);
  listener_stop(&l);
}

/* Writes a hello keyed by nonce on a fresh connection without waiting for
 * its challenge, then ends it, as a failing rank tells a ring neighbour;
 * whether the acceptor hands it over (with *got). */
static int keyed_arrives(listener *l, const uint8_t nonce[CHORUS_NONCE_BYTES], uint32_t kind,
                         int from, chorus_arrival *got) {
  char err[128];
  int fd = -1;
  const uint64_t payload = 0x5eed0000ull + (uint64_t)from;
  const int64_t dl = chorus_now_ns() + 2000000000ll;
  const int sent = chorus_sock_connect(&l->addr, dl, &fd, err, sizeof err) == ncclSuccess &&
                   chorus_hello_answer(fd, nonce, kind, secret, from, 8, 0, &payload,
                                       sizeof payload, dl, err, sizeof err) == ncclSuccess;
  EXPECT(sent);
  shutdown(fd, SHUT_WR);
  const int ok = sent && arrival(l, 300, got);
  if (fd >= 0) close(fd);
  if (!ok) return 0;
  uint64_t p;
  memcpy(&p, got->payload, sizeof p);
  EXPECT(p == payload);
  close(got->fd);
  return 1;
}

/* A standing link's key opens the door for its kind and sender only; the
 * arrival carries the nonce it answered, a fresh challenge's otherwise. */
static void standing_link(void) {
  listener l;
  listener_start(&l);
  uint8_t link[CHORUS_NONCE_BYTES], other[CHORUS_NONCE_BYTES];
  for (int i = 0; i < CHORUS_NONCE_BYTES; i++)
    link[i] = (uint8_t)(3 * i + 1), other[i] = (uint8_t)i;
  chorus_arrival got;
  EXPECT(!keyed_arrives(&l, link, CHORUS_HELLO_PEER_P2P, 5, &got)); /* not standing yet */
  chorus_acceptor_stand(&l.acc, CHORUS_HELLO_PEER_P2P, 5, link);
  EXPECT(keyed_arrives(&l, link, CHORUS_HELLO_PEER_P2P, 5, &got));
  EXPECT_EQ_INT(got.hello.from, 5);
  EXPECT(!memcmp(got.nonce, link, sizeof link));
  EXPECT(!keyed_arrives(&l, link, CHORUS_HELLO_PEER_P2P, 6, &got));  /* another sender */
  EXPECT(!keyed_arrives(&l, link, CHORUS_HELLO_PEER_DATA, 5, &got)); /* another kind */
  EXPECT(!keyed_arrives(&l, other, CHORUS_HELLO_PEER_P2P, 5, &got)); /* another link */
  /* A challenged hello still comes in, carrying its own challenge. */
  char err[128];
  int a = dial(&l);
  REQUIRE(a >= 0);
  uint8_t nonce[CHORUS_NONCE_BYTES];
  REQUIRE(chorus_sock_recv_all(a, nonce, sizeof nonce, chorus_now_ns() + 2000000000ll, err,
                               sizeof err) == ncclSuccess);
  const uint64_t payload = 9;
  REQUIRE(chorus_hello_answer(a, nonce, CHORUS_HELLO_PEER_P2P, secret, 6, 8, 1, &payload,
                              sizeof payload, chorus_now_ns() + 2000000000ll, err,
                              sizeof err) == ncclSuccess);
  REQUIRE(arrival(&l, 2000, &got));
  EXPECT(!memcmp(got.nonce, nonce, sizeof nonce));
  close(got.fd);
  close(a);
  EXPECT_EQ_INT(l.acc.npending, 0);
  listener_stop(&l);
}

/* Silent connections beyond the limit push the oldest out; a real hello
 * still gets through. */
static void silent_crowd(void) {
  listener l;
  listener_start(&l);
  enum { N = CHORUS_ACCEPT_MAX_PENDING + 40 };
  int fds[N];
  for (int i = 0; i < N; i++) {
    fds[i] = dial(&l);
    REQUIRE(fds[i] >= 0);
  }
  chorus_arrival none;
  EXPECT(!arrival(&l, 20, &none));
  EXPECT(l.acc.npending <= CHORUS_ACCEPT_MAX_PENDING);
  int closed = 0;
  for (int i = 0; i < N; i++) closed += closed_by_peer(fds[i], 5);
  EXPECT(closed >= N - CHORUS_ACCEPT_MAX_PENDING);
  char err[128];
  int a = dial(&l);
  REQUIRE(a >= 0);
  const uint64_t payload = 1;
  REQUIRE(chorus_hello_send(a, CHORUS_HELLO_PEER_P2P, secret, 1, 2, 5, &payload, sizeof payload,
                            chorus_now_ns() + 2000000000ll, err, sizeof err) == ncclSuccess);
  chorus_arrival got;
  EXPECT(arrival(&l, 2000, &got));
  if (got.fd >= 0) close(got.fd);
  close(a);
  for (int i = 0; i < N; i++) close(fds[i]);
  listener_stop(&l);
}

/* An acceptor told that a job's ranks may all arrive at once keeps them
 * waiting (a 256-rank rendezvous lost joins at the default bound), and
 * still bounds the crowd beyond that. */
static void expected_crowd(void) {
  listener l;
  listener_start(&l);
  enum { WANT = CHORUS_ACCEPT_MAX_PENDING + 60, N = WANT + 20 };
  chorus_acceptor_expect(&l.acc, WANT);
  int fds[N];
  for (int i = 0; i < WANT; i++) {
    fds[i] = dial(&l);
    REQUIRE(fds[i] >= 0);
  }
  chorus_arrival none;
  EXPECT(!arrival(&l, 20, &none));
  int closed = 0;
  for (int i = 0; i < WANT; i++) closed += closed_by_peer(fds[i], 5);
  EXPECT_EQ_INT(closed, 0);
  EXPECT_EQ_INT(l.acc.npending, WANT);
  for (int i = WANT; i < N; i++) {
    fds[i] = dial(&l);
    REQUIRE(fds[i] >= 0);
  }
  EXPECT(!arrival(&l, 20, &none));
  EXPECT(l.acc.npending <= WANT);
  for (int i = 0; i < N; i++) close(fds[i]);
  listener_stop(&l);
}

int main(void) {
  setenv("NCCL_DEBUG", "NONE", 1); /* the drops below are meant */
  RUN(siphash_vectors);
  RUN(answer_and_replay);
  RUN(standing_link);
  RUN(silent_crowd);
  RUN(expected_crowd);
  return unit_report();
}

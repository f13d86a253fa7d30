/*
 * fuzz_hello.c - bytes on a bootstrap connection (a stranger, a port
 * scanner, a peer of another job, a real rank's hello cut short) read by
 * the acceptor that guards every Chorus listener.
 *
 * Input: a flag byte, then what the connection carries after the
 * acceptor's challenge. Flags 1 and 2 stamp the right magic and the mac
 * that answers the challenge, so the fuzzer also reaches what comes after
 * them (kinds, payload lengths); flag 4 keeps the connection open after
 * the bytes (a slow talker); flag 8 (with 2) keys the mac by a standing
 * ring link's nonce instead, which the acceptor takes for PEER_FAIL words
 * from rank 3 alone. Property: the acceptor hands over a connection only
 * with the right magic and a mac that answers its challenge or, for that
 * kind and sender, the link's (the arrival says which), a known kind and
 * its whole payload.
 */
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/hello.h"
#include "fuzz.h"
#include "util/clock.h"

FUZZ_QUIET_INIT

static const uint64_t secret[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
static const uint8_t ring_link[CHORUS_NONCE_BYTES] = {7, 1, 8, 2, 8, 1, 8, 2,
                                                      8, 4, 5, 9, 0, 4, 5, 2};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  const unsigned flags = data[0];
  unsigned char buf[4096];
  size--;
  memcpy(buf, data + 1, size);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return 0;
  chorus_acceptor a;
  chorus_acceptor_init(&a, -1, secret);
  a.payload_size[CHORUS_HELLO_ROOT_RANK] = sizeof(chorus_root_join);
  a.payload_size[CHORUS_HELLO_ROOT_SUBROOT] = 3 * sizeof(int32_t);
  a.payload_size[CHORUS_HELLO_PEER_FAIL] = CHORUS_FAIL_BYTES;
  chorus_acceptor_stand(&a, CHORUS_HELLO_PEER_FAIL, 3, ring_link);
  FUZZ_REQUIRE(chorus_acceptor_adopt(&a, sv[0]) == ncclSuccess);
  uint8_t nonce[CHORUS_NONCE_BYTES];
  FUZZ_REQUIRE(read(sv[1], nonce, sizeof nonce) == (ssize_t)sizeof nonce);
  if ((flags & 1) && size >= sizeof(chorus_hello)) {
    chorus_hello h;
    memcpy(&h, buf, sizeof h);
    h.magic = CHORUS_HELLO_MAGIC;
    if (flags & 2) h.mac = chorus_hello_mac(secret, (flags & 8) ? ring_link : nonce, &h);
    memcpy(buf, &h, sizeof h);
  }
  size_t off = 0;
  while (off < size) {
    const ssize_t w = write(sv[1], buf + off, size - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (!(flags & 4)) {
    close(sv[1]);
    sv[1] = -1;
  }
  chorus_arrival out;
  /* A deadline already past: one pass over what has arrived. */
  if (chorus_acceptor_poll(&a, chorus_now_ns(), NULL, &out) == ncclSuccess) {
    FUZZ_REQUIRE(out.hello.magic == CHORUS_HELLO_MAGIC);
    const int keyed = out.hello.mac != chorus_hello_mac(secret, nonce, &out.hello);
    FUZZ_REQUIRE(!keyed || (out.hello.kind == CHORUS_HELLO_PEER_FAIL && out.hello.from == 3 &&
                            out.hello.mac == chorus_hello_mac(secret, ring_link, &out.hello)));
    FUZZ_REQUIRE(!memcmp(out.nonce, keyed ? ring_link : nonce, sizeof out.nonce));
    FUZZ_REQUIRE(out.hello.kind >= 1 && out.hello.kind < 8);
    FUZZ_REQUIRE(size >= sizeof(chorus_hello) + a.payload_size[out.hello.kind]);
    FUZZ_REQUIRE(memcmp(out.payload, buf + sizeof(chorus_hello), a.payload_size[out.hello.kind]) ==
                 0);
    close(out.fd);
  }
  chorus_acceptor_fini(&a);
  if (sv[1] >= 0) close(sv[1]);
  return 0;
}

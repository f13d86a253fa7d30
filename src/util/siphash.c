/*
 * siphash.c - see siphash.h. Written from the algorithm's description:
 * four 64-bit words of state mixed by add-rotate-xor rounds, two rounds
 * per 8-byte word of the message (the last word carries its length), four
 * rounds at the end.
 */
#include "util/siphash.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

typedef struct sip_state {
  uint64_t v0, v1, v2, v3;
} sip_state;

static inline void sip_round(sip_state *s) {
  s->v0 += s->v1;
  s->v1 = rotl(s->v1, 13) ^ s->v0;
  s->v0 = rotl(s->v0, 32);
  s->v2 += s->v3;
  s->v3 = rotl(s->v3, 16) ^ s->v2;
  s->v0 += s->v3;
  s->v3 = rotl(s->v3, 21) ^ s->v0;
  s->v2 += s->v1;
  s->v1 = rotl(s->v1, 17) ^ s->v2;
  s->v2 = rotl(s->v2, 32);
}

static inline void absorb(sip_state *s, uint64_t m) {
  s->v3 ^= m;
  sip_round(s);
  sip_round(s);
  s->v0 ^= m;
}

static inline uint64_t load_le(const unsigned char *p, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) x |= (uint64_t)p[i] << (8 * i);
  return x;
}

uint64_t chorus_siphash(const uint64_t key[2], const void *msg, size_t len) {
  /* The initial state: the key against the constant "somepseudorandomlygeneratedbytes". */
  sip_state s = {key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull,
                 key[0] ^ 0x6c7967656e657261ull, key[1] ^ 0x7465646279746573ull};
  const unsigned char *p = msg;
  size_t left = len;
  for (; left >= 8; left -= 8, p += 8) absorb(&s, load_le(p, 8));
  absorb(&s, load_le(p, left) | (uint64_t)(len & 0xff) << 56);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; i++) sip_round(&s);
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

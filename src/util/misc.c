/*
 * misc.c - see misc.h.
 */
#include "util/misc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

uint64_t chorus_hash64(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

ncclResult_t chorus_random_bytes(void *buf, size_t len) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ncclSystemError;
    }
    p += n;
    len -= (size_t)n;
  }
  return ncclSuccess;
}

static uint64_t token;
static pthread_once_t token_once = PTHREAD_ONCE_INIT;

static void make_token(void) {
  if (chorus_random_bytes(&token, sizeof token) != ncclSuccess)
    token = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&token;
}

uint64_t chorus_process_token(void) {
  pthread_once(&token_once, make_token);
  return token;
}

size_t chorus_type_size(int t) {
  static const unsigned char sizes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (t >= 0 && t < ncclNumTypes) ? sizes[t] : 0;
}

const char *chorus_type_name(int t) {
  static const char *const names[ncclNumTypes] = {"int8",   "uint8",    "int32",  "uint32",
                                                  "int64",  "uint64",   "half",   "float",
                                                  "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return (t >= 0 && t < ncclNumTypes) ? names[t] : "?";
}

const char *chorus_redop_name(int op) {
  static const char *const names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return (op >= 0 && op <= 5) ? names[op] : "?";
}

/*
 * readrate.c - the peer-read slowdown probe (readrate.h).
 */
#include "transport/shm/readrate.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/param.h"

#define PROBE_BYTES  ((size_t)1 << 20)
#define PROBE_ROUNDS 4 /* the first warms the caches and the page tables */

static double slowdown;
static pthread_once_t probed = PTHREAD_ONCE_INIT;

/* CHORUS_READ_SLOWDOWN: 1 with its value, 0 where unset or (with a WARN)
 * not a ratio in range. */
static int setting(double *out) {
  const char *v = chorus_param_str(CHORUS_P_READ_SLOWDOWN);
  if (!v) return 0;
  char *end = NULL;
  const double x = strtod(v, &end);
  if (end == v || *end || !(x >= 0.1 && x <= 100)) {
    WARN("CHORUS_READ_SLOWDOWN=\"%s\" is not a ratio from 0.1 to 100; measuring it", v);
    return 0;
  }
  *out = x;
  return 1;
}

static void probe(void) {
  if (setting(&slowdown)) return;
  char *src = chorus_malloc(PROBE_BYTES), *dst = chorus_malloc(PROBE_BYTES);
  if (src && dst) {
    memset(src, 1, PROBE_BYTES);
    memset(dst, 2, PROBE_BYTES);
    int64_t copy = INT64_MAX, read = INT64_MAX;
    for (int i = 0; i < PROBE_ROUNDS && read > 0; i++) {
      int64_t t0 = chorus_now_ns();
      memcpy(dst, src, PROBE_BYTES);
      __asm__ volatile("" : : "r"(dst) : "memory"); /* the copy happens, here */
      const int64_t t1 = chorus_now_ns();
      struct iovec mine = {dst, PROBE_BYTES}, theirs = {src, PROBE_BYTES};
      const ssize_t n = process_vm_readv(getpid(), &mine, 1, &theirs, 1, 0);
      const int64_t t2 = chorus_now_ns();
      if (n != (ssize_t)PROBE_BYTES) read = 0;
      if (t1 - t0 < copy) copy = t1 - t0;
      if (read > 0 && t2 - t1 < read) read = t2 - t1;
    }
    if (read > 0) slowdown = (double)read / (double)(copy > 0 ? copy : 1);
  }
  chorus_free(src);
  chorus_free(dst);
}

double chorus_shm_read_slowdown(void) {
  pthread_once(&probed, probe);
  return slowdown;
}

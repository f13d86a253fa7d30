/*
 * copy.c - see copy.h.
 */
#include "host/copy.h"

#include "util/clock.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>

void chorus_copy_nt_nofence(void *dst, const void *src, size_t bytes) {
  char *d = dst;
  const char *s = src;
  /* Head: plain stores up to a 64-byte boundary of the destination, so the
   * loop writes whole cache lines. */
  size_t head = (size_t)(-(uintptr_t)d & 63);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_stream_si128((__m128i *)(d + i), a);
    _mm_stream_si128((__m128i *)(d + i + 16), b);
    _mm_stream_si128((__m128i *)(d + i + 32), c);
    _mm_stream_si128((__m128i *)(d + i + 48), e);
  }
  memcpy(d + i, s + i, bytes - i);
}

void chorus_copy_fence(void) {
  _mm_sfence();
}

#else

void chorus_copy_nt_nofence(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
}

void chorus_copy_fence(void) {}

#endif

void chorus_copy(void *dst, const void *src, size_t bytes, int nt) {
  /* Below a few pages the set-up and the fence cost more than they save. */
  if (!nt || bytes < 4096) {
    memcpy(dst, src, bytes);
    return;
  }
  chorus_copy_nt_nofence(dst, src, bytes);
  chorus_copy_fence();
}

/* Every EXPLORE-th tuned write uses the kind not currently chosen, so a
 * change of conditions is noticed within a few dozen writes. */
#define EXPLORE 16

void chorus_store_tuner_init(chorus_store_tuner *t, int force) {
  t->ns_per_kib[0] = t->ns_per_kib[1] = 0;
  t->calls = 0;
  t->force = force;
}

int chorus_store_pick(chorus_store_tuner *t, size_t bytes) {
  if (t->force >= 0) return t->force;
  if (bytes < CHORUS_TUNED_MIN_BYTES) return 0;
  /* Measure each kind once, then take the cheaper. */
  if (t->ns_per_kib[0] == 0) return 0;
  if (t->ns_per_kib[1] == 0) return 1;
  int best = t->ns_per_kib[1] < t->ns_per_kib[0];
  return ++t->calls % EXPLORE == 0 ? !best : best;
}

void chorus_store_learn(chorus_store_tuner *t, int nt, size_t bytes, int64_t ns) {
  if (t->force >= 0 || bytes < CHORUS_TUNED_MIN_BYTES || ns <= 0) return;
  double v = (double)ns * 1024.0 / (double)bytes, *avg = &t->ns_per_kib[nt != 0];
  /* A write cut by preemption looks slow without being slow: one sample
   * moves the average at most fourfold. */
  if (*avg > 0 && v > 4 * *avg) v = 4 * *avg;
  *avg = *avg == 0 ? v : 0.75 * *avg + 0.25 * v;
}

void chorus_copy_tuned(chorus_store_tuner *t, void *dst, const void *src, size_t bytes) {
  int nt = chorus_store_pick(t, bytes);
  if (bytes < CHORUS_TUNED_MIN_BYTES || t->force >= 0) {
    chorus_copy(dst, src, bytes, nt);
    return;
  }
  int64_t t0 = chorus_now_ns();
  chorus_copy(dst, src, bytes, nt);
  chorus_store_learn(t, nt, bytes, chorus_now_ns() - t0);
}

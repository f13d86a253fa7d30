/*
 * reduce_avx2.c - the reduction kernels compiled for AVX2 and F16C, chosen
 * at run time on CPUs that have both; see reduce_kernels.h. The only
 * hand-written part is binary16, which F16C converts in hardware (round to
 * nearest even, overflow to infinity, exact subnormals: what fp.h promises).
 */
#include "host/reduce_impl.h"

#ifdef CHORUS_RED_HAVE_AVX2

#include <immintrin.h>

#define KATTR __attribute__((target("avx2,f16c")))
#include "host/reduce_kernels.h"

/* Eight elements of every stream per step, so the k streams advance
 * together. */
KERNEL void half_decode(float *const *d, const void *const *sv, int k, size_t n) {
  const uint16_t *const *s = (const uint16_t *const *)sv;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < k; j++)
      _mm256_storeu_ps(d[j] + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s[j] + i))));
  for (; i < n; i++)
    for (int j = 0; j < k; j++) d[j][i] = half_decode_one(s[j][i]);
}

KERNEL void half_encode(void *dv, const float *restrict s, size_t n) {
  uint16_t *restrict d = dv;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) d[i] = half_encode_one(s[i]);
}

const chorus_red_kernels chorus_red_kernels_avx2 = CHORUS_RED_KERNEL_TABLE("avx2");

#else
typedef int chorus_red_avx2_unused; /* keeps the unit non-empty */
#endif

/*
 * ordered.cu - the device half of reductions in rank order
 * (CHORUS_REPRODUCIBLE; kernels.h, gpu/ordered.h is the host half).
 *
 * Every element is added by one thread, over the ranks in rank order,
 * rounding to the type after each pair as the host's ordered reduction
 * (coll/ordered.c) does, so the bits depend on the inputs alone. The
 * contributions sit in `all`, rank r's at all + r * stride elements,
 * gathered there by a collective that only moved bytes.
 */
#include "kern_util.cuh"

#define NT         256
#define MAX_BLOCKS 2048

namespace {

template <typename T>
__global__ void __launch_bounds__(NT)
    ordered_add(chorus_kern_red red, T *dst, const T *all, size_t count, int n, size_t stride) {
  typedef typename elem<T>::acc A;
  const int kind = red.kind == CHORUS_RED_PREMULSUM ? CHORUS_RED_SUM : red.kind;
  for (size_t i = (size_t)blockIdx.x * NT + threadIdx.x; i < count; i += (size_t)gridDim.x * NT) {
    A acc = elem<T>::load(all[i]);
    for (int r = 1; r < n; r++) {
      acc = arith<A>::combine(kind, acc, elem<T>::load(all[(size_t)r * stride + i]));
      if (r < n - 1) acc = elem<T>::load(elem<T>::store(acc)); /* rounded to T, as stored */
    }
    if (red.kind == CHORUS_RED_SUMPOSTDIV) acc = (A)(acc / (A)red.divisor);
    dst[i] = elem<T>::store(acc);
  }
}

template <typename T>
__global__ void __launch_bounds__(NT)
    premul(chorus_kern_red red, T *dst, const T *src, size_t count) {
  typedef typename elem<T>::acc A;
  const A s = premul_scalar<T>(red);
  for (size_t i = (size_t)blockIdx.x * NT + threadIdx.x; i < count; i += (size_t)gridDim.x * NT)
    dst[i] = elem<T>::store(arith<A>::mul(elem<T>::load(src[i]), s));
}

/* The loops stride over the grid, so any count of CTAs covers count. */
unsigned blocks(size_t count, unsigned cap) {
  const size_t most = cap && cap < MAX_BLOCKS ? cap : MAX_BLOCKS;
  const size_t b = (count + NT - 1) / NT;
  return (unsigned)(b < 1 ? 1 : b > most ? most : b);
}

template <typename T> struct add_launch {
  static cudaError_t run(const chorus_kern_red *red, void *dst, const void *all, size_t count,
                         int n, size_t stride, unsigned cap, cudaStream_t s) {
    ordered_add<T>
        <<<blocks(count, cap), NT, 0, s>>>(*red, (T *)dst, (const T *)all, count, n, stride);
    return cudaGetLastError();
  }
};

template <typename T> struct scale_launch {
  static cudaError_t run(const chorus_kern_red *red, void *dst, const void *src, size_t count,
                         unsigned cap, cudaStream_t s) {
    premul<T><<<blocks(count, cap), NT, 0, s>>>(*red, (T *)dst, (const T *)src, count);
    return cudaGetLastError();
  }
};

} // namespace

extern "C" int chorus_kern_ordered_add(const chorus_kern_red *red, void *dst, const void *all,
                                       size_t count, int n, size_t stride, unsigned max_blocks,
                                       void *stream) {
  if (count == 0) return 0;
  cudaError_t e = by_dtype<add_launch>(red->dtype, red, dst, all, count, n, stride, max_blocks,
                                       (cudaStream_t)stream);
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the reduction in rank order");
  return 0;
}

extern "C" int chorus_kern_premul(const chorus_kern_red *red, void *dst, const void *src,
                                  size_t count, unsigned max_blocks, void *stream) {
  if (count == 0) return 0;
  cudaError_t e =
      by_dtype<scale_launch>(red->dtype, red, dst, src, count, max_blocks, (cudaStream_t)stream);
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the PreMulSum scaling");
  return 0;
}

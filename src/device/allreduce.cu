/*
 * allreduce.cu - one-shot AllReduce over LL lines (kernels.h).
 *
 * Block b of every rank owns the same range of 16-byte lines; line j holds
 * bytes [8j, 8j+8) of the input. Phase 1: each thread pushes its lines, the
 * epoch of block b folded into both halves, into slot [parity][me] of every
 * peer. Phase 2: the same thread polls its own window for the peers' copies
 * of those lines and reduces the n payloads in rank order. Nothing else
 * synchronises the ranks: seeing the epoch in both 8-byte halves of a line
 * proves that its data arrived (NVLink and PCIe deliver aligned 8-byte
 * stores whole). Two parities suffice: rank r writes parity p of a peer for
 * epoch e + 2 only after it received that peer's lines of epoch e + 1,
 * which the peer sends after it finished reading epoch e.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
#include "host/reduce.h"
}

#define THREADS       512
#define LINES_PER_CTA 2048
#define CHECK_EVERY   1024 /* spins between deadline and abort checks */

/* ---- element types: storage type T, accumulator A ------------------------ */
template <typename T> struct elem {
  typedef T acc;
  static __device__ acc load(T x) { return x; }
  static __device__ T store(acc a) { return a; }
};
template <> struct elem<__half> {
  typedef float acc;
  static __device__ float load(__half x) { return __half2float(x); }
  static __device__ __half store(float a) { return __float2half_rn(a); }
};
template <> struct elem<__nv_bfloat16> {
  typedef float acc;
  static __device__ float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __nv_bfloat16 store(float a) { return __float2bfloat16_rn(a); }
};
template <> struct elem<__nv_fp8_e4m3> {
  typedef float acc;
  static __device__ float load(__nv_fp8_e4m3 x) { return (float)x; }
  static __device__ __nv_fp8_e4m3 store(float a) { return __nv_fp8_e4m3(a); }
};
template <> struct elem<__nv_fp8_e5m2> {
  typedef float acc;
  static __device__ float load(__nv_fp8_e5m2 x) { return (float)x; }
  static __device__ __nv_fp8_e5m2 store(float a) { return __nv_fp8_e5m2(a); }
};

template <typename A> struct arith {
  /* Integers wrap around like the host reduction (unsigned arithmetic). */
  typedef typename std::conditional<std::is_integral<A>::value, std::make_unsigned<A>,
                                    std::common_type<A>>::type::type U;
  static __device__ A add(A a, A b) { return (A)(U)((U)a + (U)b); }
  static __device__ A mul(A a, A b) { return (A)(U)((U)a * (U)b); }
  static __device__ A combine(int kind, A a, A b) {
    switch (kind) {
    case CHORUS_RED_PROD:
      return mul(a, b);
    case CHORUS_RED_MAX:
      return b > a ? b : a;
    case CHORUS_RED_MIN:
      return b < a ? b : a;
    default:
      return add(a, b);
    }
  }
};

/* ---- LL lines -------------------------------------------------------------- */
static __device__ __forceinline__ void st_line(char *p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
static __device__ __forceinline__ uint4 ld_line(const char *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
static __device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Bytes [8j, 8j+8) of buf (nbytes long), zero past the end. */
static __device__ __forceinline__ uint2 payload(const char *buf, size_t nbytes, size_t j) {
  size_t off = j * 8;
  if (off + 8 <= nbytes && ((uintptr_t)buf & 7) == 0) return *(const uint2 *)(buf + off);
  unsigned char b[8];
  for (int k = 0; k < 8; k++) b[k] = off + k < nbytes ? (unsigned char)buf[off + k] : 0;
  uint2 v;
  memcpy(&v, b, 8);
  return v;
}

/* PreMulSum: each rank scales its own input by its own scalar before
 * anyone sees it (ranks' scalars differ), rounding to T like a store. */
template <typename T>
static __device__ __forceinline__ uint2 scaled(uint2 d, typename elem<T>::acc s) {
  constexpr int E = 8 / sizeof(T);
  T v[E];
  memcpy(v, &d, sizeof v);
#pragma unroll
  for (int e = 0; e < E; e++)
    v[e] = elem<T>::store(arith<typename elem<T>::acc>::mul(elem<T>::load(v[e]), s));
  memcpy(&d, v, sizeof d);
  return d;
}

/* Waits for line p to carry flag in both halves. Returns its payload, or
 * sets *failed (after recording why) and returns zeros. */
static __device__ uint2 poll_line(const char *p, uint32_t flag, const chorus_kern_comm &c, int src,
                                  volatile int *failed) {
  uint64_t deadline = 0;
  for (unsigned spins = 0;; spins++) {
    uint4 v = ld_line(p);
    if (v.y == flag && v.w == flag) return make_uint2(v.x, v.z);
    if (*failed) return make_uint2(0, 0);
    if (spins % CHECK_EVERY == CHECK_EVERY - 1) {
      int why = 0;
      if (*c.abort)
        why = CHORUS_KERN_ABORTED;
      else if (c.timeout_ns) {
        uint64_t t = now_ns();
        if (!deadline)
          deadline = t + c.timeout_ns;
        else if (t > deadline)
          why = CHORUS_KERN_TIMEOUT;
      }
      if (why) {
        if (*(volatile int32_t *)c.status == 0) {
          *(volatile int32_t *)c.status_peer = src;
          __threadfence_system();
          *(volatile int32_t *)c.status = why;
        }
        *failed = 1;
        return make_uint2(0, 0);
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
    allreduce_oneshot(chorus_kern_comm c, chorus_kern_red red, const char *send, T *recv,
                      size_t count, size_t lines_per_cta) {
  typedef typename elem<T>::acc A;
  constexpr int E = 8 / sizeof(T);
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  const int b = blockIdx.x, n = c.nranks, me = c.rank;
  if (threadIdx.x == 0) {
    s_epoch = c.epochs[b] + 1;
    s_failed = 0;
  }
  __syncthreads();
  const uint32_t flag = s_epoch;
  const size_t parity = flag & 1;
  const size_t nbytes = count * sizeof(T);
  const size_t nlines = (nbytes + 7) / 8;
  const size_t lo = (size_t)b * lines_per_cta;
  const size_t hi = lo + lines_per_cta < nlines ? lo + lines_per_cta : nlines;
  const size_t my_slot = (parity * n + me) * c.ll_lines * CHORUS_KERN_LINE;

  A scalar = A(0);
  const bool premul = red.kind == CHORUS_RED_PREMULSUM;
  if (premul) {
    T s;
    if (red.scalar_dev)
      s = *(const T *)red.scalar_dev;
    else
      memcpy(&s, red.scalar, sizeof s);
    scalar = elem<T>::load(s);
  }

  /* Phase 1: push. */
  for (size_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    uint2 d = payload(send, nbytes, j);
    if (premul) d = scaled<T>(d, scalar);
    uint4 line = make_uint4(d.x, flag, d.y, flag);
    for (int k = 1; k < n; k++) {
      int p = me + k < n ? me + k : me + k - n;
      st_line(c.ll[p] + my_slot + j * CHORUS_KERN_LINE, line);
    }
  }

  /* Phase 2: reduce in rank order. */
  const char *own = c.ll[me];
  for (size_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    A acc[E];
    for (int src = 0; src < n; src++) {
      uint2 d =
          src == me
              ? (premul ? scaled<T>(payload(send, nbytes, j), scalar) : payload(send, nbytes, j))
              : poll_line(own + ((parity * n + src) * c.ll_lines + j) * CHORUS_KERN_LINE, flag, c,
                          src, &s_failed);
      T v[E];
      memcpy(v, &d, sizeof v);
#pragma unroll
      for (int e = 0; e < E; e++) {
        A x = elem<T>::load(v[e]);
        acc[e] = src == 0 ? x : arith<A>::combine(red.kind, acc[e], x);
      }
    }
    if (s_failed) break;
#pragma unroll
    for (int e = 0; e < E; e++) {
      size_t i = j * E + e;
      if (i >= count) break;
      A a = acc[e];
      if (red.kind == CHORUS_RED_SUMPOSTDIV) a = (A)(a / (A)red.divisor);
      recv[i] = elem<T>::store(a);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) c.epochs[b] = flag;
}

template <typename T>
static cudaError_t launch(const chorus_kern_comm *c, const chorus_kern_red *red, const void *send,
                          void *recv, size_t count, cudaStream_t stream) {
  size_t nlines = (count * sizeof(T) + 7) / 8;
  size_t grid = (nlines + LINES_PER_CTA - 1) / LINES_PER_CTA;
  if (grid < 1) grid = 1;
  if (grid > CHORUS_KERN_MAX_BLOCKS) grid = CHORUS_KERN_MAX_BLOCKS;
  size_t per = (nlines + grid - 1) / grid;
  int threads = per < THREADS ? (int)((per + 31) / 32 * 32) : THREADS;
  if (threads < 32) threads = 32;
  allreduce_oneshot<T>
      <<<(unsigned)grid, threads, 0, stream>>>(*c, *red, (const char *)send, (T *)recv, count, per);
  return cudaGetLastError();
}

extern "C" int chorus_kern_allreduce_oneshot(const chorus_kern_comm *c, const chorus_kern_red *red,
                                             const void *send, void *recv, size_t count,
                                             size_t esize, void *stream) {
  (void)esize;
  if (count == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  cudaError_t e;
  switch (red->dtype) {
  case 0:
    e = launch<int8_t>(c, red, send, recv, count, s);
    break;
  case 1:
    e = launch<uint8_t>(c, red, send, recv, count, s);
    break;
  case 2:
    e = launch<int32_t>(c, red, send, recv, count, s);
    break;
  case 3:
    e = launch<uint32_t>(c, red, send, recv, count, s);
    break;
  case 4:
    e = launch<int64_t>(c, red, send, recv, count, s);
    break;
  case 5:
    e = launch<uint64_t>(c, red, send, recv, count, s);
    break;
  case 6:
    e = launch<__half>(c, red, send, recv, count, s);
    break;
  case 7:
    e = launch<float>(c, red, send, recv, count, s);
    break;
  case 8:
    e = launch<double>(c, red, send, recv, count, s);
    break;
  case 9:
    e = launch<__nv_bfloat16>(c, red, send, recv, count, s);
    break;
  case 10:
    e = launch<__nv_fp8_e4m3>(c, red, send, recv, count, s);
    break;
  case 11:
    e = launch<__nv_fp8_e5m2>(c, red, send, recv, count, s);
    break;
  default:
    e = cudaErrorInvalidValue;
    break;
  }
  if (e != cudaSuccess) {
    return chorus_dev_fail((int)e, "launching the one-shot AllReduce kernel");
  }
  return 0;
}

/*
 * exchange.cu - the one-shot exchange kernel behind every collective on
 * GPU communicators (kernels.h), in its two protocols (LL, Simple).
 *
 * Every collective here is "each rank pushes a block to some peers, then
 * each rank takes the blocks of some sources and copies them into its
 * output or reduces them": AllReduce pushes its buffer to everyone and
 * reduces everyone's; ReduceScatter pushes block p to rank p and reduces
 * what arrives; AllGather, Broadcast, AlltoAll, Gather and Scatter copy.
 *
 * Block b of every rank owns the same range of 16-byte lines. With LL,
 * line j holds bytes [8j, 8j+8) of a block. Phase 1: each thread pushes its
 * lines, the epoch of block b folded into both halves, into slot
 * [parity][me] of each destination. Phase 2: the same thread polls its own
 * window for its lines from each source, in rank order. Seeing the epoch in
 * both 8-byte halves of a line proves its data arrived (NVLink and PCIe
 * deliver aligned 8-byte stores whole). With Simple, line j holds bytes
 * [16j, 16j+16) and a flag per block and source says the lines are there. At the end every rank
 * stores the epoch into an ack word of every peer; before pushing epoch e into a parity a
 * destination may still read, a sender waits for that destination's ack of epoch e - 2.
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

/* Unit j of buf (nbytes long; a unit is sizeof(U) = 8 or 16 bytes), zero
 * past the end. */
template <typename U>
static __device__ __forceinline__ U load_unit(const char *buf, size_t nbytes, size_t j) {
  size_t off = j * sizeof(U);
  if (off + sizeof(U) <= nbytes && (uintptr_t)buf % sizeof(U) == 0) return *(const U *)(buf + off);
  unsigned char b[sizeof(U)];
  for (size_t k = 0; k < sizeof(U); k++) b[k] = off + k < nbytes ? (unsigned char)buf[off + k] : 0;
  U v;
  memcpy(&v, b, sizeof v);
  return v;
}

/* Unit j into dst (nbytes long), clipped at the end. */
template <typename U>
static __device__ __forceinline__ void put_unit(char *dst, size_t nbytes, size_t j, U d) {
  size_t off = j * sizeof(U);
  if (off + sizeof(U) <= nbytes && (uintptr_t)dst % sizeof(U) == 0) {
    *(U *)(dst + off) = d;
    return;
  }
  unsigned char b[sizeof(U)];
  memcpy(b, &d, sizeof b);
  for (size_t k = 0; k < sizeof(U) && off + k < nbytes; k++) dst[off + k] = (char)b[k];
}

/* PreMulSum: each rank scales its own input by its own scalar before
 * anyone sees it (ranks' scalars differ), rounding to T like a store. */
template <typename T, typename U>
static __device__ __forceinline__ U scaled(U d, typename elem<T>::acc s) {
  constexpr int E = sizeof(U) / sizeof(T);
  T v[E];
  memcpy(v, &d, sizeof v);
#pragma unroll
  for (int e = 0; e < E; e++)
    v[e] = elem<T>::store(arith<typename elem<T>::acc>::mul(elem<T>::load(v[e]), s));
  memcpy(&d, v, sizeof d);
  return d;
}

/* Called now and then by a waiting thread: when the communicator is
 * aborted or the wait passed its deadline, records why and for which peer
 * (first failure wins), marks the CTA failed and returns true. */
static __device__ bool gave_up(const chorus_kern_comm &c, uint64_t *deadline, int peer,
                               volatile int *failed) {
  int why = 0;
  if (*c.abort) {
    why = CHORUS_KERN_ABORTED;
  } else if (c.timeout_ns) {
    uint64_t t = now_ns();
    if (!*deadline)
      *deadline = t + c.timeout_ns;
    else if (t > *deadline)
      why = CHORUS_KERN_TIMEOUT;
  }
  if (!why) return false;
  if (*(volatile int32_t *)c.status == 0) {
    *(volatile int32_t *)c.status_peer = peer;
    __threadfence_system();
    *(volatile int32_t *)c.status = why;
  }
  *failed = 1;
  return true;
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
    if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &deadline, src, failed))
      return make_uint2(0, 0);
  }
}

static __device__ __forceinline__ void st_release(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ uint32_t ld_acquire(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* Waits until *p (an ack word in this rank's window) reaches at least v. */
static __device__ bool wait_ack(const uint32_t *p, uint32_t v, const chorus_kern_comm &c, int peer,
                                volatile int *failed) {
  uint64_t deadline = 0;
  for (unsigned spins = 0;; spins++) {
    uint32_t a = ld_acquire(p);
    if ((int32_t)(a - v) >= 0) return true;
    if (*failed) return false;
    if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &deadline, peer, failed)) return false;
  }
}

/* The two protocols, as the kernel sees them: the unit of data one 16-byte
 * slot line carries, and how a line is written and read. LL: 8 data bytes
 * and the epoch twice per line, so a reader polls each line. Simple: 16
 * data bytes per line, and after its lines a CTA announces them with one
 * release store of the epoch per destination. */
template <bool SIMPLE> struct proto;
template <> struct proto<false> {
  typedef uint2 unit;
  static __device__ void push(char *line, unit d, uint32_t flag) {
    st_line(line, make_uint4(d.x, flag, d.y, flag));
  }
  static __device__ unit take(const char *line, uint32_t flag, const chorus_kern_comm &c, int src,
                              volatile int *failed) {
    return poll_line(line, flag, c, src, failed);
  }
};
template <> struct proto<true> {
  typedef uint4 unit;
  static __device__ void push(char *line, unit d, uint32_t) { st_line(line, d); }
  static __device__ unit take(const char *line, uint32_t, const chorus_kern_comm &, int,
                              volatile int *) {
    return ld_line(line); /* after the source's flag was seen */
  }
};

template <typename T, bool SIMPLE>
__global__ void __launch_bounds__(THREADS)
    exchange(chorus_kern_comm c, chorus_kern_red red, chorus_kern_xchg x, size_t units_per_cta) {
  typedef proto<SIMPLE> P;
  typedef typename P::unit U;
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
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
  const size_t nbytes = x.bytes;
  const size_t nunits = (nbytes + sizeof(U) - 1) / sizeof(U);
  const size_t lo = (size_t)b * units_per_cta;
  const size_t hi = lo + units_per_cta < nunits ? lo + units_per_cta : nunits;
  const size_t slot_bytes = c.ll_lines * CHORUS_KERN_LINE;
  const size_t my_slot = (parity * n + me) * slot_bytes;
  const char *send = (const char *)x.send;
  char *recv = (char *)x.recv;
  const size_t row = (size_t)b * CHORUS_KERN_MAX_RANKS; /* [block][src] words */
  const uint32_t *acks = (const uint32_t *)(c.win[me] + c.ack_off) + row;
  const uint32_t *flags = (const uint32_t *)(c.win[me] + c.flag_off) + row;

  A scalar = A(0);
  const bool premul = x.reduce && red.kind == CHORUS_RED_PREMULSUM;
  if (premul) {
    T s;
    if (red.scalar_dev)
      s = *(const T *)red.scalar_dev;
    else
      memcpy(&s, red.scalar, sizeof s);
    scalar = elem<T>::load(s);
  }

  /* The destinations finished reading this parity (epoch - 2). */
  if (threadIdx.x < n && ((x.send_to >> threadIdx.x) & 1))
    wait_ack(&acks[threadIdx.x], flag - 2, c, threadIdx.x, &s_failed);
  __syncthreads();

  /* Phase 1: push (Simple: then announce). */
  if (!s_failed)
    for (size_t j = lo + threadIdx.x; j < hi; j += blockDim.x)
      for (int k = 1; k < n; k++) {
        int p = me + k < n ? me + k : me + k - n;
        if (!((x.send_to >> p) & 1)) continue;
        U d = load_unit<U>(send + x.soff[p], nbytes, j);
        if (premul) d = scaled<T, U>(d, scalar);
        P::push(c.win[p] + c.ll_off + my_slot + j * CHORUS_KERN_LINE, d, flag);
      }
  if constexpr (SIMPLE) {
    __syncthreads();
    if (threadIdx.x < n && ((x.send_to >> threadIdx.x) & 1) && !s_failed) {
      __threadfence_system();
      st_release((uint32_t *)(c.win[threadIdx.x] + c.flag_off) + row + me, flag);
    }
    if (threadIdx.x < n && threadIdx.x != (unsigned)me && ((x.recv_from >> threadIdx.x) & 1))
      wait_ack(&flags[threadIdx.x], flag, c, threadIdx.x, &s_failed);
    __syncthreads();
  }

  /* Phase 2: take the sources' units in rank order; copy or reduce. */
  const char *own = c.win[me] + c.ll_off;
  for (size_t j = lo + threadIdx.x; j < hi && !s_failed; j += blockDim.x) {
    A acc[E];
    bool first = true;
    for (int src = 0; src < n; src++) {
      if (!((x.recv_from >> src) & 1)) continue;
      U d;
      if (src == me) {
        d = load_unit<U>(send + x.soff[me], nbytes, j);
        if (premul) d = scaled<T, U>(d, scalar);
      } else {
        d = P::take(own + (parity * n + src) * slot_bytes + j * CHORUS_KERN_LINE, flag, c, src,
                    &s_failed);
        if (s_failed) break;
      }
      if (!x.reduce) {
        put_unit<U>(recv + x.roff[src], nbytes, j, d);
        continue;
      }
      T v[E];
      memcpy(v, &d, sizeof v);
#pragma unroll
      for (int e = 0; e < E; e++) {
        A xv = elem<T>::load(v[e]);
        acc[e] = first ? xv : arith<A>::combine(red.kind, acc[e], xv);
      }
      first = false;
    }
    if (s_failed || !x.reduce) continue;
    T *out = (T *)(recv + x.roff[0]);
    const size_t count = nbytes / sizeof(T);
#pragma unroll
    for (int e = 0; e < E; e++) {
      size_t i = j * E + e;
      if (i >= count) break;
      A a = acc[e];
      if (red.kind == CHORUS_RED_SUMPOSTDIV) a = (A)(a / (A)red.divisor);
      out[i] = elem<T>::store(a);
    }
  }

  /* Tell every peer this rank is done with epoch `flag` of block b. */
  __syncthreads();
  if (threadIdx.x < n && (int)threadIdx.x != me)
    *(volatile uint32_t *)((uint32_t *)(c.win[threadIdx.x] + c.ack_off) + row + me) = flag;
  if (threadIdx.x == 0) c.epochs[b] = flag;
}

template <typename T>
static cudaError_t launch(const chorus_kern_comm *c, const chorus_kern_red *red,
                          const chorus_kern_xchg *x, cudaStream_t stream) {
  size_t unit = x->simple ? 16 : 8;
  size_t nlines = (x->bytes + unit - 1) / unit;
  size_t grid = (nlines + LINES_PER_CTA - 1) / LINES_PER_CTA;
  if (grid < 1) grid = 1;
  if (grid > CHORUS_KERN_MAX_BLOCKS) grid = CHORUS_KERN_MAX_BLOCKS;
  size_t per = (nlines + grid - 1) / grid;
  int threads = per < THREADS ? (int)((per + 31) / 32 * 32) : THREADS;
  if (threads < 32) threads = 32;
  if (x->simple)
    exchange<T, true><<<(unsigned)grid, threads, 0, stream>>>(*c, *red, *x, per);
  else
    exchange<T, false><<<(unsigned)grid, threads, 0, stream>>>(*c, *red, *x, per);
  return cudaGetLastError();
}

extern "C" int chorus_kern_exchange(const chorus_kern_comm *c, const chorus_kern_red *red,
                                    const chorus_kern_xchg *x, void *stream) {
  if (x->bytes == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  cudaError_t e;
  switch (x->reduce ? red->dtype : 1) {
  case 0:
    e = launch<int8_t>(c, red, x, s);
    break;
  case 1:
    e = launch<uint8_t>(c, red, x, s);
    break;
  case 2:
    e = launch<int32_t>(c, red, x, s);
    break;
  case 3:
    e = launch<uint32_t>(c, red, x, s);
    break;
  case 4:
    e = launch<int64_t>(c, red, x, s);
    break;
  case 5:
    e = launch<uint64_t>(c, red, x, s);
    break;
  case 6:
    e = launch<__half>(c, red, x, s);
    break;
  case 7:
    e = launch<float>(c, red, x, s);
    break;
  case 8:
    e = launch<double>(c, red, x, s);
    break;
  case 9:
    e = launch<__nv_bfloat16>(c, red, x, s);
    break;
  case 10:
    e = launch<__nv_fp8_e4m3>(c, red, x, s);
    break;
  case 11:
    e = launch<__nv_fp8_e5m2>(c, red, x, s);
    break;
  default:
    e = cudaErrorInvalidValue;
    break;
  }
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the LL exchange kernel");
  return 0;
}

/*
 * kern_util.cuh - what the GPU collective kernels share: element types and
 * their accumulators, the reduction operators, 8/16-byte unit loads and
 * stores that handle unaligned buffers and partial tails, PreMulSum
 * scaling, memory-ordering helpers, and the deadline/abort check every
 * spin-wait makes. Included by the .cu files only.
 */
#ifndef CHORUS_DEVICE_KERN_UTIL_CUH
#define CHORUS_DEVICE_KERN_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
#include "host/reduce.h"
}

#define CHECK_EVERY 1024 /* spins between deadline and abort checks */

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

/* The PreMulSum multiplier of red, in T's accumulator type (0 otherwise). */
template <typename T>
static __device__ typename elem<T>::acc premul_scalar(const chorus_kern_red &red) {
  typedef typename elem<T>::acc A;
  if (red.kind != CHORUS_RED_PREMULSUM) return A(0);
  T s;
  if (red.scalar_dev)
    s = *(const T *)red.scalar_dev;
  else
    memcpy(&s, red.scalar, sizeof s);
  return elem<T>::load(s);
}

/* Folds unit d (sizeof(U) / sizeof(T) elements) into acc: the first
 * source initialises it, later ones combine in call order. */
template <typename T, typename U>
static __device__ __forceinline__ void
fold_unit(typename elem<T>::acc (&acc)[sizeof(U) / sizeof(T)], U d, bool first, int kind) {
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  T v[E];
  memcpy(v, &d, sizeof v);
#pragma unroll
  for (int e = 0; e < E; e++) {
    A xv = elem<T>::load(v[e]);
    acc[e] = first ? xv : arith<A>::combine(kind, acc[e], xv);
  }
}

/* acc back into a unit of T, divided by red's divisor for SUMPOSTDIV when
 * this is the final result (divide). */
template <typename T, typename U>
static __device__ __forceinline__ U
finish_unit(const typename elem<T>::acc (&acc)[sizeof(U) / sizeof(T)], const chorus_kern_red &red,
            bool divide) {
  typedef typename elem<T>::acc A;
  constexpr int E = sizeof(U) / sizeof(T);
  T v[E];
#pragma unroll
  for (int e = 0; e < E; e++) {
    A a = acc[e];
    if (divide && red.kind == CHORUS_RED_SUMPOSTDIV) a = (A)(a / (A)red.divisor);
    v[e] = elem<T>::store(a);
  }
  U d;
  memcpy(&d, v, sizeof d);
  return d;
}

/* Whether red is an operator of the plain-sum loops (ring.cu, pipe.cu,
 * twoshot.cu): a sum, divided at the end or not. */
static __device__ __forceinline__ bool plain_sum(const chorus_kern_red &red) {
  return red.kind == CHORUS_RED_SUM || red.kind == CHORUS_RED_SUMPOSTDIV;
}

/* 2-byte floats that add in pairs (one instruction per two elements on
 * sm_80 and later). */
template <typename T> struct pairs { static constexpr bool ok = false; };
template <> struct pairs<__half> {
  typedef __half2 P;
  static constexpr bool ok = true;
};
template <> struct pairs<__nv_bfloat16> {
  typedef __nv_bfloat162 P;
  static constexpr bool ok = true;
};

/* a + b, element by element, for units of a pairs<T> type: each sum
 * rounded once to T. That is what the float sum rounded back to T gives:
 * two such values add exactly in float unless one is below half an ulp of
 * the other in T, and then both round to the larger. */
template <typename T, typename U> static __device__ __forceinline__ U add_pairs(U a, U b) {
  typedef typename pairs<T>::P P;
  constexpr int N = sizeof(U) / sizeof(P);
  P x[N], y[N];
  memcpy(x, &a, sizeof x);
  memcpy(y, &b, sizeof y);
#pragma unroll
  for (int i = 0; i < N; i++) x[i] = __hadd2(x[i], y[i]);
  memcpy(&a, x, sizeof a);
  return a;
}

/* a + b, element by element: in pairs where T allows (add_pairs), else
 * through T's accumulator type, as fold_unit and finish_unit sum. */
template <typename T, typename U> static __device__ __forceinline__ U add_units(U a, U b) {
  if constexpr (pairs<T>::ok) {
    return add_pairs<T, U>(a, b);
  } else {
    typedef typename elem<T>::acc A;
    constexpr int E = sizeof(U) / sizeof(T);
    T x[E], y[E];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
#pragma unroll
    for (int e = 0; e < E; e++)
      x[e] = elem<T>::store(arith<A>::add(elem<T>::load(x[e]), elem<T>::load(y[e])));
    memcpy(&a, x, sizeof a);
    return a;
  }
}

/* The words at fail_off of the arena at `arena` that rank src writes. */
static __device__ __forceinline__ volatile uint32_t *fail_words(const chorus_kern_comm &c,
                                                                char *arena, int src) {
  return (volatile uint32_t *)(arena + c.fail_off + (size_t)src * 32);
}

/* Records the first failure of the communicator's kernels (why, the peer
 * concerned and, for a mismatch, the sizes or calls) where the host reads
 * it. A mismatch is also written into every other rank's arena: ranks
 * waiting for this one (for data it will never send, say) stop at once with
 * it instead of at their deadline. Other failures are not: their peer may
 * be gone, its arena with it, and every waiting rank has its own deadline. */
static __device__ void record_failure(const chorus_kern_comm &c, int why, int peer,
                                      uint64_t info0 = 0, uint64_t info1 = 0, uint64_t info2 = 0) {
  if (*(volatile int32_t *)c.status != 0) return;
  *(volatile int32_t *)c.status_peer = peer;
  ((volatile uint64_t *)c.status_info)[0] = info0;
  ((volatile uint64_t *)c.status_info)[1] = info1;
  ((volatile uint64_t *)c.status_info)[2] = info2;
  __threadfence_system();
  *(volatile int32_t *)c.status = why;
  if (!CHORUS_KERN_FORWARDED(why)) return;
  for (int r = 0; r < c.nranks; r++) {
    if (r == c.rank) continue;
    volatile uint32_t *w = fail_words(c, c.arena[r], c.rank);
    w[1] = (uint32_t)peer;
    ((volatile uint64_t *)w)[1] = info0;
    ((volatile uint64_t *)w)[2] = info1;
  }
  __threadfence_system();
  for (int r = 0; r < c.nranks; r++)
    if (r != c.rank) fail_words(c, c.arena[r], c.rank)[0] = (uint32_t)why;
}

/* Whether another rank wrote a failure into this rank's arena (then it is
 * recorded as CHORUS_KERN_PEER_FAILED). */
static __device__ bool peer_failed(const chorus_kern_comm &c) {
  for (int r = 0; r < c.nranks; r++) {
    if (r == c.rank) continue;
    volatile uint32_t *w = fail_words(c, c.arena[c.rank], r);
    const uint32_t why = w[0];
    if (!why) continue;
    __threadfence();
    const uint64_t i0 = ((volatile uint64_t *)w)[1], i1 = ((volatile uint64_t *)w)[2];
    record_failure(c, CHORUS_KERN_PEER_FAILED, r, i0, i1, (uint64_t)why << 32 | w[1]);
    return true;
  }
  return false;
}
/* ---- the call board (kernels.h: board_off) ------------------------------ */

/* Rank src's line for call seq on the board in the arena at `arena`. */
static __device__ __forceinline__ char *board_line(const chorus_kern_comm &c, char *arena, int src,
                                                   uint32_t seq) {
  return arena + c.board_off +
         ((size_t)src * CHORUS_KERN_BOARD_SLOTS + seq % CHORUS_KERN_BOARD_SLOTS) * CHORUS_KERN_LINE;
}
/* An entry (board_line's contents): false when there is none (never
 * posted; or torn, being rewritten). */
static __device__ __forceinline__ bool board_entry(uint4 v, uint32_t *seq, uint64_t *desc) {
  if (v.y != v.w || v.y == 0) return false;
  *seq = v.y - 1;
  *desc = v.x | (uint64_t)v.z << 32;
  return true;
}
/* Whether rank src's entry (theirs) and this rank's (mine), both read from
 * one slot, name the same call number but another call; then records the
 * mismatch, naming both calls. */
static __device__ bool board_differs(const chorus_kern_comm &c, int src, uint4 theirs, uint4 mine) {
  uint32_t ts, ms;
  uint64_t td, md;
  if (!board_entry(theirs, &ts, &td) || !board_entry(mine, &ms, &md) || ts != ms || td == md)
    return false;
  record_failure(c, CHORUS_KERN_CALL_MISMATCH, src, td, md);
  return true;
}
/* Rank src's entries and this rank's for the calls before call seq, loaded
 * ahead (board_load) and compared later (board_compare), so that the loads
 * overlap a wait. */
#define BOARD_BACK (CHORUS_KERN_BOARD_SLOTS - 1)
typedef struct board_history {
  uint4 theirs[BOARD_BACK], mine[BOARD_BACK];
} board_history;
static __device__ __forceinline__ void board_load(const chorus_kern_comm &c, int src, uint32_t seq,
                                                  board_history *h) {
#pragma unroll
  for (uint32_t k = 0; k < BOARD_BACK; k++) {
    h->theirs[k] = ld_line(board_line(c, c.arena[c.rank], src, seq - 1 - k));
    h->mine[k] = ld_line(board_line(c, c.arena[c.rank], c.rank, seq - 1 - k));
  }
}
static __device__ __forceinline__ bool board_compare(const chorus_kern_comm &c, int src,
                                                     const board_history *h) {
  bool differs = false;
#pragma unroll
  for (uint32_t k = 0; k < BOARD_BACK; k++)
    differs = differs || board_differs(c, src, h->theirs[k], h->mine[k]);
  return differs;
}
/* What every collective launch does first, in the last warp of CTA 0 (the
 * least busy at small sizes): posts call seq (desc) on every rank's board,
 * its own included; with `compare`, also compares the calls before it
 * with what the peers posted (launches that wait for a header of every
 * peer do that during the wait instead: ll_check). A difference is
 * recorded (the host reports it) and forwarded to the peers; this launch
 * runs on. */
static __device__ void board_post(const chorus_kern_comm &c, uint32_t seq, uint64_t desc,
                                  bool compare) {
  if (blockIdx.x != 0 || threadIdx.x + 32 < blockDim.x) return;
  const int lane = (int)(threadIdx.x & 31);
  if (lane < c.nranks)
    st_line(board_line(c, c.arena[lane], c.rank, seq),
            make_uint4((uint32_t)desc, seq + 1, (uint32_t)(desc >> 32), seq + 1));
  if (compare && lane < c.nranks && lane != c.rank) {
    board_history h;
    board_load(c, lane, seq, &h);
    board_compare(c, lane, &h);
  }
}
/* Whether any peer posted another call under a number this rank posted
 * too (recorded): the calls that wait on each other without exchanging
 * anything, compared while they wait. */
static __device__ bool board_mismatch(const chorus_kern_comm &c) {
  for (int src = 0; src < c.nranks; src++) {
    if (src == c.rank) continue;
    for (uint32_t k = 0; k < CHORUS_KERN_BOARD_SLOTS; k++)
      if (board_differs(c, src, ld_line(board_line(c, c.arena[c.rank], src, k)),
                        ld_line(board_line(c, c.arena[c.rank], c.rank, k))))
        return true;
  }
  return false;
}

/* How long a wait goes on before it compares the board (a wait that long
 * is rare for calls that match, and the comparison costs microseconds). */
#define BOARD_AFTER_NS 1000000ull

/* Called now and then by a waiting thread: when the communicator is
 * aborted, the peer's process exited (util/watch.h) or the wait passed its
 * deadline, records why and for which peer (first failure wins), marks the
 * CTA failed and returns true; also when another CTA recorded a failure
 * (a mismatch it saw), which ends the communicator anyway, another rank
 * wrote one into this rank's arena, or the board shows a peer in another
 * call. *since: when the wait began (0 before the first call). */
static __device__ bool gave_up(const chorus_kern_comm &c, uint64_t *since, int peer,
                               volatile int *failed) {
  int why = 0;
  if (*c.abort) {
    why = CHORUS_KERN_ABORTED;
  } else if (peer >= 0 && peer < 32 && (*c.peer_gone >> peer & 1u)) {
    why = CHORUS_KERN_PEER_EXITED;
  } else if (*(volatile int32_t *)c.status) { /* another CTA's failure, recorded */
    *failed = 1;
    return true;
  } else if (peer_failed(c)) { /* another rank's, written here */
    *failed = 1;
    return true;
  } else {
    const uint64_t t = now_ns();
    if (!*since) {
      *since = t;
    } else if (t - *since > BOARD_AFTER_NS && board_mismatch(c)) {
      *failed = 1;
      return true;
    } else if (c.timeout_ns && t - *since > c.timeout_ns) {
      why = CHORUS_KERN_TIMEOUT;
    }
  }
  if (!why) return false;
  record_failure(c, why, peer);
  *failed = 1;
  return true;
}
static __device__ __forceinline__ void st_release(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ uint32_t ld_acquire(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* Waits until *p (a counter in this rank's arena that a peer advances)
 * reaches at least v (in wrap-around order). False when it gave up. */
static __device__ bool wait_at_least(const uint32_t *p, uint32_t v, const chorus_kern_comm &c,
                                     int peer, volatile int *failed) {
  uint64_t since = 0;
  for (unsigned spins = 0;; spins++) {
    uint32_t a = ld_acquire(p);
    if ((int32_t)(a - v) >= 0) return true;
    if (*failed) return false;
    if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &since, peer, failed)) return false;
  }
}

/* Waits for line p to carry flag in both halves. Returns its payload, or
 * sets *failed (after recording why) and returns zeros. */
static __device__ uint2 poll_line(const char *p, uint32_t flag, const chorus_kern_comm &c, int src,
                                  volatile int *failed) {
  uint64_t since = 0;
  for (unsigned spins = 0;; spins++) {
    uint4 v = ld_line(p);
    if (v.y == flag && v.w == flag) return make_uint2(v.x, v.z);
    if (*failed) return make_uint2(0, 0);
    if (spins % CHECK_EVERY == CHECK_EVERY - 1 && gave_up(c, &since, src, failed))
      return make_uint2(0, 0);
  }
}

/* Calls F<T>::run(args...) with T the element type of ncclDataType_t dtype
 * (fp8 where the compiler supports it, as everywhere here). */
template <template <typename> class F, typename... Args>
static cudaError_t by_dtype(int dtype, Args... args) {
  switch (dtype) {
  case 0:
    return F<int8_t>::run(args...);
  case 1:
    return F<uint8_t>::run(args...);
  case 2:
    return F<int32_t>::run(args...);
  case 3:
    return F<uint32_t>::run(args...);
  case 4:
    return F<int64_t>::run(args...);
  case 5:
    return F<uint64_t>::run(args...);
  case 6:
    return F<__half>::run(args...);
  case 7:
    return F<float>::run(args...);
  case 8:
    return F<double>::run(args...);
  case 9:
    return F<__nv_bfloat16>::run(args...);
  case 10:
    return F<__nv_fp8_e4m3>::run(args...);
  case 11:
    return F<__nv_fp8_e5m2>::run(args...);
  default:
    return cudaErrorInvalidValue;
  }
}

/* ---- launches that overlap the kernel before them ---------------------- */
/* First of a kernel that chorus_launch may start early (c.pdl:
 * programmatic dependent launch): waits until the stream's kernel before
 * it has completed and its writes show, then lets the next such launch
 * start in turn, its CTAs waiting here. So only the launches overlap,
 * never memory accesses, and a kernel launched the usual way passes both
 * at once. */
static __device__ __forceinline__ void pdl_enter() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/* kernel<<<grid, threads, 0, stream>>>(args...), early where pdl (a
 * kernel that starts with pdl_enter). Graphs capture the overlap as well.
 * With an LL AllReduce of 8 B-128 KiB between 2 processes on 2xH200 each
 * call took 0.3-0.8 us less (5.1-5.4 us), 0.23-0.36 us less in graphs. */
template <typename... P, typename... A>
static cudaError_t chorus_launch(bool pdl, void (*kernel)(P...), unsigned grid, unsigned threads,
                                 cudaStream_t stream, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.stream = stream;
  cudaLaunchAttribute early[1];
  early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early[0].val.programmaticStreamSerializationAllowed = 1;
  if (pdl) {
    cfg.attrs = early;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError(); /* a GPU or driver without it: the usual launch */
    cfg.numAttrs = 0;
  }
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

/* The launch an exchange kernel file ends with, given its launcher
 * F<T, REDUCE>::run(c, red, x, stream): F<T, true> for a reduction over
 * elements of type T, F<uint8_t, false> for a copy (copies move bytes, so
 * one instance serves every type); a failed launch becomes the error
 * naming `what`. F must be file-local (an anonymous namespace): run()
 * instances of two files' launchers of one name would otherwise be merged
 * by the linker, every exchange then launching one file's kernel. */
namespace {
template <template <typename, bool> class F> struct launch_exchange {
  template <typename T> struct reducing {
    static cudaError_t run(const chorus_kern_comm *c, const chorus_kern_red *red,
                           const chorus_kern_xchg *x, cudaStream_t stream) {
      return F<T, true>::run(c, red, x, stream);
    }
  };
  static int run(const char *what, const chorus_kern_comm *c, const chorus_kern_red *red,
                 const chorus_kern_xchg *x, void *stream) {
    if (x->bytes == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = x->reduce ? by_dtype<reducing>(red->dtype, c, red, x, s)
                              : F<uint8_t, false>::run(c, red, x, s);
    if (e != cudaSuccess) return chorus_dev_fail((int)e, what);
    return 0;
  }
};
} // namespace

#endif

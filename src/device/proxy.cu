/*
 * proxy.cu - the device half of host-staged calls (kernels.h,
 * chorus_kern_proxy; gpu/proxy.h is the host half).
 *
 * One block: its threads copy the call's small inputs into host memory,
 * then thread 0 takes the next number on the communicator's device
 * counter, posts (number, batch) into the host's ring and waits until the
 * host says the batch is done, and the threads copy the small outputs
 * back. The number comes from the device, so a graph replayed posts fresh
 * numbers and the host runs each replay as a new batch.
 */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "device/device.h"
#include "device/kernels.h"
}

#define NT 512

/* Every thread of the block copies its share; 16-byte units where both
 * ends allow, four loads in flight per thread (host memory is far). */
__device__ static void copy_bytes(char *dst, const char *src, uint64_t n) {
  const int t = threadIdx.x;
  uint64_t done = 0;
  if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
    const uint64_t units = n / 16;
    uint4 *d = (uint4 *)dst;
    const uint4 *s = (const uint4 *)src;
    uint64_t i = t;
    for (; i + 3 * NT < units; i += 4 * NT) {
      uint4 a = s[i], b = s[i + NT], c = s[i + 2 * NT], e = s[i + 3 * NT];
      d[i] = a;
      d[i + NT] = b;
      d[i + 2 * NT] = c;
      d[i + 3 * NT] = e;
    }
    for (; i < units; i += NT) d[i] = s[i];
    done = units * 16;
  }
  for (uint64_t i = done + t; i < n; i += NT) dst[i] = src[i];
}

/* The host's words in one read: .x done, .y failed, .z abort. */
__device__ static uint4 state(const chorus_kern_proxy &p) {
  uint4 s;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(s.x), "=r"(s.y), "=r"(s.z), "=r"(s.w)
               : "l"(p.st)
               : "memory");
  return s;
}

__device__ static int stopped(uint4 s) {
  return s.y != 0 || s.z != 0;
}

__device__ static void copy_list(const chorus_kern_proxy &p, uint32_t from, uint32_t to) {
  const chorus_kern_copy *list = p.ncopies <= CHORUS_KERN_PROXY_INLINE ? p.inl : p.copies;
  for (uint32_t i = from; i < to; i++)
    copy_bytes((char *)list[i].dst, (const char *)list[i].src, list[i].bytes);
}

__global__ void __launch_bounds__(NT) proxy(const __grid_constant__ chorus_kern_proxy p) {
  __shared__ int s_stop;
  if (p.mode != CHORUS_KERN_PROXY_OUTS) {
    copy_list(p, 0, p.nin);
    __syncthreads();
    if (threadIdx.x == 0) {
      int stop = 0;
      __threadfence_system(); /* the copies, before the host sees the post */
      const uint32_t t = atomicAdd(p.issued, 1u);
      for (uint4 s = state(p); (int32_t)(t - s.x) >= CHORUS_KERN_PROXY_RING; s = state(p)) {
        if ((stop = stopped(s))) break;
        __nanosleep(256);
      }
      if (!stop) {
        p.ring[t % CHORUS_KERN_PROXY_RING] = (uint64_t)(t + 1) << 32 | p.batch;
        __threadfence_system();
        if (p.mode == CHORUS_KERN_PROXY_SPIN)
          for (uint4 s = state(p); (int32_t)(s.x - (t + 1)) < 0; s = state(p)) {
            if ((stop = stopped(s))) break;
            __nanosleep(128);
          }
        __threadfence_system(); /* the host's outputs, after its word */
      }
      if (stop && p.mode == CHORUS_KERN_PROXY_POST) { /* the host never will */
        *p.word = p.gen;
        __threadfence_system();
      }
      s_stop = stop;
    }
    __syncthreads();
    if (s_stop || p.mode == CHORUS_KERN_PROXY_POST) return;
  }
  copy_list(p, p.nin, p.ncopies);
}

extern "C" int chorus_kern_proxy_run(const chorus_kern_proxy *p, void *stream) {
  proxy<<<1, NT, 0, (cudaStream_t)stream>>>(*p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching the host-staged call's kernel");
  return 0;
}

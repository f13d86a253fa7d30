/*
 * hop_bench.cu - what one hand-off between two GPUs costs, by protocol.
 *
 * A ping-pong between GPU 0 and GPU 1 (peer access), one CTA of 512
 * threads on each, `bytes` of payload each way per hop:
 *   fifo-sys  the payload in plain 16-byte stores, then a CTA barrier, a
 *             system-scope fence and a release store of the step into the
 *             peer's flag; the peer polls its own flag with acquire loads
 *             (what pipe.cu, ring.cu and twoshot.cu do per step);
 *   fifo-gpu  the same with a GPU-scope fence and release (not a valid
 *             protocol between GPUs; shows what the system scope costs);
 *   ll        8 bytes of payload per 16-byte line with the step twice, no
 *             fence; the peer polls every line (exchange.cu).
 * Prints the round trip and one-way time per hop, and the one-way payload
 * rate, averaged over `iters` round trips (after a warm-up). Not a test:
 * it checks only that every hop arrived in time. Usage: hop_bench [iters].
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "device/kern_util.cuh" /* the kernels' own stores, loads and clock */

#define NT        512
#define MAX_BYTES (1 << 20)
#define SPIN_MAX  (1u << 30)

enum { FIFO_SYS = 0, FIFO_GPU = 1, LL = 2 };

/* The GPU-scope twin of kern_util.cuh's st_release (system scope). */
static __device__ __forceinline__ void st_release_gpu(uint32_t *p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* One side. Its peer's landing area and flag are `to`/`to_flag`; its own
 * are `in`/`flag`. starts: whether it sends first. */
__global__ void __launch_bounds__(NT)
    side(int variant, size_t bytes, int iters, bool starts, uint4 *to, uint32_t *to_flag,
         const uint4 *in, const uint32_t *flag, uint64_t *ns, int *failed) {
  __shared__ int s_bad;
  const int t = threadIdx.x;
  if (t == 0) s_bad = 0;
  __syncthreads();
  const size_t units = bytes / 16, lines = (bytes + 7) / 8 ? (bytes + 7) / 8 : 1;
  uint64_t t0 = 0;
  for (int i = 1; i <= iters + 1 && !s_bad; i++) {
    if (i == 2 && t == 0) t0 = now_ns(); /* the first round trip warms up */
    const uint32_t step = (uint32_t)i;
    for (int half = 0; half < 2; half++) {
      const bool send = (half == 0) == starts;
      if (send) {
        if (variant == LL) {
          for (size_t j = t; j < lines; j += NT)
            st_line((char *)&to[j], make_uint4((uint32_t)j, step, ~(uint32_t)j, step));
        } else {
          for (size_t j = t; j < units; j += NT) to[j] = make_uint4(step, (uint32_t)j, step, 0);
          __syncthreads();
          if (t == 0) {
            if (variant == FIFO_SYS) {
              __threadfence_system();
              st_release(to_flag, step);
            } else {
              __threadfence();
              st_release_gpu(to_flag, step);
            }
          }
        }
      } else if (variant == LL) {
        for (size_t j = t; j < lines; j += NT) {
          unsigned spins = 0;
          uint4 v = ld_line((const char *)&in[j]);
          while ((v.y != step || v.w != step) && ++spins < SPIN_MAX)
            v = ld_line((const char *)&in[j]);
          if (spins >= SPIN_MAX) s_bad = 1;
        }
        __syncthreads();
      } else {
        if (t == 0) {
          unsigned spins = 0;
          while (ld_acquire(flag) < step && ++spins < SPIN_MAX) {
          }
          if (spins >= SPIN_MAX) s_bad = 1;
        }
        __syncthreads();
        /* Read the payload (as a taker would) so the hop includes it. */
        uint32_t acc = 0;
        for (size_t j = t; j < units; j += NT) acc += in[j].x;
        if (acc == 0xffffffffu) s_bad = 2; /* keeps the loads */
      }
    }
  }
  __syncthreads();
  if (t == 0) {
    if (starts) *ns = now_ns() - t0;
    if (s_bad) *failed = 1;
  }
}

/* Ends the program with what failed unless e is cudaSuccess. */
static void ck(cudaError_t e, int line) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "hop_bench.cu:%d: %s\n", line, cudaGetErrorString(e));
  exit(1);
}
#define CK(call) ck((call), __LINE__)

int main(int argc, char **argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 2000;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    printf("hop_bench needs 2 GPUs: skipped\n");
    return 77;
  }
  uint4 *buf[2];
  uint32_t *flag[2];
  uint64_t *ns[2];
  int *failed[2];
  cudaStream_t s[2];
  for (int d = 0; d < 2; d++) {
    CK(cudaSetDevice(d));
    cudaError_t e = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
    cudaGetLastError();
    CK(cudaMalloc(&buf[d], 2 * MAX_BYTES));
    CK(cudaMalloc(&flag[d], 64));
    CK(cudaMalloc(&ns[d], sizeof(uint64_t)));
    CK(cudaMalloc(&failed[d], sizeof(int)));
    CK(cudaStreamCreate(&s[d]));
  }
  printf("%-9s %9s %9s %9s %9s\n", "protocol", "bytes", "rt_us", "hop_us", "GB/s");
  const char *names[] = {"fifo-sys", "fifo-gpu", "ll"};
  const size_t sizes[] = {0, 4096, 16384, 65536, 262144, 1 << 20};
  for (int v = 0; v < 3; v++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      const size_t bytes = sizes[k];
      for (int d = 0; d < 2; d++) { /* fresh flags and lines: steps restart at 1 */
        CK(cudaSetDevice(d));
        CK(cudaMemset(buf[d], 0, 2 * MAX_BYTES));
        CK(cudaMemset(flag[d], 0, 64));
        CK(cudaMemset(failed[d], 0, sizeof(int)));
        CK(cudaDeviceSynchronize());
      }
      for (int d = 1; d >= 0; d--) { /* the waiting side first */
        CK(cudaSetDevice(d));
        side<<<1, NT, 0, s[d]>>>(v, bytes, iters, d == 0, buf[1 - d], flag[1 - d], buf[d], flag[d],
                                 ns[d], failed[d]);
        CK(cudaGetLastError());
      }
      uint64_t t = 0;
      int bad = 0, b;
      for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        CK(cudaStreamSynchronize(s[d]));
        CK(cudaMemcpy(&b, failed[d], sizeof b, cudaMemcpyDeviceToHost));
        bad |= b;
      }
      CK(cudaSetDevice(0));
      CK(cudaMemcpy(&t, ns[0], sizeof t, cudaMemcpyDeviceToHost));
      const double rt = (double)t / iters / 1000.0, hop = rt / 2;
      printf("%-9s %9zu %9.2f %9.2f %9.1f%s\n", names[v], bytes, rt, hop,
             hop > 0 ? (double)bytes / (hop * 1000.0) : 0.0, bad ? "  (a hop timed out)" : "");
    }
  return 0;
}

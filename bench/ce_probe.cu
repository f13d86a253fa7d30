// ce_probe.cu - the copy engine against an SM copy kernel between GPUs 0 and 1
// (peer access): GB/s per direction, one way and both ways at once, each
// buffer whole or in chunks back to back on one stream. With any argument
// every copy runs on the destination GPU's stream (a pull), else on the
// source's (a push).
//   nvcc -O2 -arch=sm_90 -o /tmp/ce_probe bench/ce_probe.cu && /tmp/ce_probe && /tmp/ce_probe pull
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e) {                                                                                       \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
__global__ void smcopy(int4 *dst, const int4 *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}
int main(int argc, char **argv) {
  (void)argv;
  const int pull = argc > 1; /* any argument: each copy on the destination GPU's stream */
  const size_t maxb = (size_t)2 << 30;
  void *a[2], *b[2];
  cudaStream_t s[2];
  cudaEvent_t e0[2], e1[2];
  for (int d = 0; d < 2; d++) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&a[d], maxb));
    CK(cudaMalloc(&b[d], maxb));
    CK(cudaMemset(a[d], 1, maxb));
    CK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[d]));
    CK(cudaEventCreate(&e1[d]));
  }
  printf("%10s %5s %8s | %9s %9s | %9s %9s\n", "bytes", "chunk", "mode", "CE 1way", "CE 2way",
         "SM 1way", "SM 2way");
  size_t sizes[] = {(size_t)1 << 20, (size_t)8 << 20, (size_t)64 << 20, (size_t)512 << 20, maxb};
  for (size_t bytes : sizes)
    for (int chunks : {1, 16, 64}) {
      if (bytes / chunks < (1 << 20)) continue;
      double gbs[4];
      for (int mode = 0; mode < 4; mode++) { // CE1 CE2 SM1 SM2
        int ways = (mode & 1) + 1, ce = mode < 2;
        int iters = bytes >= ((size_t)512 << 20) ? 5 : 20;
        for (int rep = 0; rep < 2; rep++) { // warm-up then timed
          for (int d = 0; d < 2; d++) {
            cudaSetDevice(d);
            cudaEventRecord(e0[d], s[d]);
          }
          for (int it = 0; it < iters; it++)
            for (int d = 0; d < ways; d++) {
              const int q = pull ? 1 - d : d; /* the stream's GPU */
              cudaSetDevice(q);
              size_t cb = bytes / chunks;
              for (int c = 0; c < chunks; c++) {
                char *dst = (char *)b[1 - d] + c * cb;
                const char *src = (const char *)a[d] + c * cb;
                if (ce)
                  cudaMemcpyPeerAsync(dst, 1 - d, src, d, cb, s[q]);
                else
                  smcopy<<<64, 512, 0, s[q]>>>((int4 *)dst, (const int4 *)src, cb / 16);
              }
            }
          for (int d = 0; d < 2; d++) {
            cudaSetDevice(d);
            cudaEventRecord(e1[d], s[d]);
          }
          float ms = 0;
          for (int d = 0; d < 2; d++) {
            cudaSetDevice(d);
            CK(cudaEventSynchronize(e1[d]));
            float m;
            cudaEventElapsedTime(&m, e0[d], e1[d]);
            if (m > ms) ms = m;
          }
          gbs[mode] = (double)bytes * iters / (ms * 1e-3) / 1e9;
        }
      }
      printf("%10zu %5d %8s | %9.1f %9.1f | %9.1f %9.1f\n", bytes, chunks, "", gbs[0], gbs[1],
             gbs[2], gbs[3]);
    }
  return 0;
}

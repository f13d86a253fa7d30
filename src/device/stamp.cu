/*
 * stamp.cu - GPU timestamps for calls captured in CUDA graphs (kernels.h,
 * chorus_kern_stamp; core/trace.c reads them).
 *
 * One thread takes the next entry of a ring in host-mapped memory from a
 * counter in device memory, so each replay of a graph writes fresh
 * entries, and writes the GPU's global timer into it: the time first,
 * then, after a system-wide fence, the header naming the entry's number
 * and tag, which the host reads before and after the time.
 */
#include "kern_util.cuh"

namespace {

__global__ void stamp(volatile uint64_t *ring, uint32_t *counter, uint32_t mask, uint32_t tag) {
  const uint32_t i = atomicAdd(counter, 1u);
  volatile uint64_t *e = ring + 2 * (size_t)(i & mask);
  e[1] = now_ns();
  __threadfence_system();
  e[0] = (uint64_t)(i + 1) << 32 | tag;
}

} // namespace

extern "C" int chorus_kern_stamp(volatile uint64_t *ring, uint32_t *counter, uint32_t entries,
                                 uint32_t tag, void *stream) {
  stamp<<<1, 1, 0, (cudaStream_t)stream>>>(ring, counter, entries - 1, tag);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "launching a timestamp kernel");
  return 0;
}

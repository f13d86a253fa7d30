/*
 * mem.c - buffer memory and streams of the perf programs.
 *
 * Every buffer handed to NCCL comes from pt_mem_alloc, and the host only
 * touches buffers through pt_mem_begin/pt_mem_end. Without GPUs (or with
 * CHORUS_HOST_COMM=1) buffers are page-aligned host memory, their own
 * host-visible window, and streams are NULL. Built with CUDA (PT_CUDA) on a
 * machine with GPUs, buffers are device memory on the communicator's GPU
 * (ncclCommCuDevice, so this works with any NCCL library), windows are
 * host copies, and each rank gets a stream of its own; the streams are
 * blocking ones, so the copies of pt_mem_begin (on the legacy stream) wait
 * for the collectives queued before them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#ifdef PT_CUDA
#include <cuda_runtime.h>
#endif

#define PT_ALIGN 4096

int pt_dev_mode(void) {
#ifdef PT_CUDA
  static int mode = -1;
  if (mode < 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    const char *host = getenv("CHORUS_HOST_COMM");
    mode = n > 0 && !(host && atoi(host) == 1);
  }
  return mode;
#else
  return 0;
#endif
}

#ifdef PT_CUDA
static void cuda_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "chorus perf: %s failed: %s\n", what, cudaGetErrorString(e));
  exit(EXIT_FAILURE);
}

/* Is comm's memory on a GPU? If so, that GPU becomes current. */
static int on_gpu(ncclComm_t comm) {
  int dev = -1;
  if (!pt_dev_mode() || ncclCommCuDevice(comm, &dev) != ncclSuccess || dev < 0) return 0;
  cuda_check(cudaSetDevice(dev), "cudaSetDevice");
  return 1;
}
#endif

int pt_dev_bind(const pt_thread *t, int i, pt_rank *r) {
  r->dev = -1;
  r->stream = NULL;
#ifdef PT_CUDA
  if (!pt_dev_mode()) return -1;
  const pt_world *w = t->world;
  int ndev = 0;
  cuda_check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  int local = w->local_size > 0 ? w->local_rank : w->proc;
  r->dev = (local * w->nthreads * w->ngpus + t->thread * w->ngpus + i) % ndev;
  cuda_check(cudaSetDevice(r->dev), "cudaSetDevice");
  cudaStream_t s;
  cuda_check(cudaStreamCreate(&s), "cudaStreamCreate");
  r->stream = s;
#else
  (void)t, (void)i;
#endif
  return r->dev;
}

void pt_dev_unbind(pt_rank *r) {
#ifdef PT_CUDA
  if (r->stream) {
    cudaSetDevice(r->dev);
    cudaStreamDestroy((cudaStream_t)r->stream);
  }
#endif
  r->stream = NULL;
}

void pt_dev_sync(const pt_thread *t) {
#ifdef PT_CUDA
  for (int i = 0; i < t->nlocal; i++) {
    const pt_rank *r = &t->ranks[i];
    if (!r->stream) continue;
    cuda_check(cudaSetDevice(r->dev), "cudaSetDevice");
    cuda_check(cudaStreamSynchronize((cudaStream_t)r->stream), "cudaStreamSynchronize");
  }
#else
  (void)t;
#endif
}

void *pt_mem_alloc(ncclComm_t comm, size_t bytes, int ncclmem) {
  size_t rounded = (bytes + PT_ALIGN - 1) / PT_ALIGN * PT_ALIGN;
  if (rounded == 0) rounded = PT_ALIGN;
#ifdef PT_CUDA
  const int gpu = on_gpu(comm);
#else
  (void)comm;
#endif
  void *p = NULL;
  if (ncclmem) {
    if (ncclMemAlloc(&p, rounded) != ncclSuccess) return NULL;
#ifdef PT_CUDA
  } else if (gpu) {
    if (cudaMalloc(&p, rounded) != cudaSuccess) return NULL;
#endif
  } else {
    p = aligned_alloc(PT_ALIGN, rounded);
    if (!p) return NULL;
  }
  /* touch every page before timing */
#ifdef PT_CUDA
  if (gpu) {
    cuda_check(cudaMemset(p, 0, rounded), "cudaMemset");
    return p;
  }
#endif
  memset(p, 0, rounded);
  return p;
}

void pt_mem_free(ncclComm_t comm, void *p, int ncclmem) {
  if (ncclmem) {
#ifdef PT_CUDA
    on_gpu(comm);
#endif
    ncclMemFree(p);
    return;
  }
#ifdef PT_CUDA
  if (on_gpu(comm)) {
    cudaFree(p);
    return;
  }
#else
  (void)comm;
#endif
  free(p);
}

void *pt_mem_begin(ncclComm_t comm, void *p, size_t bytes, int read) {
#ifdef PT_CUDA
  if (on_gpu(comm)) {
    void *view = malloc(bytes ? bytes : 1);
    if (!view) {
      fprintf(stderr, "chorus perf: out of memory (%zu bytes)\n", bytes);
      exit(EXIT_FAILURE);
    }
    if (read && bytes) cuda_check(cudaMemcpy(view, p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return view;
  }
#else
  (void)comm, (void)bytes, (void)read;
#endif
  return p;
}

void pt_mem_end(ncclComm_t comm, void *p, void *view, size_t bytes, int write) {
#ifdef PT_CUDA
  if (on_gpu(comm)) {
    if (write && bytes)
      cuda_check(cudaMemcpy(p, view, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    free(view);
    return;
  }
#else
  (void)comm, (void)bytes, (void)write;
#endif
  (void)p, (void)view;
}

/* Doubles the first done bytes of p until bytes are filled. */
static void double_host(char *p, size_t done, size_t bytes) {
  while (done < bytes) {
    size_t chunk = done < bytes - done ? done : bytes - done;
    memcpy(p + done, p, chunk);
    done += chunk;
  }
}

void pt_mem_fill(ncclComm_t comm, void *p, size_t bytes, const void *unit, size_t unit_bytes) {
  if (bytes == 0 || unit_bytes == 0) return;
#ifdef PT_CUDA
  if (on_gpu(comm)) {
    size_t first = (size_t)1 << 20;
    first = first < bytes ? first / unit_bytes * unit_bytes : bytes;
    char *block = malloc(first);
    if (!block) {
      fprintf(stderr, "chorus perf: out of memory (%zu bytes)\n", first);
      exit(EXIT_FAILURE);
    }
    memcpy(block, unit, unit_bytes);
    double_host(block, unit_bytes, first);
    cuda_check(cudaMemcpy(p, block, first, cudaMemcpyHostToDevice), "cudaMemcpy");
    for (size_t done = first; done < bytes;) {
      size_t chunk = done < bytes - done ? done : bytes - done;
      cuda_check(cudaMemcpy((char *)p + done, p, chunk, cudaMemcpyDeviceToDevice), "cudaMemcpy");
      done += chunk;
    }
    /* the last unit, read back: a doubling that fell short shows here */
    cuda_check(
        cudaMemcpy(block, (char *)p + bytes - unit_bytes, unit_bytes, cudaMemcpyDeviceToHost),
        "cudaMemcpy");
    if (memcmp(block, unit, unit_bytes) != 0) {
      fprintf(stderr, "chorus perf: filling %zu bytes of device memory failed\n", bytes);
      exit(EXIT_FAILURE);
    }
    free(block);
    return;
  }
#else
  (void)comm;
#endif
  memcpy(p, unit, unit_bytes);
  double_host(p, unit_bytes, bytes);
}

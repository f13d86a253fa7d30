/*
 * gpu_test.h - what the GPU test programs share (each is a standalone
 * program linked against libnccl and the CUDA runtime): a clock, a failure
 * counter with EXPECT, and CUDA/NCCL calls that end the program (status 1)
 * with the call, its place and the library's message when they fail.
 */
#ifndef CHORUS_TESTS_GPU_TEST_H
#define CHORUS_TESTS_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl.h"

/* Monotonic seconds. */
static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Checks that failed; the program exits 1 when any did. */
static int failures __attribute__((unused));

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define CUDA(call)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define NCCL(call)                                                                                 \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_),   \
              ncclGetLastError(NULL));                                                             \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#endif

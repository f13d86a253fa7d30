/*
 * gpu_test.h - what the GPU test programs share (each is a standalone
 * program linked against libnccl and the CUDA runtime).
 */
#ifndef CHORUS_TESTS_GPU_TEST_H
#define CHORUS_TESTS_GPU_TEST_H

#include <time.h>

/* Monotonic seconds. */
static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif

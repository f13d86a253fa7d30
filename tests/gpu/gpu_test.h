/*
 * gpu_test.h - what the GPU test programs share (each is a standalone
 * program linked against libnccl and the CUDA runtime): a clock, a failure
 * counter with EXPECT, and CUDA/NCCL calls that end the program (status 1)
 * with the call, its place and the library's message when they fail;
 * and joining a communicator as one of the processes a launcher started.
 */
#ifndef CHORUS_TESTS_GPU_TEST_H
#define CHORUS_TESTS_GPU_TEST_H

#include <cuda_runtime.h>
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

/* Waits for stream s, at most limit seconds; returns the seconds waited,
 * or -1 if it was still busy at the limit. */
static inline double wait_stream(cudaStream_t s, double limit) {
  double t0 = now();
  while (cudaStreamQuery(s) == cudaErrorNotReady) {
    if (now() - t0 > limit) return -1;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return now() - t0;
}

/* An integer from the environment, dflt when unset or empty. */
static inline int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

/* One process per GPU, started by chorusrun, mpirun or torchrun (alone:
 * rank 0 of 1): picks GPU LOCAL_RANK, joins the communicator of RANK and
 * WORLD_SIZE (NCCL_COMM_ID names rank 0's address) and makes a
 * non-blocking stream. Returns 77 (skip) where no GPU is visible, else 0;
 * failures end the program. */
static inline int join_launched(int *rank, int *n, ncclComm_t *comm, cudaStream_t *s) {
  *rank = env_int("RANK", 0);
  *n = env_int("WORLD_SIZE", 1);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("rank %d: no GPU visible: skipped\n", *rank);
    return 77;
  }
  CUDA(cudaSetDevice(env_int("LOCAL_RANK", 0) % ndev));
  ncclUniqueId id;
  NCCL(ncclGetUniqueId(&id));
  NCCL(ncclCommInitRank(comm, *n, id, *rank));
  CUDA(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  return 0;
}

/* join_launched for programs that need peers: -1 to go on, else the
 * exit status to return (77: no GPU visible; 0: one rank, nothing to
 * test, its communicator destroyed). */
static inline int join_peers(int *rank, int *n, ncclComm_t *comm, cudaStream_t *s) {
  if (join_launched(rank, n, comm, s) != 0) return 77;
  if (*n >= 2) return -1;
  printf("one rank: nothing to test\n");
  ncclCommDestroy(*comm);
  return 0;
}

/* Microseconds per replay of exec on s: one replay to warm up, then reps
 * timed back to back. */
static inline double replay_us(cudaGraphExec_t exec, cudaStream_t s, int reps) {
  CUDA(cudaGraphLaunch(exec, s));
  CUDA(cudaStreamSynchronize(s));
  double t0 = now();
  for (int rep = 0; rep < reps; rep++) CUDA(cudaGraphLaunch(exec, s));
  CUDA(cudaStreamSynchronize(s));
  return (now() - t0) * 1e6 / reps;
}

#endif

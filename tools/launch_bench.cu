/*
 * launch_bench.cu - what launching kernels costs on this machine, the floor
 * under every eager (not graph-captured) collective.
 *
 * An empty kernel with a parameter block the size of Chorus's (about 512
 * bytes), launched back to back `iters` times on each GPU's own stream,
 * then one synchronisation; the time per round (one launch per GPU):
 *   one-thread  the calling thread launches on every GPU in turn, selecting
 *               each (what a process driving several GPUs from one thread
 *               does: nccl-tests -g N);
 *   threads     one thread per GPU launches its own, all at once (the
 *               bound for a launcher thread per GPU);
 *   handoff     the calling thread launches on GPU 0 and hands each round
 *               to one spinning thread per other GPU, then waits until they
 *               have launched (what a group call would pay with launcher
 *               threads: the handoff included).
 * Not a test: it only times. Usage: launch_bench [iters].
 */
#include <cuda_runtime.h>

#include <atomic>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_DEV 8

struct params {
  char bytes[512];
};

__global__ void empty(params p) {
  if (p.bytes[threadIdx.x & 511] == 42 && threadIdx.x == 1024) p.bytes[0] = 0;
}

static void ck(cudaError_t e, int line) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "launch_bench.cu:%d: %s\n", line, cudaGetErrorString(e));
  exit(1);
}
#define CK(call) ck((call), __LINE__)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static cudaStream_t streams[MAX_DEV];
static int iters = 2000;

static void launch(int d) {
  params p = {};
  empty<<<1, 32, 0, streams[d]>>>(p);
}

/* ---- threads: each launches its own iters, started together ----------- */
struct worker {
  int dev, ndev;
  pthread_barrier_t *bar;
  std::atomic<unsigned> *round; /* handoff: the round to launch */
  std::atomic<unsigned> *done;  /* handoff: launches finished this round */
};

static void *free_running(void *arg) {
  worker *w = (worker *)arg;
  CK(cudaSetDevice(w->dev));
  pthread_barrier_wait(w->bar);
  for (int i = 0; i < iters; i++) launch(w->dev);
  CK(cudaStreamSynchronize(streams[w->dev]));
  pthread_barrier_wait(w->bar);
  return NULL;
}

static void *handed(void *arg) {
  worker *w = (worker *)arg;
  CK(cudaSetDevice(w->dev));
  pthread_barrier_wait(w->bar);
  for (unsigned r = 1; r <= (unsigned)iters; r++) {
    while (w->round->load(std::memory_order_acquire) < r) {
    }
    launch(w->dev);
    w->done->fetch_add(1, std::memory_order_release);
  }
  return NULL;
}

static double sync_all(int ndev) {
  for (int d = 0; d < ndev; d++) {
    CK(cudaSetDevice(d));
    CK(cudaStreamSynchronize(streams[d]));
  }
  return now_us();
}

int main(int argc, char **argv) {
  if (argc > 1) iters = atoi(argv[1]);
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
    printf("launch_bench needs a GPU: skipped\n");
    return 77;
  }
  if (ngpu > MAX_DEV) ngpu = MAX_DEV;
  for (int d = 0; d < ngpu; d++) {
    CK(cudaSetDevice(d));
    CK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
    for (int i = 0; i < 100; i++) launch(d); /* warm up */
    CK(cudaStreamSynchronize(streams[d]));
  }
  printf("%-11s %5s %12s\n", "mode", "gpus", "us_per_round");
  for (int ndev = 1; ndev <= ngpu; ndev *= 2) {
    /* one thread */
    double t0 = now_us();
    for (int i = 0; i < iters; i++)
      for (int d = 0; d < ndev; d++) {
        CK(cudaSetDevice(d));
        launch(d);
      }
    double t1 = sync_all(ndev);
    printf("%-11s %5d %12.2f\n", "one-thread", ndev, (t1 - t0) / iters);
    if (ndev == 1) continue;
    /* one free-running thread per GPU */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)ndev + 1);
    pthread_t th[MAX_DEV];
    worker w[MAX_DEV];
    for (int d = 0; d < ndev; d++) {
      w[d] = worker{d, ndev, &bar, NULL, NULL};
      pthread_create(&th[d], NULL, free_running, &w[d]);
    }
    pthread_barrier_wait(&bar);
    t0 = now_us();
    pthread_barrier_wait(&bar);
    t1 = now_us();
    for (int d = 0; d < ndev; d++) pthread_join(th[d], NULL);
    pthread_barrier_destroy(&bar);
    printf("%-11s %5d %12.2f\n", "threads", ndev, (t1 - t0) / iters);
    /* the calling thread launches GPU 0's and hands every round to the rest */
    std::atomic<unsigned> round{0}, done{0};
    pthread_barrier_init(&bar, NULL, (unsigned)ndev);
    for (int d = 1; d < ndev; d++) {
      w[d] = worker{d, ndev, &bar, &round, &done};
      pthread_create(&th[d], NULL, handed, &w[d]);
    }
    CK(cudaSetDevice(0));
    pthread_barrier_wait(&bar);
    t0 = now_us();
    for (unsigned r = 1; r <= (unsigned)iters; r++) {
      round.store(r, std::memory_order_release);
      launch(0);
      while (done.load(std::memory_order_acquire) < r * (unsigned)(ndev - 1)) {
      }
    }
    t1 = sync_all(ndev);
    for (int d = 1; d < ndev; d++) pthread_join(th[d], NULL);
    pthread_barrier_destroy(&bar);
    printf("%-11s %5d %12.2f\n", "handoff", ndev, (t1 - t0) / iters);
  }
  return 0;
}

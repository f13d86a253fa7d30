/*
 * rooted.c - the buffers that rooted collectives leave alone, on GPUs.
 *
 * NCCL uses Reduce's and Gather's recvbuff on the root only, and
 * Broadcast's and Scatter's sendbuff on the root only, so the other ranks
 * may pass NULL there, or memory they still use. One process drives every
 * visible GPU (at most 8, at least 2; ncclCommInitAll); for sizes that take
 * each kind of kernel (LL lines, the pipelined kernel, chains on 3+ GPUs)
 * and for roots 0 and n - 1, each collective runs twice: once with NULL
 * there on the other ranks, once with a buffer of a known pattern, which
 * must come back unchanged. The root's (or every rank's) result is checked
 * element by element against a reference computed on the host. Exit status
 * 0 when every check holds, 1 otherwise, 77 (skip) with fewer than 2 GPUs.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "nccl.h"

#define MAXG   8
#define CANARY 0x7b

static int n;
static ncclComm_t comms[MAXG];
static cudaStream_t streams[MAXG];

/* Input element j of rank r: small integers, so float sums are exact. */
static float input(int r, size_t j) {
  return (float)((r + 1) * (int)(j % 97));
}

static float *dev_alloc(int r, size_t count) {
  float *p = NULL;
  CUDA(cudaSetDevice(r));
  CUDA(cudaMalloc((void **)&p, count * sizeof(float)));
  return p;
}
static void dev_fill_input(int r, float *p, size_t count, size_t block) {
  float *h = malloc(count * sizeof *h);
  for (size_t j = 0; j < count; j++)
    h[j] = input(block == 0 ? r : (int)(j / block), j % (block ? block : count));
  CUDA(cudaSetDevice(r));
  CUDA(cudaMemcpy(p, h, count * sizeof *h, cudaMemcpyHostToDevice));
  free(h);
}
static void dev_fill_canary(int r, float *p, size_t count) {
  CUDA(cudaSetDevice(r));
  CUDA(cudaMemset(p, CANARY, count * sizeof(float)));
}
/* How many bytes of p differ from the canary. */
static size_t canary_damage(int r, const float *p, size_t count) {
  unsigned char *h = malloc(count * sizeof(float));
  CUDA(cudaSetDevice(r));
  CUDA(cudaMemcpy(h, p, count * sizeof(float), cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < count * sizeof(float); i++) bad += h[i] != CANARY;
  free(h);
  return bad;
}
/* How many of count elements of p differ from want(j). */
static size_t wrong(int r, const float *p, size_t count, float (*want)(size_t j, size_t arg),
                    size_t arg) {
  float *h = malloc(count * sizeof *h);
  CUDA(cudaSetDevice(r));
  CUDA(cudaMemcpy(h, p, count * sizeof *h, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t j = 0; j < count; j++) bad += h[j] != want(j, arg);
  free(h);
  return bad;
}
static float want_sum(size_t j, size_t unused) {
  (void)unused;
  double s = 0;
  for (int r = 0; r < n; r++) s += input(r, j);
  return (float)s;
}
static float want_block(size_t j, size_t count) { /* Gather: block r from rank r */
  return input((int)(j / count), j % count);
}
static float want_root(size_t j, size_t root) { /* Broadcast: the root's input */
  return input((int)root, j);
}
static float want_scatter(size_t j, size_t rank) { /* Scatter: block rank of the root */
  return input((int)rank, j);
}

static void finish(const char *what) {
  for (int r = 0; r < n; r++) {
    CUDA(cudaSetDevice(r));
    cudaError_t e = cudaStreamSynchronize(streams[r]);
    if (e != cudaSuccess) {
      fprintf(stderr, "%s: rank %d: %s\n", what, r, cudaGetErrorString(e));
      exit(1); /* a fault in a kernel leaves the GPU unusable */
    }
  }
}

/* One rooted collective, twice: NULL on the other ranks, then a canary. */
static void one(const char *name, size_t count, int root) {
  const int is_reduce = !strcmp(name, "Reduce"), is_gather = !strcmp(name, "Gather"),
            is_bcast = !strcmp(name, "Broadcast");
  /* Sizes of send and recv in elements, on the root / on the others. */
  const size_t ns = is_gather || is_reduce || is_bcast ? count : count * (size_t)n;
  const size_t nr = is_gather ? count * (size_t)n : count;
  for (int pass = 0; pass < 2; pass++) {
    float *send[MAXG], *recv[MAXG], *unused[MAXG];
    for (int r = 0; r < n; r++) {
      send[r] = dev_alloc(r, ns);
      recv[r] = dev_alloc(r, nr);
      unused[r] = NULL;
      /* Scatter's root input is n blocks; a rank's block r holds input(r). */
      dev_fill_input(r, send[r], ns, !strcmp(name, "Scatter") ? count : 0);
      dev_fill_canary(r, recv[r], nr);
    }
    CUDA(cudaSetDevice(0));
    NCCL(ncclGroupStart());
    for (int r = 0; r < n; r++) {
      const int other = r != root;
      float *s = send[r], *d = recv[r];
      if (is_reduce || is_gather) { /* recvbuff unused off the root */
        unused[r] = other ? d : NULL;
        if (other && pass == 0) d = NULL;
      } else { /* Broadcast, Scatter: sendbuff unused off the root */
        if (other) dev_fill_canary(r, s, ns);
        unused[r] = other ? s : NULL;
        if (other && pass == 0) s = NULL;
      }
      if (is_reduce)
        NCCL(ncclReduce(s, d, count, ncclFloat, ncclSum, root, comms[r], streams[r]));
      else if (is_gather)
        NCCL(ncclGather(s, d, count, ncclFloat, root, comms[r], streams[r]));
      else if (is_bcast)
        NCCL(ncclBroadcast(s, d, count, ncclFloat, root, comms[r], streams[r]));
      else
        NCCL(ncclScatter(s, d, count, ncclFloat, root, comms[r], streams[r]));
    }
    NCCL(ncclGroupEnd());
    finish(name);
    for (int r = 0; r < n; r++) {
      size_t bad = 0;
      if (is_reduce && r == root) bad = wrong(r, recv[r], count, want_sum, 0);
      if (is_gather && r == root) bad = wrong(r, recv[r], nr, want_block, count);
      if (is_bcast) bad = wrong(r, recv[r], count, want_root, (size_t)root);
      if (!is_reduce && !is_gather && !is_bcast)
        bad = wrong(r, recv[r], count, want_scatter, (size_t)r);
      EXPECT(bad == 0, "%s of %zu floats, root %d, %s off the root: rank %d: %zu elements wrong",
             name, count, root, pass ? "a buffer" : "NULL", r, bad);
      if (unused[r] && pass == 1) {
        const size_t dmg = canary_damage(r, unused[r], is_reduce || is_gather ? nr : ns);
        EXPECT(dmg == 0, "%s of %zu floats, root %d: rank %d's unused %s changed (%zu bytes)", name,
               count, root, r, is_reduce || is_gather ? "recvbuff" : "sendbuff", dmg);
      }
      CUDA(cudaSetDevice(r));
      CUDA(cudaFree(send[r]));
      CUDA(cudaFree(recv[r]));
    }
  }
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    printf("fewer than 2 GPUs visible: skipped\n");
    return 77;
  }
  n = ndev > MAXG ? MAXG : ndev;
  NCCL(ncclCommInitAll(comms, n, NULL));
  for (int r = 0; r < n; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamCreate(&streams[r]));
  }
  /* LL lines, the pipelined kernel (or LL, by the thresholds), a chain on 3+ GPUs. */
  const size_t counts[] = {1000, 65536 + 3, (size_t)1 << 20};
  const char *names[] = {"Reduce", "Gather", "Broadcast", "Scatter"};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int f = 0; f < 4; f++) {
      one(names[f], counts[c], 0);
      one(names[f], counts[c], n - 1);
    }
  for (int r = 0; r < n; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamDestroy(streams[r]));
    NCCL(ncclCommDestroy(comms[r]));
  }
  printf(
      "rooted collectives on %d GPUs, NULL or untouched buffers off the root: %s (%d failure(s))\n",
      n, failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}

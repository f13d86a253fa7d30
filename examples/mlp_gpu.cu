/*
 * mlp_gpu.cu - the MLP of mlp.h on a GPU (compiled only with CUDA).
 *
 * Three small kernels per batch, the same arithmetic as mlp_cpu.c:
 *   per_sample: one thread per sample runs forward and backward and writes
 *               that sample's gradient (and loss, and hit) to `work`;
 *   sum_samples: one thread per parameter adds the samples' gradients in
 *               sample order and multiplies by 1/b (the batch mean);
 *   add_stats:  one thread adds the losses and hits to stats.
 * No atomics, so a run gives the same bits every time. A real model would
 * call cuBLAS for the matrix products; at this size the loops are clearer.
 */
#include "mlp.h"

/* work layout: [b][P] per-sample gradients, then b losses, then b hits */
extern "C" size_t mlp_gpu_work_floats(const mlp *m, int b) {
  return (size_t)b * (mlp_size(m) + 2);
}

__global__ void per_sample(mlp m, const float *params, const float *x, const int *y, int b,
                           float *work) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= b) return;
  const size_t P = mlp_size(&m);
  const float *w1 = params, *b1 = w1 + m.h * m.d, *w2 = b1 + m.h, *b2 = w2 + m.k * m.h;
  float *g = work + (size_t)s * P;
  float *gw1 = g, *gb1 = gw1 + m.h * m.d, *gw2 = gb1 + m.h, *gb2 = gw2 + m.k * m.h;
  const float *xs = x + (size_t)s * m.d;
  float z1[MLP_MAX_H], a1[MLP_MAX_H], z2[MLP_MAX_K];

  for (int j = 0; j < m.h; j++) {
    float acc = b1[j];
    for (int i = 0; i < m.d; i++) acc += w1[j * m.d + i] * xs[i];
    z1[j] = acc;
    a1[j] = acc > 0 ? acc : 0;
  }
  int best = 0;
  for (int c = 0; c < m.k; c++) {
    float acc = b2[c];
    for (int j = 0; j < m.h; j++) acc += w2[c * m.h + j] * a1[j];
    z2[c] = acc;
    if (acc > z2[best]) best = c;
  }
  /* The largest logit, kept apart: the loop below overwrites z2. */
  const float top = z2[best];
  float sum = 0;
  for (int c = 0; c < m.k; c++) sum += expf(z2[c] - top);
  work[(size_t)b * P + s] = logf(sum) - (z2[y[s]] - top);
  work[(size_t)b * P + b + s] = best == y[s] ? 1.0f : 0.0f;

  for (int c = 0; c < m.k; c++) {
    float dz2 = expf(z2[c] - top) / sum - (c == y[s] ? 1.0f : 0.0f);
    z2[c] = dz2; /* keep d(loss)/d(logit) for the hidden layer */
    gb2[c] = dz2;
    for (int j = 0; j < m.h; j++) gw2[c * m.h + j] = dz2 * a1[j];
  }
  for (int j = 0; j < m.h; j++) {
    float dz1 = 0;
    if (z1[j] > 0)
      for (int c = 0; c < m.k; c++) dz1 += w2[c * m.h + j] * z2[c];
    gb1[j] = dz1;
    for (int i = 0; i < m.d; i++) gw1[j * m.d + i] = dz1 * xs[i];
  }
}

__global__ void sum_samples(size_t P, int b, const float *work, float *grad) {
  size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= P) return;
  float acc = 0;
  for (int s = 0; s < b; s++) acc += work[(size_t)s * P + p];
  grad[p] = acc * (1.0f / (float)b);
}

__global__ void add_stats(size_t P, int b, const float *work, float *stats) {
  float loss = 0, hits = 0;
  for (int s = 0; s < b; s++) {
    loss += work[(size_t)b * P + s];
    hits += work[(size_t)b * P + b + s];
  }
  stats[0] += loss;
  stats[1] += hits;
}

__global__ void sgd(float *params, const float *grad, size_t n, float lr) {
  size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p < n) params[p] -= lr * grad[p];
}

static unsigned blocks(size_t n, unsigned threads) {
  return (unsigned)((n + threads - 1) / threads);
}

extern "C" cudaError_t mlp_grad_gpu(const mlp *m, const float *params, const float *x, const int *y,
                                    int b, float *grad, float *stats, float *work, cudaStream_t s) {
  const size_t P = mlp_size(m);
  per_sample<<<blocks((size_t)b, 64), 64, 0, s>>>(*m, params, x, y, b, work);
  sum_samples<<<blocks(P, 128), 128, 0, s>>>(P, b, work, grad);
  add_stats<<<1, 1, 0, s>>>(P, b, work, stats);
  return cudaGetLastError();
}

extern "C" cudaError_t mlp_sgd_gpu(float *params, const float *grad, size_t n, float lr,
                                   cudaStream_t s) {
  sgd<<<blocks(n, 256), 256, 0, s>>>(params, grad, n, lr);
  return cudaGetLastError();
}

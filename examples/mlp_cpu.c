/*
 * mlp_cpu.c - forward, backward and SGD of the MLP of mlp.h on the CPU.
 *
 * Written out loop by loop, one sample at a time, the way the GPU kernels
 * of mlp_gpu.cu do it with one thread per sample: the gradients of a batch
 * are the per-sample gradients summed in sample order, times 1/b.
 */
#include <math.h>
#include <string.h>

#include "mlp.h"

void mlp_init(const mlp *m, float *params, unsigned long long seed) {
  float *w1 = params, *b1 = w1 + m->h * m->d, *w2 = b1 + m->h, *b2 = w2 + m->k * m->h;
  unsigned long long state = seed;
  for (int i = 0; i < m->h * m->d; i++)
    w1[i] = (float)((2 * mlp_rand(&state) - 1) / sqrt((double)m->d));
  for (int i = 0; i < m->k * m->h; i++)
    w2[i] = (float)((2 * mlp_rand(&state) - 1) / sqrt((double)m->h));
  memset(b1, 0, sizeof(float) * (size_t)m->h);
  memset(b2, 0, sizeof(float) * (size_t)m->k);
}

void mlp_make_blobs(const mlp *m, float *x, int *y, int samples, unsigned long long seed) {
  unsigned long long state = seed;
  float centre[MLP_MAX_K][64];
  for (int c = 0; c < m->k; c++)
    for (int i = 0; i < m->d && i < 64; i++) centre[c][i] = (float)(4 * mlp_rand(&state) - 2);
  for (int s = 0; s < samples; s++) {
    y[s] = s % m->k;
    for (int i = 0; i < m->d; i++) {
      /* Box-Muller: a normal variate from two uniform ones */
      double u = 1 - mlp_rand(&state), v = mlp_rand(&state);
      double noise = sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
      x[(size_t)s * m->d + i] = centre[y[s]][i % 64] + (float)(0.8 * noise);
    }
  }
}

void mlp_grad_cpu(const mlp *m, const float *params, const float *x, const int *y, int b,
                  float *grad, float *stats) {
  const float *w1 = params, *b1 = w1 + m->h * m->d, *w2 = b1 + m->h, *b2 = w2 + m->k * m->h;
  float *gw1 = grad, *gb1 = gw1 + m->h * m->d, *gw2 = gb1 + m->h, *gb2 = gw2 + m->k * m->h;
  float z1[MLP_MAX_H], a1[MLP_MAX_H], z2[MLP_MAX_K], dz2[MLP_MAX_K];
  memset(grad, 0, sizeof(float) * mlp_size(m));
  for (int s = 0; s < b; s++) {
    const float *xs = x + (size_t)s * m->d;
    /* forward: hidden = relu(W1 x + b1), logits = W2 hidden + b2 */
    for (int j = 0; j < m->h; j++) {
      float acc = b1[j];
      for (int i = 0; i < m->d; i++) acc += w1[j * m->d + i] * xs[i];
      z1[j] = acc;
      a1[j] = acc > 0 ? acc : 0;
    }
    int best = 0;
    for (int c = 0; c < m->k; c++) {
      float acc = b2[c];
      for (int j = 0; j < m->h; j++) acc += w2[c * m->h + j] * a1[j];
      z2[c] = acc;
      if (acc > z2[best]) best = c;
    }
    /* softmax with the largest logit subtracted, so exp cannot overflow */
    float sum = 0;
    for (int c = 0; c < m->k; c++) sum += expf(z2[c] - z2[best]);
    stats[0] += logf(sum) - (z2[y[s]] - z2[best]); /* -log softmax[label] */
    stats[1] += best == y[s];
    /* backward: d(loss)/d(logit c) = softmax c - (c == label) */
    for (int c = 0; c < m->k; c++) {
      dz2[c] = expf(z2[c] - z2[best]) / sum - (c == y[s]);
      gb2[c] += dz2[c];
      for (int j = 0; j < m->h; j++) gw2[c * m->h + j] += dz2[c] * a1[j];
    }
    for (int j = 0; j < m->h; j++) {
      if (z1[j] <= 0) continue; /* ReLU passes no gradient where it was off */
      float dz1 = 0;
      for (int c = 0; c < m->k; c++) dz1 += w2[c * m->h + j] * dz2[c];
      gb1[j] += dz1;
      for (int i = 0; i < m->d; i++) gw1[j * m->d + i] += dz1 * xs[i];
    }
  }
  const float inv_b = 1.0f / (float)b; /* the mean over the batch */
  for (size_t p = 0; p < mlp_size(m); p++) grad[p] *= inv_b;
}

void mlp_sgd_cpu(float *params, const float *grad, size_t n, float lr) {
  for (size_t p = 0; p < n; p++) params[p] -= lr * grad[p];
}

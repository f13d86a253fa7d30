/*
 * mlp.h - the small multilayer perceptron that 03_ddp_training (and
 * 05_advanced) train: inputs of D features, one hidden layer of H ReLU
 * units, K classes with softmax and cross-entropy loss.
 *
 * Every parameter lives in one flat float array, in this order:
 *   W1 [H][D] | b1 [H] | W2 [K][H] | b2 [K]
 * so that the gradients are one flat array too and a single AllReduce
 * synchronises all of them (real frameworks group parameters into buckets
 * for the same reason: one large call costs less than many small ones).
 *
 * The CPU functions work on host memory. With CUDA (EX_CUDA, mlp_gpu.cu)
 * the same functions exist for device memory: simple kernels, one thread
 * per sample and then one per parameter, no cuBLAS, so they stay readable.
 * This header is plain C so that both the C and the CUDA files include it.
 */
#ifndef EXAMPLES_MLP_H
#define EXAMPLES_MLP_H

#include <stddef.h>

#ifdef EX_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of the GPU kernels (a thread keeps a sample's activations). */
#define MLP_MAX_H 64
#define MLP_MAX_K 16

typedef struct mlp {
  int d, h, k; /* features, hidden units, classes */
} mlp;

/* Callable from GPU kernels too when compiled by nvcc. */
#ifdef __CUDACC__
#define MLP_HOST_DEVICE __host__ __device__
#else
#define MLP_HOST_DEVICE
#endif

/* Number of floats in the parameter (and gradient) array. */
static inline MLP_HOST_DEVICE size_t mlp_size(const mlp *m) {
  return (size_t)m->h * m->d + m->h + (size_t)m->k * m->h + m->k;
}

/* A uniform number in [0, 1) from a 64-bit state (splitmix64): the same
 * seed gives the same numbers on every rank and every machine. */
static inline double mlp_rand(unsigned long long *state) {
  unsigned long long z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* Small random weights (scaled by 1/sqrt(fan-in)), zero biases; the same
 * seed gives the same parameters everywhere. */
void mlp_init(const mlp *m, float *params, unsigned long long seed);

/* A synthetic data set: K clouds of points around random centres in
 * [-2, 2]^D (normal noise, deviation 0.8; D up to 64); sample s has
 * label s % K. */
void mlp_make_blobs(const mlp *m, float *x, int *y, int samples, unsigned long long seed);

/* Over the b samples x[b][D] with labels y[b]: grad = the mean over the
 * samples of d(loss)/d(params); stats[0] += the summed loss and
 * stats[1] += the number of samples whose largest output is the label. */
void mlp_grad_cpu(const mlp *m, const float *params, const float *x, const int *y, int b,
                  float *grad, float *stats);

/* params -= lr * grad, element by element. */
void mlp_sgd_cpu(float *params, const float *grad, size_t n, float lr);

#ifdef EX_CUDA
/* The same on device memory, queued on stream s; they return the error of
 * the kernel launches (the kernels' own errors show at the next wait).
 * work holds mlp_gpu_work_floats(m, b) floats: per-sample gradients. */
size_t mlp_gpu_work_floats(const mlp *m, int b);
cudaError_t mlp_grad_gpu(const mlp *m, const float *params, const float *x, const int *y, int b,
                         float *grad, float *stats, float *work, cudaStream_t s);
cudaError_t mlp_sgd_gpu(float *params, const float *grad, size_t n, float lr, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif

#endif /* EXAMPLES_MLP_H */

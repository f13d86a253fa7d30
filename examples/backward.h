/*
 * backward.h - a stand-in for one layer's backward pass on a GPU, for
 * 05_advanced's overlap lesson: a kernel that writes the layer's
 * gradients (the same values as grad_value there) and then stays busy
 * for a set time, as a real layer's matrix products would.
 * Plain C, so that both the C and the CUDA files include it.
 */
#ifndef EXAMPLES_BACKWARD_H
#define EXAMPLES_BACKWARD_H

#ifdef EX_CUDA
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queues on stream s: grad[i] = (rank + 1) * ((layer * 7 + i) % 5 - 2)
 * for i < n, then about `us` microseconds of work on one block. */
cudaError_t backward_layer_gpu(float *grad, int n, int layer, int rank, int us, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif /* EX_CUDA */

#endif /* EXAMPLES_BACKWARD_H */

/*
 * probe.cu - device.h with the CUDA runtime: queries, memory, peer access,
 * IPC. The collective kernels are in the other .cu files of this folder.
 */
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "device/device.h"
}

static __thread char dev_msg[512];

static int fail(cudaError_t e, const char *fmt, ...) {
  char what[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(dev_msg, sizeof dev_msg, "%s: %s (%s)", what, cudaGetErrorString(e),
           cudaGetErrorName(e));
  cudaGetLastError(); /* clear it, so that it does not surface at the next call */
  return -1;
}

#define TRY(call, ...)                                                                             \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) return fail(e_, __VA_ARGS__);                                           \
  } while (0)

extern "C" const char *chorus_dev_error(void) {
  return dev_msg;
}

extern "C" int chorus_dev_fail(int cuda_error, const char *what) {
  return fail((cudaError_t)cuda_error, "%s", what);
}

static long long fault_countdown; /* 0: disarmed */

extern "C" void chorus_dev_fail_after(long long n) {
  __atomic_store_n(&fault_countdown, n, __ATOMIC_RELAXED);
}

extern "C" int chorus_dev_fault_due(void) {
  long long c = __atomic_load_n(&fault_countdown, __ATOMIC_RELAXED);
  while (c > 0)
    if (__atomic_compare_exchange_n(&fault_countdown, &c, c - 1, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return c == 1;
  return 0;
}

extern "C" int chorus_dev_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return n;
}

extern "C" int chorus_dev_current(void) {
  if (chorus_dev_count() == 0) return -1;
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

extern "C" int chorus_dev_built(void) {
  return 1;
}

extern "C" int chorus_dev_use(int device) {
  TRY(cudaSetDevice(device), "cudaSetDevice(%d)", device);
  return 0;
}

extern "C" int chorus_dev_bus_id(int device, char *out, size_t len) {
  TRY(cudaDeviceGetPCIBusId(out, (int)len, device), "cudaDeviceGetPCIBusId(%d)", device);
  return 0;
}

extern "C" int chorus_dev_zero(void *p, size_t bytes) {
  cudaError_t e = cudaMemset(p, 0, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return fail(e, "clearing %zu bytes of device memory", bytes);
  return 0;
}

extern "C" int chorus_dev_alloc(size_t bytes, void **out) {
  *out = NULL;
  if (chorus_dev_fault_due())
    return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu bytes), failed by CHORUS_FAULT_DEVICE",
                bytes);
  TRY(cudaMalloc(out, bytes), "cudaMalloc(%zu bytes)", bytes);
  int rc = chorus_dev_zero(*out, bytes);
  if (rc != 0) {
    cudaFree(*out);
    *out = NULL;
  }
  return rc;
}

extern "C" int chorus_dev_free(void *p) {
  if (p) TRY(cudaFree(p), "cudaFree");
  return 0;
}

/* Allocations and event queries are refused on a thread whose stream is
 * being captured in the global mode; staging memory is made while calls
 * are captured, so these run in the relaxed mode (the capture is not
 * disturbed: nothing is queued on a stream). */
struct relaxed_capture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  relaxed_capture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  ~relaxed_capture() { cudaThreadExchangeStreamCaptureMode(&mode); }
};

extern "C" int chorus_dev_host_alloc(size_t bytes, void **host, void **dev) {
  relaxed_capture relaxed;
  *host = *dev = NULL;
  if (chorus_dev_fault_due())
    return fail(cudaErrorMemoryAllocation,
                "cudaHostAlloc(%zu bytes, mapped), failed by CHORUS_FAULT_DEVICE", bytes);
  TRY(cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
      "cudaHostAlloc(%zu bytes, mapped)", bytes);
  memset(*host, 0, bytes);
  cudaError_t e = cudaHostGetDevicePointer(dev, *host, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(*host);
    *host = NULL;
    return fail(e, "cudaHostGetDevicePointer");
  }
  return 0;
}

extern "C" int chorus_dev_host_free(void *host) {
  relaxed_capture relaxed;
  if (host) TRY(cudaFreeHost(host), "cudaFreeHost");
  return 0;
}

extern "C" int chorus_dev_scratch_alloc(size_t bytes, void **out) {
  relaxed_capture relaxed;
  *out = NULL;
  if (chorus_dev_fault_due())
    return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu bytes), failed by CHORUS_FAULT_DEVICE",
                bytes);
  TRY(cudaMalloc(out, bytes), "cudaMalloc(%zu bytes)", bytes);
  return 0;
}

extern "C" int chorus_dev_scratch_free(void *p) {
  relaxed_capture relaxed;
  if (p) TRY(cudaFree(p), "cudaFree");
  return 0;
}

extern "C" int chorus_dev_can_reach(const char *bus_id) {
  int me = -1, d = -1, can = 0;
  if (cudaGetDevice(&me) != cudaSuccess || cudaDeviceGetByPCIBusId(&d, bus_id) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  if (d == me) return 1;
  if (cudaDeviceCanAccessPeer(&can, me, d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return can ? 1 : 0;
}

extern "C" int chorus_dev_host_register(void *p, size_t bytes, void **dev) {
  *dev = NULL;
  TRY(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
      "cudaHostRegister(%zu bytes, mapped)", bytes);
  cudaError_t e = cudaHostGetDevicePointer(dev, p, 0);
  if (e != cudaSuccess) {
    cudaHostUnregister(p);
    return fail(e, "cudaHostGetDevicePointer");
  }
  return 0;
}

extern "C" int chorus_dev_host_unregister(void *p) {
  if (p) TRY(cudaHostUnregister(p), "cudaHostUnregister");
  return 0;
}

extern "C" int chorus_dev_peer_enable(int peer) {
  int me = -1, can = 0;
  TRY(cudaGetDevice(&me), "cudaGetDevice");
  if (peer == me) return 1;
  TRY(cudaDeviceCanAccessPeer(&can, me, peer), "cudaDeviceCanAccessPeer(%d, %d)", me, peer);
  if (!can) return 0;
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return 1;
  }
  if (e != cudaSuccess) return fail(e, "cudaDeviceEnablePeerAccess(%d -> %d)", me, peer);
  return 1;
}

__global__ void peer_probe(volatile unsigned *p, unsigned pattern, unsigned *seen) {
  unsigned old = *p;
  *p = pattern;
  __threadfence_system();
  *seen = *p;
  *p = old;
  __threadfence_system();
}

extern "C" int chorus_dev_peer_verify(void *p) {
  unsigned *seen = NULL, host = 0;
  TRY(cudaMalloc(&seen, sizeof *seen), "cudaMalloc");
  const unsigned pattern = 0xC0A1E5CEu;
  peer_probe<<<1, 1>>>((volatile unsigned *)p, pattern, seen);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(&host, seen, sizeof host, cudaMemcpyDeviceToHost);
  cudaFree(seen);
  if (e != cudaSuccess) return fail(e, "test write to peer memory at %p", p);
  if (host != pattern) {
    snprintf(dev_msg, sizeof dev_msg, "test write to peer memory at %p read back 0x%x, not 0x%x", p,
             host, pattern);
    return -1;
  }
  return 0;
}

extern "C" int chorus_dev_ipc_get(void *p, unsigned char handle[CHORUS_DEV_IPC_BYTES]) {
  cudaIpcMemHandle_t h;
  static_assert(sizeof h == CHORUS_DEV_IPC_BYTES, "CUDA IPC handle size");
  TRY(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle");
  memcpy(handle, &h, sizeof h);
  return 0;
}

extern "C" int chorus_dev_ipc_open(const unsigned char handle[CHORUS_DEV_IPC_BYTES], void **out) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  *out = NULL;
  TRY(cudaIpcOpenMemHandle(out, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  return 0;
}

extern "C" int chorus_dev_ipc_close(void *p) {
  if (p) TRY(cudaIpcCloseMemHandle(p), "cudaIpcCloseMemHandle");
  return 0;
}

extern "C" int chorus_dev_stream_sync(void *stream) {
  TRY(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
  return 0;
}

extern "C" int chorus_dev_stream_new(void **out) {
  cudaStream_t s;
  TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  *out = (void *)s;
  return 0;
}

extern "C" int chorus_dev_stream_free(void *stream) {
  if (stream) TRY(cudaStreamDestroy((cudaStream_t)stream), "cudaStreamDestroy");
  return 0;
}

extern "C" int chorus_dev_stream_wait(void *waiter, void *waited) {
  if (waiter == waited) return 0;
  cudaEvent_t ev;
  TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaError_t e = cudaEventRecord(ev, (cudaStream_t)waited);
  if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)waiter, ev, 0);
  cudaEventDestroy(ev); /* released once the wait is satisfied */
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "joining two streams through an event");
  return 0;
}

extern "C" int chorus_dev_copy(void *dst, const void *src, size_t bytes, void *stream) {
  TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream),
      "cudaMemcpyAsync(%p, %p, %zu bytes)", dst, src, bytes);
  return 0;
}

extern "C" int chorus_dev_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                    size_t width, size_t rows, void *stream) {
  TRY(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault,
                        (cudaStream_t)stream),
      "cudaMemcpy2DAsync(%p, %p, %zu x %zu bytes)", dst, src, rows, width);
  return 0;
}

extern "C" int chorus_dev_put(void *dst, const void *src, size_t bytes) {
  cudaStream_t s;
  TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  if (e != cudaSuccess) return fail(e, "copying %zu bytes to %p", bytes, dst);
  return 0;
}

extern "C" int chorus_dev_stream_capturing(void *stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  TRY(cudaStreamIsCapturing((cudaStream_t)stream, &st), "cudaStreamIsCapturing");
  return st != cudaStreamCaptureStatusNone;
}

extern "C" int chorus_dev_pointer_is_device(const void *p) {
  cudaPointerAttributes a;
  TRY(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes(%p)", p);
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ||
         (a.type == cudaMemoryTypeHost && a.devicePointer != NULL);
}

extern "C" int chorus_dev_event_new(void **out) {
  relaxed_capture relaxed;
  cudaEvent_t ev;
  *out = NULL;
  TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  *out = (void *)ev;
  return 0;
}

extern "C" int chorus_dev_event_new_timed(void **out) {
  relaxed_capture relaxed;
  cudaEvent_t ev;
  *out = NULL;
  TRY(cudaEventCreate(&ev), "cudaEventCreate");
  *out = (void *)ev;
  return 0;
}

extern "C" int chorus_dev_event_elapsed(void *a, void *b, float *ms) {
  relaxed_capture relaxed;
  TRY(cudaEventElapsedTime(ms, (cudaEvent_t)a, (cudaEvent_t)b), "cudaEventElapsedTime");
  return 0;
}

extern "C" int chorus_dev_event_record(void *ev, void *stream) {
  TRY(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream), "cudaEventRecord");
  return 0;
}

extern "C" int chorus_dev_event_done(void *ev) {
  relaxed_capture relaxed;
  cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  return fail(e, "cudaEventQuery");
}

extern "C" int chorus_dev_event_free(void *ev) {
  if (ev) TRY(cudaEventDestroy((cudaEvent_t)ev), "cudaEventDestroy");
  return 0;
}

extern "C" int chorus_dev_stream_wait_event(void *stream, void *ev) {
  TRY(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0), "cudaStreamWaitEvent");
  return 0;
}

extern "C" int chorus_dev_event_wait(void *ev) {
  relaxed_capture relaxed;
  TRY(cudaEventSynchronize((cudaEvent_t)ev), "cudaEventSynchronize");
  return 0;
}

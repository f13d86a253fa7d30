/*
 * device.h - the only header through which host code reaches CUDA.
 *
 * Plain C. Built without CUDA (device_none.c) every query reports no device,
 * so communicators use host memory. Built with CUDA, the .cu files behind
 * this header implement it with the CUDA runtime.
 */
#ifndef CHORUS_DEVICE_DEVICE_H
#define CHORUS_DEVICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/* Number of CUDA devices this process can use (0 without CUDA, without a
 * driver, or without a GPU). Never fails. */
int chorus_dev_count(void);

/* The calling thread's current CUDA device, or -1 when there is none. */
int chorus_dev_current(void);

/* 1 if the library was built with CUDA support. */
int chorus_dev_built(void);

/* The functions below return 0 on success, or -1 after recording a message
 * that chorus_dev_error() returns (per thread). */
const char *chorus_dev_error(void);
/* Records a CUDA error code with what failed and returns -1 (for .cu files). */
int chorus_dev_fail(int cuda_error, const char *what);

/* Fault injection (the campaign's, CHORUS_FAULT_DEVICE): the n-th
 * allocation from now by chorus_dev_alloc, chorus_dev_vmm_alloc or
 * chorus_dev_host_alloc fails as if the GPU were out of memory (n >= 1;
 * 0 disarms); chorus_dev_fault_due is the allocators' question, whether
 * this one is it (for .cu files). */
void chorus_dev_fail_after(long long n);
int chorus_dev_fault_due(void);

/* Makes device the calling thread's current device. */
int chorus_dev_use(int device);
/* PCI bus id of device ("0000:19:00.0"). */
int chorus_dev_bus_id(int device, char *out, size_t len);
/* Zeroed device memory on the current device. */
int chorus_dev_alloc(size_t bytes, void **out);
int chorus_dev_free(void *p);
/* Device memory on the current device, not zeroed, made and freed while
 * this thread may be capturing a stream (relaxed mode: nothing is queued):
 * scratch between the steps of a call. */
int chorus_dev_scratch_alloc(size_t bytes, void **out);
int chorus_dev_scratch_free(void *p);
/* ncclMemAlloc's device memory (vmm.cu): on the current device, through
 * cuMem, exportable as a POSIX file descriptor where the driver allows,
 * readable and writable from every device with peer access to it; size
 * rounded up to the allocation granularity (*mapped). */
int chorus_dev_vmm_alloc(size_t bytes, void **out, size_t *mapped);
int chorus_dev_vmm_free(void *p, size_t mapped);
/* A POSIX file descriptor for the allocation at p (made by
 * chorus_dev_vmm_alloc with a shareable handle), for another process; and,
 * there, the memory behind such a descriptor (`bytes`, the exporter's
 * mapped size) mapped for the current device. Unmap it with
 * chorus_dev_vmm_free. The caller closes fd either way. */
int chorus_dev_vmm_export(void *p, int *fd);
int chorus_dev_vmm_import(int fd, size_t bytes, void **out);
/* Whether each of the n devices (of this process) can read and write the
 * device memory at p directly: cudaMalloc's memory (given peer access), or
 * cuMem memory mapped for each of them. 0 for anything else (host, managed
 * or pool memory) or when it cannot be told. Never records an error. */
int chorus_dev_reachable(const void *p, const int *devices, int n);
/* Zeroes device memory (and waits for it). */
int chorus_dev_zero(void *p, size_t bytes);
/* Host memory mapped into the device address space (zeroed). */
int chorus_dev_host_alloc(size_t bytes, void **host, void **dev);
int chorus_dev_host_free(void *host);
/* Pins host memory [p, p + bytes) that another allocator made (a shared
 * memory segment, say) for every device of this process and returns the
 * address devices reach it at; and undoes that. */
int chorus_dev_host_register(void *p, size_t bytes, void **dev);
int chorus_dev_host_unregister(void *p);

/* Peer access from the current device to `peer`: 1 when enabled (or
 * already), 0 when the pair cannot, -1 on error. */
int chorus_dev_peer_enable(int peer);
/* Whether the current device can access the device of PCI bus id bus_id
 * directly: 1 yes (or the same device), 0 no, -1 when that device is not
 * visible here (CUDA_VISIBLE_DEVICES) or the question fails. Never records
 * an error. */
int chorus_dev_can_reach(const char *bus_id);
/* Writes a test pattern into p (memory of another device or process, as
 * mapped here) from the current device and reads it back: 0 when it
 * arrived, -1 otherwise. Restores the old contents. */
int chorus_dev_peer_verify(void *p);

/* CUDA IPC: the handle of an allocation made by chorus_dev_alloc, and
 * mapping a peer process's handle here. */
#define CHORUS_DEV_IPC_BYTES 64
int chorus_dev_ipc_get(void *p, unsigned char handle[CHORUS_DEV_IPC_BYTES]);
int chorus_dev_ipc_open(const unsigned char handle[CHORUS_DEV_IPC_BYTES], void **out);
int chorus_dev_ipc_close(void *p);

/* Waits for every operation queued on stream (NULL: the legacy stream). */
int chorus_dev_stream_sync(void *stream);
/* A stream of the current device that does not wait for the legacy
 * stream, and freeing it (work queued there still runs). */
int chorus_dev_stream_new(void **out);
int chorus_dev_stream_free(void *stream);
/* Makes `waiter` wait for everything queued on `waited` so far (an
 * event; capturable). */
int chorus_dev_stream_wait(void *waiter, void *waited);
/* Queues a copy of bytes from src to dst (device memory of any GPU of
 * this process, as the stream's GPU reaches it) on stream: the copy
 * engine, cudaMemcpyAsync. */
int chorus_dev_copy(void *dst, const void *src, size_t bytes, void *stream);
/* The same for `rows` rows of `width` bytes, dst_pitch and src_pitch
 * bytes apart (cudaMemcpy2DAsync). */
int chorus_dev_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                         size_t width, size_t rows, void *stream);
/* Copies bytes of host memory to dst (device memory of any GPU of this
 * process, as the current device reaches it) on a stream of its own that
 * waits for nothing else, and waits for the copy: for words that other
 * GPUs' kernels poll while this process's streams may be stuck. */
int chorus_dev_put(void *dst, const void *src, size_t bytes);
/* Is the stream being captured into a CUDA graph? 1 yes, 0 no, -1 error. */
int chorus_dev_stream_capturing(void *stream);
/* Is p device memory (or managed, or mapped host memory)? 1/0, -1 error. */
int chorus_dev_pointer_is_device(const void *p);

/* Events (no timing): one made, recorded on a stream (capturable), asked
 * whether the work before its record has finished (1 yes, 0 not yet, -1
 * error; an event never recorded has), and freed. */
int chorus_dev_event_new(void **out);
int chorus_dev_event_record(void *ev, void *stream);
int chorus_dev_event_done(void *ev);
int chorus_dev_event_free(void *ev);
/* Events that time (CHORUS_TRACE): one made, and the milliseconds from
 * a's record to b's, both completed. */
int chorus_dev_event_new_timed(void **out);
int chorus_dev_event_elapsed(void *a, void *b, float *ms);
/* Waits on the host for the work before ev's last record. */
int chorus_dev_event_wait(void *ev);
/* Makes stream wait for the work before ev's last record (capturable). */
int chorus_dev_stream_wait_event(void *stream, void *ev);
/* Waits on a word the host writes (memop.cu): whether the driver offers
 * them (1/0; tried once per process, on the current device), and making
 * stream wait, holding no SM, until the 32-bit
 * word at `word` (a device address of host-mapped memory) reaches value:
 * (int32_t)(*word - value) >= 0. */
int chorus_dev_word_waits(void);
int chorus_dev_stream_wait_word(void *stream, const void *word, uint32_t value);

#endif

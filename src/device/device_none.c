/*
 * device_none.c - device.h and kernels.h for builds without CUDA: there is
 * never a device, and everything else fails saying so.
 */
#include <string.h>

#include "device/device.h"
#include "device/kernels.h"

static const char no_cuda[] = "this build of Chorus has no CUDA support";

int chorus_dev_count(void) {
  return 0;
}
int chorus_dev_current(void) {
  return -1;
}
int chorus_dev_built(void) {
  return 0;
}
const char *chorus_dev_error(void) {
  return no_cuda;
}
int chorus_dev_fail(int cuda_error, const char *what) {
  (void)cuda_error, (void)what;
  return -1;
}
int chorus_dev_use(int device) {
  (void)device;
  return -1;
}
int chorus_dev_bus_id(int device, char *out, size_t len) {
  (void)device;
  if (len) out[0] = '\0';
  return -1;
}
void chorus_dev_fail_after(long long n) {
  (void)n;
}
int chorus_dev_fault_due(void) {
  return 0;
}
int chorus_dev_alloc(size_t bytes, void **out) {
  (void)bytes;
  *out = NULL;
  return -1;
}
int chorus_dev_free(void *p) {
  return p ? -1 : 0;
}
int chorus_dev_scratch_alloc(size_t bytes, void **out) {
  return chorus_dev_alloc(bytes, out);
}
int chorus_dev_scratch_free(void *p) {
  return chorus_dev_free(p);
}
int chorus_dev_host_alloc(size_t bytes, void **host, void **dev) {
  (void)bytes;
  *host = *dev = NULL;
  return -1;
}
int chorus_dev_host_free(void *host) {
  return host ? -1 : 0;
}
int chorus_dev_vmm_export(void *p, int *fd) {
  (void)p;
  *fd = -1;
  return -1;
}
int chorus_dev_vmm_import(int fd, size_t bytes, void **out) {
  (void)fd, (void)bytes;
  *out = NULL;
  return -1;
}
int chorus_dev_zero(void *p, size_t bytes) {
  (void)p, (void)bytes;
  return -1;
}
int chorus_dev_can_reach(const char *bus_id) {
  (void)bus_id;
  return -1;
}
int chorus_dev_host_register(void *p, size_t bytes, void **dev) {
  (void)p, (void)bytes;
  *dev = NULL;
  return -1;
}
int chorus_dev_host_unregister(void *p) {
  return p ? -1 : 0;
}
int chorus_dev_peer_enable(int peer) {
  (void)peer;
  return -1;
}
int chorus_dev_peer_verify(void *p) {
  (void)p;
  return -1;
}
int chorus_dev_ipc_get(void *p, unsigned char handle[CHORUS_DEV_IPC_BYTES]) {
  (void)p;
  memset(handle, 0, CHORUS_DEV_IPC_BYTES);
  return -1;
}
int chorus_dev_ipc_open(const unsigned char handle[CHORUS_DEV_IPC_BYTES], void **out) {
  (void)handle;
  *out = NULL;
  return -1;
}
int chorus_dev_ipc_close(void *p) {
  return p ? -1 : 0;
}
int chorus_dev_stream_sync(void *stream) {
  (void)stream;
  return 0;
}
int chorus_dev_stream_new(void **out) {
  *out = NULL;
  return chorus_dev_fail(1, "creating a GPU stream: built without CUDA");
}
int chorus_dev_stream_free(void *stream) {
  return stream ? -1 : 0;
}
int chorus_dev_stream_wait(void *waiter, void *waited) {
  (void)waiter, (void)waited;
  return 0;
}
int chorus_dev_copy(void *dst, const void *src, size_t bytes, void *stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return chorus_dev_fail(1, "copying on a GPU: built without CUDA");
}
int chorus_dev_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                         size_t width, size_t rows, void *stream) {
  (void)dst, (void)dst_pitch, (void)src, (void)src_pitch, (void)width, (void)rows, (void)stream;
  return chorus_dev_fail(1, "copying on a GPU: built without CUDA");
}
int chorus_dev_put(void *dst, const void *src, size_t bytes) {
  (void)dst, (void)src, (void)bytes;
  return chorus_dev_fail(1, "copying to a GPU: built without CUDA");
}
int chorus_dev_stream_capturing(void *stream) {
  (void)stream;
  return 0;
}
int chorus_dev_pointer_is_device(const void *p) {
  (void)p;
  return 0;
}
int chorus_kern_exchange(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, void *stream) {
  (void)c, (void)red, (void)x, (void)stream;
  return -1;
}
int chorus_kern_pipe(const chorus_kern_comm *c, const chorus_kern_red *red,
                     const chorus_kern_xchg *x, void *stream) {
  (void)c, (void)red, (void)x, (void)stream;
  return -1;
}
int chorus_kern_ring(const chorus_kern_comm *c, const chorus_kern_red *red,
                     const chorus_kern_xchg *x, void *stream) {
  (void)c, (void)red, (void)x, (void)stream;
  return -1;
}
int chorus_kern_twoshot(const chorus_kern_comm *c, const chorus_kern_red *red,
                        const chorus_kern_xchg *x, void *stream) {
  (void)c, (void)red, (void)x, (void)stream;
  return -1;
}
int chorus_kern_sendrecv(const chorus_kern_comm *c, const chorus_kern_p2p *p, void *stream) {
  (void)c, (void)p, (void)stream;
  return -1;
}
int chorus_kern_zc_run(const chorus_kern_comm *c, const chorus_kern_red *red,
                       const chorus_kern_zc *d, void *stream) {
  (void)c, (void)red, (void)d, (void)stream;
  return -1;
}
int chorus_kern_ordered_add(const chorus_kern_red *red, void *dst, const void *all, size_t count,
                            int n, size_t stride, unsigned max_blocks, void *stream) {
  (void)red, (void)dst, (void)all, (void)count, (void)n, (void)stride, (void)max_blocks,
      (void)stream;
  return -1;
}
int chorus_kern_premul(const chorus_kern_red *red, void *dst, const void *src, size_t count,
                       unsigned max_blocks, void *stream) {
  (void)red, (void)dst, (void)src, (void)count, (void)max_blocks, (void)stream;
  return -1;
}
int chorus_kern_stamp(volatile uint64_t *ring, uint32_t *counter, uint32_t entries, uint32_t tag,
                      void *stream) {
  (void)ring, (void)counter, (void)entries, (void)tag, (void)stream;
  return -1;
}
int chorus_dev_reachable(const void *p, const int *devices, int n) {
  (void)p, (void)devices, (void)n;
  return 0;
}
int chorus_kern_sendrecv_ll(const chorus_kern_comm *c, const chorus_kern_p2p *p, void *stream) {
  (void)c, (void)p, (void)stream;
  return -1;
}
int chorus_dev_vmm_alloc(size_t bytes, void **out, size_t *mapped) {
  (void)bytes;
  *out = NULL;
  *mapped = 0;
  return -1;
}
int chorus_dev_vmm_free(void *p, size_t mapped) {
  (void)p, (void)mapped;
  return -1;
}
int chorus_kern_proxy_run(const chorus_kern_proxy *p, void *stream) {
  (void)p, (void)stream;
  return -1;
}
int chorus_dev_event_new(void **out) {
  *out = NULL;
  return -1;
}
int chorus_dev_event_record(void *ev, void *stream) {
  (void)ev, (void)stream;
  return -1;
}
int chorus_dev_event_done(void *ev) {
  (void)ev;
  return -1;
}
int chorus_dev_event_free(void *ev) {
  return ev ? -1 : 0;
}
int chorus_dev_stream_wait_event(void *stream, void *ev) {
  (void)stream, (void)ev;
  return -1;
}
int chorus_dev_word_waits(void) {
  return 0;
}
int chorus_dev_stream_wait_word(void *stream, const void *word, uint32_t value) {
  (void)stream, (void)word, (void)value;
  return -1;
}
int chorus_dev_event_wait(void *ev) {
  (void)ev;
  return -1;
}
int chorus_dev_event_new_timed(void **out) {
  *out = NULL;
  return -1;
}
int chorus_dev_event_elapsed(void *a, void *b, float *ms) {
  (void)a, (void)b;
  *ms = 0;
  return -1;
}

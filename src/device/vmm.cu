/*
 * vmm.cu - device.h's shareable allocations through CUDA's virtual memory
 * management (cuMem*), the driver API reached through the runtime's entry
 * points, so that the library never links libcuda (it must load on
 * machines without a driver).
 *
 * An allocation is physical memory on the current device, created so that
 * it can be exported as a POSIX file descriptor (where the driver allows;
 * otherwise without a shareable handle), mapped at an address reserved for
 * it, and made readable and writable from the current device and from
 * every device that can reach it directly. Sizes round up to the
 * recommended granularity. The handle is released once mapped: unmapping
 * frees the memory.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "device/driver_entry.cuh"

extern "C" {
#include "device/device.h"
}

#define MAX_DEVICES 64

struct vmm {
  decltype(&cuMemGetAllocationGranularity) granularity;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuMemAddressReserve) reserve;
  decltype(&cuMemAddressFree) address_free;
  decltype(&cuMemMap) map;
  decltype(&cuMemUnmap) unmap;
  decltype(&cuMemSetAccess) set_access;
  /* Sharing (arenas and windows handed to other processes), found separately: a
   * driver without them still serves ncclMemAlloc. */
  decltype(&cuMemRetainAllocationHandle) retain;
  decltype(&cuMemExportToShareableHandle) export_handle;
  decltype(&cuMemImportFromShareableHandle) import_handle;
  decltype(&cuMemGetAllocationPropertiesFromHandle) properties;
  /* Questions about pointers (may a peer GPU reach this memory?). */
  decltype(&cuPointerGetAttribute) attribute;
  decltype(&cuMemGetAccess) get_access;
};

/* A group of entry points, found once per process; what failed, if
 * anything. */
typedef struct found {
  pthread_once_t once;
  cudaError_t err;
  char what[96];
} found;
static vmm vmm_fns;
static found core = {PTHREAD_ONCE_INIT, cudaSuccess, ""},
             sharing = {PTHREAD_ONCE_INIT, cudaSuccess, ""},
             query = {PTHREAD_ONCE_INIT, cudaSuccess, ""};

static int entry(found *f, const char *name, void **fn) {
  const cudaError_t e = chorus_driver_entry(name, fn);
  if (e == cudaSuccess) return 0;
  f->err = e;
  snprintf(f->what, sizeof f->what, "finding the driver's %s", name);
  return -1;
}

static void find_core(void) {
  vmm *v = &vmm_fns;
  found *f = &core;
  (void)(entry(f, "cuMemGetAllocationGranularity", (void **)&v->granularity) ||
         entry(f, "cuMemCreate", (void **)&v->create) ||
         entry(f, "cuMemRelease", (void **)&v->release) ||
         entry(f, "cuMemAddressReserve", (void **)&v->reserve) ||
         entry(f, "cuMemAddressFree", (void **)&v->address_free) ||
         entry(f, "cuMemMap", (void **)&v->map) || entry(f, "cuMemUnmap", (void **)&v->unmap) ||
         entry(f, "cuMemSetAccess", (void **)&v->set_access));
}

static void find_sharing(void) {
  vmm *v = &vmm_fns;
  found *f = &sharing;
  (void)(entry(f, "cuMemRetainAllocationHandle", (void **)&v->retain) ||
         entry(f, "cuMemExportToShareableHandle", (void **)&v->export_handle) ||
         entry(f, "cuMemImportFromShareableHandle", (void **)&v->import_handle) ||
         entry(f, "cuMemGetAllocationPropertiesFromHandle", (void **)&v->properties));
}

static void find_query(void) {
  vmm *v = &vmm_fns;
  found *f = &query;
  (void)(entry(f, "cuPointerGetAttribute", (void **)&v->attribute) ||
         entry(f, "cuMemGetAccess", (void **)&v->get_access));
}

/* Runs find once; false after recording why it failed. */
static bool ready(found *f, void (*find)(void)) {
  pthread_once(&f->once, find);
  if (!f->what[0]) return true;
  chorus_dev_fail((int)f->err, f->what);
  return false;
}

/* The driver's cuMem functions (and those that share allocations), or
 * NULL after recording why not. */
static const vmm *load(void) {
  return ready(&core, find_core) ? &vmm_fns : NULL;
}
static const vmm *load_sharing(void) {
  return ready(&core, find_core) && ready(&sharing, find_sharing) ? &vmm_fns : NULL;
}

/* Records a driver error like chorus_dev_fail records a runtime one. */
static int drv_fail(CUresult r, const char *what) {
  char msg[192];
  snprintf(msg, sizeof msg, "%s: driver error %d", what, (int)r);
  return chorus_dev_fail((int)cudaErrorUnknown, msg);
}

/* Maps allocation h at a fresh address range of `size` (aligned to gran)
 * and lets the k devices of desc read and write it. The handle is released
 * whatever happens (a mapping keeps the memory alive); on failure nothing is
 * left reserved or mapped. `what` tells apart the errors of callers. */
static int map_handle(const vmm &v, CUmemGenericAllocationHandle h, size_t size, size_t gran,
                      const CUmemAccessDesc *desc, int k, const char *what, void **out) {
  char msg[96];
  CUdeviceptr p = 0;
  CUresult r = v.reserve(&p, size, gran, 0, 0);
  if (r != CUDA_SUCCESS) {
    v.release(h);
    snprintf(msg, sizeof msg, "cuMemAddressReserve (%s)", what);
    return drv_fail(r, msg);
  }
  r = v.map(p, size, 0, h, 0);
  v.release(h);
  if (r != CUDA_SUCCESS) {
    v.address_free(p, size);
    snprintf(msg, sizeof msg, "cuMemMap (%s)", what);
    return drv_fail(r, msg);
  }
  r = v.set_access(p, size, desc, (size_t)k);
  if (r != CUDA_SUCCESS) {
    v.unmap(p, size);
    v.address_free(p, size);
    snprintf(msg, sizeof msg, "cuMemSetAccess (%s)", what);
    return drv_fail(r, msg);
  }
  *out = (void *)p;
  return 0;
}

/* Read-write access for device d. */
static CUmemAccessDesc access_for(int d) {
  CUmemAccessDesc a;
  memset(&a, 0, sizeof a);
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = d;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return a;
}

extern "C" int chorus_dev_vmm_alloc(size_t bytes, void **out, size_t *mapped) {
  *out = NULL;
  *mapped = 0;
  const vmm *vp = load();
  if (!vp) return -1;
  const vmm &v = *vp;
  if (chorus_dev_fault_due())
    return chorus_dev_fail((int)cudaErrorMemoryAllocation,
                           "cuMemCreate, failed by CHORUS_FAULT_DEVICE");
  int dev = 0, ndev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "finding the current device");
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CUresult r = v.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CUDA_SUCCESS || gran == 0) return drv_fail(r, "cuMemGetAllocationGranularity");
  const size_t size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  r = v.create(&h, size, &prop, 0);
  if (r != CUDA_SUCCESS) { /* no shareable handles here: local memory still */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    r = v.create(&h, size, &prop, 0);
  }
  if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemCreate");
  CUmemAccessDesc desc[MAX_DEVICES];
  int k = 0;
  for (int d = 0; d < ndev && k < MAX_DEVICES; d++) {
    int can = d == dev;
    if (!can && cudaDeviceCanAccessPeer(&can, d, dev) != cudaSuccess) {
      cudaGetLastError();
      can = 0;
    }
    if (can) desc[k++] = access_for(d);
  }
  const int rc = map_handle(v, h, size, gran, desc, k, "allocation", out);
  if (rc == 0) *mapped = size;
  return rc;
}

extern "C" int chorus_dev_vmm_free(void *p, size_t mapped) {
  const vmm *v = load();
  if (!v) return -1;
  /* cudaFree waits for the device's kernels; unmapping does not, and a
   * kernel still running (one that an abort just stopped, finishing its
   * last stores) would fault on the vanished range. */
  const cudaError_t e = cudaDeviceSynchronize(); /* unmapped below either way */
  CUresult r = v->unmap((CUdeviceptr)p, mapped);
  if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemUnmap");
  r = v->address_free((CUdeviceptr)p, mapped);
  if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemAddressFree");
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "cudaDeviceSynchronize before cuMemUnmap");
  return 0;
}

extern "C" int chorus_dev_vmm_export(void *p, int *fd) {
  *fd = -1;
  const vmm *v = load_sharing();
  if (!v) return -1;
  CUmemGenericAllocationHandle h;
  CUresult r = v->retain(&h, p);
  if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemRetainAllocationHandle");
  int out = -1;
  r = v->export_handle(&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  v->release(h);
  if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemExportToShareableHandle (POSIX descriptor)");
  *fd = out;
  return 0;
}

extern "C" int chorus_dev_vmm_import(int fd, size_t bytes, void **out) {
  *out = NULL;
  const vmm *v = load_sharing();
  if (!v) return -1;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return chorus_dev_fail((int)e, "finding the current device");
  CUmemGenericAllocationHandle h;
  CUresult r =
      v->import_handle(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemImportFromShareableHandle");
  CUmemAllocationProp prop;
  size_t gran = 0;
  r = v->properties(&prop, h);
  if (r == CUDA_SUCCESS) r = v->granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || gran == 0 || bytes % gran) {
    v->release(h);
    return r != CUDA_SUCCESS ? drv_fail(r, "the imported allocation's granularity")
                             : chorus_dev_fail((int)cudaErrorInvalidValue,
                                               "an imported allocation of a size not a multiple "
                                               "of its granularity");
  }
  const CUmemAccessDesc desc = access_for(dev);
  return map_handle(*v, h, bytes, gran, &desc, 1, "imported", out);
}

extern "C" int chorus_dev_reachable(const void *p, const int *devices, int n) {
  if (!p) return 0;
  if (!ready(&query, find_query)) {
    cudaGetLastError();
    return 0;
  }
  const vmm &v = vmm_fns;
  const CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)p;
  unsigned int type = 0;
  if (v.attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != CUDA_SUCCESS ||
      type != CU_MEMORYTYPE_DEVICE)
    return 0;
  unsigned int managed = 0;
  if (v.attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr) != CUDA_SUCCESS || managed)
    return 0;
  /* cudaMalloc's memory: every GPU with peer access to its GPU reaches it
   * (the communicator enabled that access at init). */
  int legacy = 0;
  if (v.attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr) == CUDA_SUCCESS &&
      legacy)
    return 1;
  /* cuMem memory (ncclMemAlloc's among it): only where its owner granted
   * each GPU access. Pool memory (cudaMallocAsync) answers neither. */
  for (int i = 0; i < n; i++) {
    CUmemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = devices[i];
    unsigned long long flags = 0;
    if (v.get_access(&flags, &loc, ptr) != CUDA_SUCCESS ||
        flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return 0;
  }
  return n > 0;
}

/*
 * mem.c - ncclMemAlloc/ncclMemFree and buffer registration.
 *
 * Where the calling thread has a GPU (and CHORUS_HOST_COMM is not set),
 * ncclMemAlloc returns device memory on it through cuMem (device/vmm.cu:
 * exportable, mapped for every GPU with peer access to it), as NCCL does;
 * without one, page-aligned host memory from mmap. Every live allocation
 * is remembered, so ncclMemFree of a pointer we did not hand out is an
 * error, not a crash. Registration (ncclCommRegister) has nothing to pin
 * or map: handles are validated tokens. On GPUs of one process the
 * zero-copy collectives reach every rank's cudaMalloc or ncclMemAlloc
 * buffers without it (gpu/direct.c). Windows (ncclCommWindowRegister): a
 * range of one ncclMemAlloc allocation, checked and kept on the
 * communicator's list until deregistered or the communicator is freed; on
 * GPU communicators of one process per rank, registering one maps it on
 * every rank (collective), and NCCL_WIN_COLL_SYMMETRIC ones carry zero-copy
 * collectives. No device-side API use yet.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/api.h"
#include "core/comm.h"
#include "device/device.h"
#include "gpu/gpu.h"
#include "util/alloc.h"
#include "util/check.h"

typedef struct mem_block {
  void *ptr;
  size_t size; /* as mapped */
  int device;  /* GPU memory (cuMem), else mmap'ed host memory */
} mem_block;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_block *blocks;
static size_t nblocks, cap_blocks;

static int remember(void *p, size_t size, int device) {
  pthread_mutex_lock(&mem_lock);
  if (nblocks == cap_blocks) {
    size_t cap = cap_blocks ? 2 * cap_blocks : 64;
    mem_block *b = chorus_malloc(cap * sizeof *b);
    if (!b) {
      pthread_mutex_unlock(&mem_lock);
      return -1;
    }
    if (nblocks) memcpy(b, blocks, nblocks * sizeof *b);
    chorus_free(blocks);
    blocks = b;
    cap_blocks = cap;
  }
  blocks[nblocks++] = (mem_block){p, size, device};
  pthread_mutex_unlock(&mem_lock);
  return 0;
}

/* Removes p from the registry; returns its size (0 if unknown) and kind. */
static size_t forget(void *p, int *device) {
  size_t size = 0;
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < nblocks; i++)
    if (blocks[i].ptr == p) {
      size = blocks[i].size;
      *device = blocks[i].device;
      blocks[i] = blocks[--nblocks];
      break;
    }
  if (nblocks == 0) {
    chorus_free(blocks);
    blocks = NULL;
    cap_blocks = 0;
  }
  pthread_mutex_unlock(&mem_lock);
  return size;
}

NCCL_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t size) {
  if (!ptr) return chorus_error(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) return chorus_error(ncclInvalidArgument, "ncclMemAlloc: size is 0");
  const int gpu = chorus_comm_pick_device();
  if (gpu >= 0) {
    void *d = NULL;
    size_t mapped = 0;
    if (chorus_dev_vmm_alloc(size, &d, &mapped) != 0)
      return chorus_error(ncclUnhandledCudaError,
                          "ncclMemAlloc: cannot allocate %zu bytes on GPU %d: %s", size, gpu,
                          chorus_dev_error());
    if (remember(d, mapped, 1) != 0) {
      chorus_dev_vmm_free(d, mapped);
      return chorus_error(ncclSystemError, "ncclMemAlloc: out of memory");
    }
    chorus_alloc_account(CHORUS_MEM_DEVICE, (int64_t)mapped);
    *ptr = d;
    return ncclSuccess;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return chorus_error(ncclSystemError, "ncclMemAlloc: cannot allocate %zu bytes of host memory",
                        size);
  if (remember(p, size, 0) != 0) {
    munmap(p, size);
    return chorus_error(ncclSystemError, "ncclMemAlloc: out of memory");
  }
  chorus_alloc_account(CHORUS_MEM_PINNED, (int64_t)size);
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void *ptr) {
  if (!ptr) return ncclSuccess;
  int device = 0;
  size_t size = forget(ptr, &device);
  if (!size)
    return chorus_error(ncclInvalidArgument,
                        "ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already)",
                        ptr);
  if (device) {
    chorus_alloc_account(CHORUS_MEM_DEVICE, -(int64_t)size);
    if (chorus_dev_vmm_free(ptr, size) != 0)
      return chorus_error(ncclUnhandledCudaError, "ncclMemFree: unmapping %p: %s", ptr,
                          chorus_dev_error());
    return ncclSuccess;
  }
  munmap(ptr, size);
  chorus_alloc_account(CHORUS_MEM_PINNED, -(int64_t)size);
  return ncclSuccess;
}

/* A registration (ncclCommRegister's handle) or a window
 * (ncclCommWindowRegister's): kept on its communicator's list until
 * deregistered or the communicator is freed, so a handle is known by
 * finding it there, never by reading memory it points at. */
struct ncclWindow_vidmem {
  void *buff;
  size_t size;
  int flags;
  int window;             /* made by ncclCommWindowRegister */
  chorus_gpu_window *gpu; /* its mapping on a GPU communicator, or NULL */
  struct ncclWindow_vidmem *next;
};

static ncclResult_t add_reg(ncclComm_t comm, void *buff, size_t size, int flags, int window,
                            struct ncclWindow_vidmem **out, const char *what) {
  struct ncclWindow_vidmem *r = chorus_malloc(sizeof *r);
  if (!r) return chorus_error(ncclSystemError, "%s: out of memory", what);
  *r = (struct ncclWindow_vidmem){buff, size, flags, window, NULL, comm->regs};
  comm->regs = r;
  *out = r;
  return ncclSuccess;
}

/* Unlinks and frees handle h of the given kind; 0 when comm has no such. */
static int take_reg(ncclComm_t comm, const void *h, int window) {
  for (struct ncclWindow_vidmem **at = &comm->regs; *at; at = &(*at)->next)
    if (*at == h && (*at)->window == window) {
      struct ncclWindow_vidmem *r = *at;
      *at = r->next;
      if (r->gpu) chorus_gpu_window_remove(comm->cc.gpu, r->gpu);
      chorus_free(r);
      return 1;
    }
  return 0;
}

void chorus_comm_regs_free(ncclComm_t comm) {
  while (comm->regs) {
    struct ncclWindow_vidmem *r = comm->regs;
    comm->regs = r->next;
    if (r->gpu) chorus_gpu_window_remove(comm->cc.gpu, r->gpu);
    chorus_free(r);
  }
}

/* Whether every page of [p, p + size) is mapped in this process (msync
 * fails with ENOMEM on a hole; it writes nothing back with MS_ASYNC). */
static int host_mapped(const void *p, size_t size) {
  const long ps = sysconf(_SC_PAGESIZE);
  const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096, a = (uintptr_t)p & ~(page - 1);
  const uintptr_t end = (uintptr_t)p + size;
  return msync((void *)a, end - a, MS_ASYNC) == 0 || errno != ENOMEM;
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void *buff, size_t size,
         void **handle) {
  CHECK(chorus_comm_check(comm, "ncclCommRegister"));
  if (!handle) return chorus_error(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (!buff && size)
    return chorus_error(ncclInvalidArgument, "ncclCommRegister: buff is NULL (size %zu)", size);
  if (size && (uintptr_t)buff > UINTPTR_MAX - size)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommRegister: buff %p + size %zu runs past the end of the address "
                        "space",
                        buff, size);
  if (size && comm->device < 0 && !host_mapped(buff, size))
    return chorus_error(ncclInvalidArgument,
                        "ncclCommRegister: [%p, %p + %zu) is not all memory of this process "
                        "(size larger than the buffer?)",
                        buff, buff, size);
  struct ncclWindow_vidmem *r = NULL;
  CHECK(add_reg(comm, buff, size, 0, 0, &r, "ncclCommRegister"));
  *handle = r;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void *handle) {
  CHECK(chorus_comm_check(comm, "ncclCommDeregister"));
  if (!take_reg(comm, handle, 0))
    return chorus_error(ncclInvalidArgument,
                        "ncclCommDeregister: handle %p was not registered on this communicator",
                        handle);
  return ncclSuccess;
}

/* Whether [p, p + size) lies inside one ncclMemAlloc allocation (then a
 * copy of its record in *blk). */
static int inside_one_block(const void *p, size_t size, mem_block *blk) {
  const uintptr_t a = (uintptr_t)p;
  int found = 0;
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < nblocks && !found; i++) {
    const uintptr_t b = (uintptr_t)blocks[i].ptr;
    found = a >= b && size <= blocks[i].size && a - b <= blocks[i].size - size;
    if (found) *blk = blocks[i];
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size,
         ncclWindow_t *win, int winFlags) {
  CHECK(chorus_comm_check(comm, "ncclCommWindowRegister"));
  if (!win) return chorus_error(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  *win = NULL;
  /* Collective on GPU communicators: every rank must be able to take part. */
  CHECK(chorus_comm_usable(comm, "ncclCommWindowRegister"));
  if (!buff || size == 0)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommWindowRegister: buff = %p, size = %zu: a window needs memory",
                        buff, size);
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommWindowRegister: winFlags = 0x%x; the flags are NCCL_WIN_DEFAULT "
                        "(0) and NCCL_WIN_COLL_SYMMETRIC (1)",
                        (unsigned)winFlags);
  mem_block blk;
  if (!inside_one_block(buff, size, &blk))
    return chorus_error(ncclInvalidArgument,
                        "ncclCommWindowRegister: buff [%p, +%zu) is not inside one allocation of "
                        "ncclMemAlloc, which windows need",
                        buff, size);
  struct ncclWindow_vidmem *r = NULL;
  CHECK(add_reg(comm, buff, size, winFlags, 1, &r, "ncclCommWindowRegister"));
  if (comm->cc.gpu && blk.device) {
    ncclResult_t res = chorus_gpu_window_add(comm->cc.gpu, comm->bs, buff, size, blk.ptr, blk.size,
                                             (winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0, &r->gpu);
    if (res != ncclSuccess) {
      take_reg(comm, r, 1);
      return res;
    }
  }
  *win = r;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  CHECK(chorus_comm_check(comm, "ncclCommWindowDeregister"));
  if (take_reg(comm, win, 1)) return ncclSuccess;
  return chorus_error(ncclInvalidArgument,
                      "ncclCommWindowDeregister: window %p is not registered on this communicator "
                      "(or was deregistered already)",
                      (void *)win);
}

/*
 * mem.c - ncclMemAlloc/ncclMemFree and buffer registration.
 *
 * Where the calling thread has a GPU (and CHORUS_HOST_COMM is not set),
 * ncclMemAlloc returns device memory on it through cuMem (device/vmm.cu:
 * exportable, mapped for every GPU with peer access to it), as NCCL does;
 * without one, page-aligned host memory from mmap. Every live allocation
 * is remembered, so ncclMemFree of a pointer we did not hand out is an
 * error, not a crash. Registration has nothing to pin or map yet (the
 * collectives copy through Chorus's own buffers either way): handles are
 * validated tokens. Windows (ncclCommWindowRegister) likewise: a range of
 * one ncclMemAlloc allocation, checked and kept on the communicator's list
 * until deregistered or the communicator is freed; no symmetric kernels
 * or device-side use yet.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "core/api.h"
#include "core/comm.h"
#include "device/device.h"
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

#define REG_MAGIC 0x43524547u /* "CREG" */

typedef struct reg_handle {
  uint32_t magic;
  ncclComm_t comm;
  void *buff;
  size_t size;
} reg_handle;

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void *buff, size_t size,
         void **handle) {
  CHECK(chorus_comm_check(comm, "ncclCommRegister"));
  if (!handle) return chorus_error(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (!buff && size)
    return chorus_error(ncclInvalidArgument, "ncclCommRegister: buff is NULL (size %zu)", size);
  reg_handle *h = chorus_malloc(sizeof *h);
  if (!h) return chorus_error(ncclSystemError, "ncclCommRegister: out of memory");
  *h = (reg_handle){REG_MAGIC, comm, buff, size};
  *handle = h;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void *handle) {
  CHECK(chorus_comm_check(comm, "ncclCommDeregister"));
  reg_handle *h = handle;
  if (!h || h->magic != REG_MAGIC || h->comm != comm)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommDeregister: handle %p was not registered on this communicator",
                        handle);
  h->magic = 0;
  chorus_free(h);
  return ncclSuccess;
}

/* Whether [p, p + size) lies inside one ncclMemAlloc allocation. */
static int inside_one_block(const void *p, size_t size) {
  const uintptr_t a = (uintptr_t)p;
  int found = 0;
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < nblocks && !found; i++) {
    const uintptr_t b = (uintptr_t)blocks[i].ptr;
    found = a >= b && size <= blocks[i].size && a - b <= blocks[i].size - size;
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

struct ncclWindow_vidmem {
  void *buff;
  size_t size;
  int flags;
  struct ncclWindow_vidmem *next;
};

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size,
         ncclWindow_t *win, int winFlags) {
  CHECK(chorus_comm_check(comm, "ncclCommWindowRegister"));
  if (!win) return chorus_error(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  *win = NULL;
  if (!buff || size == 0)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommWindowRegister: buff = %p, size = %zu: a window needs memory",
                        buff, size);
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return chorus_error(ncclInvalidArgument,
                        "ncclCommWindowRegister: winFlags = 0x%x; the flags are NCCL_WIN_DEFAULT "
                        "(0) and NCCL_WIN_COLL_SYMMETRIC (1)",
                        (unsigned)winFlags);
  if (!inside_one_block(buff, size))
    return chorus_error(ncclInvalidArgument,
                        "ncclCommWindowRegister: buff [%p, +%zu) is not inside one allocation of "
                        "ncclMemAlloc, which windows need",
                        buff, size);
  struct ncclWindow_vidmem *w = chorus_malloc(sizeof *w);
  if (!w) return chorus_error(ncclSystemError, "ncclCommWindowRegister: out of memory");
  *w = (struct ncclWindow_vidmem){buff, size, winFlags, comm->windows};
  comm->windows = w;
  *win = w;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  CHECK(chorus_comm_check(comm, "ncclCommWindowDeregister"));
  for (struct ncclWindow_vidmem **at = &comm->windows; *at; at = &(*at)->next)
    if (*at == win) {
      *at = win->next;
      chorus_free(win);
      return ncclSuccess;
    }
  return chorus_error(ncclInvalidArgument,
                      "ncclCommWindowDeregister: window %p is not registered on this communicator "
                      "(or was deregistered already)",
                      (void *)win);
}

void chorus_comm_windows_free(ncclComm_t comm) {
  while (comm->windows) {
    struct ncclWindow_vidmem *w = comm->windows;
    comm->windows = w->next;
    chorus_free(w);
  }
}

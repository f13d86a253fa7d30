/*
 * mem.c - buffer memory of the perf programs.
 *
 * Every buffer handed to NCCL comes from pt_mem_alloc, and the host only
 * touches buffers through pt_mem_begin/pt_mem_end. Host communicators get
 * page-aligned host memory, which is its own host-visible window. A CUDA
 * build will allocate device memory here for device communicators
 * (chorusCommIsHost(comm) == 0) and stage the windows through host memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define PT_ALIGN 4096

static int comm_is_host(ncclComm_t comm) {
  int host = chorusCommIsHost(comm);
  if (host == 0)
    fprintf(stderr, "chorus perf: this build of the perf programs only drives host-memory "
                    "communicators (set CHORUS_HOST_COMM=1)\n");
  return host == 1;
}

void *pt_mem_alloc(ncclComm_t comm, size_t bytes) {
  if (!comm_is_host(comm)) return NULL;
  size_t rounded = (bytes + PT_ALIGN - 1) / PT_ALIGN * PT_ALIGN;
  if (rounded == 0) rounded = PT_ALIGN;
  void *p = aligned_alloc(PT_ALIGN, rounded);
  if (p) memset(p, 0, rounded); /* touch every page before timing */
  return p;
}

void pt_mem_free(ncclComm_t comm, void *p) {
  (void)comm;
  free(p);
}

void *pt_mem_begin(ncclComm_t comm, void *p, size_t bytes, int read) {
  (void)comm, (void)bytes, (void)read;
  return p;
}

void pt_mem_end(ncclComm_t comm, void *p, void *view, size_t bytes, int write) {
  (void)comm, (void)p, (void)view, (void)bytes, (void)write;
}

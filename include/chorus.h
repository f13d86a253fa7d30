/*
 * chorus.h - what Chorus adds to the NCCL API.
 *
 * The library exports exactly the symbols of NVIDIA's libnccl.so.2, so the
 * extensions here are constants and static inline helpers built on the NCCL
 * API itself; nothing in this header needs a symbol NVIDIA's library lacks.
 */
#ifndef CHORUS_H_
#define CHORUS_H_

#include "nccl.h"

#define CHORUS_VERSION_MAJOR  0
#define CHORUS_VERSION_MINOR  1
#define CHORUS_VERSION_PATCH  0
#define CHORUS_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A communicator either moves device memory (it is bound to a CUDA device) or
 * host memory. Host communicators report device -1 from ncclCommCuDevice.
 * Returns 1 for a host-memory communicator, 0 for a device one, -1 on error.
 */
static inline int chorusCommIsHost(ncclComm_t comm) {
  int dev = 0;
  if (ncclCommCuDevice(comm, &dev) != ncclSuccess) return -1;
  return dev < 0 ? 1 : 0;
}

#ifdef __cplusplus
}
#endif

/* Environment variables Chorus adds (every one is listed, with its default,
 * by `chorus_info`). */
#define CHORUS_ENV_HOST_COMM         "CHORUS_HOST_COMM"         /* 1: host memory even with GPUs */
#define CHORUS_ENV_BOOTSTRAP_TIMEOUT "CHORUS_BOOTSTRAP_TIMEOUT" /* seconds, init rendezvous */
#define CHORUS_ENV_OP_TIMEOUT        "CHORUS_OP_TIMEOUT"        /* seconds a collective may wait */

#endif /* CHORUS_H_ */

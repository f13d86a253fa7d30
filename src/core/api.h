/*
 * api.h - how public entry points are defined.
 *
 * NCCL exports every function twice: pncclX is the implementation and ncclX a
 * weak alias of it, so a profiling shim can define ncclX and call pncclX.
 *   NCCL_API(ncclResult_t, ncclGetVersion, int *version) { ... }
 * defines pncclGetVersion with the body and ncclGetVersion as its alias. Both
 * get default visibility; everything else in the library is hidden.
 */
#ifndef CHORUS_CORE_API_H
#define CHORUS_CORE_API_H

#include "nccl.h"

#define CHORUS_EXPORT __attribute__((visibility("default")))

#define NCCL_API(ret, name, ...)                                                                   \
  CHORUS_EXPORT ret p##name(__VA_ARGS__);                                                          \
  CHORUS_EXPORT ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name)));                     \
  CHORUS_EXPORT ret p##name(__VA_ARGS__)

#endif

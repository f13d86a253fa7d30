/*
 * tuner_abi.h - NCCL's tuner plugin interface, versions 2 to 5, as plugins
 * built for NCCL 2.28 expect it (written from NCCL's public ext-tuner
 * description; layouts for LP64).
 *
 * A plugin exports a table `ncclTunerPlugin_vN`: its name, then init, a
 * per-call query and a finalizer, all on a context of its own per
 * communicator. Version 2's query answers with an algorithm and a protocol
 * (NCCL's codes; -1 where it leaves one unset). From version 3 it is handed
 * NCCL's cost table of the call, float[algorithms][protocols] passed as a
 * float **, to change in place; version 4 adds whether the buffers are
 * registered, version 5 a communicator id, the NVLink domains and NCCL's
 * own tuning constants at init. Every version may also cap the call's
 * channels (0: no cap).
 */
#ifndef CHORUS_CORE_TUNER_ABI_H
#define CHORUS_CORE_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

typedef void (*tuner_logger_t)(int level, unsigned long flags, const char *file, int line,
                               const char *fmt, ...);

typedef struct tuner_v2 {
  const char *name;
  ncclResult_t (*init)(size_t nranks, size_t nnodes, tuner_logger_t log, void **ctx);
  ncclResult_t (*get_coll_info)(void *ctx, int func, size_t bytes, int collnet_ok, int nvls_ok,
                                int npipe, int *algo, int *proto, int *nchannels);
  ncclResult_t (*destroy)(void *ctx);
} tuner_v2;

typedef struct tuner_v3 {
  const char *name;
  ncclResult_t (*init)(size_t nranks, size_t nnodes, tuner_logger_t log, void **ctx);
  ncclResult_t (*get_coll_info)(void *ctx, int func, size_t bytes, int npipe, float **table,
                                int nalgo, int nproto, int *nchannels);
  ncclResult_t (*destroy)(void *ctx);
} tuner_v3;

typedef struct tuner_v4 {
  const char *name;
  ncclResult_t (*init)(size_t nranks, size_t nnodes, tuner_logger_t log, void **ctx);
  ncclResult_t (*get_coll_info)(void *ctx, int func, size_t bytes, int npipe, float **table,
                                int nalgo, int nproto, int reg_buff, int *nchannels);
  ncclResult_t (*destroy)(void *ctx);
} tuner_v4;

/* The NVLink domains of a communicator (hosts, for Chorus). */
typedef struct tuner_nvl_domains_v5 {
  int ndomains;
  int min_ranks, max_ranks; /* ranks per domain */
} tuner_nvl_domains_v5;

/* NCCL's tuning constants, which a version 5 plugin may change at init:
 * base and per-link latencies by algorithm and protocol, and bandwidth
 * ceilings by compute capability and scale. */
typedef struct tuner_constants_v5 {
  double base_latency[7][3];
  double hw_latency[3][7][3];
  double ll_max_bw[4][3];
  double ring_ll128_bw[4][3];
  double tree_ll128_bw[4][3];
  double tree_bw[4][3];
  double nvls_tree_bw[4][3];
} tuner_constants_v5;

typedef struct tuner_v5 {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes,
                       tuner_logger_t log, tuner_nvl_domains_v5 *nvl,
                       tuner_constants_v5 *constants);
  ncclResult_t (*get_coll_info)(void *ctx, int func, size_t bytes, int npipe, float **table,
                                int nalgo, int nproto, int reg_buff, int *nchannels);
  ncclResult_t (*finalize)(void *ctx);
} tuner_v5;

_Static_assert(sizeof(tuner_v2) == 32 && sizeof(tuner_v5) == 32, "tuner tables: 4 pointers");
_Static_assert(sizeof(tuner_nvl_domains_v5) == 12, "ncclNvlDomainInfo_v5_t");
_Static_assert(sizeof(tuner_constants_v5) == (21 + 63 + 5 * 12) * 8, "ncclTunerConstants_v5_t");

#endif

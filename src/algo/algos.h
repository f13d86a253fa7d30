/*
 * algos.h - the algorithms each collective can use, by name, and the
 * NCCL_ALGO and NCCL_PROTO filters.
 *
 * NCCL_ALGO takes NCCL's forms: "ring,direct" (allow these), "^tree"
 * (allow all but these), and per-function lists "allreduce:ring;^tree"
 * (function names as in NCCL: allreduce, allgather, reducescatter,
 * broadcast, reduce, alltoall, gather, scatter, sendrecv). Names are
 * case-insensitive; unknown names are ignored with an INFO line.
 */
#ifndef CHORUS_ALGO_ALGOS_H
#define CHORUS_ALGO_ALGOS_H

#include <stdint.h>

/* Functions (also the low byte of chorus_msg_meta.call). */
typedef enum {
  CHORUS_FUNC_ALLREDUCE = 1,
  CHORUS_FUNC_BROADCAST,
  CHORUS_FUNC_REDUCE,
  CHORUS_FUNC_ALLGATHER,
  CHORUS_FUNC_REDUCESCATTER,
  CHORUS_FUNC_ALLTOALL,
  CHORUS_FUNC_GATHER,
  CHORUS_FUNC_SCATTER,
  CHORUS_FUNC_SEND,
  CHORUS_FUNC_RECV,
  CHORUS_FUNC_COUNT
} chorus_func;

typedef enum {
  CHORUS_ALGO_RING = 0,
  CHORUS_ALGO_DIRECT,
  CHORUS_ALGO_ONESHOT,
  CHORUS_ALGO_TWOSHOT,
  CHORUS_ALGO_RD,
  CHORUS_ALGO_COUNT
} chorus_algo;

/* NCCL's protocols (NCCL_PROTO); GPU communicators run LL and Simple. */
typedef enum {
  CHORUS_PROTO_LL = 0,
  CHORUS_PROTO_LL128,
  CHORUS_PROTO_SIMPLE,
  CHORUS_PROTO_COUNT
} chorus_proto;

typedef struct chorus_algo_desc {
  chorus_algo id;
  const char *name;
  const char *doc;
} chorus_algo_desc;

const char *chorus_func_name(int func); /* "AllReduce" */
const chorus_algo_desc *chorus_algo_get(chorus_algo id);

/* Bit i set = algorithm i allowed for func under `spec` (NCCL_ALGO text,
 * may be NULL = all). *explicit_out (may be NULL) is set when spec names
 * func in a per-function list. */
uint32_t chorus_algo_allowed(const char *spec, int func);
uint32_t chorus_algo_allowed_ex(const char *spec, int func, int *explicit_out);
/* The same for NCCL_PROTO: bit i set = chorus_proto i allowed. */
uint32_t chorus_proto_allowed_ex(const char *spec, int func, int *explicit_out);

#endif

/*
 * redop.c - reduction operators, and ncclRedOpCreatePreMulSum/Destroy.
 *
 * User operators are per communicator. The handle is ncclNumOps + (tag << 10
 * | index), where tag is 10 bits of a hash of the communicator, so using a
 * handle with the wrong communicator is caught (with high probability)
 * instead of silently applying another scalar.
 */
#include "core/redop.h"

#include <string.h>

#include "core/api.h"
#include "core/comm.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"

#define INDEX_BITS 10

static unsigned comm_tag(ncclComm_t comm) {
  uintptr_t p = (uintptr_t)comm;
  return (unsigned)(chorus_hash64(&p, sizeof p, 7) & 0x3ff);
}

static int is_float(int dtype) {
  return dtype == ncclFloat16 || dtype == ncclFloat32 || dtype == ncclFloat64 ||
         dtype == ncclBfloat16 || dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2;
}

/* Index of a user op handle on comm, or -1. */
static int user_index(ncclComm_t comm, ncclRedOp_t op) {
  if ((int)op < ncclNumOps) return -1;
  unsigned v = (unsigned)op - ncclNumOps;
  if ((v >> INDEX_BITS) != comm_tag(comm)) return -1;
  int idx = (int)(v & ((1u << INDEX_BITS) - 1));
  if (idx >= comm->nuser_ops || !comm->user_ops[idx].used) return -1;
  return idx;
}

ncclResult_t chorus_redop_resolve(ncclComm_t comm, ncclRedOp_t op, int dtype, chorus_red *out,
                                  int *kind, const char *what) {
  memset(out, 0, sizeof *out);
  out->dtype = dtype;
  switch ((int)op) {
  case ncclSum:
    out->kind = CHORUS_RED_SUM;
    *kind = 0;
    return ncclSuccess;
  case ncclProd:
    out->kind = CHORUS_RED_PROD;
    *kind = 1;
    return ncclSuccess;
  case ncclMax:
    out->kind = CHORUS_RED_MAX;
    *kind = 2;
    return ncclSuccess;
  case ncclMin:
    out->kind = CHORUS_RED_MIN;
    *kind = 3;
    return ncclSuccess;
  case ncclAvg:
    *kind = 4;
    if (is_float(dtype)) {
      out->kind = CHORUS_RED_PREMULSUM;
      chorus_scalar_from_double(dtype, 1.0 / comm->nranks, out->scalar);
    } else {
      out->kind = CHORUS_RED_SUMPOSTDIV;
      out->divisor = (uint64_t)comm->nranks;
    }
    return ncclSuccess;
  default:
    break;
  }
  int idx = user_index(comm, op);
  if (idx < 0)
    return chorus_error(ncclInvalidArgument,
                        "%s: op = %d is neither a built-in ncclRedOp_t (0..4) nor an operator "
                        "created on this communicator",
                        what, (int)op);
  const chorus_user_op *u = &comm->user_ops[idx];
  if (u->dtype != dtype)
    return chorus_error(ncclInvalidArgument,
                        "%s: PreMulSum operator %d was created for %s but is used with %s", what,
                        (int)op, chorus_type_name(u->dtype), chorus_type_name(dtype));
  *kind = 5;
  out->kind = CHORUS_RED_PREMULSUM;
  if (u->residence == ncclScalarHostImmediate)
    memcpy(out->scalar, u->value, sizeof out->scalar);
  else if (comm->device >= 0) /* ncclScalarDevice: the kernel reads it */
    out->scalar_dev = u->ptr;
  else /* ncclScalarDevice: on a host communicator it is host memory, read when the call runs */
    memcpy(out->scalar, u->ptr, chorus_type_size(dtype));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op, void *scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  const char *what = "ncclRedOpCreatePreMulSum";
  CHECK(chorus_comm_check(comm, what));
  if (!op) return chorus_error(ncclInvalidArgument, "%s: op (output) is NULL", what);
  if (!scalar) return chorus_error(ncclInvalidArgument, "%s: scalar is NULL", what);
  if ((int)datatype < 0 || (int)datatype >= ncclNumTypes)
    return chorus_error(ncclInvalidArgument, "%s: datatype = %d is not a valid ncclDataType_t",
                        what, (int)datatype);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return chorus_error(ncclInvalidArgument, "%s: residence = %d is not a ncclScalarResidence_t",
                        what, (int)residence);
  int idx = 0;
  while (idx < comm->nuser_ops && comm->user_ops[idx].used) idx++;
  if (idx == comm->nuser_ops) {
    if (comm->nuser_ops == CHORUS_MAX_USER_OPS)
      return chorus_error(ncclInvalidUsage, "%s: more than %d live operators on one communicator",
                          what, CHORUS_MAX_USER_OPS);
    int cap = comm->nuser_ops ? 2 * comm->nuser_ops : 8;
    if (cap > CHORUS_MAX_USER_OPS) cap = CHORUS_MAX_USER_OPS;
    chorus_user_op *ops = chorus_calloc((size_t)cap, sizeof *ops);
    if (!ops) return chorus_error(ncclSystemError, "%s: out of memory", what);
    if (comm->nuser_ops) memcpy(ops, comm->user_ops, (size_t)comm->nuser_ops * sizeof *ops);
    chorus_free(comm->user_ops);
    comm->user_ops = ops;
    comm->nuser_ops = cap;
  }
  chorus_user_op *u = &comm->user_ops[idx];
  memset(u, 0, sizeof *u);
  u->used = 1;
  u->dtype = datatype;
  u->residence = residence;
  if (residence == ncclScalarHostImmediate)
    memcpy(u->value, scalar, chorus_type_size(datatype));
  else
    u->ptr = scalar;
  *op = (ncclRedOp_t)(ncclNumOps + (int)(comm_tag(comm) << INDEX_BITS | (unsigned)idx));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  CHECK(chorus_comm_check(comm, "ncclRedOpDestroy"));
  if ((int)op >= 0 && (int)op < ncclNumOps)
    return chorus_error(ncclInvalidArgument,
                        "ncclRedOpDestroy: op = %d is a built-in operator and cannot be destroyed",
                        (int)op);
  int idx = user_index(comm, op);
  if (idx < 0)
    return chorus_error(ncclInvalidArgument,
                        "ncclRedOpDestroy: op = %d was not created on this communicator (or was "
                        "already destroyed)",
                        (int)op);
  comm->user_ops[idx].used = 0;
  return ncclSuccess;
}

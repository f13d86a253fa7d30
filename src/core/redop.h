/*
 * redop.h - turning an ncclRedOp_t into what the kernels execute.
 */
#ifndef CHORUS_CORE_REDOP_H
#define CHORUS_CORE_REDOP_H

#include "host/reduce.h"
#include "nccl.h"

/* Resolves op for dtype on comm: built-ins (ncclAvg becomes PREMULSUM by
 * 1/nranks for floating types, SUMPOSTDIV for integers) and handles from
 * ncclRedOpCreatePreMulSum (whose scalar is read now if it lives in
 * memory). *kind receives the value messages carry (0..4, or 5 for
 * PreMulSum) so ranks can compare calls. */
ncclResult_t chorus_redop_resolve(ncclComm_t comm, ncclRedOp_t op, int dtype, chorus_red *out,
                                  int *kind, const char *what);

#endif

/*
 * info.c - version, error strings, last error, debug reset.
 */
#include "core/api.h"
#include "core/comm.h"
#include "util/check.h"

NCCL_API(ncclResult_t, ncclGetVersion, int *version) {
  if (!version) return chorus_error(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char *, ncclGetErrorString, ncclResult_t code) {
  switch (code) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError:
    return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

/* NCCL returns one process-wide string and ignores comm; we return the
 * communicator's own last error when it has one, which is never less
 * specific. */
NCCL_API(const char *, ncclGetLastError, ncclComm_t comm) {
  if (comm && comm->magic == CHORUS_COMM_MAGIC) return chorus_last_error(comm->last_error);
  return chorus_last_error(NULL);
}

CHORUS_EXPORT void ncclResetDebugInitInternal(void);
CHORUS_EXPORT void ncclResetDebugInitInternal(void) {
  chorus_log_reset();
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
NCCL_API(void, ncclResetDebugInit, void) {
  ncclResetDebugInitInternal();
}
#pragma GCC diagnostic pop

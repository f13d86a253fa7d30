/*
 * check.h - the one result type (ncclResult_t), error recording and the
 * CHECK family of macros.
 *
 * chorus_error() is how every failure is reported: it writes a WARN line and
 * records the text as the last error of the process and of the communicator
 * the thread is acting on (see chorus_log_ctx). Messages should say what
 * failed, where (rank, peer, host, call) and which setting to change.
 *
 * CHECK(x) returns x's error to the caller and leaves a "file:line -> code"
 * breadcrumb in the INFO log, so the path of an error can be reconstructed.
 * Low-level helpers (sockets, shm) do not call chorus_error; they return a
 * code and fill a caller-supplied message, and their caller decides.
 */
#ifndef CHORUS_UTIL_CHECK_H
#define CHORUS_UTIL_CHECK_H

#include <stddef.h>

#include "nccl.h"
#include "util/log.h"

/* Record and WARN; returns code so it can be used as `return chorus_error(...)`. */
#define chorus_error(code, ...) chorus_error_at(__FILE__, __LINE__, (code), __VA_ARGS__)
ncclResult_t chorus_error_at(const char *file, int line, ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A stable copy of the last error: of comm_buf when it holds one (a
 * communicator's buffer registered through chorus_log_ctx), else the
 * process-wide one. Never NULL. */
const char *chorus_last_error(const char *comm_buf);

/* Copies "what failed" text into buf, formatted; helpers use it to describe
 * errno-style failures for their callers. Returns code. */
ncclResult_t chorus_errmsg(char *buf, size_t size, ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHORUS_BREADCRUMB(res) INFO(CHORUS_ALL, "%s:%d -> %d", __FILE__, __LINE__, (int)(res))

#define CHECK(call)                                                                                \
  do {                                                                                             \
    ncclResult_t chk_res_ = (call);                                                                \
    if (chk_res_ != ncclSuccess) {                                                                 \
      CHORUS_BREADCRUMB(chk_res_);                                                                 \
      return chk_res_;                                                                             \
    }                                                                                              \
  } while (0)

#define CHECK_GOTO(call, res, label)                                                               \
  do {                                                                                             \
    (res) = (call);                                                                                \
    if ((res) != ncclSuccess) {                                                                    \
      CHORUS_BREADCRUMB(res);                                                                      \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

#endif

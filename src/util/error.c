/*
 * error.c - recording of error messages (see check.h).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/check.h"

static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[1024];
/* ncclGetLastError returns a pointer that the caller reads after we unlock:
 * each thread gets its own copy, stable until that thread asks again. */
static CHORUS_TLS char last_copy[1024];

ncclResult_t chorus_error_at(const char *file, int line, ncclResult_t code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  chorus_log(CHORUS_LOG_WARN, CHORUS_ALL, file, line, "%s", msg);
  chorus_log_ctx ctx = chorus_log_ctx_get();
  char full[1024];
  if (ctx.rank >= 0)
    snprintf(full, sizeof full, "rank %d of %d on %s: %s", ctx.rank, ctx.nranks,
             chorus_log_hostname(), msg);
  else
    snprintf(full, sizeof full, "%s: %s", chorus_log_hostname(), msg);
  pthread_mutex_lock(&last_lock);
  memcpy(last_error, full, sizeof last_error);
  if (ctx.err_buf && ctx.err_size) snprintf(ctx.err_buf, ctx.err_size, "%s", full);
  pthread_mutex_unlock(&last_lock);
  return code;
}

const char *chorus_last_error(const char *comm_buf) {
  pthread_mutex_lock(&last_lock);
  char *out = last_copy;
  const char *src = (comm_buf && comm_buf[0]) ? comm_buf : last_error;
  snprintf(out, sizeof last_copy, "%s", src);
  pthread_mutex_unlock(&last_lock);
  return out;
}

ncclResult_t chorus_errmsg(char *buf, size_t size, ncclResult_t code, const char *fmt, ...) {
  if (buf && size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
  }
  return code;
}

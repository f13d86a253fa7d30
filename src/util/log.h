/*
 * log.h - NCCL-style logging.
 *
 * Lines look like NCCL's:  host:pid:tid [rank] NCCL INFO message
 * NCCL_DEBUG picks the level, NCCL_DEBUG_SUBSYS filters INFO/TRACE lines by
 * subsystem, NCCL_DEBUG_FILE redirects them (%h host, %p pid). The rank in
 * the prefix comes from the calling thread's context (chorus_log_ctx_set),
 * which API entry points set from the communicator they act on.
 */
#ifndef CHORUS_UTIL_LOG_H
#define CHORUS_UTIL_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  CHORUS_LOG_NONE = 0,
  CHORUS_LOG_VERSION = 1,
  CHORUS_LOG_WARN = 2,
  CHORUS_LOG_INFO = 3,
  CHORUS_LOG_ABORT = 4,
  CHORUS_LOG_TRACE = 5
} chorus_log_level;

/* Subsystems (NCCL's names and bits). */
#define CHORUS_INIT      0x1u
#define CHORUS_COLL      0x2u
#define CHORUS_P2P       0x4u
#define CHORUS_SHM       0x8u
#define CHORUS_NET       0x10u
#define CHORUS_GRAPH     0x20u
#define CHORUS_TUNING    0x40u
#define CHORUS_ENV       0x80u
#define CHORUS_ALLOC     0x100u
#define CHORUS_CALL      0x200u
#define CHORUS_PROXY     0x400u
#define CHORUS_NVLS      0x800u
#define CHORUS_BOOTSTRAP 0x1000u
#define CHORUS_REG       0x2000u
#define CHORUS_PROFILE   0x4000u
#define CHORUS_RAS       0x8000u
#define CHORUS_ALL       (~0u)

/* Thread-local state of the library is small and lives in the initial TLS
 * block, which spares every API call a __tls_get_addr lookup. */
#define CHORUS_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* Current level and subsystem mask; read without locking on hot paths. */
extern int chorus_log_level_cur;
extern uint32_t chorus_log_mask_cur;

/* Reads NCCL_DEBUG* once; called implicitly by the first log call. */
void chorus_log_init(void);
/* Writes pattern to out with %h (this host's name) and %p (the pid)
 * expanded, as NCCL_DEBUG_FILE takes them. */
void chorus_log_expand_path(const char *pattern, char *out, size_t size);
/* The same for process pid of this host (chorus_info --dump). */
void chorus_log_expand_path_for(const char *pattern, int pid, char *out, size_t size);
/* Forgets the settings so the next line re-reads them (ncclResetDebugInit). */
void chorus_log_reset(void);

void chorus_log(chorus_log_level level, uint32_t subsys, const char *file, int line,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void chorus_vlog(chorus_log_level level, uint32_t subsys, const char *file, int line,
                 const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

/* A line a plugin logs through the logger NCCL hands it (NCCL's levels
 * and subsystem bits; a level outside NCCL's is dropped). */
void chorus_vlog_plugin(int level, unsigned long flags, const char *file, int line, const char *fmt,
                        va_list ap) __attribute__((format(printf, 5, 0)));
/* The same, as the logger function handed to profiler and tuner plugins. */
void chorus_log_plugin(int level, unsigned long flags, const char *file, int line, const char *fmt,
                       ...) __attribute__((format(printf, 5, 6)));

/* Per-thread context: the rank shown in the prefix and where the messages of
 * chorus_error() are also recorded (a communicator's last-error buffer). */
typedef struct chorus_log_ctx {
  int rank; /* -1 when the thread acts on no communicator */
  int nranks;
  char *err_buf; /* may be NULL */
  unsigned err_size;
} chorus_log_ctx;

/* This thread's context (log.c); inline, as every call and every pass of
 * the executor reads or sets it. */
extern CHORUS_TLS chorus_log_ctx chorus_log_tls;

/* Installs ctx for this thread and returns the previous one (restore it). */
static inline chorus_log_ctx chorus_log_ctx_set(chorus_log_ctx ctx) {
  chorus_log_ctx old = chorus_log_tls;
  chorus_log_tls = ctx;
  return old;
}
static inline chorus_log_ctx chorus_log_ctx_get(void) {
  return chorus_log_tls;
}

/* The host name used in prefixes and messages. */
const char *chorus_log_hostname(void);

#define WARN(...) chorus_log(CHORUS_LOG_WARN, CHORUS_ALL, __FILE__, __LINE__, __VA_ARGS__)
/* True when a line of this level and subsystem would be written. */
static inline int chorus_log_on(int level, uint32_t sub) {
  int cur = __atomic_load_n(&chorus_log_level_cur, __ATOMIC_ACQUIRE);
  if (cur < 0) {
    chorus_log_init();
    cur = __atomic_load_n(&chorus_log_level_cur, __ATOMIC_ACQUIRE);
  }
  return cur >= level && (__atomic_load_n(&chorus_log_mask_cur, __ATOMIC_RELAXED) & sub);
}

#define INFO(sub, ...)                                                                             \
  do {                                                                                             \
    if (chorus_log_on(CHORUS_LOG_INFO, (sub)))                                                     \
      chorus_log(CHORUS_LOG_INFO, (sub), __FILE__, __LINE__, __VA_ARGS__);                         \
  } while (0)
#define TRACE(sub, ...)                                                                            \
  do {                                                                                             \
    if (chorus_log_on(CHORUS_LOG_TRACE, (sub)))                                                    \
      chorus_log(CHORUS_LOG_TRACE, (sub), __FILE__, __LINE__, __VA_ARGS__);                        \
  } while (0)

#endif

/*
 * log.c - NCCL-compatible log output. See log.h.
 *
 * Settings are read once under a mutex; the level and mask are then plain
 * ints read racily by the INFO/TRACE macros (a stale read only means one line
 * more or less while a reset is in progress). Lines are written with one
 * fwrite under the mutex so threads never interleave within a line.
 */
#include "util/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/param.h"

int chorus_log_level_cur = -1;
uint32_t chorus_log_mask_cur = 0;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file = NULL; /* NULL: stdout */
static char hostname[64];

CHORUS_TLS chorus_log_ctx chorus_log_tls = {-1, 0, NULL, 0};

static int parse_level(const char *s) {
  if (!s) return CHORUS_LOG_WARN;
  static const struct {
    const char *name;
    int level;
  } names[] = {{"NONE", CHORUS_LOG_NONE},   {"VERSION", CHORUS_LOG_VERSION},
               {"WARN", CHORUS_LOG_WARN},   {"INFO", CHORUS_LOG_INFO},
               {"ABORT", CHORUS_LOG_ABORT}, {"TRACE", CHORUS_LOG_TRACE}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(s, names[i].name) == 0) return names[i].level;
  return CHORUS_LOG_WARN;
}

static uint32_t parse_subsys(const char *s) {
  static const struct {
    const char *name;
    uint32_t bit;
  } names[] = {{"INIT", CHORUS_INIT},
               {"COLL", CHORUS_COLL},
               {"P2P", CHORUS_P2P},
               {"SHM", CHORUS_SHM},
               {"NET", CHORUS_NET},
               {"GRAPH", CHORUS_GRAPH},
               {"TUNING", CHORUS_TUNING},
               {"ENV", CHORUS_ENV},
               {"ALLOC", CHORUS_ALLOC},
               {"CALL", CHORUS_CALL},
               {"PROXY", CHORUS_PROXY},
               {"NVLS", CHORUS_NVLS},
               {"BOOTSTRAP", CHORUS_BOOTSTRAP},
               {"REG", CHORUS_REG},
               {"PROFILE", CHORUS_PROFILE},
               {"RAS", CHORUS_RAS},
               {"ALL", CHORUS_ALL}};
  if (!s) return CHORUS_INIT | CHORUS_BOOTSTRAP | CHORUS_ENV;
  int invert = 0;
  if (*s == '^') {
    invert = 1;
    s++;
  }
  uint32_t mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strcasecmp(tok, names[i].name) == 0) mask |= names[i].bit;
  }
  return invert ? ~mask : mask;
}

/* Expands %h and %p (hostname set). */
static void expand_path(const char *pattern, int pid, char *out, size_t size) {
  size_t o = 0;
  for (const char *p = pattern; *p && o + 1 < size; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      int n = p[1] == 'h' ? snprintf(out + o, size - o, "%s", hostname)
                          : snprintf(out + o, size - o, "%d", pid);
      if (n < 0) break;
      o += (size_t)n < size - o ? (size_t)n : size - o - 1;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

static void init_locked(void) {
  if (__atomic_load_n(&chorus_log_level_cur, __ATOMIC_RELAXED) >= 0) return;
  if (!hostname[0]) {
    if (gethostname(hostname, sizeof hostname - 1) != 0) snprintf(hostname, sizeof hostname, "?");
    char *dot = strchr(hostname, '.');
    if (dot) *dot = '\0';
  }
  __atomic_store_n(&chorus_log_mask_cur, parse_subsys(chorus_param_str(CHORUS_P_DEBUG_SUBSYS)),
                   __ATOMIC_RELAXED);
  const char *file = chorus_param_str(CHORUS_P_DEBUG_FILE);
  if (file && *file) {
    char path[4096];
    expand_path(file, (int)getpid(), path, sizeof path);
    FILE *f = fopen(path, "w");
    if (f) {
      setvbuf(f, NULL, _IOLBF, 0);
      log_file = f;
    }
  }
  __atomic_store_n(&chorus_log_level_cur, parse_level(chorus_param_str(CHORUS_P_DEBUG)),
                   __ATOMIC_RELEASE);
}

void chorus_log_init(void) {
  pthread_mutex_lock(&log_lock);
  init_locked();
  pthread_mutex_unlock(&log_lock);
}

void chorus_log_expand_path(const char *pattern, char *out, size_t size) {
  chorus_log_expand_path_for(pattern, (int)getpid(), out, size);
}

void chorus_log_expand_path_for(const char *pattern, int pid, char *out, size_t size) {
  pthread_mutex_lock(&log_lock);
  init_locked();
  expand_path(pattern, pid, out, size);
  pthread_mutex_unlock(&log_lock);
}

void chorus_log_reset(void) {
  pthread_mutex_lock(&log_lock);
  if (log_file) fclose(log_file);
  log_file = NULL;
  __atomic_store_n(&chorus_log_level_cur, -1, __ATOMIC_RELEASE);
  init_locked();
  pthread_mutex_unlock(&log_lock);
}

const char *chorus_log_hostname(void) {
  if (__atomic_load_n(&chorus_log_level_cur, __ATOMIC_ACQUIRE) < 0) chorus_log_init();
  return hostname;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

void chorus_vlog(chorus_log_level level, uint32_t subsys, const char *file, int line,
                 const char *fmt, va_list ap) {
  if (!chorus_log_on((int)level, level >= CHORUS_LOG_INFO ? subsys : CHORUS_ALL)) return;
  char buf[2048];
  int tid = (int)syscall(SYS_gettid);
  char rank[16] = "-";
  if (chorus_log_tls.rank >= 0) snprintf(rank, sizeof rank, "%d", chorus_log_tls.rank);
  static const char *const names[] = {"", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
  int n;
  if (level == CHORUS_LOG_WARN)
    n = snprintf(buf, sizeof buf, "%s:%d:%d [%s] %s:%d NCCL WARN ", hostname, (int)getpid(), tid,
                 rank, base_name(file), line);
  else if (level == CHORUS_LOG_VERSION)
    n = snprintf(buf, sizeof buf, "%s:%d:%d [%s] NCCL ", hostname, (int)getpid(), tid, rank);
  else
    n = snprintf(buf, sizeof buf, "%s:%d:%d [%s] NCCL %s ", hostname, (int)getpid(), tid, rank,
                 names[level]);
  if (n < 0) return;
  if ((size_t)n < sizeof buf) {
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if (m > 0) n += m;
  }
  if ((size_t)n >= sizeof buf - 1) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  pthread_mutex_lock(&log_lock);
  FILE *out = log_file ? log_file : stdout;
  fwrite(buf, 1, (size_t)n, out);
  fflush(out);
  pthread_mutex_unlock(&log_lock);
}

void chorus_vlog_plugin(int level, unsigned long flags, const char *file, int line, const char *fmt,
                        va_list ap) {
  if (level <= CHORUS_LOG_NONE || level > CHORUS_LOG_TRACE || !fmt) return;
  chorus_vlog((chorus_log_level)level, (uint32_t)flags, file ? file : "plugin", line, fmt, ap);
}

void chorus_log_plugin(int level, unsigned long flags, const char *file, int line, const char *fmt,
                       ...) {
  va_list ap;
  va_start(ap, fmt);
  chorus_vlog_plugin(level, flags, file, line, fmt, ap);
  va_end(ap);
}

void chorus_log(chorus_log_level level, uint32_t subsys, const char *file, int line,
                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  chorus_vlog(level, subsys, file, line, fmt, ap);
  va_end(ap);
}

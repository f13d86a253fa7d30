/*
 * test_log.c - NCCL-style logging: level and subsystem filters, the line
 * prefix, NCCL_DEBUG_FILE with %h and %p, and chorus_error recording the
 * last error with the rank context.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "util/check.h"
#include "util/log.h"

static char path[128], pattern[128];

static char *slurp(void) {
  static char buf[8192];
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void filters_and_file(void) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET,TUNING", 1);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  chorus_log_reset();
  INFO(CHORUS_INIT, "hidden init line");
  INFO(CHORUS_NET, "visible net line %d", 7);
  TRACE(CHORUS_NET, "hidden trace line");
  chorus_log_ctx old = chorus_log_ctx_set((chorus_log_ctx){3, 8, NULL, 0});
  WARN("visible warning");
  chorus_log_ctx_set(old);
  char *text = slurp();
  REQUIRE(text != NULL);
  EXPECT(strstr(text, "visible net line 7") != NULL);
  EXPECT(strstr(text, "hidden") == NULL);
  char prefix[64];
  snprintf(prefix, sizeof prefix, ":%d:", (int)getpid());
  EXPECT(strstr(text, prefix) != NULL);
  EXPECT(strstr(text, "[3] test_log.c:") != NULL);
  EXPECT(strstr(text, "NCCL WARN visible warning") != NULL);
  EXPECT(strstr(text, "NCCL INFO visible net line") != NULL);
  /* ^ excludes. */
  setenv("NCCL_DEBUG_SUBSYS", "^NET", 1);
  chorus_log_reset();
  INFO(CHORUS_NET, "excluded net line");
  INFO(CHORUS_INIT, "included init line");
  text = slurp();
  EXPECT(strstr(text, "excluded") == NULL && strstr(text, "included init line") != NULL);
  setenv("NCCL_DEBUG", "NONE", 1);
  chorus_log_reset();
  WARN("silenced warning");
  text = slurp();
  EXPECT(text && strstr(text, "silenced") == NULL);
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG");
  chorus_log_reset();
}

static void last_error(void) {
  char buf[256] = "";
  chorus_log_ctx old = chorus_log_ctx_set((chorus_log_ctx){1, 4, buf, sizeof buf});
  setenv("NCCL_DEBUG", "NONE", 1);
  chorus_log_reset();
  EXPECT(chorus_error(ncclInvalidArgument, "argument %s is bad", "x") == ncclInvalidArgument);
  chorus_log_ctx_set(old);
  EXPECT(strstr(buf, "rank 1 of 4") && strstr(buf, "argument x is bad"));
  EXPECT(strstr(chorus_last_error(NULL), "argument x is bad") != NULL);
  EXPECT(strstr(chorus_last_error(buf), "rank 1 of 4") != NULL);
  unsetenv("NCCL_DEBUG");
  chorus_log_reset();
}

int main(void) {
  char host[64];
  gethostname(host, sizeof host);
  char *dot = strchr(host, '.');
  if (dot) *dot = '\0';
  snprintf(pattern, sizeof pattern, "/tmp/chorus-log-%%h-%%p.txt");
  snprintf(path, sizeof path, "/tmp/chorus-log-%s-%d.txt", host, (int)getpid());
  RUN(filters_and_file);
  RUN(last_error);
  unlink(path);
  return unit_report();
}

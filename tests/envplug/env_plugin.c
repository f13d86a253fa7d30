/*
 * env_plugin.c - an environment plugin as a third party writes one
 * (ncclEnvPlugin_v1), depending only on nccl.h and libc. What it does
 * comes from the real environment, read at init:
 *   ENVPLUG_VALUES  NAME=value;NAME=value...: its answers
 *   ENVPLUG_HIDE    1: names it has no answer for are unset (else it
 *                   answers from the environment, as NCCL's own does)
 *   ENVPLUG_LOG     a file it appends its init, finalize and every name
 *                   it was asked for to
 *   ENVPLUG_FAIL    init: its init returns ncclInternalError
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

#define MAXV 16

static char names[MAXV][64], values[MAXV][256];
static int nvalues, hide;
static const char *log_path;

static void log_line(const char *what, const char *arg) {
  if (!log_path) return;
  char line[512];
  const int n = snprintf(line, sizeof line, "%s %s\n", what, arg);
  const int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  if (n > 0) (void)!write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  close(fd);
}

static ncclResult_t init(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix) {
  log_path = getenv("ENVPLUG_LOG");
  char v[64];
  snprintf(v, sizeof v, "%u.%u.%u suffix '%s'", major, minor, patch, suffix ? suffix : "(null)");
  log_line("init", v);
  const char *fail = getenv("ENVPLUG_FAIL");
  if (fail && !strcmp(fail, "init")) return ncclInternalError;
  const char *h = getenv("ENVPLUG_HIDE");
  hide = h && !strcmp(h, "1");
  const char *all = getenv("ENVPLUG_VALUES");
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", all ? all : "");
  char *save = NULL;
  for (char *kv = strtok_r(buf, ";", &save); kv && nvalues < MAXV;
       kv = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq) continue;
    *eq = 0;
    snprintf(names[nvalues], sizeof names[nvalues], "%s", kv);
    snprintf(values[nvalues], sizeof values[nvalues], "%s", eq + 1);
    nvalues++;
  }
  return ncclSuccess;
}

static ncclResult_t finalize(void) {
  log_line("finalize", "-");
  return ncclSuccess;
}

static const char *get_env(const char *name) {
  log_line("get", name);
  for (int i = 0; i < nvalues; i++)
    if (!strcmp(names[i], name)) return values[i];
  return hide ? NULL : getenv(name);
}

typedef struct {
  const char *name;
  ncclResult_t (*init)(uint8_t, uint8_t, uint8_t, const char *);
  ncclResult_t (*finalize)(void);
  const char *(*get_env)(const char *);
} env_v1;

__attribute__((visibility("default")))
const env_v1 ncclEnvPlugin_v1 = {"testenv", init, finalize, get_env};

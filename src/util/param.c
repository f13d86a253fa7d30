/*
 * param.c - the one place that reads environment variables and the NCCL
 * config file. See param_table.h for the list.
 */
#include "util/param.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static const chorus_param_desc table[CHORUS_P_COUNT] = {
#define CHORUS_PARAM_DEF_INT(def) (int64_t)(def), NULL
#define CHORUS_PARAM_DEF_STR(def) 0, (def)
#define CHORUS_PARAM(id, name, type, def, doc)                                                     \
  [CHORUS_P_##id] = {name, CHORUS_PARAM_##type, CHORUS_PARAM_DEF_##type(def), doc},
#include "util/param_table.h"
#undef CHORUS_PARAM
};

/* Values found in the config file; loaded once, kept for the process. */
static char *conf_values[CHORUS_P_COUNT];
static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

const chorus_param_desc *chorus_param_desc_get(chorus_param_id id) {
  return (id >= 0 && id < CHORUS_P_COUNT) ? &table[id] : NULL;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
  return s;
}

/* Reads NAME=value lines; '#' starts a comment. The first file to set a
 * variable wins, so the user's file beats /etc/nccl.conf. */
static void load_conf_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq = '\0';
    const char *name = trim(line);
    const char *value = trim(eq + 1);
    for (int i = 0; i < CHORUS_P_COUNT; i++) {
      if (strcmp(table[i].name, name) == 0 && conf_values[i] == NULL) {
        conf_values[i] = strdup(value);
        break;
      }
    }
  }
  fclose(f);
}

static void load_conf(void) {
  const char *path = getenv(table[CHORUS_P_CONF_FILE].name);
  if (path && *path) {
    load_conf_file(path);
  } else {
    const char *home = getenv("HOME");
    if (home) {
      char buf[4096];
      snprintf(buf, sizeof buf, "%s/.nccl.conf", home);
      load_conf_file(buf);
    }
  }
  load_conf_file("/etc/nccl.conf");
}

const char *chorus_param_raw(chorus_param_id id) {
  if (id < 0 || id >= CHORUS_P_COUNT) return NULL;
  const char *v = getenv(table[id].name);
  if (v) return v;
  pthread_once(&conf_once, load_conf);
  return conf_values[id];
}

int64_t chorus_param_int(chorus_param_id id) {
  const char *v = chorus_param_raw(id);
  if (!v || !*v) return table[id].def_int;
  errno = 0;
  char *end = NULL;
  long long x = strtoll(v, &end, 0);
  while (end && isspace((unsigned char)*end)) end++;
  if (errno || end == v || (end && *end)) {
    WARN("%s=\"%s\" is not an integer; using the default %lld", table[id].name, v,
         (long long)table[id].def_int);
    return table[id].def_int;
  }
  return (int64_t)x;
}

const char *chorus_param_str(chorus_param_id id) {
  const char *v = chorus_param_raw(id);
  return v ? v : table[id].def_str;
}

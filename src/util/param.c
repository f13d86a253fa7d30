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
#include <strings.h>

#include "util/envplug.h"
#include "util/log.h"
#include "util/units.h"

#define AUTO  CHORUS_PARAM_AUTO
#define OFF   CHORUS_PARAM_OFF
#define AGREE CHORUS_PARAM_AGREE
static const chorus_param_desc table[CHORUS_P_COUNT] = {
#define CHORUS_PARAM(id, name, type, def, flags, doc)                                              \
  [CHORUS_P_##id] = {name, CHORUS_PARAM_##type, def, flags, doc},
#define CHORUS_PARAM_GROUP(title)
#include "util/param_table.h"
#undef CHORUS_PARAM
#undef CHORUS_PARAM_GROUP
};

/* The table again, sections included, in order: a section's title names
 * the variables after it. */
static const char *const sections[] = {
#define CHORUS_PARAM(id, name, type, def, flags, doc) NULL,
#define CHORUS_PARAM_GROUP(title)                     title,
#include "util/param_table.h"
#undef CHORUS_PARAM
#undef CHORUS_PARAM_GROUP
};

const char *chorus_param_group(chorus_param_id id) {
  const char *group = "";
  int k = 0;
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    if (sections[i]) {
      group = sections[i];
    } else if (k++ == (int)id) {
      return group;
    }
  }
  return "";
}

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

int chorus_param_conf_line(char *line, const char **name, const char **value) {
  char *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  char *eq = strchr(line, '=');
  if (!eq) return -1;
  *eq = '\0';
  *name = trim(line);
  *value = trim(eq + 1);
  return **name ? 0 : -1;
}

/* Reads NAME=value lines. The first file to set a variable wins, so the
 * user's file beats /etc/nccl.conf. */
static void load_conf_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    const char *name, *value;
    if (chorus_param_conf_line(line, &name, &value) != 0) continue;
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

/* An environment plugin (util/envplug.h) is looked for at the first read;
 * NCCL_ENV_PLUGIN itself comes from the environment. */
static pthread_once_t envplug_once = PTHREAD_ONCE_INIT;
static void load_envplug(void) {
  chorus_envplug_load(getenv(table[CHORUS_P_ENV_PLUGIN].name));
}

void chorus_param_env_report(void) {
  pthread_once(&envplug_once, load_envplug);
  chorus_envplug_report();
}

const char *chorus_param_raw(chorus_param_id id) {
  if (id < 0 || id >= CHORUS_P_COUNT) return NULL;
  const char *v = NULL;
  if (id == CHORUS_P_ENV_PLUGIN || id == CHORUS_P_CONF_FILE) {
    v = getenv(table[id].name);
  } else {
    pthread_once(&envplug_once, load_envplug);
    if (!chorus_envplug_get(table[id].name, &v)) v = getenv(table[id].name);
  }
  if (v) return v;
  pthread_once(&conf_once, load_conf);
  return conf_values[id];
}

static int word(const char *v, const char *w) {
  return strcasecmp(v, w) == 0;
}

/* A whole number, decimal or 0x hex: 0 with *out, or -1 (special values
 * are words, so nothing negative). */
static int whole(const char *v, int64_t *out) {
  errno = 0;
  char *end = NULL;
  const long long x = strtoll(v, &end, 0);
  if (errno || end == v || *end || x < 0) return -1;
  *out = (int64_t)x;
  return 0;
}

int chorus_param_parse(const chorus_param_desc *d, const char *text, int64_t *out) {
  if (d->type == CHORUS_PARAM_STR) return -1;
  while (isspace((unsigned char)*text)) text++;
  size_t len = strlen(text);
  while (len && isspace((unsigned char)text[len - 1])) len--;
  char v[64];
  if (len == 0 || len >= sizeof v) return -1;
  memcpy(v, text, len);
  v[len] = '\0';
  /* Numbers first: most values, and every hot path's, are. */
  if (d->type != CHORUS_PARAM_SIZE && isdigit((unsigned char)v[0])) {
    if (whole(v, out) != 0) return -1;
    return d->type == CHORUS_PARAM_BOOL && *out != 0 && *out != 1 ? -1 : 0;
  }
  if (word(v, "auto")) {
    if (!(d->flags & CHORUS_PARAM_AUTO)) return -1;
    *out = CHORUS_AUTO;
    return 0;
  }
  if (word(v, "off") || (d->type == CHORUS_PARAM_BOOL && (word(v, "no") || word(v, "false")))) {
    if (!(d->flags & CHORUS_PARAM_OFF) && d->type != CHORUS_PARAM_BOOL) return -1;
    *out = 0;
    return 0;
  }
  if (d->type == CHORUS_PARAM_BOOL) {
    if (word(v, "on") || word(v, "yes") || word(v, "true")) return *out = 1, 0;
    return -1;
  }
  if (d->type == CHORUS_PARAM_SIZE) {
    uint64_t b;
    if (chorus_size_parse(v, len, &b) != 0 || b > (uint64_t)INT64_MAX) return -1;
    *out = (int64_t)b;
    return 0;
  }
  return whole(v, out);
}

/* Defaults are parsed once (the table is constant; two threads that parse
 * one at once store the same value). */
static int64_t def_value[CHORUS_P_COUNT];
static unsigned char def_ready[CHORUS_P_COUNT];

static int64_t default_of(chorus_param_id id) {
  if (__atomic_load_n(&def_ready[id], __ATOMIC_ACQUIRE))
    return __atomic_load_n(&def_value[id], __ATOMIC_RELAXED);
  int64_t x;
  if (!table[id].def || chorus_param_parse(&table[id], table[id].def, &x) != 0) x = CHORUS_UNSET;
  __atomic_store_n(&def_value[id], x, __ATOMIC_RELAXED);
  __atomic_store_n(&def_ready[id], 1, __ATOMIC_RELEASE);
  return x;
}

/* A bad value is reported once per variable and process. */
static unsigned char warned[CHORUS_P_COUNT];

int64_t chorus_param_int(chorus_param_id id) {
  const chorus_param_desc *d = &table[id];
  int64_t x;
  const char *v = chorus_param_raw(id);
  if (v && *v) {
    if (chorus_param_parse(d, v, &x) == 0) return x;
    if (!__atomic_exchange_n(&warned[id], 1, __ATOMIC_RELAXED))
      WARN("%s=\"%s\" is not a valid %s%s%s; using the default %s", d->name, v,
           d->type == CHORUS_PARAM_BOOL   ? "on/off value"
           : d->type == CHORUS_PARAM_SIZE ? "size (4096, 512K, 2M, 1G)"
                                          : "whole number",
           d->flags & CHORUS_PARAM_AUTO ? " or auto" : "",
           d->flags & CHORUS_PARAM_OFF ? " or off" : "", d->def ? d->def : "(unset)");
  }
  return default_of(id);
}

const char *chorus_param_str(chorus_param_id id) {
  const char *v = chorus_param_raw(id);
  return v ? v : table[id].def;
}

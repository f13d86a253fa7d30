/*
 * envplug.c - see envplug.h.
 */
#include "util/envplug.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl.h"
#include "util/dl.h"
#include "util/log.h"

/* The interface, as NCCL 2.28's public ext-env description gives it. */
typedef struct env_v1 {
  const char *name;
  ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix);
  ncclResult_t (*finalize)(void);
  const char *(*get_env)(const char *name);
} env_v1;

/* A value handed out: the plugin may reuse its string at the next ask for
 * the same name, while a caller may still hold ours, so every distinct
 * answer is copied and kept for the life of the process. */
typedef struct answer {
  struct answer *next;
  char *name, *value;
} answer;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const env_v1 *plugin;
static answer *answers;
static char path[4096], said[640];
static int said_warn, reported;

static void finalize(void) {
  pthread_mutex_lock(&lock);
  if (plugin) (void)plugin->finalize();
  __atomic_store_n(&plugin, NULL, __ATOMIC_RELEASE);
  /* The answers stay: a thread still running may hold one. */
  pthread_mutex_unlock(&lock);
}

void chorus_envplug_load(const char *want) {
  if (want && !strcasecmp(want, "none")) return;
  char why[512] = "";
  void *h = chorus_dl_open_named("libnccl-env-", want && *want ? want : "libnccl-env.so", path,
                                 sizeof path, why, sizeof why);
  if (!h) {
    if (want && *want) {
      snprintf(said, sizeof said,
               "NCCL_ENV_PLUGIN=%s: cannot load it (%s); the environment "
               "applies",
               want, why);
      said_warn = 1;
    }
    return;
  }
  const env_v1 *t = dlsym(h, "ncclEnvPlugin_v1");
  ncclResult_t res = ncclSuccess;
  if (!t || !t->name || !t->init || !t->finalize || !t->get_env) {
    snprintf(said, sizeof said, "env plugin %s: %s; the environment applies", path,
             t ? "its ncclEnvPlugin_v1 table lacks a function or name"
               : "it exports no ncclEnvPlugin_v1 table");
  } else if ((res = t->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX)) != ncclSuccess) {
    snprintf(said, sizeof said, "env plugin %s (%s): init returned %d; the environment applies",
             path, t->name, (int)res);
  } else {
    __atomic_store_n(&plugin, t, __ATOMIC_RELEASE);
    snprintf(said, sizeof said,
             "env plugin %s (%s, ncclEnvPlugin_v1) answers for the "
             "environment",
             path, t->name);
    atexit(finalize);
    return;
  }
  said_warn = 1;
  dlclose(h);
}

int chorus_envplug_get(const char *name, const char **value) {
  if (!__atomic_load_n(&plugin, __ATOMIC_ACQUIRE)) return 0; /* the common case: no lock */
  pthread_mutex_lock(&lock);
  if (!plugin) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  const char *v = plugin->get_env(name);
  *value = NULL;
  for (answer *a = answers; a && v; a = a->next)
    if (!strcmp(a->name, name) && !strcmp(a->value, v)) *value = a->value;
  if (v && !*value) {
    answer *a = calloc(1, sizeof *a);
    if (a && (a->name = strdup(name)) && (a->value = strdup(v))) {
      a->next = answers;
      answers = a;
      *value = a->value;
    } else if (a) {
      free(a->name);
      free(a);
    }
  }
  pthread_mutex_unlock(&lock);
  return 1;
}

void chorus_envplug_report(void) {
  if (__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED) || !said[0]) return;
  if (said_warn)
    WARN("%s", said);
  else
    INFO(CHORUS_INIT | CHORUS_ENV, "%s", said);
}

/*
 * dl.c - see dl.h.
 */
#include "util/dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *chorus_dl_open_named(const char *prefix, const char *name, char *path, size_t len, char *why,
                           size_t whylen) {
  snprintf(path, len, "%s", name);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl) return dl;
  const char *e = dlerror();
  snprintf(why, whylen, "%s", e ? e : "not found");
  if (strchr(name, '/') || (strncmp(name, "lib", 3) == 0 && strstr(name, ".so"))) return NULL;
  snprintf(path, len, "%s%s.so", prefix, name);
  dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    e = dlerror();
    snprintf(why, whylen, "%s", e ? e : "not found");
  }
  return dl;
}

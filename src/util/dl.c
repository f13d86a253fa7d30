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

const void *chorus_dl_newest(void *h, const char *prefix, int newest, int oldest, int *version) {
  for (int v = newest; v >= oldest; v--) {
    char sym[64];
    snprintf(sym, sizeof sym, "%s%d", prefix, v);
    const void *t = dlsym(h, sym);
    if (t) {
      *version = v;
      return t;
    }
  }
  return NULL;
}

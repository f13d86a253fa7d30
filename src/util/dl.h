/*
 * dl.h - opening a plugin library by the name a user gives, as NCCL does.
 */
#ifndef CHORUS_UTIL_DL_H
#define CHORUS_UTIL_DL_H

#include <stddef.h>

/* dlopen (RTLD_NOW | RTLD_LOCAL) of `name` as given, then, for a bare name
 * (no '/', not already lib*.so), of PREFIX + name + ".so" (prefix
 * "libnccl-net-": libnccl-net-NAME.so). The path that opened goes to path;
 * on failure NULL, and why to why. */
void *chorus_dl_open_named(const char *prefix, const char *name, char *path, size_t len, char *why,
                           size_t whylen);

/* The newest versioned table h exports: the first of PREFIX<newest> down
 * to PREFIX<oldest> it has ("ncclTunerPlugin_v", 5, 2 looks for
 * ncclTunerPlugin_v5 .. _v2), with *version set; NULL when none. */
const void *chorus_dl_newest(void *h, const char *prefix, int newest, int oldest, int *version);

#endif

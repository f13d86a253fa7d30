/*
 * load.c - finding, loading and choosing a network plugin (netplug.h).
 *
 * The library in use is process-wide, as in NCCL: the first that loads,
 * answers, has a device and passes the checks serves every communicator
 * until the last closes it; then it is unloaded, and the next open reads
 * NCCL_NET_PLUGIN again. Every reason a plugin is passed over is logged:
 * a library that is not there at INFO (the default name is usually
 * absent), one that is there but fails at WARN.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "transport/plugin/plugin_impl.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/dl.h"
#include "util/log.h"
#include "util/param.h"

#define MAX_PLUGINS 14 /* NCCL's table holds 16, two of them its own networks */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static plugin_lib in_use; /* open while in_use.dl */

/* The newest table the library exports: 1, or 0 when it has none. */
static int find_table(plugin_lib *lib) {
  const void *t = chorus_dl_newest(lib->dl, "ncclNetPlugin_v", 11, 6, &lib->version);
  if (!t) return 0;
  memcpy(&lib->t, &t, sizeof t); /* every member of the union is this pointer */
  return 1;
}

/* Makes lib serve a communicator: init, devices, device 0's properties.
 * ncclSuccess with *out, or the reason it cannot (logged by the caller). */
static ncclResult_t start(plugin_lib *lib, uint64_t comm_id, int traffic_class, chorus_net **out,
                          char *why, size_t whylen) {
  chorus_net *n = chorus_calloc(1, sizeof *n);
  if (!n) {
    snprintf(why, whylen, "out of memory");
    return ncclSystemError;
  }
  n->lib = lib;
  n->config.trafficClass = traffic_class;
  ncclResult_t res = chorus_plugin_init(n, comm_id);
  if (res != ncclSuccess) {
    snprintf(why, whylen, "init failed (%s)", ncclGetErrorString(res));
    chorus_free(n);
    return res;
  }
  if (lib->ndev <= 0) {
    int ndev = 0;
    res = chorus_plugin_devices(lib, &ndev);
    if (res != ncclSuccess || ndev <= 0) {
      snprintf(why, whylen, "devices() %s",
               res != ncclSuccess ? ncclGetErrorString(res) : "reports no device");
      chorus_plugin_finalize(n);
      chorus_free(n);
      return res != ncclSuccess ? res : ncclSystemError;
    }
    lib->ndev = ndev;
  }
  chorus_net_props p;
  res = chorus_net_properties(n, 0, &p); /* WARNs its reason */
  if (res != ncclSuccess) {
    snprintf(why, whylen, "device 0 is not usable");
    chorus_plugin_finalize(n);
    chorus_free(n);
    return res;
  }
  *out = n;
  return ncclSuccess;
}

static void unload(plugin_lib *lib) {
  if (lib->dl) dlclose(lib->dl);
  memset(lib, 0, sizeof *lib);
}

/* Tries the library called name; 1 when it now serves (into *out). */
static int try_library(const char *name, uint64_t comm_id, int traffic_class, const char *want,
                       chorus_net **out) {
  plugin_lib lib;
  memset(&lib, 0, sizeof lib);
  char why[300];
  lib.dl = chorus_dl_open_named("libnccl-net-", name, lib.path, sizeof lib.path, why, sizeof why);
  if (!lib.dl) {
    INFO(CHORUS_INIT | CHORUS_NET, "NET/Plugin: no %s (%s)", name, why);
    return 0;
  }
  if (!find_table(&lib)) {
    WARN("NET/Plugin: %s exports no ncclNetPlugin_v11 .. _v6 table; not a network plugin this "
         "library can use",
         lib.path);
    unload(&lib);
    return 0;
  }
  const char *tname = chorus_plugin_table_name(&lib);
  snprintf(lib.name, sizeof lib.name, "%s", tname && tname[0] ? tname : "(unnamed)");
  if (want && strcasecmp(want, lib.name) != 0) {
    INFO(CHORUS_INIT | CHORUS_NET, "NET/Plugin: %s is network %s, not NCCL_NET=%s", lib.path,
         lib.name, want);
    unload(&lib);
    return 0;
  }
  in_use = lib; /* the tables point into it from here on */
  if (start(&in_use, comm_id, traffic_class, out, why, sizeof why) != ncclSuccess) {
    WARN("NET/Plugin: %s (network %s, ABI v%d): %s; not using it", in_use.path, in_use.name,
         in_use.version, why);
    unload(&in_use);
    return 0;
  }
  in_use.users = 1;
  INFO(CHORUS_INIT | CHORUS_NET, "NET/Plugin: using network %s from %s (ABI v%d, %d device(s))",
       in_use.name, in_use.path, in_use.version, in_use.ndev);
  return 1;
}

ncclResult_t chorus_net_open(uint64_t comm_id, int traffic_class, const char *want,
                             chorus_net **out) {
  *out = NULL;
  if (want && !want[0]) want = NULL;
  const int builtin = want && strcasecmp(want, "Socket") == 0;
  if (builtin) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&lock);
  if (in_use.dl) {
    char why[300];
    if (want && strcasecmp(want, in_use.name) != 0) {
      /* one external network per process: the one in use, or the built-in */
    } else if (start(&in_use, comm_id, traffic_class, out, why, sizeof why) == ncclSuccess) {
      in_use.users++;
    } else {
      WARN("NET/Plugin: %s (network %s): %s for this communicator", in_use.path, in_use.name, why);
    }
  } else {
    const char *list = chorus_param_str(CHORUS_P_NET_PLUGIN);
    char names[1024];
    snprintf(names, sizeof names, "%s", list ? list : "libnccl-net.so");
    if (list) INFO(CHORUS_INIT | CHORUS_NET, "NET/Plugin: NCCL_NET_PLUGIN=%s", list);
    if (strcasecmp(names, "none") != 0) {
      char *save = NULL;
      int tried = 0;
      for (char *name = strtok_r(names, ",", &save); name && !*out;
           name = strtok_r(NULL, ",", &save)) {
        if (++tried > MAX_PLUGINS) {
          INFO(CHORUS_INIT | CHORUS_NET,
               "NET/Plugin: more than %d plugins named; %s and after "
               "are not tried",
               MAX_PLUGINS, name);
          break;
        }
        (void)try_library(name, comm_id, traffic_class, want, out);
      }
    }
  }
  if (!*out && want) {
    const char *list = chorus_param_str(CHORUS_P_NET_PLUGIN);
    if (in_use.dl)
      res = chorus_error(ncclInvalidUsage,
                         "NCCL_NET=%s: this process already uses network %s (%s); one plugin "
                         "at a time, or the built-in Socket",
                         want, in_use.name, in_use.path);
    else
      res = chorus_error(ncclInvalidUsage,
                         "NCCL_NET=%s: no usable network of that name (the built-in one is "
                         "Socket; NCCL_NET_PLUGIN=%s)",
                         want, list ? list : "(unset: libnccl-net.so)");
  }
  pthread_mutex_unlock(&lock);
  return res;
}

void chorus_net_close(chorus_net *n) {
  if (!n) return;
  pthread_mutex_lock(&lock);
  chorus_plugin_finalize(n);
  if (n->lib == &in_use && --in_use.users <= 0) unload(&in_use);
  pthread_mutex_unlock(&lock);
  chorus_free(n);
}

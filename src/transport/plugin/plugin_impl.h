/*
 * plugin_impl.h - what load.c and adapt.c share: a loaded plugin library
 * and a communicator's use of it.
 */
#ifndef CHORUS_TRANSPORT_PLUGIN_IMPL_H
#define CHORUS_TRANSPORT_PLUGIN_IMPL_H

#include "transport/plugin/ext_net.h"
#include "transport/plugin/netplug.h"

/* One library, open while a communicator uses it. */
typedef struct plugin_lib {
  void *dl;
  char path[256];
  int version; /* 6..11 */
  union {
    const ncclNet_v6_t *v6;
    const ncclNet_v7_t *v7;
    const ncclNet_v8_t *v8;
    const ncclNet_v9_t *v9;
    const ncclNet_v10_t *v10;
    const ncclNet_v11_t *v11;
  } t;
  char name[64]; /* the table's, checked */
  int users;     /* communicators that opened it */
  int inited;    /* versions 6-10: their one init happened */
  int ndev;
} plugin_lib;

struct chorus_net {
  plugin_lib *lib;
  void *ctx; /* version 11: what init returned */
  ncclNetCommConfig_v10_t config;
};

/* The version's init for one communicator (version 11: every time; the
 * others: the first only), and its finalize. */
ncclResult_t chorus_plugin_init(chorus_net *n, uint64_t comm_id);
void chorus_plugin_finalize(chorus_net *n);
/* The table's name and devices() through its version. */
const char *chorus_plugin_table_name(const plugin_lib *lib);
ncclResult_t chorus_plugin_devices(const plugin_lib *lib, int *ndev);

#endif

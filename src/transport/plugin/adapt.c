/*
 * adapt.c - the calls of netplug.h on each version of the plugin ABI.
 *
 * Members with one signature in every version go through CALL_ANY; the
 * others switch on the version and convert: sizes narrowed to int for
 * versions 6-8 (which NCCL limits to 1 GiB a message), the profiler
 * handles of versions 10-11 passed as NULL, version 10's connect given
 * the communicator's config, version 11's given its context, device
 * handles (7+) never asked for (the kernels never post to a network).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transport/plugin/plugin_impl.h"
#include "util/check.h"
#include "util/log.h"

#define V6_MAX_BYTES ((size_t)1 << 30)

_Static_assert(sizeof(ncclNet_v6_t) == 136, "ncclNet_v6_t layout");
_Static_assert(sizeof(ncclNet_v7_t) == 152, "ncclNet_v7_t layout");
_Static_assert(sizeof(ncclNet_v8_t) == 152, "ncclNet_v8_t layout");
_Static_assert(sizeof(ncclNet_v9_t) == 160, "ncclNet_v9_t layout");
_Static_assert(sizeof(ncclNet_v10_t) == 160, "ncclNet_v10_t layout");
_Static_assert(sizeof(ncclNet_v11_t) == 176, "ncclNet_v11_t layout");
_Static_assert(sizeof(ncclNetProperties_v6_t) == 48, "v6 properties");
_Static_assert(sizeof(ncclNetProperties_v7_t) == 56, "v7 properties");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "v8 properties");
_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "v9 properties");
_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "v11 properties");

#define CALL_ANY(lib, member, ...)                                                                 \
  ((lib)->version == 6    ? (lib)->t.v6->member(__VA_ARGS__)                                       \
   : (lib)->version == 7  ? (lib)->t.v7->member(__VA_ARGS__)                                       \
   : (lib)->version == 8  ? (lib)->t.v8->member(__VA_ARGS__)                                       \
   : (lib)->version == 9  ? (lib)->t.v9->member(__VA_ARGS__)                                       \
   : (lib)->version == 10 ? (lib)->t.v10->member(__VA_ARGS__)                                      \
                          : (lib)->t.v11->member(__VA_ARGS__))

/* What a plugin logs, into Chorus's log (NCCL's levels and bits). */
static void plugin_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void plugin_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  chorus_vlog_plugin((int)level, flags, file, line, fmt, ap);
  va_end(ap);
}

static const chorus_net_prof *net_prof;

void chorus_net_prof_set(const chorus_net_prof *p) {
  __atomic_store_n(&net_prof, p, __ATOMIC_RELEASE);
}

/* NCCL's ncclProfilerCallback_t: type 0 starts an event under parent (the
 * phandle its message came with), 1 stops *ev, 2 updates it, 3 both. */
enum { NET_EV_START, NET_EV_STOP, NET_EV_UPDATE, NET_EV_UPDATE_STOP };

static ncclResult_t plugin_profile(void **ev, int type, void *parent, int64_t id, void *data) {
  const chorus_net_prof *p = __atomic_load_n(&net_prof, __ATOMIC_ACQUIRE);
  if (!ev) return ncclSuccess;
  if (type == NET_EV_START) {
    const chorus_step_ref *ref = parent;
    *ev = p && ref && ref->step ? p->start(ref, id, data) : NULL;
    return ncclSuccess;
  }
  if (!p || !*ev) return ncclSuccess;
  if (type == NET_EV_UPDATE || type == NET_EV_UPDATE_STOP) p->update(*ev, data);
  if (type == NET_EV_STOP || type == NET_EV_UPDATE_STOP) p->stop(*ev);
  return ncclSuccess;
}

const char *chorus_plugin_table_name(const plugin_lib *lib) {
  switch (lib->version) {
  case 6:
    return lib->t.v6->name;
  case 7:
    return lib->t.v7->name;
  case 8:
    return lib->t.v8->name;
  case 9:
    return lib->t.v9->name;
  case 10:
    return lib->t.v10->name;
  default:
    return lib->t.v11->name;
  }
}

ncclResult_t chorus_plugin_devices(const plugin_lib *lib, int *ndev) {
  return CALL_ANY(lib, devices, ndev);
}

ncclResult_t chorus_plugin_init(chorus_net *n, uint64_t comm_id) {
  plugin_lib *lib = n->lib;
  if (lib->version == 11)
    return lib->t.v11->init(&n->ctx, comm_id, &n->config, plugin_log, plugin_profile);
  if (lib->inited) return ncclSuccess; /* older versions are told once per process */
  ncclResult_t res = lib->version == 10  ? lib->t.v10->init(plugin_log, plugin_profile)
                     : lib->version == 9 ? lib->t.v9->init(plugin_log)
                     : lib->version == 8 ? lib->t.v8->init(plugin_log)
                     : lib->version == 7 ? lib->t.v7->init(plugin_log)
                                         : lib->t.v6->init(plugin_log);
  if (res == ncclSuccess) lib->inited = 1;
  return res;
}

void chorus_plugin_finalize(chorus_net *n) {
  /* Older versions have no finalize: NCCL never tells them either. */
  if (n->lib->version == 11 && n->lib->t.v11->finalize) (void)n->lib->t.v11->finalize(n->ctx);
  n->ctx = NULL;
}

/* Copies a plugin's C string (NULL: dflt), bounded. */
static void copy_str(char *dst, size_t len, const char *src, const char *dflt) {
  snprintf(dst, len, "%s", src ? src : dflt);
}

int chorus_net_props_adapt(int version, const void *raw, size_t raw_len, chorus_net_props *out,
                           char *err, size_t errlen) {
  /* The fields every version has, then what each adds; a version lacking
   * one gets what NCCL's adapters give it. */
  const char *name = NULL, *pci = NULL;
  int ptr = 0, reg_global = 0, flush = 0, speed = 0, port = 0, comms = 0, recvs = 0;
  int dtype = NCCL_NET_DEVICE_HOST, multi = 1;
  float lat = 0;
  uint64_t guid = 0;
  size_t p2p = V6_MAX_BYTES;
  static const size_t need[] = {
      [6] = sizeof(ncclNetProperties_v6_t),   [7] = sizeof(ncclNetProperties_v7_t),
      [8] = sizeof(ncclNetProperties_v8_t),   [9] = sizeof(ncclNetProperties_v9_t),
      [10] = sizeof(ncclNetProperties_v10_t), [11] = sizeof(ncclNetProperties_v11_t)};
  if (version < 6 || version > 11 || raw_len < need[version]) {
    snprintf(err, errlen, "ABI version %d properties of %zu bytes", version, raw_len);
    return -1;
  }
  /* The fields every version has, at its own places. */
#define COMMON(p)                                                                                  \
  (name = (p).name, pci = (p).pciPath, guid = (p).guid, ptr = (p).ptrSupport, speed = (p).speed,   \
   port = (p).port, lat = (p).latency, comms = (p).maxComms, recvs = (p).maxRecvs)
  switch (version) {
  case 6: {
    ncclNetProperties_v6_t p;
    memcpy(&p, raw, sizeof p);
    COMMON(p);
    break;
  }
  case 7: {
    ncclNetProperties_v7_t p;
    memcpy(&p, raw, sizeof p);
    COMMON(p);
    dtype = (int)p.netDeviceType;
    break;
  }
  case 8: {
    ncclNetProperties_v8_t p;
    memcpy(&p, raw, sizeof p);
    COMMON(p);
    dtype = (int)p.netDeviceType, reg_global = p.regIsGlobal;
    break;
  }
  case 9:
  case 10: {
    ncclNetProperties_v9_t p;
    memcpy(&p, raw, sizeof p);
    COMMON(p);
    dtype = (int)p.netDeviceType, reg_global = p.regIsGlobal, flush = p.forceFlush;
    p2p = p.maxP2pBytes;
    break;
  }
  default: {
    ncclNetProperties_v11_t p;
    memcpy(&p, raw, sizeof p);
    COMMON(p);
    dtype = (int)p.netDeviceType, reg_global = p.regIsGlobal, flush = p.forceFlush;
    p2p = p.maxP2pBytes, multi = p.maxMultiRequestSize;
    break;
  }
  }
#undef COMMON
  memset(out, 0, sizeof *out);
  copy_str(out->name, sizeof out->name, name, "(unnamed)");
  copy_str(out->pci_path, sizeof out->pci_path, pci, "");
  if (!(ptr & NCCL_PTR_HOST)) {
    snprintf(err, errlen, "device %s takes no host memory (ptrSupport %#x)", out->name,
             (unsigned)ptr);
    return -1;
  }
  if (dtype != NCCL_NET_DEVICE_HOST) {
    snprintf(err, errlen,
             "device %s offloads to the GPU (netDeviceType %d), which Chorus does "
             "not drive",
             out->name, dtype);
    return -1;
  }
  if (recvs < 1 || comms < 1) {
    snprintf(err, errlen, "device %s reports maxRecvs %d, maxComms %d", out->name, recvs, comms);
    return -1;
  }
  if (p2p == 0 || p2p > ((size_t)1 << 40)) {
    snprintf(err, errlen, "device %s reports maxP2pBytes %zu", out->name, p2p);
    return -1;
  }
  out->guid = guid;
  out->ptr_support = ptr & (NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
  out->speed_mbps = speed > 0 ? speed : 10000; /* NCCL's guess when a link does not say */
  out->port = port;
  out->latency_us = isfinite(lat) && lat >= 0 ? lat : 0;
  out->max_comms = comms;
  out->max_recvs = recvs < CHORUS_NET_MAX_RECVS ? recvs : CHORUS_NET_MAX_RECVS;
  out->force_flush = flush != 0;
  out->reg_is_global = reg_global != 0;
  out->max_p2p_bytes = version <= 8 && p2p > V6_MAX_BYTES ? V6_MAX_BYTES : p2p;
  out->max_multi_request = multi > 0 ? multi : 1;
  return 0;
}

const char *chorus_net_name(const chorus_net *n) {
  return n->lib->name;
}

int chorus_net_version(const chorus_net *n) {
  return n->lib->version;
}

const char *chorus_net_path(const chorus_net *n) {
  return n->lib->path;
}

int chorus_net_ndev(const chorus_net *n) {
  return n->lib->ndev;
}

ncclResult_t chorus_net_properties(chorus_net *n, int dev, chorus_net_props *p) {
  const plugin_lib *lib = n->lib;
  if (dev < 0 || dev >= lib->ndev)
    return chorus_error(ncclInvalidArgument, "NET/%s: no device %d (it has %d)", lib->name, dev,
                        lib->ndev);
  union {
    ncclNetProperties_v6_t v6;
    ncclNetProperties_v7_t v7;
    ncclNetProperties_v8_t v8;
    ncclNetProperties_v9_t v9;
    ncclNetProperties_v11_t v11;
  } raw;
  memset(&raw, 0, sizeof raw);
  ncclResult_t res;
  switch (lib->version) {
  case 6:
    res = lib->t.v6->getProperties(dev, &raw.v6);
    break;
  case 7:
    res = lib->t.v7->getProperties(dev, &raw.v7);
    break;
  case 8:
    res = lib->t.v8->getProperties(dev, &raw.v8);
    break;
  case 9:
    res = lib->t.v9->getProperties(dev, &raw.v9);
    break;
  case 10:
    res = lib->t.v10->getProperties(dev, &raw.v9);
    break;
  default:
    res = lib->t.v11->getProperties(dev, &raw.v11);
    break;
  }
  if (res != ncclSuccess)
    return chorus_error(res, "NET/%s: getProperties(%d) failed (%s)", lib->name, dev,
                        ncclGetErrorString(res));
  char why[192];
  if (chorus_net_props_adapt(lib->version, &raw, sizeof raw, p, why, sizeof why) != 0)
    return chorus_error(ncclInvalidUsage, "NET/%s (%s, v%d): %s", lib->name, lib->path,
                        lib->version, why);
  return ncclSuccess;
}

ncclResult_t chorus_net_listen(chorus_net *n, int dev, void *handle, void **listen_comm) {
  const plugin_lib *lib = n->lib;
  *listen_comm = NULL;
  memset(handle, 0, CHORUS_NET_HANDLE_BYTES);
  switch (lib->version) {
  case 6:
    return lib->t.v6->listen(dev, handle, listen_comm);
  case 7:
    return lib->t.v7->listen(dev, handle, listen_comm);
  case 8:
    return lib->t.v8->listen(dev, handle, listen_comm);
  case 9:
    return lib->t.v9->listen(dev, handle, listen_comm);
  case 10:
    return lib->t.v10->listen(dev, handle, listen_comm);
  default:
    return lib->t.v11->listen(n->ctx, dev, handle, listen_comm);
  }
}

ncclResult_t chorus_net_connect(chorus_net *n, int dev, void *handle, void **send_comm) {
  const plugin_lib *lib = n->lib;
  *send_comm = NULL;
  switch (lib->version) {
  case 6:
    return lib->t.v6->connect(dev, handle, send_comm);
  case 7:
    return lib->t.v7->connect(dev, handle, send_comm, NULL);
  case 8:
    return lib->t.v8->connect(dev, handle, send_comm, NULL);
  case 9:
    return lib->t.v9->connect(dev, handle, send_comm, NULL);
  case 10:
    return lib->t.v10->connect(dev, &n->config, handle, send_comm, NULL);
  default:
    return lib->t.v11->connect(n->ctx, dev, handle, send_comm, NULL);
  }
}

ncclResult_t chorus_net_accept(chorus_net *n, void *listen_comm, void **recv_comm) {
  const plugin_lib *lib = n->lib;
  *recv_comm = NULL;
  switch (lib->version) {
  case 6:
    return lib->t.v6->accept(listen_comm, recv_comm);
  case 7:
    return lib->t.v7->accept(listen_comm, recv_comm, NULL);
  case 8:
    return lib->t.v8->accept(listen_comm, recv_comm, NULL);
  case 9:
    return lib->t.v9->accept(listen_comm, recv_comm, NULL);
  case 10:
    return lib->t.v10->accept(listen_comm, recv_comm, NULL);
  default:
    return lib->t.v11->accept(listen_comm, recv_comm, NULL);
  }
}

/* Versions 6-8 take int sizes; NCCL allows them 1 GiB a message. */
static ncclResult_t too_big(const plugin_lib *lib, const char *what, size_t size) {
  return chorus_error(ncclInternalError,
                      "NET/%s: %s of %zu bytes; a version %d plugin takes at most %zu", lib->name,
                      what, size, lib->version, V6_MAX_BYTES);
}

ncclResult_t chorus_net_reg(chorus_net *n, void *comm, void *data, size_t size, int type,
                            void **mhandle) {
  const plugin_lib *lib = n->lib;
  *mhandle = NULL;
  if (lib->version <= 7) {
    if (size > V6_MAX_BYTES) return too_big(lib, "a registration", size);
    return lib->version == 6 ? lib->t.v6->regMr(comm, data, (int)size, type, mhandle)
                             : lib->t.v7->regMr(comm, data, (int)size, type, mhandle);
  }
  switch (lib->version) {
  case 8:
    return lib->t.v8->regMr(comm, data, size, type, mhandle);
  case 9:
    return lib->t.v9->regMr(comm, data, size, type, mhandle);
  case 10:
    return lib->t.v10->regMr(comm, data, size, type, mhandle);
  default:
    return lib->t.v11->regMr(comm, data, size, type, mhandle);
  }
}

ncclResult_t chorus_net_dereg(chorus_net *n, void *comm, void *mhandle) {
  return CALL_ANY(n->lib, deregMr, comm, mhandle);
}

ncclResult_t chorus_net_isend(chorus_net *n, void *send_comm, void *data, size_t size, int tag,
                              void *mhandle, void *phandle, void **request) {
  const plugin_lib *lib = n->lib;
  *request = NULL;
  if (lib->version <= 8 && size > V6_MAX_BYTES) return too_big(lib, "a send", size);
  switch (lib->version) {
  case 6:
    return lib->t.v6->isend(send_comm, data, (int)size, tag, mhandle, request);
  case 7:
    return lib->t.v7->isend(send_comm, data, (int)size, tag, mhandle, request);
  case 8:
    return lib->t.v8->isend(send_comm, data, (int)size, tag, mhandle, request);
  case 9:
    return lib->t.v9->isend(send_comm, data, size, tag, mhandle, request);
  case 10:
    return lib->t.v10->isend(send_comm, data, size, tag, mhandle, phandle, request);
  default:
    return lib->t.v11->isend(send_comm, data, size, tag, mhandle, phandle, request);
  }
}

ncclResult_t chorus_net_iflush(chorus_net *n, void *recv_comm, int k, void **data, int *sizes,
                               void **mhandles, void **request) {
  *request = NULL;
  const plugin_lib *lib = n->lib;
  const int has = lib->version == 6    ? lib->t.v6->iflush != NULL
                  : lib->version == 7  ? lib->t.v7->iflush != NULL
                  : lib->version == 8  ? lib->t.v8->iflush != NULL
                  : lib->version == 9  ? lib->t.v9->iflush != NULL
                  : lib->version == 10 ? lib->t.v10->iflush != NULL
                                       : lib->t.v11->iflush != NULL;
  if (!has) return ncclSuccess; /* a network that needs no flush */
  return CALL_ANY(lib, iflush, recv_comm, k, data, sizes, mhandles, request);
}

ncclResult_t chorus_net_irecv(chorus_net *n, void *recv_comm, int k, void **data, size_t *sizes,
                              int *tags, void **mhandles, void **request) {
  const plugin_lib *lib = n->lib;
  *request = NULL;
  if (k < 1 || k > CHORUS_NET_MAX_RECVS)
    return chorus_error(ncclInternalError, "NET/%s: a receive of %d buffers", lib->name, k);
  void *phandles[CHORUS_NET_MAX_RECVS] = {NULL};
  if (lib->version >= 9) {
    switch (lib->version) {
    case 9:
      return lib->t.v9->irecv(recv_comm, k, data, sizes, tags, mhandles, request);
    case 10:
      return lib->t.v10->irecv(recv_comm, k, data, sizes, tags, mhandles, phandles, request);
    default:
      return lib->t.v11->irecv(recv_comm, k, data, sizes, tags, mhandles, phandles, request);
    }
  }
  int isizes[CHORUS_NET_MAX_RECVS];
  for (int i = 0; i < k; i++) {
    if (sizes[i] > V6_MAX_BYTES) return too_big(lib, "a receive", sizes[i]);
    isizes[i] = (int)sizes[i];
  }
  switch (lib->version) {
  case 6:
    return lib->t.v6->irecv(recv_comm, k, data, isizes, tags, mhandles, request);
  case 7:
    return lib->t.v7->irecv(recv_comm, k, data, isizes, tags, mhandles, request);
  default:
    return lib->t.v8->irecv(recv_comm, k, data, isizes, tags, mhandles, request);
  }
}

ncclResult_t chorus_net_test(chorus_net *n, void *request, int *done, int *sizes) {
  *done = 0;
  return CALL_ANY(n->lib, test, request, done, sizes);
}

ncclResult_t chorus_net_close_send(chorus_net *n, void *send_comm) {
  return send_comm ? CALL_ANY(n->lib, closeSend, send_comm) : ncclSuccess;
}

ncclResult_t chorus_net_close_recv(chorus_net *n, void *recv_comm) {
  return recv_comm ? CALL_ANY(n->lib, closeRecv, recv_comm) : ncclSuccess;
}

ncclResult_t chorus_net_close_listen(chorus_net *n, void *listen_comm) {
  return listen_comm ? CALL_ANY(n->lib, closeListen, listen_comm) : ncclSuccess;
}

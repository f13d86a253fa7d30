/*
 * netplug.h - the networks of NCCL's plugins (libnccl-net*.so: InfiniBand,
 * RoCE, EFA, libfabric ...), through one interface whatever version of
 * the plugin ABI (6 to 11, ext_net.h) a library speaks.
 *
 * Loading follows NCCL 2.28: NCCL_NET_PLUGIN is a comma list of names,
 * each tried as given and then as libnccl-net-NAME.so ("none": no
 * plugin); unset, libnccl-net.so. In each library the newest table wins
 * (ncclNetPlugin_v11 down to _v6). NCCL_NET (or the config's netName)
 * picks a network by its name. One external library is in use at a time
 * per process; it is unloaded when its last communicator closes it.
 *
 * Sizes are size_t here; the adapters narrow them for versions 6-8 (at
 * most 1 GiB a message, as NCCL allows them) and fill in what a version
 * lacks. Connect, accept, isend and irecv never block: a NULL result
 * means "not yet, call again". Errors are recorded with chorus_error.
 */
#ifndef CHORUS_TRANSPORT_PLUGIN_NETPLUG_H
#define CHORUS_TRANSPORT_PLUGIN_NETPLUG_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "transport/transport.h"

#define CHORUS_NET_HANDLE_BYTES 128 /* what listen writes for the peer's connect */
#define CHORUS_NET_MAX_RECVS    8   /* buffers in one grouped irecv, at most */

/* A device's properties, checked and in one shape. */
typedef struct chorus_net_props {
  char name[64];
  char pci_path[128];
  uint64_t guid;
  int ptr_support; /* NCCL_PTR_HOST | _CUDA | _DMABUF; HOST always */
  int speed_mbps;
  int port;
  float latency_us;
  int max_comms;
  int max_recvs; /* 1..CHORUS_NET_MAX_RECVS */
  int force_flush, reg_is_global;
  size_t max_p2p_bytes; /* the largest message */
  int max_multi_request;
} chorus_net_props;

typedef struct chorus_net chorus_net;

/* The plugin network a communicator uses: *out, or NULL when it is to
 * use the built-in one (no plugin, or none usable: each reason at INFO,
 * a plugin that fails at WARN). want: NCCL_NET's name, or NULL; a name
 * that is neither a usable plugin's nor "Socket" is ncclInvalidUsage.
 * comm_id and traffic_class go to a version 11 plugin's init. */
ncclResult_t chorus_net_open(uint64_t comm_id, int traffic_class, const char *want,
                             chorus_net **out);
/* Finalizes the communicator's part; unloads the library after its last. */
void chorus_net_close(chorus_net *n);

const char *chorus_net_name(const chorus_net *n);
int chorus_net_version(const chorus_net *n);
const char *chorus_net_path(const chorus_net *n);
int chorus_net_ndev(const chorus_net *n);
ncclResult_t chorus_net_properties(chorus_net *n, int dev, chorus_net_props *p);

ncclResult_t chorus_net_listen(chorus_net *n, int dev, void *handle, void **listen_comm);
ncclResult_t chorus_net_connect(chorus_net *n, int dev, void *handle, void **send_comm);
ncclResult_t chorus_net_accept(chorus_net *n, void *listen_comm, void **recv_comm);
ncclResult_t chorus_net_reg(chorus_net *n, void *comm, void *data, size_t size, int type,
                            void **mhandle);
ncclResult_t chorus_net_dereg(chorus_net *n, void *comm, void *mhandle);
/* phandle: a profiler's step for the message (chorus_step_ref), which a
 * plugin of version 10 or later hands back with events of its own; NULL. */
ncclResult_t chorus_net_isend(chorus_net *n, void *send_comm, void *data, size_t size, int tag,
                              void *mhandle, void *phandle, void **request);
/* k (1..max_recvs) buffers matched by tag, under one request. */
ncclResult_t chorus_net_irecv(chorus_net *n, void *recv_comm, int k, void **data, size_t *sizes,
                              int *tags, void **mhandles, void **request);
/* After a receive into device memory: makes what it wrote visible to the
 * GPU's kernels; *request NULL when nothing is to wait for. */
ncclResult_t chorus_net_iflush(chorus_net *n, void *recv_comm, int k, void **data, int *sizes,
                               void **mhandles, void **request);
/* *done, and once done the bytes each buffer received (k ints). */
ncclResult_t chorus_net_test(chorus_net *n, void *request, int *done, int *sizes);
ncclResult_t chorus_net_close_send(chorus_net *n, void *send_comm);
ncclResult_t chorus_net_close_recv(chorus_net *n, void *recv_comm);
ncclResult_t chorus_net_close_listen(chorus_net *n, void *listen_comm);

/* Properties raw as ABI version `version` lays them out (raw_len bytes)
 * into *out, checked: 0, or -1 with why in err (a plugin this library
 * cannot use). Pointers in raw are read as C strings. For the loader and
 * its fuzzer. */
int chorus_net_props_adapt(int version, const void *raw, size_t raw_len, chorus_net_props *out,
                           char *err, size_t errlen);

/* What a network plugin's own profiler events (NCCL's
 * ncclProfilerCallback_t) become: set by core while a profiler plugin is
 * loaded; NULL: they are dropped. start: under a step (a chorus_step_ref
 * of a message in flight), the plugin's event or NULL. */
typedef struct chorus_net_prof {
  void *(*start)(const chorus_step_ref *ref, int64_t id, void *data);
  void (*update)(void *ev, void *data);
  void (*stop)(void *ev);
} chorus_net_prof;
void chorus_net_prof_set(const chorus_net_prof *p);

#endif

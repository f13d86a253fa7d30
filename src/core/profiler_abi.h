/*
 * profiler_abi.h - NCCL's profiler plugin interface, versions 1 to 5, as
 * the plugins built for NCCL 2.28 expect it (written from NCCL's public
 * ext-profiler description; layouts for LP64, checked by static asserts).
 *
 * A plugin exports a table `ncclProfiler_vN`: its name, then init, start,
 * stop, record-state and finalize. Events are described by a descriptor
 * whose head is the same in every version (type, the parent's handle as
 * the plugin returned it, rank) followed by a union per event type; the
 * versions differ in the type's width, in which members exist, and in
 * whether function, type, algorithm and protocol are strings or codes.
 */
#ifndef CHORUS_CORE_PROFILER_ABI_H
#define CHORUS_CORE_PROFILER_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"

/* Event types (bits of the activation mask). */
enum {
  PROF_GROUP = 1 << 0,
  PROF_COLL = 1 << 1,
  PROF_P2P = 1 << 2,
  PROF_PROXY_OP = 1 << 3,
  PROF_PROXY_STEP = 1 << 4,
  PROF_PROXY_CTRL = 1 << 5,
  PROF_KERNEL_CH = 1 << 6,
  PROF_NET_PLUGIN = 1 << 7,
  PROF_GROUP_API = 1 << 8,
  PROF_COLL_API = 1 << 9,
  PROF_P2P_API = 1 << 10,
  PROF_KERNEL_LAUNCH = 1 << 11,
};

/* Event states used here. */
#define PROF_STATE_PROXY_OP_IN_PROGRESS 19 /* versions 4 and 5 */
#define PROF_STATE_CTRL_IDLE            13
#define PROF_STATE_CTRL_ACTIVE          14
#define PROF_STATE_CTRL_SLEEP           15
#define PROF_STATE_CTRL_WAKEUP          16
#define PROF_STATE_CTRL_APPEND          17
#define PROF_STATE_CTRL_APPEND_END      18
#define PROF_STATE_STEP_SEND_GPU_WAIT   8
#define PROF_STATE_STEP_SEND_PEER_WAIT  20 /* versions 4 and 5 */
#define PROF_STATE_STEP_SEND_WAIT       9
#define PROF_STATE_STEP_RECV_WAIT       10
#define PROF_STATE_STEP_RECV_FLUSH_WAIT 11
#define PROF_STATE_STEP_RECV_GPU_WAIT   12
#define PROF_STATE_NET_PLUGIN_UPDATE    21
#define PROF_STATE_KERNEL_CH_STOP       22

/* The proxy events' members, the same in every version. */
typedef struct prof_proxy_op {
  pid_t pid;
  uint8_t channel;
  int peer;
  int nsteps;
  int chunk;
  int is_send;
} prof_proxy_op;

typedef struct prof_proxy_step {
  int step;
} prof_proxy_step;

/* A network plugin's own event (versions 3-5): its plugin id, its data. */
typedef struct prof_net_plugin {
  int64_t id;
  void *data;
} prof_net_plugin;

typedef void (*prof_logger_t)(int level, unsigned long flags, const char *file, int line,
                              const char *fmt, ...);

/* ---- version 5 ---- */
typedef struct prof_descr_v5 {
  uint64_t type;
  void *parent;
  int rank;
  union {
    struct {
      int graph_captured; /* a bool in a 4-byte slot */
      int depth;
    } group_api;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      int root;
      void *stream;
      uint8_t graph_captured;
    } coll_api;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      void *stream;
      uint8_t graph_captured;
    } p2p_api;
    struct {
      void *stream;
    } kernel_launch;
    struct {
      uint64_t seq;
      const char *func;
      const void *send;
      void *recv;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nchannels, nwarps;
      const char *algo, *proto;
      void *parent_group;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nchannels;
      void *parent_group;
    } p2p;
    prof_proxy_op proxy_op;
    prof_proxy_step proxy_step;
    prof_net_plugin net_plugin;
    struct {
      uint8_t channel;
      uint64_t ptimer;
    } kernel_ch;
  };
} prof_descr_v5;

typedef union prof_args_v45 {
  size_t trans_size;
  int appended;
  void *data;
  uint64_t ptimer;
} prof_args_v45;

typedef struct prof_v5 {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t comm_id, int *mask, const char *comm_name, int nnodes,
                       int nranks, int rank, prof_logger_t log);
  ncclResult_t (*start)(void *ctx, void **handle, prof_descr_v5 *d);
  ncclResult_t (*stop)(void *handle);
  ncclResult_t (*record)(void *handle, int state, prof_args_v45 *args);
  ncclResult_t (*finalize)(void *ctx);
} prof_v5;

/* ---- version 4: no API events; the type a byte ---- */
typedef struct prof_descr_v4 {
  uint8_t type;
  void *parent;
  int rank;
  union {
    struct {
      uint64_t seq;
      const char *func;
      const void *send;
      void *recv;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nchannels, nwarps;
      const char *algo, *proto;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nchannels;
    } p2p;
    prof_proxy_op proxy_op;
    prof_proxy_step proxy_step;
    prof_net_plugin net_plugin;
    struct {
      uint8_t channel;
      uint64_t ptimer;
    } kernel_ch;
  };
} prof_descr_v4;

typedef struct prof_v4 {
  const char *name;
  ncclResult_t (*init)(void **ctx, int *mask, const char *comm_name, uint64_t comm_hash, int nnodes,
                       int nranks, int rank, prof_logger_t log);
  ncclResult_t (*start)(void *ctx, void **handle, prof_descr_v4 *d);
  ncclResult_t (*stop)(void *handle);
  ncclResult_t (*record)(void *handle, int state, prof_args_v45 *args);
  ncclResult_t (*finalize)(void *ctx);
} prof_v4;

/* ---- versions 1-3: the communicator in every event; init takes the mask alone ---- */
typedef union prof_args_v123 {
  struct {
    size_t trans_size;
    int steps;
  } proxy_op;
  int appended;
} prof_args_v123;

typedef struct prof_descr_v3 {
  uint8_t type;
  void *parent;
  int rank;
  union {
    struct {
      const char *name;
      uint64_t comm_hash, seq;
      const char *func;
      const void *send;
      void *recv;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nchannels, nwarps;
      const char *algo, *proto;
    } coll;
    struct {
      const char *name;
      uint64_t comm_hash;
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
    } p2p;
    prof_proxy_op proxy_op;
    prof_proxy_step proxy_step;
    prof_net_plugin net_plugin;
    struct {
      uint8_t channel;
    } kernel_ch;
  };
} prof_descr_v3;

/* Version 2: version 3 with the bytes moved, before KernelCh existed. */
typedef struct prof_descr_v2 {
  uint8_t type;
  void *parent;
  int rank;
  union {
    struct {
      const char *name;
      uint64_t comm_hash, seq;
      const char *func;
      const void *send;
      void *recv;
      size_t count;
      int root;
      const char *datatype;
      size_t traffic_bytes;
      uint8_t nchannels, nwarps;
      const char *algo, *proto;
    } coll;
    struct {
      const char *name;
      uint64_t comm_hash;
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
    } p2p;
    prof_proxy_op proxy_op;
    prof_proxy_step proxy_step;
  };
} prof_descr_v2;

/* Version 1: codes instead of strings. */
typedef struct prof_descr_v1 {
  uint8_t type;
  void *parent;
  int rank;
  union {
    struct {
      const char *name;
      uint64_t comm_hash, seq;
      uint8_t func;
      const void *send;
      void *recv;
      size_t count;
      int root;
      uint8_t datatype;
      uint32_t op;
      size_t traffic_bytes;
      uint8_t nchannels, nwarps, algo, proto;
      int is_collnet, is_nvls;
    } coll;
    struct {
      const char *name;
      uint64_t comm_hash;
      uint8_t func;
      void *buff;
      uint8_t datatype;
      size_t count;
      int peer;
    } p2p;
    prof_proxy_op proxy_op;
    prof_proxy_step proxy_step;
  };
} prof_descr_v1;

/* Versions 1-3 share a table shape; the descriptor is the version's. */
typedef struct prof_v123 {
  const char *name;
  ncclResult_t (*init)(void **ctx, int *mask);
  ncclResult_t (*start)(void *ctx, void **handle, void *d);
  ncclResult_t (*stop)(void *handle);
  ncclResult_t (*record)(void *handle, int state, prof_args_v123 *args);
  ncclResult_t (*finalize)(void *ctx);
} prof_v123;

/* The layouts NCCL's plugins were compiled against. */
_Static_assert(sizeof(prof_descr_v5) == 112, "v5 descriptor");
_Static_assert(offsetof(prof_descr_v5, coll.parent_group) == 104, "v5 coll");
_Static_assert(offsetof(prof_descr_v5, coll.algo) == 88, "v5 coll algo");
_Static_assert(offsetof(prof_descr_v5, coll_api.graph_captured) == 64, "v5 collApi");
_Static_assert(offsetof(prof_descr_v5, p2p.parent_group) == 64, "v5 p2p");
_Static_assert(offsetof(prof_descr_v5, kernel_ch.ptimer) == 32, "v5 kernelCh");
_Static_assert(sizeof(prof_descr_v4) == 104, "v4 descriptor");
_Static_assert(offsetof(prof_descr_v4, coll.proto) == 96, "v4 coll");
_Static_assert(offsetof(prof_descr_v4, p2p.nchannels) == 60, "v4 p2p");
_Static_assert(sizeof(prof_descr_v3) == 120, "v3 descriptor");
_Static_assert(offsetof(prof_descr_v3, coll.proto) == 112, "v3 coll");
_Static_assert(sizeof(prof_descr_v2) == 128, "v2 descriptor");
_Static_assert(offsetof(prof_descr_v2, coll.proto) == 120, "v2 coll");
_Static_assert(sizeof(prof_descr_v1) == 120, "v1 descriptor");
_Static_assert(offsetof(prof_descr_v1, coll.is_nvls) == 112, "v1 coll");
_Static_assert(offsetof(prof_descr_v1, p2p.peer) == 72, "v1 p2p");
_Static_assert(offsetof(prof_descr_v5, proxy_op.is_send) == 44, "v5 proxyOp");
_Static_assert(offsetof(prof_descr_v4, proxy_op.is_send) == 44, "v4 proxyOp");
_Static_assert(offsetof(prof_descr_v1, proxy_op.is_send) == 44, "v1 proxyOp");
_Static_assert(offsetof(prof_descr_v5, net_plugin.data) == 32, "v5 netPlugin");
_Static_assert(offsetof(prof_descr_v3, net_plugin.data) == 32, "v3 netPlugin");
_Static_assert(sizeof(prof_args_v45) == 8 && sizeof(prof_args_v123) == 16, "state args");

#endif

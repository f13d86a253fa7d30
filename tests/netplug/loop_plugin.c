/*
 * loop_plugin.c - a real ext-net plugin over TCP on 127.0.0.1, written the
 * way a third party writes one: it sees only the ABI header and libc, never
 * Chorus itself. The same source is compiled once per interface version
 * (-DLOOP_VERSION=6..11) into libnccl-net-loopN.so, whose only exported
 * symbol is the table ncclNetPlugin_vN. Tests load these libraries to check
 * the loader and the adaptation of every version against a plugin that
 * actually moves bytes.
 *
 * Protocol. listen() binds a non-blocking socket to 127.0.0.1:0 and writes
 * {magic, port} into the 128-byte handle. connect() opens a non-blocking
 * connection and, once it is up, sends a hello {magic, version}; accept()
 * hands out the connection once that hello has arrived. Each message is a
 * header {magic, tag, size} followed by size bytes. Nothing ever blocks:
 * isend/irecv only queue a request and test() moves bytes with non-blocking
 * send/recv until the socket would block.
 *
 * Because connect() must return without a comm and be called again, the
 * connection in progress is remembered in the caller's copy of the handle,
 * as NCCL's own socket plugin does; NCCL keeps that handle while it retries.
 *
 * Knobs, for tests of the loader's failure paths: LOOP_FAIL_INIT=1 makes
 * init fail, LOOP_NDEV=0 reports no device, LOOP_NO_HOST=1 advertises
 * NCCL_PTR_CUDA only. They are read at each init.
 *
 * GPU memory, as a GPUDirect network takes it: LOOP_CUDA=1 advertises
 * NCCL_PTR_CUDA too and moves memory registered as CUDA through a host
 * bounce buffer with the CUDA runtime (found in the process, or loaded,
 * at the first comm), as a NIC would by DMA; LOOP_TRACE=1 logs each copy. Each
 * comm that moved some says how much when it closes (stderr); LOOP_CUDA=host
 * does the same with host memory standing in for the GPU's (memcpy), for
 * machines without one;
 * LOOP_CUDA_EXPECT=1 makes the process exit with status 3 at the close of
 * its last comm if none did, so a test sees a GPU transfer that never
 * reached the plugin.
 *
 * LOOP_CLOSE=late closes receive ends as aws-ofi-nccl 1.7.4 does: its close
 * frees the requests of receives still posted while libfabric keeps their
 * buffers, and a message that lands in one later is written into freed
 * memory (it crashed a later connect in the same process). Here such a
 * comm stays open on a list of orphans that every later call of the plugin
 * reads, and a message for one of its receives ends the process (abort,
 * with a line on stderr), so a caller that closes while its peers still
 * send is seen. An orphan goes when its peer closes; the close of the last
 * live comm waits up to LOOP_ORPHAN_WAIT_MS for that.
 */
#include <dlfcn.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/plugin/ext_net.h"

#if !defined(LOOP_VERSION) || LOOP_VERSION < 6 || LOOP_VERSION > 11
#error "compile with -DLOOP_VERSION=N, N from 6 to 11"
#endif

#define LOOP_CAT2(a, b) a##b
#define LOOP_CAT(a, b)  LOOP_CAT2(a, b)
#define LOOP_TABLE      LOOP_CAT(ncclNetPlugin_v, LOOP_VERSION)
#define LOOP_NET_T      LOOP_CAT(LOOP_CAT(ncclNet_v, LOOP_VERSION), _t)
#define LOOP_PROPS_T    LOOP_CAT(LOOP_CAT(ncclNetProperties_v, LOOP_VERSION), _t)

/* isend/irecv sizes became size_t in v9, regMr's in v8. */
#if LOOP_VERSION >= 9
typedef size_t loop_msg_size_t;
#else
typedef int loop_msg_size_t;
#endif
#if LOOP_VERSION >= 8
typedef size_t loop_mr_size_t;
#else
typedef int loop_mr_size_t;
#endif

#define LOOP_HANDLE_MAGIC 0x4c4f4f5048414e44ull /* "LOOPHAND" */
#define LOOP_HELLO_MAGIC  0x4c4f4f5048454c4cull /* "LOOPHELL" */
#define LOOP_MSG_MAGIC    0x4c4d5347u           /* "LMSG" */
#define LOOP_MR_MAGIC     0x4c4d5248u           /* "LMRH" */
#define LOOP_MAX_RECVS    4
#define LOOP_MAX_BYTES    (1ull << 30)

/* Written into the handle by listen() and read by connect() in the peer's
 * copy. `pending` is only ever set in the connecting side's copy: it is the
 * comm whose connection is in progress between connect() calls. */
struct loop_handle {
  uint64_t magic;
  uint16_t port;
  struct loop_comm *pending;
};
_Static_assert(sizeof(struct loop_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

/* First bytes on every connection, so accept() can tell a peer of ours from
 * a stray connection to the port. */
struct loop_hello {
  uint64_t magic;
  uint32_t version;
  uint32_t pad;
};

/* Precedes every message; `size` may be 0 (no bytes follow). */
struct loop_wire {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
};

enum { LOOP_REQ_SEND = 1, LOOP_REQ_RECV, LOOP_REQ_FLUSH };

/* What a send's profiler event (LOOP_PROF) carries: the layout of NCCL's
 * socket plugin events, version 1 (its ext-profiler's net_socket_v1.h, as
 * its example profiler reads them): a type byte (1: a socket operation),
 * then the socket, the operation (0: send) and the bytes. */
struct loop_sock_event {
  uint8_t type;
  struct {
    int fd;
    int op;
    size_t length;
  } sock;
};

/* One isend, irecv (up to LOOP_MAX_RECVS buffers) or iflush. Lives in its
 * comm's slot array from the call that posts it until test() reports it
 * done, so a comm never holds more than NCCL_NET_MAX_REQUESTS. */
struct loop_req {
  struct loop_comm *comm;
  int kind;
  int used, done;
  int n;
  char *data[LOOP_MAX_RECVS];
  size_t posted[LOOP_MAX_RECVS]; /* buffer sizes (send: the message size) */
  int tags[LOOP_MAX_RECVS];
  size_t got[LOOP_MAX_RECVS];   /* bytes of the matched message */
  int filled[LOOP_MAX_RECVS];   /* recv: whole message landed in buffer i */
  char *gpu[LOOP_MAX_RECVS];    /* CUDA memory: the caller's buffer (data[i] is a bounce) */
  void *pev;                    /* send, LOOP_PROF: its profiler event (v10 and later) */
  struct loop_sock_event pdesc; /* and what it says */
};

/* A send or receive end. Progress state for the message on the wire sits
 * here, not in the request, because one socket carries one message at a
 * time in order. */
struct loop_comm {
  int fd;
  int is_send;
  int connecting;    /* connect(): non-blocking connect not yet confirmed */
  ncclResult_t err;  /* sticky: once the stream is broken, it stays broken */
  int traffic_class; /* recorded only: loopback has no use for it */
  struct loop_hello hello;
  size_t hello_off;
  struct loop_req reqs[NCCL_NET_MAX_REQUESTS];
  int nused;
  /* Posting order of requests not yet done: completion follows it. */
  int fifo[NCCL_NET_MAX_REQUESTS];
  int fifo_head, fifo_count;
  /* The message in flight: its header, how much of it has moved, and
   * (receive side) the request buffer it was matched to. */
  struct loop_wire wire;
  size_t wire_off;
  int have_wire;
  struct loop_req *cur;
  int cur_i;
  size_t off;
  unsigned long long cuda_bytes, cuda_msgs, flushes; /* reported at close */
  struct loop_comm *next_orphan;                     /* LOOP_CLOSE=late */
  int counted;                                       /* in loop_live_comms */
};

struct loop_listen {
  int fd;
  struct loop_comm *pending; /* accepted, hello not complete yet */
};

/* Registration carries nothing over TCP; the handle only lets deregMr
 * check that it is given back something regMr made. */
struct loop_mr {
  uint32_t magic;
  int cuda; /* registered as NCCL_PTR_CUDA */
};

#if LOOP_VERSION >= 11
struct loop_ctx {
  uint64_t comm_id;
  int traffic_class;
};
#endif

/* Set by every init (version 11: one per communicator, while others'
 * communicators run), read by everything: atomics. */
static ncclDebugLogger_t loop_logger;
static int loop_ndev = 1;
static int loop_ptr_support = NCCL_PTR_HOST;
static char loop_dev_name[] = "loop0";
static int loop_cuda, loop_cuda_expect;    /* LOOP_CUDA, LOOP_CUDA_EXPECT */
static unsigned long long loop_cuda_total; /* CUDA bytes moved, all comms (atomic) */
static int loop_live_comms;                /* atomic */
static int loop_close_late;                /* LOOP_CLOSE=late (atomic) */
#define LOOP_ORPHAN_WAIT_MS 1000
static pthread_mutex_t loop_orphan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_comm *loop_orphans; /* under loop_orphan_lock */
static int loop_norphans;              /* atomic: a look without the lock */
/* The CUDA runtime's calls, found at the first comm made with LOOP_CUDA=1,
 * and what copies use: a stream that does not wait for the program's
 * (cudaStreamNonBlocking) and a pinned bounce, both made then, during the
 * program's init: made later, while the program's kernels wait for this
 * plugin, a pinned allocation would wait for them (CUDA synchronises
 * around it), and so may a copy to pageable memory. One copy at a time. */
#define LOOP_PINNED ((size_t)8 << 20)
typedef int (*loop_stream_create_fn)(void **, unsigned);
typedef int (*loop_memcpy_async_fn)(void *, const void *, size_t, int, void *);
typedef int (*loop_stream_sync_fn)(void *);
typedef int (*loop_host_alloc_fn)(void **, size_t, unsigned);
static struct {
  pthread_mutex_t lock;
  int ready; /* 1: usable, -1: tried and failed */
  loop_stream_create_fn create;
  loop_memcpy_async_fn copy;
  loop_stream_sync_fn sync;
  loop_host_alloc_fn host_alloc;
  void *stream;
  char *pinned;
} loop_rt = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, NULL, NULL, NULL, NULL, NULL};

#define LOOP_LOG(level, flags, ...)                                                                \
  do {                                                                                             \
    ncclDebugLogger_t log_ = __atomic_load_n(&loop_logger, __ATOMIC_ACQUIRE);                      \
    if (log_) log_(level, flags, __FILE__, __LINE__, __VA_ARGS__);                                 \
  } while (0)
#define LOOP_WARN(...) LOOP_LOG(NCCL_LOG_WARN, NCCL_NET_LOG_NET, __VA_ARGS__)

static int env_is(const char *name, const char *value) {
  const char *s = getenv(name);
  return s && strcmp(s, value) == 0;
}

static ncclResult_t loop_init_common(ncclDebugLogger_t logger) {
  __atomic_store_n(&loop_logger, logger, __ATOMIC_RELEASE);
  if (env_is("LOOP_FAIL_INIT", "1")) {
    LOOP_WARN("NET/Loop: init fails on purpose (LOOP_FAIL_INIT=1)");
    return ncclSystemError;
  }
  __atomic_store_n(&loop_ndev, env_is("LOOP_NDEV", "0") ? 0 : 1, __ATOMIC_RELAXED);
  __atomic_store_n(&loop_cuda,
                   env_is("LOOP_CUDA", "1")      ? 1
                   : env_is("LOOP_CUDA", "host") ? 2
                                                 : 0,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&loop_cuda_expect, env_is("LOOP_CUDA_EXPECT", "1"), __ATOMIC_RELAXED);
  __atomic_store_n(&loop_close_late, env_is("LOOP_CLOSE", "late"), __ATOMIC_RELAXED);
  __atomic_store_n(&loop_ptr_support,
                   env_is("LOOP_NO_HOST", "1")                     ? NCCL_PTR_CUDA
                   : __atomic_load_n(&loop_cuda, __ATOMIC_RELAXED) ? NCCL_PTR_HOST | NCCL_PTR_CUDA
                                                                   : NCCL_PTR_HOST,
                   __ATOMIC_RELAXED);
  LOOP_LOG(NCCL_LOG_INFO, NCCL_NET_LOG_INIT, "NET/Loop v%d initialised", LOOP_VERSION);
  return ncclSuccess;
}

#if LOOP_VERSION >= 10
/* LOOP_PROF=1 (read at init): each send is an event of this plugin's own
 * for NCCL's profiler callback, begun by isend under the message's phandle
 * and ended, with an update, by the test() that finds it done. Its id
 * says "socket plugin events, version 1" as NCCL's profiler_net.h has it. */
#define LOOP_PROF_ID ((2 << 16) | 1)
static ncclProfilerCallback_t prof_fn;
#endif

#if LOOP_VERSION <= 9
static ncclResult_t loop_init(ncclDebugLogger_t logFunction) {
  return loop_init_common(logFunction);
}
#elif LOOP_VERSION == 10
static ncclResult_t loop_init(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  prof_fn = getenv("LOOP_PROF") ? profFunction : NULL;
  return loop_init_common(logFunction);
}
#else
static ncclResult_t loop_init(void **ctx, uint64_t commId, ncclNetCommConfig_v10_t *config,
                              ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  if (ctx == NULL) return ncclInternalError;
  *ctx = NULL;
  prof_fn = getenv("LOOP_PROF") ? profFunction : NULL;
  ncclResult_t res = loop_init_common(logFunction);
  if (res != ncclSuccess) return res;
  struct loop_ctx *c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->comm_id = commId;
  c->traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  *ctx = c;
  return ncclSuccess;
}

/* NCCL 2.28 may call finalize after a failed init, hence NULL is fine. */
static ncclResult_t loop_finalize(void *ctx) {
  free(ctx);
  return ncclSuccess;
}
#endif

static ncclResult_t loop_devices(int *ndev) {
  if (ndev == NULL) return ncclInternalError;
  *ndev = __atomic_load_n(&loop_ndev, __ATOMIC_RELAXED);
  return ncclSuccess;
}

static int dev_ok(int dev) {
  return dev >= 0 && dev < __atomic_load_n(&loop_ndev, __ATOMIC_RELAXED);
}

static ncclResult_t loop_get_properties(int dev, LOOP_PROPS_T *props) {
  if (!dev_ok(dev) || props == NULL) return ncclInternalError;
  memset(props, 0, sizeof(*props));
  props->name = loop_dev_name;
  props->pciPath = NULL;
  props->guid = 0x10c0;
  props->ptrSupport = __atomic_load_n(&loop_ptr_support, __ATOMIC_RELAXED);
  props->speed = 10000;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = LOOP_MAX_RECVS;
#if LOOP_VERSION >= 7
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0;
#endif
#if LOOP_VERSION >= 8
  props->regIsGlobal = 0;
#endif
#if LOOP_VERSION >= 9
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxP2pBytes = LOOP_MAX_BYTES;
  props->maxCollBytes = LOOP_MAX_BYTES;
#endif
#if LOOP_VERSION >= 11
  props->maxMultiRequestSize = 1;
#endif
  return ncclSuccess;
}

/* ---- sockets ------------------------------------------------------------ */

/* Moves bytes [*off, len) of buf without blocking, advancing *off. Returns
 * ncclSuccess when the socket would block or the range is done (the caller
 * compares *off with len), ncclSystemError when the peer is gone. */
static ncclResult_t xfer(int fd, int sending, void *buf, size_t len, size_t *off) {
  while (*off < len) {
    char *p = (char *)buf + *off;
    ssize_t n = sending ? send(fd, p, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, p, len - *off, MSG_DONTWAIT);
    if (n > 0) {
      *off += (size_t)n;
    } else if (n == 0 && !sending) {
      LOOP_WARN("NET/Loop: peer closed the connection");
      return ncclSystemError;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return ncclSuccess;
    } else if (errno != EINTR) {
      LOOP_WARN("NET/Loop: %s failed: %s", sending ? "send" : "recv", strerror(errno));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

/* Takes c off loop_live_comms (once); 1 if it was the last. */
static int uncount(struct loop_comm *c) {
  if (!c->counted) return 0;
  c->counted = 0;
  return __atomic_sub_fetch(&loop_live_comms, 1, __ATOMIC_RELAXED) == 0;
}

static void comm_free(struct loop_comm *c) {
  if (c == NULL) return;
  (void)uncount(c);
  if (c->fd >= 0) close(c->fd);
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; i++) /* bounces of requests never tested */
    for (int k = 0; k < LOOP_MAX_RECVS; k++)
      if (c->reqs[i].used && c->reqs[i].gpu[k]) free(c->reqs[i].data[k]);
  free(c);
}

/* Finds the runtime and makes the stream and the bounce (under the lock). */
static void cuda_setup(void) {
  if (loop_rt.ready) return;
  loop_rt.ready = -1;
  const char *libs[] = {NULL, "libcudart.so.12", "libcudart.so",
                        "/usr/local/cuda/lib64/libcudart.so"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0] && !loop_rt.host_alloc; i++) {
    void *h = RTLD_DEFAULT;
    if (libs[i] && !(h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL))) continue;
    loop_rt.create = (loop_stream_create_fn)(uintptr_t)dlsym(h, "cudaStreamCreateWithFlags");
    loop_rt.copy = (loop_memcpy_async_fn)(uintptr_t)dlsym(h, "cudaMemcpyAsync");
    loop_rt.sync = (loop_stream_sync_fn)(uintptr_t)dlsym(h, "cudaStreamSynchronize");
    loop_rt.host_alloc = (loop_host_alloc_fn)(uintptr_t)dlsym(h, "cudaHostAlloc");
    if (!loop_rt.create || !loop_rt.copy || !loop_rt.sync) loop_rt.host_alloc = NULL;
  }
  if (!loop_rt.host_alloc) {
    LOOP_WARN("NET/Loop: LOOP_CUDA=1, but no CUDA runtime in or for this process");
    return;
  }
  void *pinned = NULL;
  if (loop_rt.create(&loop_rt.stream, 1 /* cudaStreamNonBlocking */) != 0 ||
      loop_rt.host_alloc(&pinned, LOOP_PINNED, 0) != 0) {
    LOOP_WARN("NET/Loop: LOOP_CUDA=1: no stream or pinned memory for copies");
    return;
  }
  loop_rt.pinned = pinned;
  loop_rt.ready = 1;
}

/* Copies n bytes from (to_gpu 0) or to (1) GPU memory, host memory on the
 * other side, as a NIC's DMA would: outside every stream of the program
 * (see loop_rt), through the pinned bounce. 0 on success. */
static int cuda_copy(int to_gpu, void *dst, const void *src, size_t n) {
  if (__atomic_load_n(&loop_cuda, __ATOMIC_RELAXED) == 2) { /* host memory stands in */
    memcpy(dst, src, n);
    return 0;
  }
  const int trace = env_is("LOOP_TRACE", "1");
  int rc = 0;
  pthread_mutex_lock(&loop_rt.lock);
  if (loop_rt.ready != 1) rc = -1;
  for (size_t off = 0; off < n && rc == 0;) {
    const size_t k = n - off < LOOP_PINNED ? n - off : LOOP_PINNED;
    char *d = (char *)dst + off;
    const char *from = (const char *)src + off;
    if (trace) fprintf(stderr, "NET/Loop: %zu bytes %s the GPU\n", k, to_gpu ? "to" : "from");
    if (to_gpu) memcpy(loop_rt.pinned, from, k);
    rc = loop_rt.copy(to_gpu ? d : loop_rt.pinned, to_gpu ? loop_rt.pinned : from, k,
                      to_gpu ? 1 /* cudaMemcpyHostToDevice */ : 2 /* DeviceToHost */,
                      loop_rt.stream) == 0 &&
                 loop_rt.sync(loop_rt.stream) == 0
             ? 0
             : -1;
    if (rc == 0 && !to_gpu) memcpy(d, loop_rt.pinned, k);
    if (trace) fprintf(stderr, "NET/Loop: copied (%d)\n", rc);
    off += k;
  }
  pthread_mutex_unlock(&loop_rt.lock);
  return rc;
}

static struct loop_comm *comm_new(int fd, int is_send) {
  struct loop_comm *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->fd = fd;
  c->is_send = is_send;
  c->traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  c->counted = 1;
  __atomic_add_fetch(&loop_live_comms, 1, __ATOMIC_RELAXED);
  if (__atomic_load_n(&loop_cuda, __ATOMIC_RELAXED) == 1) { /* at init: see loop_rt */
    pthread_mutex_lock(&loop_rt.lock);
    cuda_setup();
    pthread_mutex_unlock(&loop_rt.lock);
  }
  return c;
}

static ncclResult_t loop_listen_common(int dev, void *handle, void **listenComm) {
  if (!dev_ok(dev) || handle == NULL || listenComm == NULL) return ncclInternalError;
  *listenComm = NULL;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ncclSystemError;
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(addr);
  struct loop_listen *l = NULL;
  if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
    LOOP_WARN("NET/Loop: listen on 127.0.0.1 failed: %s", strerror(errno));
    goto close_fd;
  }
  l = calloc(1, sizeof(*l));
  if (l == NULL) goto close_fd;
  l->fd = fd;
  struct loop_handle h = {.magic = LOOP_HANDLE_MAGIC, .port = ntohs(addr.sin_port)};
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof(h));
  *listenComm = l;
  return ncclSuccess;
close_fd:
  close(fd);
  return ncclSystemError;
}

/* Starts the connection on the first call, then checks it and pushes the
 * hello on later ones; *sendComm stays NULL until the hello is out. */
static ncclResult_t loop_connect_common(int dev, void *handle, void **sendComm, int tc) {
  if (!dev_ok(dev) || handle == NULL || sendComm == NULL) return ncclInternalError;
  *sendComm = NULL;
  struct loop_handle h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != LOOP_HANDLE_MAGIC) return ncclInternalError;
  struct loop_comm *c = h.pending;
  if (c == NULL) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return ncclSystemError;
    c = comm_new(fd, 1);
    if (c == NULL) {
      close(fd);
      return ncclSystemError;
    }
    c->traffic_class = tc;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(h.port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
      if (errno != EINPROGRESS) {
        LOOP_WARN("NET/Loop: connect to port %d failed: %s", h.port, strerror(errno));
        comm_free(c);
        return ncclSystemError;
      }
      c->connecting = 1;
    }
    c->hello.magic = LOOP_HELLO_MAGIC;
    c->hello.version = LOOP_VERSION;
    h.pending = c;
    memcpy(handle, &h, sizeof(h));
  }
  ncclResult_t res = ncclSuccess;
  if (c->connecting) {
    struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
    if (poll(&pfd, 1, 0) <= 0) return ncclSuccess; /* not yet (or EINTR): retry later */
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
      LOOP_WARN("NET/Loop: connect to port %d failed: %s", h.port, strerror(soerr ? soerr : errno));
      res = ncclSystemError;
      goto drop;
    }
    c->connecting = 0;
  }
  res = xfer(c->fd, 1, &c->hello, sizeof(c->hello), &c->hello_off);
  if (res != ncclSuccess) goto drop;
  if (c->hello_off < sizeof(c->hello)) return ncclSuccess;
  h.pending = NULL;
  memcpy(handle, &h, sizeof(h));
  *sendComm = c;
  return ncclSuccess;
drop:
  /* Forget the attempt so that a retry with this handle starts afresh. */
  h.pending = NULL;
  memcpy(handle, &h, sizeof(h));
  comm_free(c);
  return res;
}

static ncclResult_t loop_accept_common(void *listenComm, void **recvComm) {
  struct loop_listen *l = listenComm;
  if (l == NULL || recvComm == NULL) return ncclInternalError;
  *recvComm = NULL;
  if (l->pending == NULL) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return ncclSuccess;
      LOOP_WARN("NET/Loop: accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    l->pending = comm_new(fd, 0);
    if (l->pending == NULL) {
      close(fd);
      return ncclSystemError;
    }
  }
  struct loop_comm *c = l->pending;
  ncclResult_t res = xfer(c->fd, 0, &c->hello, sizeof(c->hello), &c->hello_off);
  if (res == ncclSuccess && c->hello_off < sizeof(c->hello)) return ncclSuccess;
  if (res == ncclSuccess && c->hello.magic != LOOP_HELLO_MAGIC) {
    LOOP_WARN("NET/Loop: connection without our hello, dropped");
    res = ncclSystemError;
  }
  l->pending = NULL;
  if (res != ncclSuccess) {
    comm_free(c);
    return res;
  }
  *recvComm = c;
  return ncclSuccess;
}

#if LOOP_VERSION <= 10
static ncclResult_t loop_listen(int dev, void *handle, void **listenComm) {
  return loop_listen_common(dev, handle, listenComm);
}
#else
static ncclResult_t loop_listen(void *ctx, int dev, void *handle, void **listenComm) {
  return loop_listen_common(dev, handle, listenComm);
}
#endif

#if LOOP_VERSION == 6
static ncclResult_t loop_connect(int dev, void *handle, void **sendComm) {
  return loop_connect_common(dev, handle, sendComm, NCCL_NET_TRAFFIC_CLASS_UNDEF);
}
static ncclResult_t loop_accept(void *listenComm, void **recvComm) {
  return loop_accept_common(listenComm, recvComm);
}
#else
/* No device offload: the device handles are always NULL. */
#if LOOP_VERSION <= 9
static ncclResult_t loop_connect(int dev, void *handle, void **sendComm,
                                 ncclNetDeviceHandle_v7_t **sendDevComm) {
  if (sendDevComm) *sendDevComm = NULL;
  return loop_connect_common(dev, handle, sendComm, NCCL_NET_TRAFFIC_CLASS_UNDEF);
}
#elif LOOP_VERSION == 10
static ncclResult_t loop_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                                 void **sendComm, ncclNetDeviceHandle_v7_t **sendDevComm) {
  if (sendDevComm) *sendDevComm = NULL;
  int tc = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return loop_connect_common(dev, handle, sendComm, tc);
}
#else
static ncclResult_t loop_connect(void *ctx, int dev, void *handle, void **sendComm,
                                 ncclNetDeviceHandle_v7_t **sendDevComm) {
  if (sendDevComm) *sendDevComm = NULL;
  struct loop_ctx *c = ctx;
  return loop_connect_common(dev, handle, sendComm,
                             c ? c->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF);
}
#endif
static ncclResult_t loop_accept(void *listenComm, void **recvComm,
                                ncclNetDeviceHandle_v7_t **recvDevComm) {
  if (recvDevComm) *recvDevComm = NULL;
  return loop_accept_common(listenComm, recvComm);
}
#endif

static ncclResult_t loop_reg_mr(void *comm, void *data, loop_mr_size_t size, int type,
                                void **mhandle) {
  if (comm == NULL || mhandle == NULL) return ncclInternalError;
  *mhandle = NULL;
  const int cuda = type == NCCL_PTR_CUDA && __atomic_load_n(&loop_cuda, __ATOMIC_RELAXED);
  if (!(type & NCCL_PTR_HOST) && !cuda) {
    LOOP_WARN("NET/Loop: regMr of memory type %d, only host memory is supported", type);
    return ncclInternalError;
  }
  struct loop_mr *mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return ncclSystemError;
  mr->magic = LOOP_MR_MAGIC;
  mr->cuda = cuda;
  *mhandle = mr;
  return ncclSuccess;
}

static ncclResult_t loop_dereg_mr(void *comm, void *mhandle) {
  struct loop_mr *mr = mhandle;
  if (comm == NULL || mr == NULL || mr->magic != LOOP_MR_MAGIC) return ncclInternalError;
  mr->magic = 0;
  free(mr);
  return ncclSuccess;
}

/* ---- requests and progress ---------------------------------------------- */

/* A free slot, or NULL when NCCL_NET_MAX_REQUESTS are in flight (the caller
 * then returns a NULL request: "try again"). */
static struct loop_req *req_get(struct loop_comm *c, int kind) {
  if (c->nused >= NCCL_NET_MAX_REQUESTS) return NULL;
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; i++) {
    struct loop_req *r = &c->reqs[i];
    if (r->used) continue;
    memset(r, 0, sizeof(*r));
    r->comm = c;
    r->kind = kind;
    r->used = 1;
    c->nused++;
    return r;
  }
  return NULL;
}

static void fifo_push(struct loop_comm *c, struct loop_req *r) {
  int slot = (c->fifo_head + c->fifo_count) % NCCL_NET_MAX_REQUESTS;
  c->fifo[slot] = (int)(r - c->reqs);
  c->fifo_count++;
}

static struct loop_req *fifo_at(struct loop_comm *c, int k) {
  return &c->reqs[c->fifo[(c->fifo_head + k) % NCCL_NET_MAX_REQUESTS]];
}

static void fifo_pop(struct loop_comm *c) {
  fifo_at(c, 0)->done = 1;
  c->fifo_head = (c->fifo_head + 1) % NCCL_NET_MAX_REQUESTS;
  c->fifo_count--;
}

static ncclResult_t progress_send(struct loop_comm *c) {
  while (c->fifo_count > 0) {
    struct loop_req *r = fifo_at(c, 0);
    if (!c->have_wire) {
      c->wire =
          (struct loop_wire){.magic = LOOP_MSG_MAGIC, .tag = r->tags[0], .size = r->posted[0]};
      c->wire_off = 0;
      c->off = 0;
      c->have_wire = 1;
    }
    ncclResult_t res = xfer(c->fd, 1, &c->wire, sizeof(c->wire), &c->wire_off);
    if (res != ncclSuccess || c->wire_off < sizeof(c->wire)) return res;
    res = xfer(c->fd, 1, r->data[0], r->posted[0], &c->off);
    if (res != ncclSuccess || c->off < r->posted[0]) return res;
    r->got[0] = r->posted[0];
    c->have_wire = 0;
    fifo_pop(c);
  }
  return ncclSuccess;
}

/* The first buffer, in posting order, still waiting for a message with
 * this tag. */
static int match(struct loop_comm *c, int tag, struct loop_req **req, int *idx) {
  for (int k = 0; k < c->fifo_count; k++) {
    struct loop_req *r = fifo_at(c, k);
    for (int i = 0; i < r->n; i++) {
      if (!r->filled[i] && r->tags[i] == tag) {
        *req = r;
        *idx = i;
        return 1;
      }
    }
  }
  return 0;
}

static int req_filled(const struct loop_req *r) {
  for (int i = 0; i < r->n; i++)
    if (!r->filled[i]) return 0;
  return 1;
}

/* A header whose tag no posted buffer wants stays buffered until an irecv
 * asks for it; the bytes behind it wait in the socket meanwhile. */
static ncclResult_t progress_recv(struct loop_comm *c) {
  while (c->fifo_count > 0) {
    if (!c->have_wire) {
      ncclResult_t res = xfer(c->fd, 0, &c->wire, sizeof(c->wire), &c->wire_off);
      if (res != ncclSuccess || c->wire_off < sizeof(c->wire)) return res;
      if (c->wire.magic != LOOP_MSG_MAGIC) {
        LOOP_WARN("NET/Loop: garbage on the connection (bad message header)");
        return ncclSystemError;
      }
      c->have_wire = 1;
      c->cur = NULL;
      c->off = 0;
    }
    if (c->cur == NULL) {
      if (!match(c, c->wire.tag, &c->cur, &c->cur_i)) return ncclSuccess;
      if (c->wire.size > c->cur->posted[c->cur_i]) {
        LOOP_WARN("NET/Loop: message of %llu bytes for a buffer of %zu (tag %d)",
                  (unsigned long long)c->wire.size, c->cur->posted[c->cur_i], c->wire.tag);
        return ncclInternalError;
      }
    }
    struct loop_req *r = c->cur;
    ncclResult_t res = xfer(c->fd, 0, r->data[c->cur_i], (size_t)c->wire.size, &c->off);
    if (res != ncclSuccess || c->off < c->wire.size) return res;
    r->got[c->cur_i] = (size_t)c->wire.size;
    r->filled[c->cur_i] = 1;
    c->have_wire = 0;
    c->wire_off = 0;
    c->cur = NULL;
    while (c->fifo_count > 0 && req_filled(fifo_at(c, 0))) fifo_pop(c);
  }
  return ncclSuccess;
}

static ncclResult_t progress(struct loop_comm *c) {
  if (c->err != ncclSuccess) return c->err;
  ncclResult_t res = c->is_send ? progress_send(c) : progress_recv(c);
  if (res != ncclSuccess) c->err = res;
  return res;
}

/* ---- LOOP_CLOSE=late: receive ends closed with receives posted ---------- */

/* Unlinks the orphan at *at and frees it (under loop_orphan_lock). */
static void orphan_drop(struct loop_comm **at) {
  struct loop_comm *c = *at;
  *at = c->next_orphan;
  __atomic_sub_fetch(&loop_norphans, 1, __ATOMIC_RELEASE);
  comm_free(c);
}

/* Reads what came for every orphan: a message that one of its receives
 * would take ends the process; end of stream (or a message none wants)
 * lets the orphan go. */
static void orphans_poll(void) {
  if (!__atomic_load_n(&loop_norphans, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&loop_orphan_lock);
  for (struct loop_comm **at = &loop_orphans; *at;) {
    struct loop_comm *c = *at;
    int gone = 0;
    if (!c->have_wire) {
      ssize_t n =
          recv(c->fd, (char *)&c->wire + c->wire_off, sizeof c->wire - c->wire_off, MSG_DONTWAIT);
      if (n > 0)
        c->wire_off += (size_t)n;
      else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        gone = 1;
      c->have_wire = c->wire_off == sizeof c->wire;
    }
    if (c->have_wire) {
      struct loop_req *r = c->cur;
      int i = c->cur_i;
      if (r || (c->wire.magic == LOOP_MSG_MAGIC && match(c, c->wire.tag, &r, &i))) {
        fprintf(stderr,
                "NET/Loop: LOOP_CLOSE=late: a message of %llu bytes (tag %d) came for a receive "
                "posted on a comm already closed; aws-ofi-nccl 1.7.4 writes it into freed "
                "memory\n",
                (unsigned long long)c->wire.size, c->wire.tag);
        abort();
      }
      gone = 1;
    }
    if (gone)
      orphan_drop(at);
    else
      at = &c->next_orphan;
  }
  pthread_mutex_unlock(&loop_orphan_lock);
}

/* Keeps a receive end with receives posted open as an orphan; 0 if it has
 * none (or LOOP_CLOSE is not late), for the caller to free it. */
static int orphan_keep(struct loop_comm *c) {
  if (!__atomic_load_n(&loop_close_late, __ATOMIC_RELAXED) || c->is_send || c->fifo_count == 0 ||
      c->err != ncclSuccess || c->connecting)
    return 0;
  pthread_mutex_lock(&loop_orphan_lock);
  c->next_orphan = loop_orphans;
  loop_orphans = c;
  __atomic_add_fetch(&loop_norphans, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&loop_orphan_lock);
  return 1;
}

/* Polls the orphans until their peers have closed, LOOP_ORPHAN_WAIT_MS at
 * most; those left then are closed unheard. */
static void orphans_drain(void) {
  for (int ms = 0; ms < LOOP_ORPHAN_WAIT_MS && __atomic_load_n(&loop_norphans, __ATOMIC_ACQUIRE);
       ms++) {
    orphans_poll();
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  pthread_mutex_lock(&loop_orphan_lock);
  while (loop_orphans) orphan_drop(&loop_orphans);
  pthread_mutex_unlock(&loop_orphan_lock);
}

static int mr_cuda(const void *mhandle) {
  const struct loop_mr *mr = mhandle;
  return mr != NULL && mr->magic == LOOP_MR_MAGIC && mr->cuda;
}

static ncclResult_t isend_common(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                                 void **request) {
  orphans_poll();
  struct loop_comm *c = sendComm;
  if (c == NULL || !c->is_send || request == NULL) return ncclInternalError;
  *request = NULL;
  if (size > LOOP_MAX_BYTES || (data == NULL && size > 0)) return ncclInternalError;
  if (c->err != ncclSuccess) return c->err;
  struct loop_req *r = req_get(c, LOOP_REQ_SEND);
  if (r == NULL) return ncclSuccess;
  r->n = 1;
  if (mr_cuda(mhandle) && size > 0) { /* the NIC's DMA read, done now */
    char *bounce = malloc(size);
    if (bounce == NULL || cuda_copy(0, bounce, data, size) != 0) {
      free(bounce);
      r->used = 0;
      c->nused--;
      return ncclSystemError;
    }
    r->gpu[0] = data;
    data = bounce;
    c->cuda_bytes += size;
    c->cuda_msgs++;
    __atomic_add_fetch(&loop_cuda_total, size, __ATOMIC_RELAXED);
  }
  r->data[0] = data;
  r->posted[0] = size;
  r->tags[0] = tag;
  fifo_push(c, r);
  *request = r;
  return ncclSuccess;
}

static ncclResult_t irecv_common(void *recvComm, int n, void **data, const size_t *sizes, int *tags,
                                 void **mhandles, void **request) {
  orphans_poll();
  struct loop_comm *c = recvComm;
  if (c == NULL || c->is_send || request == NULL) return ncclInternalError;
  *request = NULL;
  if (n < 1 || n > LOOP_MAX_RECVS || data == NULL || tags == NULL) return ncclInternalError;
  for (int i = 0; i < n; i++)
    if (data[i] == NULL && sizes[i] > 0) return ncclInternalError;
  if (c->err != ncclSuccess) return c->err;
  struct loop_req *r = req_get(c, LOOP_REQ_RECV);
  if (r == NULL) return ncclSuccess;
  r->n = n;
  for (int i = 0; i < n; i++) {
    r->data[i] = data[i];
    r->posted[i] = sizes[i];
    r->tags[i] = tags[i];
    if (mhandles && mr_cuda(mhandles[i]) && sizes[i] > 0) { /* lands in a bounce first */
      r->gpu[i] = data[i];
      if ((r->data[i] = malloc(sizes[i])) == NULL) {
        for (int k = 0; k < i; k++)
          if (r->gpu[k]) free(r->data[k]);
        r->used = 0;
        c->nused--;
        return ncclSystemError;
      }
    }
  }
  fifo_push(c, r);
  *request = r;
  return ncclSuccess;
}

/* Posted sizes as size_t, whatever the version's type; v6-v8 pass int. */
static ncclResult_t posted_sizes(int n, const loop_msg_size_t *sizes, size_t *posted) {
  if (sizes == NULL || n < 1 || n > LOOP_MAX_RECVS) return ncclInternalError;
  for (int i = 0; i < n; i++) {
#if LOOP_VERSION <= 8
    if (sizes[i] < 0) return ncclInternalError;
#endif
    posted[i] = (size_t)sizes[i];
  }
  return ncclSuccess;
}

#if LOOP_VERSION <= 9
static ncclResult_t loop_isend(void *sendComm, void *data, loop_msg_size_t size, int tag,
                               void *mhandle, void **request) {
  size_t len;
  ncclResult_t res = posted_sizes(1, &size, &len);
  if (res != ncclSuccess) return res;
  return isend_common(sendComm, data, len, tag, mhandle, request);
}

static ncclResult_t loop_irecv(void *recvComm, int n, void **data, loop_msg_size_t *sizes,
                               int *tags, void **mhandles, void **request) {
  size_t posted[LOOP_MAX_RECVS];
  ncclResult_t res = posted_sizes(n, sizes, posted);
  if (res != ncclSuccess) return res;
  return irecv_common(recvComm, n, data, posted, tags, mhandles, request);
}
#else
/* v10 added profiler parent handles (phandle/phandles): a send's event
 * goes under its phandle (LOOP_PROF); receives report none. */
static ncclResult_t loop_isend(void *sendComm, void *data, loop_msg_size_t size, int tag,
                               void *mhandle, void *phandle, void **request) {
  ncclResult_t res = isend_common(sendComm, data, size, tag, mhandle, request);
  struct loop_req *r = *request;
  if (res == ncclSuccess && r && prof_fn && phandle) {
    r->pdesc = (struct loop_sock_event){1, {r->comm->fd, 0, (size_t)size}};
    (void)prof_fn(&r->pev, 0, phandle, LOOP_PROF_ID, &r->pdesc);
  }
  return res;
}

static ncclResult_t loop_irecv(void *recvComm, int n, void **data, loop_msg_size_t *sizes,
                               int *tags, void **mhandles, void **phandles, void **request) {
  size_t posted[LOOP_MAX_RECVS];
  ncclResult_t res = posted_sizes(n, sizes, posted);
  if (res != ncclSuccess) return res;
  return irecv_common(recvComm, n, data, posted, tags, mhandles, request);
}
#endif

/* Host memory needs no flush; the request is born done. */
static ncclResult_t loop_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                                void **request) {
  struct loop_comm *c = recvComm;
  if (c == NULL || c->is_send || request == NULL) return ncclInternalError;
  *request = NULL;
  struct loop_req *r = req_get(c, LOOP_REQ_FLUSH);
  if (r == NULL) return ncclSuccess;
  r->done = 1;
  c->flushes++;
  *request = r;
  return ncclSuccess;
}

/* Progresses the request's comm; a done request is reported once and its
 * slot released. */
static ncclResult_t loop_test(void *request, int *done, int *sizes) {
  orphans_poll();
  struct loop_req *r = request;
  if (r == NULL || done == NULL || !r->used) return ncclInternalError;
  *done = 0;
  struct loop_comm *c = r->comm;
  if (!r->done) {
    /* A request completed before the connection failed is still done: a
     * peer may close once its last message is out, while receives for
     * messages it will never send are posted here. */
    ncclResult_t res = progress(c);
    if (res != ncclSuccess && !r->done) return res;
    if (!r->done) return ncclSuccess;
  }
  /* Bounces: a receive's bytes go to the GPU before it is reported done. */
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < r->n; i++) {
    if (!r->gpu[i]) continue;
    if (r->kind == LOOP_REQ_RECV && r->got[i]) {
      if (cuda_copy(1, r->gpu[i], r->data[i], r->got[i]) != 0) res = ncclSystemError;
      c->cuda_bytes += r->got[i];
      c->cuda_msgs++;
      __atomic_add_fetch(&loop_cuda_total, r->got[i], __ATOMIC_RELAXED);
    }
    free(r->data[i]);
    r->gpu[i] = NULL;
  }
  if (res != ncclSuccess) {
    r->used = 0;
    c->nused--;
    return res;
  }
  *done = 1;
#if LOOP_VERSION >= 10
  if (r->pev && prof_fn) (void)prof_fn(&r->pev, 3, NULL, 0, &r->pdesc); /* update and stop */
#endif
  if (sizes && r->kind != LOOP_REQ_FLUSH)
    for (int i = 0; i < r->n; i++) sizes[i] = (int)r->got[i];
  r->used = 0;
  c->nused--;
  return ncclSuccess;
}

/* Requests still posted die with their comm, as NCCL expects after close. */
static ncclResult_t loop_close_comm(void *comm) {
  struct loop_comm *c = comm;
  if (c && c->cuda_bytes)
    fprintf(stderr,
            "NET/Loop: a %s comm moved %llu bytes of CUDA memory in %llu messages, %llu flushes\n",
            c->is_send ? "send" : "receive", c->cuda_bytes, c->cuda_msgs, c->flushes);
  orphans_poll();
  const int last = c && uncount(c);
  if (c && !orphan_keep(c)) comm_free(c);
  if (last) orphans_drain();
  if (last && __atomic_load_n(&loop_cuda_expect, __ATOMIC_RELAXED) &&
      __atomic_load_n(&loop_cuda_total, __ATOMIC_RELAXED) == 0) {
    fprintf(stderr, "NET/Loop: LOOP_CUDA_EXPECT=1, but no CUDA memory reached the plugin\n");
    _exit(3);
  }
  return ncclSuccess;
}

static ncclResult_t loop_close_listen(void *listenComm) {
  struct loop_listen *l = listenComm;
  if (l == NULL) return ncclSuccess;
  comm_free(l->pending);
  close(l->fd);
  free(l);
  return ncclSuccess;
}

/* The one exported symbol: the table itself, as NCCL's loader expects. */
__attribute__((visibility("default"))) const LOOP_NET_T LOOP_TABLE = {
    .name = "Loop",
    .init = loop_init,
    .devices = loop_devices,
    .getProperties = loop_get_properties,
    .listen = loop_listen,
    .connect = loop_connect,
    .accept = loop_accept,
    .regMr = loop_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = loop_dereg_mr,
    .isend = loop_isend,
    .irecv = loop_irecv,
    .iflush = loop_iflush,
    .test = loop_test,
    .closeSend = loop_close_comm,
    .closeRecv = loop_close_comm,
    .closeListen = loop_close_listen,
#if LOOP_VERSION >= 7
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
#endif
#if LOOP_VERSION >= 9
    .makeVDevice = NULL,
#endif
#if LOOP_VERSION >= 11
    .finalize = loop_finalize,
    .setNetAttr = NULL,
#endif
};

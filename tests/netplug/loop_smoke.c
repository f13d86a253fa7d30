/*
 * loop_smoke.c - drives each libnccl-net-loopN.so (N = 6..11) through its
 * own version's table, loaded with dlopen as NCCL loads a plugin, so that
 * the test plugins are known good before the loader is tested with them.
 * Per version: the exported symbol and the table's optional members, the
 * properties (with a canary after the struct), the failure knobs, then a
 * connection made with non-blocking connect/accept, three messages (0 B,
 * 1000 B, 3 MiB; two of them received by one grouped irecv), a flush, the
 * 32-request limit, and the errors for an oversized message, a closed
 * peer and a peer that sends garbage; LOOP_CLOSE=late (a message for a
 * receive left posted at close ends the process; its peer's close lets it
 * go). Also checks that libnccl-net-nosym.so has no table.
 *
 * Usage: netplug_loop_smoke DIR (the folder holding the plugins). Everything
 * is non-blocking, so one thread alternates between both ends; each wait
 * has a deadline, so a bug fails the test instead of hanging it.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/plugin/ext_net.h"

#define DEADLINE_S 10.0
#define NMSG       3

static int cur_version;
static int info_seen; /* the plugin logged "NET/Loop vN initialised" */

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: v%d: check failed: %s\n", __FILE__, __LINE__, cur_version, #cond);   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK_RES(call, want)                                                                      \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != (want)) {                                                                            \
      fprintf(stderr, "%s:%d: v%d: %s returned %d, expected %d\n", __FILE__, __LINE__,             \
              cur_version, #call, (int)r_, (int)(want));                                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define OK(call) CHECK_RES(call, ncclSuccess)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((format(printf, 5, 6))) static void logger(ncclDebugLogLevel level,
                                                         unsigned long flags, const char *file,
                                                         int line, const char *fmt, ...) {
  char msg[512], want[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(want, sizeof(want), "NET/Loop v%d initialised", cur_version);
  if (level == NCCL_LOG_INFO && strcmp(msg, want) == 0) info_seen = 1;
  if (getenv("LOOP_SMOKE_VERBOSE"))
    fprintf(stderr, "[plugin %d] %s:%d %s\n", level, file, line, msg);
}

/* One loaded plugin; exactly one of the table pointers is set. */
typedef struct {
  int version;
  void *dl;
  const ncclNet_v6_t *v6;
  const ncclNet_v7_t *v7;
  const ncclNet_v8_t *v8;
  const ncclNet_v9_t *v9;
  const ncclNet_v10_t *v10;
  const ncclNet_v11_t *v11;
  void *ctx; /* v11: the per-communicator context init returned */
} plug;

/* Calls a member whose signature every version shares. */
#define CALL(p, member, ...)                                                                       \
  ((p)->v6    ? (p)->v6->member(__VA_ARGS__)                                                       \
   : (p)->v7  ? (p)->v7->member(__VA_ARGS__)                                                       \
   : (p)->v8  ? (p)->v8->member(__VA_ARGS__)                                                       \
   : (p)->v9  ? (p)->v9->member(__VA_ARGS__)                                                       \
   : (p)->v10 ? (p)->v10->member(__VA_ARGS__)                                                      \
              : (p)->v11->member(__VA_ARGS__))
/* Reads a data member (or function pointer) every version has. */
#define FIELD(p, member)                                                                           \
  ((p)->v6    ? (p)->v6->member                                                                    \
   : (p)->v7  ? (p)->v7->member                                                                    \
   : (p)->v8  ? (p)->v8->member                                                                    \
   : (p)->v9  ? (p)->v9->member                                                                    \
   : (p)->v10 ? (p)->v10->member                                                                   \
              : (p)->v11->member)

/* ---- per-version wrappers: the members whose signatures changed --------- */

static ncclResult_t p_init(plug *p) {
  ncclNetCommConfig_v10_t cfg = {.trafficClass = 5};
  switch (p->version) {
  case 6:
    return p->v6->init(logger);
  case 7:
    return p->v7->init(logger);
  case 8:
    return p->v8->init(logger);
  case 9:
    return p->v9->init(logger);
  case 10:
    return p->v10->init(logger, NULL);
  default:
    p->ctx = (void *)&cfg; /* must be overwritten, even on failure */
    return p->v11->init(&p->ctx, 0x1234abcdull, &cfg, logger, NULL);
  }
}

static void p_finalize(plug *p) {
  if (p->version == 11) OK(p->v11->finalize(p->ctx));
  p->ctx = NULL;
}

static ncclResult_t p_listen(plug *p, void *handle, void **l) {
  switch (p->version) {
  case 6:
    return p->v6->listen(0, handle, l);
  case 7:
    return p->v7->listen(0, handle, l);
  case 8:
    return p->v8->listen(0, handle, l);
  case 9:
    return p->v9->listen(0, handle, l);
  case 10:
    return p->v10->listen(0, handle, l);
  default:
    return p->v11->listen(p->ctx, 0, handle, l);
  }
}

/* Device-handle outputs start as garbage: the plugin must clear them. */
static ncclResult_t p_connect(plug *p, void *handle, void **s) {
  ncclNetDeviceHandle_v7_t *dev = (ncclNetDeviceHandle_v7_t *)&dev;
  ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclResult_t res;
  switch (p->version) {
  case 6:
    return p->v6->connect(0, handle, s);
  case 7:
    res = p->v7->connect(0, handle, s, &dev);
    break;
  case 8:
    res = p->v8->connect(0, handle, s, &dev);
    break;
  case 9:
    res = p->v9->connect(0, handle, s, &dev);
    break;
  case 10:
    res = p->v10->connect(0, &cfg, handle, s, &dev);
    break;
  default:
    res = p->v11->connect(p->ctx, 0, handle, s, &dev);
    break;
  }
  CHECK(dev == NULL);
  return res;
}

static ncclResult_t p_accept(plug *p, void *l, void **r) {
  ncclNetDeviceHandle_v7_t *dev = (ncclNetDeviceHandle_v7_t *)&dev;
  ncclResult_t res;
  switch (p->version) {
  case 6:
    return p->v6->accept(l, r);
  case 7:
    res = p->v7->accept(l, r, &dev);
    break;
  case 8:
    res = p->v8->accept(l, r, &dev);
    break;
  case 9:
    res = p->v9->accept(l, r, &dev);
    break;
  case 10:
    res = p->v10->accept(l, r, &dev);
    break;
  default:
    res = p->v11->accept(l, r, &dev);
    break;
  }
  CHECK(dev == NULL);
  return res;
}

static ncclResult_t p_reg_mr(plug *p, void *comm, void *data, size_t size, int type, void **mh) {
  if (p->v6) return p->v6->regMr(comm, data, (int)size, type, mh);
  if (p->v7) return p->v7->regMr(comm, data, (int)size, type, mh);
  return CALL(p, regMr, comm, data, size, type, mh);
}

static ncclResult_t p_isend(plug *p, void *s, void *data, size_t size, int tag, void *mh,
                            void **req) {
  switch (p->version) {
  case 6:
    return p->v6->isend(s, data, (int)size, tag, mh, req);
  case 7:
    return p->v7->isend(s, data, (int)size, tag, mh, req);
  case 8:
    return p->v8->isend(s, data, (int)size, tag, mh, req);
  case 9:
    return p->v9->isend(s, data, size, tag, mh, req);
  case 10:
    return p->v10->isend(s, data, size, tag, mh, NULL, req);
  default:
    return p->v11->isend(s, data, size, tag, mh, NULL, req);
  }
}

static ncclResult_t p_irecv(plug *p, void *r, int n, void **data, const size_t *sizes, int *tags,
                            void **mhs, void **req) {
  int isz[NCCL_NET_MAX_REQUESTS];
  size_t ssz[NCCL_NET_MAX_REQUESTS];
  for (int i = 0; i < n; i++) {
    isz[i] = (int)sizes[i];
    ssz[i] = sizes[i];
  }
  switch (p->version) {
  case 6:
    return p->v6->irecv(r, n, data, isz, tags, mhs, req);
  case 7:
    return p->v7->irecv(r, n, data, isz, tags, mhs, req);
  case 8:
    return p->v8->irecv(r, n, data, isz, tags, mhs, req);
  case 9:
    return p->v9->irecv(r, n, data, ssz, tags, mhs, req);
  case 10:
    return p->v10->irecv(r, n, data, ssz, tags, mhs, NULL, req);
  default:
    return p->v11->irecv(r, n, data, ssz, tags, mhs, NULL, req);
  }
}

/* ---- checks ------------------------------------------------------------- */

static void check_common_props(const char *name, const char *pci, uint64_t guid, int ptr, int speed,
                               int port, float latency, int maxComms, int maxRecvs, int want_ptr) {
  CHECK(name && strcmp(name, "loop0") == 0);
  CHECK(pci == NULL);
  CHECK(guid == 0x10c0);
  CHECK(ptr == want_ptr);
  CHECK(speed == 10000 && port == 0 && latency == 0.0f);
  CHECK(maxComms == 65536 && maxRecvs == 4);
}

#define COMMON_PROPS(pr)                                                                           \
  (pr)->name, (pr)->pciPath, (pr)->guid, (pr)->ptrSupport, (pr)->speed, (pr)->port, (pr)->latency, \
      (pr)->maxComms, (pr)->maxRecvs

/* The struct sits in a larger buffer filled with a canary, so writing past
 * the version's struct (a plugin using a newer layout) shows. */
static void check_props(plug *p, int want_ptr) {
  union {
    unsigned char bytes[256];
    ncclNetProperties_v11_t align;
  } buf;
  memset(buf.bytes, 0xa5, sizeof(buf.bytes));
  size_t size;
  switch (p->version) {
  case 6: {
    ncclNetProperties_v6_t *pr = (void *)buf.bytes;
    size = sizeof(*pr);
    OK(p->v6->getProperties(0, pr));
    check_common_props(COMMON_PROPS(pr), want_ptr);
    break;
  }
  case 7: {
    ncclNetProperties_v7_t *pr = (void *)buf.bytes;
    size = sizeof(*pr);
    OK(p->v7->getProperties(0, pr));
    check_common_props(COMMON_PROPS(pr), want_ptr);
    CHECK(pr->netDeviceType == NCCL_NET_DEVICE_HOST && pr->netDeviceVersion == 0);
    break;
  }
  case 8: {
    ncclNetProperties_v8_t *pr = (void *)buf.bytes;
    size = sizeof(*pr);
    OK(p->v8->getProperties(0, pr));
    check_common_props(COMMON_PROPS(pr), want_ptr);
    CHECK(pr->netDeviceType == NCCL_NET_DEVICE_HOST && pr->regIsGlobal == 0);
    break;
  }
  default: {
    /* v9 and v10 share a layout; v11 appends maxMultiRequestSize. */
    ncclNetProperties_v11_t *pr = (void *)buf.bytes;
    if (p->version == 9) OK(p->v9->getProperties(0, (ncclNetProperties_v9_t *)pr));
    if (p->version == 10) OK(p->v10->getProperties(0, (ncclNetProperties_v10_t *)pr));
    if (p->version == 11) OK(p->v11->getProperties(0, pr));
    size = p->version == 11 ? sizeof(ncclNetProperties_v11_t) : sizeof(ncclNetProperties_v9_t);
    check_common_props(COMMON_PROPS(pr), want_ptr);
    CHECK(pr->netDeviceType == NCCL_NET_DEVICE_HOST && pr->regIsGlobal == 0);
    CHECK(pr->forceFlush == 0);
    CHECK(pr->vProps.ndevs == 1 && pr->vProps.devs[0] == 0);
    CHECK(pr->maxP2pBytes == (size_t)1 << 30 && pr->maxCollBytes == (size_t)1 << 30);
    if (p->version == 11) CHECK(pr->maxMultiRequestSize == 1);
    break;
  }
  }
  for (size_t i = size; i < sizeof(buf.bytes); i++) CHECK(buf.bytes[i] == 0xa5);
}

/* Only ncclNetPlugin_vN is there, name is "Loop", and the optional members
 * are NULL (finalize, which v11 calls unconditionally, is not). */
static void check_table(plug *p) {
  char sym[32];
  for (int v = 6; v <= 11; v++) {
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    void *t = dlsym(p->dl, sym);
    CHECK((t != NULL) == (v == p->version));
  }
  CHECK(dlsym(p->dl, "ncclCollNetPlugin_v6") == NULL);
  CHECK(strcmp(FIELD(p, name), "Loop") == 0);
  CHECK(FIELD(p, regMrDmaBuf) == NULL);
  if (p->v7) CHECK(p->v7->getDeviceMr == NULL && p->v7->irecvConsumed == NULL);
  if (p->v8) CHECK(p->v8->getDeviceMr == NULL && p->v8->irecvConsumed == NULL);
  if (p->v9) CHECK(p->v9->getDeviceMr == NULL && p->v9->makeVDevice == NULL);
  if (p->v10) CHECK(p->v10->irecvConsumed == NULL && p->v10->makeVDevice == NULL);
  if (p->v11) {
    CHECK(p->v11->getDeviceMr == NULL && p->v11->makeVDevice == NULL);
    CHECK(p->v11->setNetAttr == NULL && p->v11->finalize != NULL);
    OK(p->v11->finalize(NULL));
  }
}

static void check_knobs(plug *p) {
  int ndev = -1;
  setenv("LOOP_FAIL_INIT", "1", 1);
  CHECK_RES(p_init(p), ncclSystemError);
  if (p->version == 11) CHECK(p->ctx == NULL);
  p_finalize(p);
  unsetenv("LOOP_FAIL_INIT");

  setenv("LOOP_NDEV", "0", 1);
  OK(p_init(p));
  OK(CALL(p, devices, &ndev));
  CHECK(ndev == 0);
  p_finalize(p);
  unsetenv("LOOP_NDEV");

  setenv("LOOP_NO_HOST", "1", 1);
  OK(p_init(p));
  check_props(p, NCCL_PTR_CUDA);
  p_finalize(p);
  unsetenv("LOOP_NO_HOST");
}

/* ---- traffic ------------------------------------------------------------ */

static void connect_pair(plug *p, void **l, void **s, void **r) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  OK(p_listen(p, handle, l));
  CHECK(*l != NULL);
  *s = *r = NULL;
  double end = now_s() + DEADLINE_S;
  while (*s == NULL || *r == NULL) {
    CHECK(now_s() < end);
    if (*s == NULL) OK(p_connect(p, handle, s));
    if (*r == NULL) OK(p_accept(p, *l, r));
  }
}

/* Tests every non-NULL request until all are done; sizes[i] receives
 * request i's sizes (up to 2 each). */
static void wait_all(plug *p, void **reqs, int n, int (*sizes)[2]) {
  double end = now_s() + DEADLINE_S;
  int left = n;
  while (left > 0) {
    CHECK(now_s() < end);
    for (int i = 0; i < n; i++) {
      if (reqs[i] == NULL) continue;
      int done = 0;
      OK(CALL(p, test, reqs[i], &done, sizes[i]));
      if (done) {
        reqs[i] = NULL;
        left--;
      }
    }
  }
}

/* Keeps calling isend (or irecv) until the plugin takes the request. */
static void *post_send(plug *p, void *s, void *data, size_t size, int tag, void *mh) {
  void *req = NULL;
  double end = now_s() + DEADLINE_S;
  while (req == NULL) {
    CHECK(now_s() < end);
    OK(p_isend(p, s, data, size, tag, mh, &req));
  }
  return req;
}

/* Keeps calling irecv with one buffer until the plugin takes it. */
static void *post_recv(plug *p, void *r, void *dst, size_t size, int tag) {
  void *req = NULL, *d[1] = {dst};
  size_t z[1] = {size};
  int t[1] = {tag};
  double end = now_s() + DEADLINE_S;
  while (req == NULL) {
    CHECK(now_s() < end);
    OK(p_irecv(p, r, 1, d, z, t, NULL, &req));
  }
  return req;
}

static void fill(unsigned char *b, size_t n, int tag) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7 + (size_t)tag);
}

static int same(const unsigned char *b, size_t n, int tag) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != (unsigned char)(i * 7 + (size_t)tag)) return 0;
  return 1;
}

/* Three messages; the 3 MiB and the 1000 B ones land in one grouped irecv
 * whose tags are in the opposite order to the sends. Receive buffers are
 * larger than the messages, so the sizes reported are the actual ones. */
static void exchange(plug *p, void *s, void *r) {
  static const size_t len[NMSG] = {0, 1000, 3u << 20};
  static const int tag[NMSG] = {11, 12, 13};
  unsigned char *sbuf[NMSG], *rbuf[NMSG];
  void *smh[NMSG], *rmh[NMSG];
  for (int i = 0; i < NMSG; i++) {
    sbuf[i] = malloc(len[i] + 1);
    rbuf[i] = malloc(len[i] + 64);
    CHECK(sbuf[i] && rbuf[i]);
    fill(sbuf[i], len[i], tag[i]);
    memset(rbuf[i], 0, len[i] + 64);
    OK(p_reg_mr(p, s, sbuf[i], len[i] + 1, NCCL_PTR_HOST, &smh[i]));
    OK(p_reg_mr(p, r, rbuf[i], len[i] + 64, NCCL_PTR_HOST, &rmh[i]));
    CHECK(smh[i] != NULL && rmh[i] != NULL);
  }
  void *bad = (void *)&bad;
  CHECK_RES(p_reg_mr(p, s, sbuf[1], 10, NCCL_PTR_CUDA, &bad), ncclInternalError);

  void *reqs[2 + NMSG] = {NULL};
  int sizes[2 + NMSG][2];
  memset(sizes, 0xff, sizeof(sizes));
  /* Receives first, so that matching by tag is what sorts the messages. */
  void *d0[1] = {rbuf[0]}, *m0[1] = {rmh[0]};
  size_t z0[1] = {len[0] + 64};
  int t0[1] = {tag[0]};
  OK(p_irecv(p, r, 1, d0, z0, t0, m0, &reqs[0]));
  void *d1[2] = {rbuf[2], rbuf[1]}, *m1[2] = {rmh[2], rmh[1]};
  size_t z1[2] = {len[2] + 64, len[1] + 64};
  int t1[2] = {tag[2], tag[1]};
  OK(p_irecv(p, r, 2, d1, z1, t1, m1, &reqs[1]));
  CHECK(reqs[0] != NULL && reqs[1] != NULL);
  for (int i = 0; i < NMSG; i++) reqs[2 + i] = post_send(p, s, sbuf[i], len[i], tag[i], smh[i]);
  wait_all(p, reqs, 2 + NMSG, sizes);

  CHECK(sizes[0][0] == 0);
  CHECK(sizes[1][0] == (int)len[2] && sizes[1][1] == (int)len[1]);
  for (int i = 0; i < NMSG; i++) CHECK(sizes[2 + i][0] == (int)len[i]);
  for (int i = 0; i < NMSG; i++) CHECK(same(rbuf[i], len[i], tag[i]));
  CHECK(rbuf[1][len[1]] == 0); /* nothing written past the message */

  /* Host memory needs no flush, but the request must still complete. */
  void *flush = NULL;
  int fsz[2][2];
  OK(CALL(p, iflush, r, 1, d0, (int[1]){0}, m0, &flush));
  CHECK(flush != NULL);
  wait_all(p, &flush, 1, fsz);

  for (int i = 0; i < NMSG; i++) {
    OK(CALL(p, deregMr, s, smh[i]));
    OK(CALL(p, deregMr, r, rmh[i]));
    free(sbuf[i]);
    free(rbuf[i]);
  }
}

/* Tests one request until it fails; returns the error. */
static ncclResult_t wait_error(plug *p, void *req) {
  double end = now_s() + DEADLINE_S;
  for (;;) {
    CHECK(now_s() < end);
    int done = 0, sz[1];
    ncclResult_t res = CALL(p, test, req, &done, sz);
    if (res != ncclSuccess) return res;
    CHECK(!done);
  }
}

/* A message larger than the posted buffer is the caller's mistake. */
static void check_oversize(plug *p) {
  void *l, *s, *r;
  connect_pair(p, &l, &s, &r);
  char src[100] = {0}, dst[10];
  void *d[1] = {dst};
  size_t z[1] = {sizeof(dst)};
  int t[1] = {7};
  void *rreq = NULL;
  OK(p_irecv(p, r, 1, d, z, t, NULL, &rreq));
  CHECK(rreq != NULL);
  /* Bytes move only inside test(), so the send must be driven too. */
  void *sreq = post_send(p, s, src, sizeof(src), 7, NULL);
  int ssz[1][2];
  wait_all(p, &sreq, 1, ssz);
  CHECK_RES(wait_error(p, rreq), ncclInternalError);
  OK(CALL(p, closeSend, s));
  OK(CALL(p, closeRecv, r));
  OK(CALL(p, closeListen, l));
}

/* 32 receives are accepted and a 33rd is refused with a NULL request; when
 * the sender goes away they fail with ncclSystemError; closing the receiver
 * with them still posted leaks nothing. */
static void check_peer_closed(plug *p) {
  void *l, *s, *r;
  connect_pair(p, &l, &s, &r);
  char dst[10];
  void *d[1] = {dst};
  size_t z[1] = {sizeof(dst)};
  int t[1] = {3};
  void *reqs[NCCL_NET_MAX_REQUESTS + 1];
  for (int i = 0; i <= NCCL_NET_MAX_REQUESTS; i++) {
    reqs[i] = (void *)&reqs[i];
    OK(p_irecv(p, r, 1, d, z, t, NULL, &reqs[i]));
    CHECK((reqs[i] != NULL) == (i < NCCL_NET_MAX_REQUESTS));
  }
  OK(CALL(p, closeSend, s));
  CHECK_RES(wait_error(p, reqs[0]), ncclSystemError);
  OK(CALL(p, closeRecv, r));
  OK(CALL(p, closeListen, l));
}

/* A raw TCP connection to a listener, for a peer that is not the plugin.
 * The port sits after the 8-byte magic in loop_plugin.c's handle. */
static int raw_connect(const char *handle) {
  uint16_t port;
  memcpy(&port, handle + 8, sizeof(port));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
  return fd;
}

/* A stranger whose first bytes are not the hello is refused by accept;
 * one that says hello and then sends a bad header fails test. */
static void check_garbage(plug *p) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *l = NULL, *r = NULL;
  OK(p_listen(p, handle, &l));
  unsigned char junk[16];
  memset(junk, 0xee, sizeof(junk));
  int fd = raw_connect(handle);
  CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
  double end = now_s() + DEADLINE_S;
  ncclResult_t res;
  while ((res = p_accept(p, l, &r)) == ncclSuccess && r == NULL) CHECK(now_s() < end);
  CHECK_RES(res, ncclSystemError);
  CHECK(r == NULL);
  close(fd);

  struct {
    uint64_t magic;
    uint32_t version, pad;
  } hello = {0x4c4f4f5048454c4cull, (uint32_t)p->version, 0};
  fd = raw_connect(handle);
  CHECK(write(fd, &hello, sizeof(hello)) == (ssize_t)sizeof(hello));
  CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
  end = now_s() + DEADLINE_S;
  while (r == NULL) {
    CHECK(now_s() < end);
    OK(p_accept(p, l, &r));
  }
  char dst[16];
  void *d[1] = {dst}, *req = NULL;
  size_t z[1] = {sizeof(dst)};
  int t[1] = {1};
  OK(p_irecv(p, r, 1, d, z, t, NULL, &req));
  CHECK(req != NULL);
  CHECK_RES(wait_error(p, req), ncclSystemError);
  close(fd);
  OK(CALL(p, closeRecv, r));
  OK(CALL(p, closeListen, l));
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* LOOP_CLOSE=late: a receive end closed with a receive posted stays open
 * (an orphan). A message for that receive ends the process at the
 * plugin's next call (a child here, which must die of SIGABRT); its peer's
 * close lets it go without a word (no descriptor left once the last comm
 * is closed). */
static void check_close_late(plug *p) {
  p_finalize(p);
  setenv("LOOP_CLOSE", "late", 1);
  OK(p_init(p));
  char dst[16], src[16] = "late message";
  void *l, *s, *r;
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    connect_pair(p, &l, &s, &r);
    void *rreq = post_recv(p, r, dst, sizeof(dst), 5);
    (void)rreq; /* forgotten, as a caller does at close */
    OK(CALL(p, closeRecv, r));
    void *sreq = post_send(p, s, src, sizeof(src), 5, NULL);
    int ssz[1][2];
    wait_all(p, &sreq, 1, ssz);
    for (double end = now_s() + DEADLINE_S; now_s() < end;) { /* each call reads the orphans */
      void *more = post_send(p, s, src, 0, 6, NULL);
      wait_all(p, &more, 1, ssz);
    }
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);

  const int fds = open_fds();
  connect_pair(p, &l, &s, &r);
  (void)post_recv(p, r, dst, sizeof(dst), 5);
  OK(CALL(p, closeRecv, r));
  OK(CALL(p, closeSend, s)); /* the last comm: waits for the orphan's end of stream */
  OK(CALL(p, closeListen, l));
  CHECK(open_fds() == fds);
  p_finalize(p);
  unsetenv("LOOP_CLOSE");
  OK(p_init(p));
}

static void run_version(const char *dir, int version) {
  char path[4096];
  plug pl = {.version = version}, *p = &pl;
  cur_version = version;
  info_seen = 0;
  snprintf(path, sizeof(path), "%s/libnccl-net-loop%d.so", dir, version);
  p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (p->dl == NULL) fprintf(stderr, "dlopen: %s\n", dlerror());
  CHECK(p->dl != NULL);
  char sym[32];
  snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
  void *t = dlsym(p->dl, sym);
  CHECK(t != NULL);
  switch (version) {
  case 6:
    p->v6 = t;
    break;
  case 7:
    p->v7 = t;
    break;
  case 8:
    p->v8 = t;
    break;
  case 9:
    p->v9 = t;
    break;
  case 10:
    p->v10 = t;
    break;
  default:
    p->v11 = t;
    break;
  }
  check_table(p);
  check_knobs(p);

  info_seen = 0;
  OK(p_init(p));
  CHECK(info_seen);
  if (version == 11) CHECK(p->ctx != NULL);
  int ndev = 0;
  OK(CALL(p, devices, &ndev));
  CHECK(ndev == 1);
  check_props(p, NCCL_PTR_HOST);

  void *l, *s, *r;
  connect_pair(p, &l, &s, &r);
  exchange(p, s, r);
  OK(CALL(p, closeSend, s));
  OK(CALL(p, closeRecv, r));
  OK(CALL(p, closeListen, l));
  check_oversize(p);
  check_peer_closed(p);
  check_garbage(p);
  check_close_late(p);
  p_finalize(p);
  dlclose(p->dl);
  printf("netplug: v%d ok\n", version);
}

/* A library without any table: nothing for a loader to call. */
static void check_nosym(const char *dir) {
  char path[4096], sym[32];
  cur_version = 0;
  snprintf(path, sizeof(path), "%s/libnccl-net-nosym.so", dir);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) fprintf(stderr, "dlopen: %s\n", dlerror());
  CHECK(dl != NULL);
  for (int v = 6; v <= 11; v++) {
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    CHECK(dlsym(dl, sym) == NULL);
  }
  CHECK(dlsym(dl, "loop_not_a_plugin") != NULL);
  dlclose(dl);
  printf("netplug: nosym ok\n");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN_DIR\n", argv[0]);
    return 2;
  }
  for (int v = 6; v <= 11; v++) run_version(argv[1], v);
  check_nosym(argv[1]);
  return 0;
}

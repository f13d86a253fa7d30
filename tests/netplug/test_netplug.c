/*
 * test_netplug.c - the network plugin loader (transport/plugin) against
 * real plugins: libnccl-net-loopN.so (loop_plugin.c), one per ABI
 * version 6..11, moving bytes over loopback TCP; a library with no
 * table; plugins that fail init, have no device or take no host memory.
 *   versions:   each version loads by path, is found at its own version,
 *               reports its device through the checks, and carries
 *               messages of 0 B, 1000 B and 3 MiB and a grouped receive
 *               through the adapters; versions 6-8 refuse a send over
 *               1 GiB before the plugin sees it
 *   names:      NCCL_NET_PLUGIN as NCCL reads it: a list tried in order,
 *               bare names as libnccl-net-NAME.so (LD_LIBRARY_PATH),
 *               "none"; NCCL_NET picks by name (any case), "Socket" is the
 *               built-in, an unknown name is ncclInvalidUsage
 *   broken:     a library with no table, a failing init, no device, no
 *               host memory: each passed over (the built-in network
 *               used), or ncclInvalidUsage when NCCL_NET asked for it
 *   shared:     two communicators share one loaded plugin; a version 11
 *               plugin gets an init per communicator; closing one leaves
 *               the other working
 * usage: test_netplug PLUGIN_DIR
 *        test_netplug --probe    the plugin NCCL_NET_PLUGIN names (a
 *                                third party's, aws-ofi-nccl say): loads
 *                                it, prints its devices and carries the
 *                                same messages over its device 0 (one
 *                                buffer per receive where it takes one)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/plugin/ext_net.h"
#include "transport/plugin/netplug.h"
#include "unit.h"
#include "util/clock.h"

static const char *dir;

static void use_plugin(const char *list) {
  if (list)
    setenv("NCCL_NET_PLUGIN", list, 1);
  else
    unsetenv("NCCL_NET_PLUGIN");
}

static void use_version(int v) {
  char path[512];
  snprintf(path, sizeof path, "%s/libnccl-net-loop%d.so", dir, v);
  use_plugin(path);
}

/* Tests every request until all are done (a plugin may move bytes only
 * inside test, so a receive completes only while its send is tested
 * too): 1 when all are done within 10 s. sizes[i] gets req[i]'s. */
static int wait_all(chorus_net *n, void **req, int nreq, int (*sizes)[2]) {
  int done[8] = {0}, left = nreq;
  const int64_t dl = chorus_now_ns() + 10000000000ll;
  while (left > 0 && !chorus_expired(dl))
    for (int i = 0; i < nreq; i++) {
      if (done[i] || !req[i]) continue;
      if (chorus_net_test(n, req[i], &done[i], sizes[i]) != ncclSuccess) return 0;
      left -= done[i];
    }
  return left == 0;
}

/* Listen, connect and accept, all non-blocking, in one thread. */
static int pair(chorus_net *n, void **lc, void **sc, void **rc) {
  char handle[CHORUS_NET_HANDLE_BYTES];
  if (chorus_net_listen(n, 0, handle, lc) != ncclSuccess || !*lc) return 0;
  *sc = *rc = NULL;
  const int64_t dl = chorus_now_ns() + 10000000000ll;
  while ((!*sc || !*rc) && !chorus_expired(dl)) {
    if (!*sc && chorus_net_connect(n, 0, handle, sc) != ncclSuccess) return 0;
    if (!*rc && chorus_net_accept(n, *lc, rc) != ncclSuccess) return 0;
  }
  return *sc && *rc;
}

/* Sends 0 B, 1000 B and 3 MiB (tags 1, 2, 3) and receives them, the last
 * two in one grouped receive (grouped) or one each; checks bytes and
 * sizes. */
static void carry(chorus_net *n, void *sc, void *rc, int grouped) {
  const size_t big = 3u << 20;
  unsigned char *src = malloc(big), *dst1 = malloc(1000), *dst2 = malloc(big), zero = 0;
  REQUIRE(src && dst1 && dst2);
  for (size_t i = 0; i < big; i++) src[i] = (unsigned char)(i * 7 + 3);
  void *smh = NULL, *rmh1 = NULL, *rmh2 = NULL;
  EXPECT(chorus_net_reg(n, sc, src, big, NCCL_PTR_HOST, &smh) == ncclSuccess);
  EXPECT(chorus_net_reg(n, rc, dst1, 1000, NCCL_PTR_HOST, &rmh1) == ncclSuccess);
  EXPECT(chorus_net_reg(n, rc, dst2, big, NCCL_PTR_HOST, &rmh2) == ncclSuccess);
  void *s[3] = {NULL, NULL, NULL};
  const size_t ssize[3] = {0, 1000, big};
  const int64_t dl = chorus_now_ns() + 10000000000ll;
  for (int i = 0; i < 3; i++)
    while (!s[i] && !chorus_expired(dl))
      EXPECT(chorus_net_isend(n, sc, src, ssize[i], i + 1, smh, NULL, &s[i]) == ncclSuccess);
  void *r0 = NULL, *r12 = NULL, *r2 = NULL;
  size_t one = 1;
  int tag1 = 1;
  void *d0 = &zero, *mh0 = rmh1;
  while (!r0 && !chorus_expired(dl))
    EXPECT(chorus_net_irecv(n, rc, 1, &d0, &one, &tag1, &mh0, &r0) == ncclSuccess);
  void *d[2] = {dst1, dst2}, *mh[2] = {rmh1, rmh2};
  size_t sz[2] = {1000, big};
  int tags[2] = {2, 3};
  while (!r12 && !chorus_expired(dl))
    EXPECT(chorus_net_irecv(n, rc, grouped ? 2 : 1, d, sz, tags, mh, &r12) == ncclSuccess);
  while (!grouped && !r2 && !chorus_expired(dl))
    EXPECT(chorus_net_irecv(n, rc, 1, &d[1], &sz[1], &tags[1], &mh[1], &r2) == ncclSuccess);
  void *req[6] = {s[0], s[1], s[2], r0, r12, r2};
  int got[6][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
  EXPECT(s[0] && s[1] && s[2] && r0 && r12 && (grouped || r2));
  EXPECT(wait_all(n, req, grouped ? 5 : 6, got));
  EXPECT_EQ_INT(got[3][0], 0);
  EXPECT_EQ_INT(got[4][0], 1000);
  EXPECT_EQ_INT(grouped ? got[4][1] : got[5][0], (long long)big);
  EXPECT(memcmp(dst1, src, 1000) == 0);
  EXPECT(memcmp(dst2, src, big) == 0);
  EXPECT(chorus_net_dereg(n, sc, smh) == ncclSuccess);
  EXPECT(chorus_net_dereg(n, rc, rmh1) == ncclSuccess);
  EXPECT(chorus_net_dereg(n, rc, rmh2) == ncclSuccess);
  free(src);
  free(dst1);
  free(dst2);
}

static void versions(void) {
  for (int v = 6; v <= 11; v++) {
    use_version(v);
    chorus_net *n = NULL;
    EXPECT(chorus_net_open(0x1234, NCCL_NET_TRAFFIC_CLASS_UNDEF, NULL, &n) == ncclSuccess);
    if (!n) {
      fprintf(stderr, "version %d did not load\n", v);
      unit_failures++;
      continue;
    }
    EXPECT_EQ_INT(chorus_net_version(n), v);
    EXPECT_STREQ(chorus_net_name(n), "Loop");
    EXPECT_EQ_INT(chorus_net_ndev(n), 1);
    chorus_net_props p;
    EXPECT(chorus_net_properties(n, 0, &p) == ncclSuccess);
    EXPECT_STREQ(p.name, "loop0");
    EXPECT_EQ_INT(p.max_recvs, 4);
    EXPECT_EQ_INT(p.speed_mbps, 10000);
    EXPECT_EQ_INT(p.guid, 0x10c0);
    EXPECT(p.ptr_support == NCCL_PTR_HOST);
    EXPECT_EQ_INT(p.max_p2p_bytes, (long long)1 << 30);
    EXPECT(chorus_net_properties(n, 1, &p) == ncclInvalidArgument);
    void *lc = NULL, *sc = NULL, *rc = NULL;
    EXPECT(pair(n, &lc, &sc, &rc));
    if (sc && rc) carry(n, sc, rc, 1);
    if (sc && v <= 8) { /* narrowed to int: refused before the plugin */
      void *req = NULL;
      char b = 0;
      EXPECT(chorus_net_isend(n, sc, &b, ((size_t)1 << 30) + 1, 9, NULL, NULL, &req) ==
             ncclInternalError);
      EXPECT(req == NULL);
    }
    EXPECT(chorus_net_close_send(n, sc) == ncclSuccess);
    EXPECT(chorus_net_close_recv(n, rc) == ncclSuccess);
    EXPECT(chorus_net_close_listen(n, lc) == ncclSuccess);
    chorus_net_close(n);
  }
}

/* What chorus_net_open gives for want under NCCL_NET_PLUGIN=list: the
 * result code, and the version loaded (0: none) into *version. */
static ncclResult_t open_as(const char *list, const char *want, int *version) {
  use_plugin(list);
  chorus_net *n = NULL;
  ncclResult_t res = chorus_net_open(7, NCCL_NET_TRAFFIC_CLASS_UNDEF, want, &n);
  *version = n ? chorus_net_version(n) : 0;
  chorus_net_close(n);
  return res;
}

static void names(void) {
  int v = -1;
  /* bare names, through LD_LIBRARY_PATH; the first that loads wins */
  EXPECT(open_as("loop9", NULL, &v) == ncclSuccess && v == 9);
  EXPECT(open_as("nosuch,loop7,loop11", NULL, &v) == ncclSuccess && v == 7);
  EXPECT(open_as("libnccl-net-loop10.so", NULL, &v) == ncclSuccess && v == 10);
  EXPECT(open_as("none", NULL, &v) == ncclSuccess && v == 0);
  EXPECT(open_as("NONE", "Loop", &v) == ncclInvalidUsage && v == 0);
  /* NCCL_NET by name, any case; Socket is the built-in one */
  EXPECT(open_as("loop8", "loop", &v) == ncclSuccess && v == 8);
  EXPECT(open_as("loop8", "Socket", &v) == ncclSuccess && v == 0);
  EXPECT(open_as("loop8", "IB", &v) == ncclInvalidUsage && v == 0);
  EXPECT(open_as("nosuch", NULL, &v) == ncclSuccess && v == 0);
}

static void broken(void) {
  int v = -1;
  char path[512];
  snprintf(path, sizeof path, "%s/libnccl-net-nosym.so", dir);
  EXPECT(open_as(path, NULL, &v) == ncclSuccess && v == 0);
  char list[600];
  snprintf(list, sizeof list, "%s,loop6", path); /* passed over, the next taken */
  EXPECT(open_as(list, NULL, &v) == ncclSuccess && v == 6);
  setenv("LOOP_FAIL_INIT", "1", 1);
  EXPECT(open_as("loop10", NULL, &v) == ncclSuccess && v == 0);
  EXPECT(open_as("loop11", "Loop", &v) == ncclInvalidUsage && v == 0);
  unsetenv("LOOP_FAIL_INIT");
  setenv("LOOP_NDEV", "0", 1);
  EXPECT(open_as("loop9", NULL, &v) == ncclSuccess && v == 0);
  unsetenv("LOOP_NDEV");
  setenv("LOOP_NO_HOST", "1", 1);
  EXPECT(open_as("loop11", NULL, &v) == ncclSuccess && v == 0);
  unsetenv("LOOP_NO_HOST");
  EXPECT(open_as("loop11", NULL, &v) == ncclSuccess && v == 11); /* and it recovers */
}

static void shared(void) {
  use_plugin("loop11");
  chorus_net *a = NULL, *b = NULL;
  EXPECT(chorus_net_open(1, 3, NULL, &a) == ncclSuccess && a);
  use_plugin("loop6"); /* not read again while a plugin is in use */
  EXPECT(chorus_net_open(2, 3, NULL, &b) == ncclSuccess && b);
  REQUIRE(a && b);
  EXPECT_EQ_INT(chorus_net_version(b), 11);
  chorus_net_close(a);
  void *lc = NULL, *sc = NULL, *rc = NULL;
  EXPECT(pair(b, &lc, &sc, &rc));
  if (sc && rc) carry(b, sc, rc, 1);
  chorus_net_close_send(b, sc);
  chorus_net_close_recv(b, rc);
  chorus_net_close_listen(b, lc);
  chorus_net_close(b);
  int v = -1;
  EXPECT(open_as("loop6", NULL, &v) == ncclSuccess && v == 6); /* unloaded: read again */
}

/* A third party's plugin, as NCCL_NET_PLUGIN names it. */
static void probe(void) {
  chorus_net *n = NULL;
  EXPECT(chorus_net_open(0x5eed, NCCL_NET_TRAFFIC_CLASS_UNDEF, NULL, &n) == ncclSuccess);
  REQUIRE(n != NULL);
  printf("probe: network %s from %s, ABI v%d, %d device(s)\n", chorus_net_name(n),
         chorus_net_path(n), chorus_net_version(n), chorus_net_ndev(n));
  chorus_net_props p;
  for (int d = 0; d < chorus_net_ndev(n); d++)
    if (chorus_net_properties(n, d, &p) == ncclSuccess)
      printf("probe: device %d %s (%s): ptr %#x, %d Mb/s, latency %.1f us, max recvs %d, max "
             "message %zu\n",
             d, p.name, p.pci_path, (unsigned)p.ptr_support, p.speed_mbps, p.latency_us,
             p.max_recvs, p.max_p2p_bytes);
  EXPECT(chorus_net_properties(n, 0, &p) == ncclSuccess);
  void *lc = NULL, *sc = NULL, *rc = NULL;
  EXPECT(pair(n, &lc, &sc, &rc));
  if (sc && rc) carry(n, sc, rc, p.max_recvs >= 2);
  printf("probe: carried 0 B, 1000 B and 3 MiB over device 0\n");
  EXPECT(chorus_net_close_send(n, sc) == ncclSuccess);
  EXPECT(chorus_net_close_recv(n, rc) == ncclSuccess);
  EXPECT(chorus_net_close_listen(n, lc) == ncclSuccess);
  chorus_net_close(n);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
    RUN(probe);
    return unit_report();
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN_DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  RUN(versions);
  RUN(names);
  RUN(broken);
  RUN(shared);
  return unit_report();
}

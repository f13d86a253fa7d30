/*
 * test_socket.c - the choice of a network interface (util/socket.c).
 *   default_order: by name, InfiniBand first, then any other link, then
 *                  bridges and container ends (docker, veth, virbr, br-),
 *                  loopback last: a host's own containers are not how it
 *                  reaches other hosts, and lo reaches none;
 *   ifname_spec:   NCCL_SOCKET_IFNAME's prefixes, "^" exclusions and "="
 *                  exact names;
 *   picks_usable:  with no setting an address is picked on any machine
 *                  (loopback at worst), and a setting that matches no
 *                  interface is an error naming the setting;
 *   loopback_unpaced: a loopback stream whose congestion control paces
 *                  (bbr, inherited from its listener) leaves it for one
 *                  that does not (skipped where bbr is not available);
 *   unpace_setting: CHORUS_SOCKET_UNPACE=0 keeps bbr on such a stream;
 *                  unset, chorus_sock_unpace moves it to reno and says so,
 *                  once.
 */
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "util/clock.h"
#include "util/socket.h"

static void default_order(void) {
  EXPECT_EQ_INT(chorus_sock_default_pass("ib0"), 0);
  EXPECT_EQ_INT(chorus_sock_default_pass("eth0"), 1);
  EXPECT_EQ_INT(chorus_sock_default_pass("enp65s0f0"), 1);
  EXPECT_EQ_INT(chorus_sock_default_pass("bond0"), 1);
  EXPECT_EQ_INT(chorus_sock_default_pass("docker0"), 2);
  EXPECT_EQ_INT(chorus_sock_default_pass("veth3f2a1"), 2);
  EXPECT_EQ_INT(chorus_sock_default_pass("virbr0"), 2);
  EXPECT_EQ_INT(chorus_sock_default_pass("br-5c1d2e"), 2);
  EXPECT_EQ_INT(chorus_sock_default_pass("lo"), 3);
}

static void ifname_spec(void) {
  EXPECT(chorus_sock_ifname_allowed("eth", "eth0"));
  EXPECT(!chorus_sock_ifname_allowed("eth", "ib0"));
  EXPECT(chorus_sock_ifname_allowed("eth,ib", "ib0"));
  EXPECT(!chorus_sock_ifname_allowed("^docker,lo", "docker0"));
  EXPECT(chorus_sock_ifname_allowed("^docker,lo", "eth0"));
  EXPECT(chorus_sock_ifname_allowed("=eth0", "eth0"));
  EXPECT(!chorus_sock_ifname_allowed("=eth0", "eth01"));
}

static void picks_usable(void) {
  chorus_sockaddr a;
  char ifname[IF_NAMESIZE], err[256];
  unsetenv("NCCL_SOCKET_IFNAME");
  EXPECT(chorus_sock_pick_local(&a, ifname, err, sizeof err) == ncclSuccess);
  EXPECT(ifname[0] != '\0');
  setenv("NCCL_SOCKET_IFNAME", "=no-such-interface0", 1);
  EXPECT(chorus_sock_pick_local(&a, ifname, err, sizeof err) == ncclSystemError);
  EXPECT(strstr(err, "NCCL_SOCKET_IFNAME") != NULL);
  unsetenv("NCCL_SOCKET_IFNAME");
}

static void loopback_unpaced(void) {
  chorus_sockaddr a, bound;
  char err[256], cc[16] = {0};
  int lfd, cfd, afd;
  REQUIRE(chorus_sock_parse("127.0.0.1:0", &a, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_listen(&a, &lfd, &bound, err, sizeof err) == ncclSuccess);
  if (setsockopt(lfd, IPPROTO_TCP, TCP_CONGESTION, "bbr", 3) != 0) {
    fprintf(stderr, "loopback_unpaced: skipped, bbr not available here\n");
    close(lfd);
    return;
  }
  const int64_t deadline = chorus_now_ns() + 5000000000ll;
  REQUIRE(chorus_sock_connect(&bound, deadline, &cfd, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_accept(lfd, deadline, &afd, err, sizeof err) == ncclSuccess);
  socklen_t n = sizeof cc - 1;
  EXPECT(getsockopt(afd, IPPROTO_TCP, TCP_CONGESTION, cc, &n) == 0);
  EXPECT(cc[0] != '\0' && strncmp(cc, "bbr", 3) != 0);
  close(afd);
  close(cfd);
  close(lfd);
}

static void unpace_setting(void) {
  chorus_sockaddr a, bound;
  char err[256], cc[16] = {0};
  int lfd, cfd, afd;
  REQUIRE(chorus_sock_parse("127.0.0.1:0", &a, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_listen(&a, &lfd, &bound, err, sizeof err) == ncclSuccess);
  if (setsockopt(lfd, IPPROTO_TCP, TCP_CONGESTION, "bbr", 3) != 0) {
    fprintf(stderr, "unpace_setting: skipped, bbr not available here\n");
    close(lfd);
    return;
  }
  setenv("CHORUS_SOCKET_UNPACE", "0", 1);
  const int64_t deadline = chorus_now_ns() + 5000000000ll;
  REQUIRE(chorus_sock_connect(&bound, deadline, &cfd, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_accept(lfd, deadline, &afd, err, sizeof err) == ncclSuccess);
  socklen_t n = sizeof cc - 1;
  EXPECT(getsockopt(afd, IPPROTO_TCP, TCP_CONGESTION, cc, &n) == 0);
  EXPECT(strcmp(cc, "bbr") == 0);
  EXPECT_EQ_INT(chorus_sock_unpace(afd), 0);
  unsetenv("CHORUS_SOCKET_UNPACE");
  EXPECT_EQ_INT(chorus_sock_unpace(afd), 1);
  memset(cc, 0, sizeof cc);
  n = sizeof cc - 1;
  EXPECT(getsockopt(afd, IPPROTO_TCP, TCP_CONGESTION, cc, &n) == 0);
  EXPECT(strcmp(cc, "reno") == 0);
  EXPECT_EQ_INT(chorus_sock_unpace(afd), 0);
  close(afd);
  close(cfd);
  close(lfd);
}

int main(void) {
  RUN(default_order);
  RUN(ifname_spec);
  RUN(picks_usable);
  RUN(loopback_unpaced);
  RUN(unpace_setting);
  return unit_report();
}

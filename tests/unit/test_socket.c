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
 *   born_unpaced:  where the system's congestion control is bbr, a
 *                  listener, the connection made to it and the one it
 *                  accepts all start with reno; chorus_sock_system_cc gives
 *                  one bbr back (once), chorus_sock_unpace takes it away
 *                  again; with CHORUS_SOCKET_UNPACE=0 all three keep bbr
 *                  and neither call changes it (skipped where the system's
 *                  choice is not bbr).
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

static void system_cc(char cc[16]) {
  memset(cc, 0, 16);
  FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  if (f && fgets(cc, 16, f)) cc[strcspn(cc, "\n")] = '\0';
  if (f) fclose(f);
}

/* Whether fd runs congestion control want. */
static int runs(int fd, const char *want) {
  char cc[16] = {0};
  socklen_t n = sizeof cc - 1;
  return getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &n) == 0 && strcmp(cc, want) == 0;
}

/* A listener, a connection to it and the accepted end. */
static void three(int fd[3]) {
  chorus_sockaddr a, bound;
  char err[256];
  REQUIRE(chorus_sock_parse("127.0.0.1:0", &a, err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_listen(&a, &fd[0], &bound, err, sizeof err) == ncclSuccess);
  const int64_t deadline = chorus_now_ns() + 5000000000ll;
  REQUIRE(chorus_sock_connect(&bound, deadline, &fd[1], err, sizeof err) == ncclSuccess);
  REQUIRE(chorus_sock_accept(fd[0], deadline, &fd[2], err, sizeof err) == ncclSuccess);
}

static void born_unpaced(void) {
  char sys[16];
  system_cc(sys);
  if (strcmp(sys, "bbr") != 0) {
    fprintf(stderr, "born_unpaced: skipped, the system's congestion control is '%s'\n", sys);
    return;
  }
  int fd[3];
  three(fd);
  EXPECT(runs(fd[0], "reno") && runs(fd[1], "reno") && runs(fd[2], "reno"));
  EXPECT_EQ_INT(chorus_sock_system_cc(fd[2]), 1);
  EXPECT(runs(fd[2], "bbr"));
  EXPECT_EQ_INT(chorus_sock_system_cc(fd[2]), 0);
  EXPECT_EQ_INT(chorus_sock_unpace(fd[2]), 1);
  EXPECT(runs(fd[2], "reno"));
  for (int i = 0; i < 3; i++) close(fd[i]);

  setenv("CHORUS_SOCKET_UNPACE", "0", 1);
  three(fd);
  EXPECT(runs(fd[0], "bbr") && runs(fd[1], "bbr") && runs(fd[2], "bbr"));
  EXPECT_EQ_INT(chorus_sock_unpace(fd[2]), 0);
  EXPECT(runs(fd[2], "bbr"));
  unsetenv("CHORUS_SOCKET_UNPACE");
  for (int i = 0; i < 3; i++) close(fd[i]);
}

int main(void) {
  RUN(default_order);
  RUN(ifname_spec);
  RUN(picks_usable);
  RUN(born_unpaced);
  return unit_report();
}

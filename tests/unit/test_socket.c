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
 *                  interface is an error naming the setting.
 */
#include <net/if.h>
#include <stdlib.h>

#include "unit.h"
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

int main(void) {
  RUN(default_order);
  RUN(ifname_spec);
  RUN(picks_usable);
  return unit_report();
}

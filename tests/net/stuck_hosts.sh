#!/bin/bash
# The stuck report across hosts: two "hosts" in network namespaces joined
# by a veth pair (netns_lib.sh), the ranks split between them, the culprit
# on the second; stuck_check.py drives stuck_rank.c and checks the reports.
# Exits 77 (skip) when the machine does not allow namespaces.
# usage: stuck_hosts.sh SCENARIO NRANKS <stuck_check.py> <stuck_rank program>
set -u
scen=$1 n=$2 check=$3 prog=$4
. "$(dirname "$0")/netns_lib.sh"
make_two_hosts "k$$" 10
python3 "$check" "$prog" hosts "$scen" "$n" "$nsa:$ifa:10.231.10.1" "$nsb:$ifb:10.231.10.2"

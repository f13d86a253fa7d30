/*
 * netprobe.h - the network's figures for the cost model of communicators
 * across hosts: one hop's latency and bandwidth, set by CHORUS_NET or
 * measured at init between two hosts over the communicator's own
 * connections (so a network plugin is measured, not the bootstrap's TCP).
 */
#ifndef CHORUS_CORE_NETPROBE_H
#define CHORUS_CORE_NETPROBE_H

#include "nccl.h"

struct ncclComm;

/* CHORUS_NET's text "LAT,GBPS" (microseconds, GB/s, both positive) into
 * *us and *bw (bytes per microsecond). Returns 0, or -1 when malformed. */
int chorus_netprobe_parse(const char *text, double *us, double *bw);

/* CHORUS_NET's figures: 0 when it is unset (or empty), 1 with *us and
 * *bw set, -1 when malformed (with an error naming it). */
int chorus_netprobe_setting(double *us, double *bw);

/* The figures every rank of comm (on two hosts or more, connections up)
 * prices with, alike on every rank: CHORUS_NET's, else those the first
 * rank measured with the first rank of another host (a few round trips
 * and a few MiB; bounded by CHORUS_BOOTSTRAP_TIMEOUT), taken by all. */
ncclResult_t chorus_netprobe_run(struct ncclComm *comm, double *us, double *bw);

#endif

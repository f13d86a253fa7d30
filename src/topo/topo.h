/*
 * topo.h - who shares what with whom.
 *
 * Each rank describes itself (host identity, process identity, device) in a
 * fixed-size record; records are allgathered at init. From them we derive,
 * for every pair of ranks, whether they share a host (so shared memory
 * works), share a process (so plain pointers work), and the host grouping the
 * algorithms use.
 *
 * The host identity hashes the host name, the kernel boot id, the network
 * namespace and the /dev/shm mount, or takes NCCL_HOSTID when set: two
 * containers or network namespaces on one machine count as different hosts,
 * which is what they are as far as addresses and shared memory go.
 */
#ifndef CHORUS_TOPO_TOPO_H
#define CHORUS_TOPO_TOPO_H

#include <stdint.h>

#include "nccl.h"
#include "util/affinity.h"

typedef struct chorus_rank_info {
  uint64_t host_hash;
  uint64_t machine_hash; /* the machine whose CPUs it runs on: host name and boot, whatever
                            NCCL_HOSTID and namespaces make of it */
  uint64_t proc_hash;
  int32_t rank;
  int32_t pid;
  int32_t device;     /* CUDA device, or -1 for a host-memory rank */
  int32_t quota_cpus; /* its CPU quota in CPUs (a container's limit), 0: none */
  char hostname[64];
  char bus_id[16];    /* its GPU's PCI address (core fills it), or "" */
  chorus_cpuset cpus; /* the CPUs its calling thread may run on */
} chorus_rank_info;

typedef struct chorus_topo {
  int nranks;
  int rank;
  chorus_rank_info *info; /* nranks records */
  int nhosts;
  int *host_of;        /* host index of each rank (hosts numbered by first rank) */
  int *local_index;    /* index of each rank among the ranks of its host */
  int *nlocal_of_host; /* ranks per host */
  int nlocal;          /* ranks on this rank's host */
  int nmachine;        /* ranks on this rank's machine (its CPUs), hosts or not */
  int machine_cpus;    /* the CPUs those ranks may run on at once, together */
  int *local_ranks;    /* those ranks, ascending */
} chorus_topo;

/* What a machine's ranks may run on at once, their records added one by
 * one: the union of their CPU sets, capped by their CPU quota (the
 * largest where every rank has one, none where any has none: ranks of one
 * container share theirs, ranks of several count as one's). Zeroed:
 * none added yet. */
typedef struct chorus_machine_cpus {
  chorus_cpuset set;
  int quota;  /* CPUs, 0: none */
  int nranks; /* records added */
} chorus_machine_cpus;

void chorus_machine_cpus_add(chorus_machine_cpus *m, const chorus_rank_info *r);
/* How many CPUs the ranks added may run on at once (at least 1). */
int chorus_machine_cpus_count(const chorus_machine_cpus *m);

/* Fills this rank's record. */
ncclResult_t chorus_topo_self(chorus_rank_info *me, int rank, int device);

/* Builds the derived tables from the allgathered records (takes ownership of
 * info). */
ncclResult_t chorus_topo_build(chorus_topo *t, chorus_rank_info *info, int nranks, int rank);
void chorus_topo_free(chorus_topo *t);

/* The host of `rank` in words, for messages about a peer that is lost:
 * "host 1 (node-b, ranks 2-3)": its index, its name, its ranks as ranges
 * (cut short with "..." where buf is small). */
void chorus_topo_host_words(const chorus_topo *t, int rank, char *buf, size_t len);

static inline int chorus_topo_same_host(const chorus_topo *t, int a, int b) {
  return t->host_of[a] == t->host_of[b];
}
/* The first host holding another number of ranks than this rank's host,
 * or -1 when every host holds as many (what steps in each host need). */
static inline int chorus_topo_uneven_host(const chorus_topo *t) {
  for (int h = 0; h < t->nhosts; h++)
    if (t->nlocal_of_host[h] != t->nlocal) return h;
  return -1;
}
static inline int chorus_topo_same_proc(const chorus_topo *t, int a, int b) {
  return t->info[a].host_hash == t->info[b].host_hash &&
         t->info[a].proc_hash == t->info[b].proc_hash;
}

#endif

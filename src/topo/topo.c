/*
 * topo.c - see topo.h.
 */
#include "topo/topo.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"

static void read_first_line(const char *path, char *buf, size_t size) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)size, f)) buf[0] = '\0';
  fclose(f);
}

/* Identity of a file system object: device and inode. */
static void file_id(const char *path, uint64_t out[2]) {
  struct stat st;
  if (stat(path, &st) == 0) {
    out[0] = (uint64_t)st.st_dev;
    out[1] = (uint64_t)st.st_ino;
  } else {
    out[0] = out[1] = 0;
  }
}

static uint64_t machine_hash(void) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%s|", chorus_log_hostname());
  read_first_line("/proc/sys/kernel/random/boot_id", buf + n, sizeof buf - (size_t)n);
  return chorus_hash64(buf, strlen(buf), 1);
}

static uint64_t host_hash(void) {
  const char *id = chorus_param_str(CHORUS_P_HOSTID);
  if (id && *id) return chorus_hash64(id, strlen(id), 1);
  uint64_t h = machine_hash();
  /* The network namespace (addresses) and the /dev/shm mount (shared
   * memory): processes that differ in either cannot use the shortcuts of a
   * shared host. The mount namespace itself is not used: `ip netns exec`
   * gives every process a new one while /dev/shm stays shared. */
  uint64_t ids[4];
  file_id("/proc/self/ns/net", ids);
  file_id("/dev/shm", ids + 2);
  return chorus_hash64(ids, sizeof ids, h);
}

void chorus_machine_cpus_add(chorus_machine_cpus *m, const chorus_rank_info *r) {
  chorus_cpuset_add(&m->set, &r->cpus);
  if (m->nranks == 0 || (m->quota && r->quota_cpus))
    m->quota = CHORUS_MAX(m->quota, r->quota_cpus);
  else
    m->quota = 0;
  m->nranks++;
}

int chorus_machine_cpus_count(const chorus_machine_cpus *m) {
  const int n = chorus_cpuset_count(&m->set);
  return m->quota > 0 && m->quota < n ? m->quota : n;
}

ncclResult_t chorus_topo_self(chorus_rank_info *me, int rank, int device) {
  memset(me, 0, sizeof *me);
  me->host_hash = host_hash();
  me->machine_hash = machine_hash();
  chorus_cpuset_self(&me->cpus);
  me->quota_cpus = chorus_cpu_quota();
  me->proc_hash = chorus_process_token();
  me->rank = rank;
  me->pid = (int32_t)getpid();
  me->device = device;
  snprintf(me->hostname, sizeof me->hostname, "%s", chorus_log_hostname());
  return ncclSuccess;
}

void chorus_topo_free(chorus_topo *t) {
  chorus_free(t->info);
  chorus_free(t->host_of);
  chorus_free(t->local_index);
  chorus_free(t->nlocal_of_host);
  chorus_free(t->local_ranks);
  memset(t, 0, sizeof *t);
}

ncclResult_t chorus_topo_build(chorus_topo *t, chorus_rank_info *info, int nranks, int rank) {
  memset(t, 0, sizeof *t);
  t->nranks = nranks;
  t->rank = rank;
  t->info = info;
  t->host_of = chorus_calloc((size_t)nranks, sizeof(int));
  t->local_index = chorus_calloc((size_t)nranks, sizeof(int));
  t->nlocal_of_host = chorus_calloc((size_t)nranks, sizeof(int));
  if (!t->host_of || !t->local_index || !t->nlocal_of_host) goto oom;
  /* Hosts numbered by first rank, through a table of host hashes (linear
   * work in the rank count: communicators of thousands of ranks). */
  size_t cap = 16;
  while (cap < 2 * (size_t)nranks) cap *= 2;
  int *first = chorus_malloc(cap * sizeof *first); /* a rank of the host, -1: empty */
  if (!first) goto oom;
  for (size_t i = 0; i < cap; i++) first[i] = -1;
  for (int r = 0; r < nranks; r++) {
    size_t i = (size_t)(info[r].host_hash * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
    while (first[i] >= 0 && info[first[i]].host_hash != info[r].host_hash) i = (i + 1) & (cap - 1);
    int h;
    if (first[i] < 0) {
      first[i] = r;
      h = t->nhosts++;
    } else {
      h = t->host_of[first[i]];
    }
    t->host_of[r] = h;
    t->local_index[r] = t->nlocal_of_host[h]++;
  }
  chorus_free(first);
  t->nlocal = t->nlocal_of_host[t->host_of[rank]];
  chorus_machine_cpus cpus = {0};
  for (int r = 0; r < nranks; r++)
    if (info[r].machine_hash == info[rank].machine_hash) chorus_machine_cpus_add(&cpus, &info[r]);
  t->nmachine = cpus.nranks;
  t->machine_cpus = chorus_machine_cpus_count(&cpus);
  t->local_ranks = chorus_calloc((size_t)t->nlocal, sizeof(int));
  if (!t->local_ranks) goto oom;
  for (int r = 0, i = 0; r < nranks; r++)
    if (t->host_of[r] == t->host_of[rank]) t->local_ranks[i++] = r;
  return ncclSuccess;
oom:
  chorus_topo_free(t);
  return chorus_error(ncclSystemError, "topology: out of memory");
}

void chorus_topo_host_words(const chorus_topo *t, int rank, char *buf, size_t len) {
  if (!len) return;
  buf[0] = '\0';
  if (!t || !t->host_of || rank < 0 || rank >= t->nranks) return;
  const int h = t->host_of[rank];
  size_t o = (size_t)snprintf(buf, len, "host %d (%s, rank%s ", h, t->info[rank].hostname,
                              t->nlocal_of_host[h] > 1 ? "s" : "");
  int first = 1;
  for (int r = 0; r < t->nranks && o < len; r++) {
    if (t->host_of[r] != h) continue;
    int end = r;
    while (end + 1 < t->nranks && t->host_of[end + 1] == h) end++;
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, end > r ? "%s%d-%d" : "%s%d",
                          first ? "" : ", ", r, end);
    first = 0;
    r = end;
  }
  if (o + 2 <= len) {
    buf[o] = ')';
    buf[o + 1] = '\0';
  } else if (len >= 4) {
    memcpy(buf + len - 4, "...", 4);
  }
}

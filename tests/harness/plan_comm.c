/*
 * plan_comm.c - GPU communicators as the planner sees them (plan_comm.h).
 */
#include "plan_comm.h"

#include <stdio.h>
#include <string.h>

int plan_comm_gpu(chorus_plan_comm *m, int n, int r, uint64_t key, int one_process,
                  size_t p2p_ll_max, uint32_t zc_channels, size_t zc_cta_bytes) {
  char err[256] = "";
  memset(m, 0, sizeof *m);
  m->env.backend = CHORUS_BACKEND_GPU;
  m->env.nranks = n;
  m->env.nhosts = 1;
  m->rank = r;
  m->key = key;
  m->one_process = one_process;
  m->staged = 0;
  m->twoshot_ll_max = 64 << 10;
  m->p2p_ll_max = p2p_ll_max;
  m->channels = 64;
  m->chunk_bytes = 64 << 10;
  m->ring_channels = 32;
  m->ring_chunk = 512 << 10;
  m->twoshot_channels = 32;
  m->twoshot_chunk = 64 << 10;
  m->zc_channels = zc_channels;
  m->zc_cta_bytes = zc_cta_bytes;
  if (chorus_plan_comm_settings(m, err, sizeof err) == 0) return 0;
  fprintf(stderr, "settings: %s\n", err);
  return -1;
}

uint32_t plan_probe_by_rank(void *arg, const chorus_plan_call *c, uint32_t want) {
  return ((const uint32_t *)arg)[c->comm->rank] & want;
}

uint32_t plan_probe_same(void *arg, const chorus_plan_call *c, uint32_t want) {
  (void)c;
  return *(const uint32_t *)arg & want;
}

chorus_task plan_choose_one(const chorus_plan_comm *m, int func, size_t count, size_t esize,
                            const void *send, const void *recv, uint32_t facts) {
  const chorus_plan_probe probe = {plan_probe_same, &facts};
  chorus_plan_call c = {.comm = m,
                        .func = func,
                        .count = count,
                        .esize = esize,
                        .root = 0,
                        .send = send,
                        .recv = recv,
                        .facts = facts & CHORUS_FACT_PREMULSUM,
                        .known = CHORUS_FACT_PREMULSUM};
  chorus_task t;
  char err[256] = "";
  if (chorus_plan_choose(&c, &probe, 0, 1, &t, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "choose: %s\n", err);
    t.algo = -1;
  }
  return t;
}

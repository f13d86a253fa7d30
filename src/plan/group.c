/*
 * group.c - planning a group of calls (plan.h): what moves together.
 *
 * Each call is chosen on its own first, as if its group could meet every
 * need a group can meet. Then the calls that need their partners are
 * checked against them: a zero-copy collective in one process needs every
 * rank's call of it in the group, going zero-copy, with buffers every GPU
 * reaches; a copy-engine collective needs every rank's call in the group,
 * one right after another; a copy-engine Send needs its Recv. Where that
 * fails, the algorithm is ruled out for the call and its partners and they
 * are chosen again; the rules only ever lose candidates, so this ends.
 * Last, each communicator's remaining Send/Recv are cut into rounds.
 */
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"
#include "util/alloc.h"
#include "util/misc.h"

#define MAXR CHORUS_PLAN_MAX_RANKS
/* Groups of thousands of calls are not worth the quadratic matching: their
 * calls are planned one by one. */
#define MATCH_MAX 1024

size_t chorus_plan_match_colls(const uint64_t *key, const uint64_t *seq, const int *rank,
                               const int *nranks, const uint8_t *cand, size_t n, int *match) {
  size_t full = 0;
  for (size_t i = 0; i < n * MAXR; i++) match[i] = -1;
  for (size_t i = 0; i < n; i++) {
    if (!cand[i] || nranks[i] < 2 || nranks[i] > MAXR) continue;
    int found = 0;
    for (size_t j = 0; j < n; j++) {
      const int p = rank[j];
      if (!cand[j] || key[j] != key[i] || seq[j] != seq[i] || nranks[j] != nranks[i] || p < 0 ||
          p >= nranks[i] || match[i * MAXR + (size_t)p] >= 0)
        continue;
      match[i * MAXR + (size_t)p] = (int)j;
      found++;
    }
    full += found == nranks[i];
  }
  return full;
}

/* The index of the k-th (from 0) call of c[] that is a `send` of rank
 * `rank` with peer `peer` in communicator `key`, moving bytes; -1 if none. */
static long kth(const chorus_plan_p2p *c, size_t n, uint64_t key, int rank, int peer, int send,
                size_t k) {
  for (size_t i = 0; i < n; i++)
    if (c[i].key == key && c[i].rank == rank && c[i].peer == peer && c[i].send == send &&
        c[i].bytes && k-- == 0)
      return (long)i;
  return -1;
}

size_t chorus_plan_pair_p2p(const chorus_plan_p2p *c, size_t n, long *pair) {
  size_t pairs = 0;
  for (size_t i = 0; i < n; i++) pair[i] = -1;
  for (size_t i = 0; i < n; i++) {
    const chorus_plan_p2p *s = &c[i];
    if (!s->send || !s->key || !s->want || !s->bytes || s->peer == s->rank) continue;
    /* This Send's number among its rank's sends to that peer (calls of 0
     * bytes match nothing, as in the kernels' rounds), and the receive of
     * the same number there. */
    size_t k = 0;
    for (size_t j = 0; j < i; j++)
      k += c[j].key == s->key && c[j].rank == s->rank && c[j].peer == s->peer && c[j].send &&
           c[j].bytes;
    const long r = kth(c, n, s->key, s->peer, s->rank, 0, k);
    if (r < 0 || c[r].bytes != s->bytes || !c[r].want) continue;
    /* Copies run at once, in no order among themselves: a destination that
     * another transfer reads, or a source that another writes, is left to
     * the kernels (an in-place ring shift, say). */
    int clash = 0;
    for (size_t j = 0; j < n && !clash; j++)
      clash = c[j].send ? chorus_ranges_meet(c[r].buf, c[r].bytes, c[j].buf, c[j].bytes)
                        : chorus_ranges_meet(s->buf, s->bytes, c[j].buf, c[j].bytes);
    if (clash) continue;
    pair[i] = r;
    pair[r] = (long)i;
    pairs++;
  }
  return pairs;
}

size_t chorus_plan_ce_leads(const uint8_t *cand, const uint64_t *desc, const int *nranks,
                            const int *match, size_t n, long *lead) {
  size_t calls = 0;
  for (size_t i = 0; i < n; i++) {
    lead[i] = -1;
    if (!cand[i] || nranks[i] < 1 || nranks[i] > MAXR) continue;
    long lo = (long)n, hi = -1;
    int ok = 1;
    for (int p = 0; p < nranks[i] && ok; p++) {
      const int j = match[i * MAXR + (size_t)p];
      ok = j >= 0 && (size_t)j < n && cand[j] && desc[j] == desc[i];
      if (ok && j < lo) lo = j;
      if (ok && j > hi) hi = j;
    }
    if (!ok || hi - lo + 1 != nranks[i]) continue;
    lead[i] = lo;
    calls += (long)i == lo;
  }
  return calls;
}

/* ---- the group ---------------------------------------------------------------- */

typedef struct work {
  chorus_plan_call *calls;
  const chorus_plan_probe *probe;
  chorus_task *tasks;
  size_t n;
  uint32_t *exclude; /* per call: algorithms ruled out */
  uint64_t *key, *seq, *desc;
  int *rank, *nranks, *match;
  uint8_t *cand;
  long *lead;
  chorus_plan_p2p *p2p;
} work;

/* Whether a zero-copy collective through the group needs this (one
 * process, no symmetric windows, which carry their own buffers). */
static int zc_by_group(const work *w, size_t i) {
  return w->tasks[i].algo == CHORUS_ALGO_ZEROCOPY && w->calls[i].comm->one_process &&
         !(w->calls[i].facts & CHORUS_FACT_SYM_WINDOWS);
}

/* Rules out algo for call i and every partner of it. */
static void rule_out(work *w, size_t i, int algo) {
  w->exclude[i] |= 1u << algo;
  for (int p = 0; p < MAXR; p++) {
    const int j = w->match[i * MAXR + (size_t)p];
    if (j >= 0) w->exclude[j] |= 1u << algo;
  }
}

static int fact(work *w, size_t i, uint32_t f) {
  chorus_plan_call *c = &w->calls[i];
  if (!(c->known & f)) {
    if (w->probe && w->probe->facts) c->facts |= w->probe->facts(w->probe->arg, c, f) & f;
    c->known |= f;
  }
  return (c->facts & f) != 0;
}

/* Partners of every collective that may go with its group. */
static void match_colls(work *w) {
  for (size_t i = 0; i < w->n; i++) {
    const chorus_plan_call *c = &w->calls[i];
    const int a = w->tasks[i].algo;
    w->cand[i] =
        (uint8_t)(!chorus_func_p2p(c->func) &&
                  (a == CHORUS_ALGO_CE || (a == CHORUS_ALGO_ZEROCOPY && zc_by_group(w, i))));
  }
  chorus_plan_match_colls(w->key, w->seq, w->rank, w->nranks, w->cand, w->n, w->match);
}

/* Zero-copy through the group: every rank's call of it here, going
 * zero-copy alike, its buffers reached by every GPU. 1 when a call was
 * ruled out. */
static int check_zerocopy(work *w) {
  int changed = 0;
  for (size_t i = 0; i < w->n; i++) {
    if (!w->cand[i] || !zc_by_group(w, i)) continue;
    const chorus_plan_call *c = &w->calls[i];
    const int np = w->nranks[i], me = w->rank[i], f = c->func;
    /* AllReduce reads every rank's input and writes every rank's output,
     * AllGather only writes the outputs, ReduceScatter only reads the
     * inputs. */
    const int need_send = f != CHORUS_FUNC_ALLGATHER, need_recv = f != CHORUS_FUNC_REDUCESCATTER;
    int ok = 1;
    for (int p = 0; p < np && ok; p++) {
      const int j = w->match[i * MAXR + (size_t)p];
      ok = j >= 0 && w->tasks[j].algo == CHORUS_ALGO_ZEROCOPY && w->desc[j] == w->desc[i];
      if (ok && p != me)
        ok = (!need_send || fact(w, (size_t)j, CHORUS_FACT_SEND_REACH)) &&
             (!need_recv || fact(w, (size_t)j, CHORUS_FACT_RECV_REACH));
    }
    if (ok) {
      for (int p = 0; p < MAXR; p++) w->tasks[i].peer_call[p] = w->match[i * MAXR + (size_t)p];
    } else {
      rule_out(w, i, CHORUS_ALGO_ZEROCOPY);
      changed = 1;
    }
  }
  return changed;
}

/* Copy-engine collectives: every rank's call, alike, one after another. */
static int check_ce_colls(work *w) {
  int changed = 0;
  for (size_t i = 0; i < w->n; i++)
    w->cand[i] = (uint8_t)(w->cand[i] && w->tasks[i].algo == CHORUS_ALGO_CE);
  chorus_plan_ce_leads(w->cand, w->desc, w->nranks, w->match, w->n, w->lead);
  for (size_t i = 0; i < w->n; i++) {
    if (!w->cand[i]) continue;
    if (w->lead[i] >= 0) {
      w->tasks[i].lead = (int32_t)w->lead[i];
    } else {
      rule_out(w, i, CHORUS_ALGO_CE);
      changed = 1;
    }
  }
  return changed;
}

/* Copy-engine Send/Recv: in matched pairs. A communicator's calls may
 * pair only if all of its Send/Recv may (streams that can be joined), or
 * its calls to one peer would be numbered differently at the two ends. */
static int check_ce_p2p(work *w) {
  int any = 0, changed = 0;
  for (size_t i = 0; i < w->n; i++) {
    chorus_plan_call *c = &w->calls[i];
    memset(&w->p2p[i], 0, sizeof w->p2p[i]);
    if (!chorus_func_p2p(c->func)) continue;
    const int want = w->tasks[i].algo == CHORUS_ALGO_CE;
    any |= want;
    w->p2p[i] = (chorus_plan_p2p){c->comm->key,
                                  c->comm->rank,
                                  c->root,
                                  c->func == CHORUS_FUNC_SEND,
                                  want,
                                  c->count * c->esize,
                                  c->func == CHORUS_FUNC_SEND ? c->send : c->recv};
  }
  if (!any) return 0;
  for (size_t i = 0; i < w->n; i++) {
    chorus_plan_call *c = &w->calls[i];
    if (!chorus_func_p2p(c->func) || !w->p2p[i].key) continue;
    if (c->comm->one_process && fact(w, i, CHORUS_FACT_STREAM_OK)) continue;
    for (size_t j = 0; j < w->n; j++)
      if (w->calls[j].comm == c->comm) w->p2p[j].key = 0;
  }
  long *pair = w->lead; /* free now */
  chorus_plan_pair_p2p(w->p2p, w->n, pair);
  for (size_t i = 0; i < w->n; i++) {
    if (!w->p2p[i].want) continue;
    if (pair[i] >= 0) {
      w->tasks[i].pair = (int32_t)pair[i];
    } else {
      w->exclude[i] |= 1u << CHORUS_ALGO_CE;
      changed = 1;
    }
  }
  return changed;
}

/* Rounds of each communicator's Send/Recv in kernels: the k-th send to p
 * and the k-th receive from p move in round k (calls of 0 bytes move
 * nothing and match nothing). Counted per communicator, send or receive,
 * and peer, in one pass. */
#define ROUND_COMMS 16
static void rounds(work *w) {
  const chorus_plan_comm *comm[ROUND_COMMS];
  int32_t count[ROUND_COMMS][2][MAXR];
  int ncomms = 0;
  for (size_t i = 0; i < w->n; i++) {
    const chorus_plan_call *c = &w->calls[i];
    if (!chorus_func_p2p(c->func) || w->tasks[i].algo == CHORUS_ALGO_CE || !c->count) continue;
    if (c->comm->env.backend != CHORUS_BACKEND_GPU || c->root < 0 || c->root >= MAXR) continue;
    int k = 0;
    while (k < ncomms && comm[k] != c->comm) k++;
    if (k == ncomms) {
      if (ncomms == ROUND_COMMS) { /* many communicators: count the slow way */
        int32_t r = 0;
        for (size_t j = 0; j < i; j++) {
          const chorus_plan_call *d = &w->calls[j];
          r += d->comm == c->comm && d->func == c->func && d->root == c->root && d->count &&
               w->tasks[j].algo != CHORUS_ALGO_CE;
        }
        w->tasks[i].round = r;
        continue;
      }
      comm[ncomms] = c->comm;
      memset(count[ncomms], 0, sizeof count[ncomms]);
      ncomms++;
    }
    w->tasks[i].round = count[k][c->func == CHORUS_FUNC_SEND][c->root]++;
  }
}

void chorus_plan_rounds(const chorus_plan_call *calls, size_t n, chorus_task *tasks) {
  work w;
  memset(&w, 0, sizeof w);
  w.calls = (chorus_plan_call *)calls; /* rounds() only reads them */
  w.tasks = tasks;
  w.n = n;
  for (size_t i = 0; i < n; i++) tasks[i].round = -1;
  rounds(&w);
}

static int choose_all(work *w, int group, char *err, size_t errlen) {
  for (size_t i = 0; i < w->n; i++)
    if (chorus_plan_choose(&w->calls[i], w->probe, w->exclude[i], group, &w->tasks[i], NULL, err,
                           errlen) != 0)
      return -1;
  return 0;
}

/* Whether any call needs its partners (the common small call does not). */
static int any_partnered(const work *w) {
  for (size_t i = 0; i < w->n; i++)
    if (w->tasks[i].algo == CHORUS_ALGO_CE || zc_by_group(w, i)) return 1;
  return 0;
}

/* Bytes of work arrays per call. */
#define PER_CALL                                                                                   \
  (sizeof(uint32_t) + 3 * sizeof(uint64_t) + 2 * sizeof(int) + MAXR * sizeof(int) + sizeof(long) + \
   sizeof(chorus_plan_p2p) + 1)
#define STACK_CALLS 16

static void carve(work *w, char *mem) {
  const size_t n = w->n;
  w->p2p = (chorus_plan_p2p *)mem;
  mem += n * sizeof *w->p2p;
  w->key = (uint64_t *)mem;
  w->seq = w->key + n;
  w->desc = w->seq + n;
  w->lead = (long *)(w->desc + n);
  w->exclude = (uint32_t *)(w->lead + n);
  w->rank = (int *)(w->exclude + n);
  w->nranks = w->rank + n;
  w->match = w->nranks + n;
  w->cand = (uint8_t *)(w->match + n * MAXR);
}

int chorus_plan_group(chorus_plan_call *calls, size_t n, const chorus_plan_probe *probe,
                      chorus_task *tasks, char *err, size_t errlen) {
  _Alignas(16) char stack[STACK_CALLS * PER_CALL];
  work w;
  memset(&w, 0, sizeof w);
  w.calls = calls, w.probe = probe, w.tasks = tasks, w.n = n;
  char *mem = n <= STACK_CALLS ? stack : chorus_malloc(n * PER_CALL);
  if (!mem) {
    snprintf(err, errlen, "out of memory planning a group of %zu calls", n);
    return -1;
  }
  carve(&w, mem);
  memset(w.exclude, 0, n * sizeof *w.exclude);
  int res = -1;
  /* One call, or too many to match: each alone. */
  const int group = n >= 2 && n <= MATCH_MAX;
  for (size_t i = 0; i < n; i++) {
    w.key[i] = calls[i].comm->key;
    w.seq[i] = calls[i].seq;
    w.desc[i] = calls[i].desc;
    w.rank[i] = calls[i].comm->rank;
    w.nranks[i] = calls[i].comm->env.nranks;
  }
  /* Each round rules out at least one algorithm of one call. */
  for (size_t round = 0; round <= n * CHORUS_ALGO_COUNT; round++) {
    if (choose_all(&w, group, err, errlen) != 0) goto out;
    if (!group || !any_partnered(&w)) break;
    match_colls(&w);
    int changed = check_zerocopy(&w);
    changed |= check_ce_colls(&w);
    changed |= check_ce_p2p(&w);
    if (!changed) break;
  }
  rounds(&w);
  res = 0;
out:
  if (mem != stack) chorus_free(mem);
  return res;
}

double chorus_plan_cost_us(const chorus_plan_call *calls, const chorus_task *tasks, size_t n) {
  double best = 0;
  for (size_t i = 0; i < n; i++) {
    int first = 1;
    for (size_t j = 0; j < i && first; j++) first = calls[j].comm != calls[i].comm;
    if (!first) continue;
    double sum = 0;
    for (size_t j = i; j < n; j++) {
      if (calls[j].comm != calls[i].comm) continue;
      if (tasks[j].lead >= 0 && tasks[j].lead != (int32_t)j) continue; /* moved by its lead */
      const double us = chorus_cost_us(calls[j].func, tasks[j].algo, tasks[j].proto,
                                       chorus_plan_size(&calls[j]), &calls[j].comm->env);
      sum += us > 0 ? us : 0;
    }
    if (sum > best) best = sum;
  }
  return best;
}

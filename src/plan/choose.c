/*
 * choose.c - one call's algorithm and protocol (plan.h): rules, needs and
 * filters.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

void chorus_explain_put(chorus_explain *ex, const char *fmt, ...) {
  if (!ex || !ex->buf || ex->used + 1 >= ex->len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(ex->buf + ex->used, ex->len - ex->used, fmt, ap);
  va_end(ap);
  if (k > 0) ex->used = ex->used + (size_t)k < ex->len ? ex->used + (size_t)k : ex->len - 1;
}

uint64_t chorus_plan_size(const chorus_plan_call *c) {
  return chorus_func_size(c->func, c->count, c->esize, c->comm->env.nranks);
}

/* An AllReduce two-shot's share: whole 16-byte units of ceil(count / n)
 * elements (gpu/lower.c cuts it the same way). */
static size_t twoshot_share(const chorus_plan_call *c) {
  const size_t n = (size_t)c->comm->env.nranks, es = c->esize, per = es < 16 ? 16 / es : 1;
  return ((c->count + n - 1) / n + per - 1) / per * per * es;
}

static int aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* Whether fact f holds for c, asking the probe once. */
static int fact(chorus_plan_call *c, const chorus_plan_probe *probe, uint32_t f) {
  if (!(c->known & f)) {
    if (probe && probe->facts) c->facts |= probe->facts(probe->arg, c, f) & f;
    c->known |= f;
  }
  return (c->facts & f) != 0;
}

const char *chorus_plan_hosts_misfit(const chorus_plan_comm *m, int algo) {
  const int across = (chorus_algo_get(algo)->on[m->env.backend].needs & CHORUS_NEED_HOSTS) != 0;
  if (m->env.backend == CHORUS_BACKEND_GPU && m->env.nhosts > 1 && !across)
    return "its kernels reach only the GPUs of one host";
  if (across && m->env.nhosts < 2) return "every rank is on this host";
  /* Host memory's hier has steps inside hosts of as many ranks, two or more. */
  if (algo == CHORUS_ALGO_HIER && m->env.backend == CHORUS_BACKEND_HOST && m->env.nlocal < 2)
    return m->env.nlocal ? "one rank per host: nothing to do inside a host"
                         : "hosts hold different numbers of ranks";
  return NULL;
}

/* Why algo cannot run c at all (NULL: it can, in some protocol). group:
 * the call is planned with its group (needs only a group can meet count
 * as met; chorus_plan_group checks them). Facts are asked for last. */
static const char *cannot(chorus_plan_call *c, const chorus_plan_probe *probe, int algo,
                          int group) {
  const chorus_plan_comm *m = c->comm;
  const int b = m->env.backend, n = m->env.nranks;
  const chorus_algo_info *a = chorus_algo_get(algo);
  if (!chorus_algo_runs(algo, b, c->func)) return "it does not run this function here";
  const uint32_t needs = a->on[b].needs;
  const size_t bytes = c->count * c->esize;
  if ((needs & CHORUS_NEED_RANKS2) && n < 2) return "it needs two ranks or more";
  if ((needs & CHORUS_NEED_NODE_MEM) && !m->env.node)
    return "it needs node memory (every rank on this host, shared memory on)";
  if ((needs & CHORUS_NEED_PEER_READ) && !m->env.peer_read)
    return "the ranks cannot read each other's memory (process_vm_readv refused: ptrace rules)";
  if ((needs & CHORUS_NEED_FITS_MSG) && bytes > m->env.max_msg)
    return "the buffer does not fit one message slot";
  if ((needs & CHORUS_NEED_PEER_ACCESS) && m->staged)
    return "the GPUs do not reach each other (arenas in host memory)";
  const char *why = chorus_plan_hosts_misfit(m, algo);
  if (why) return why;
  switch (algo) {
  case CHORUS_ALGO_ZEROCOPY:
    if (c->facts & CHORUS_FACT_PREMULSUM)
      return "PreMulSum scales each rank's input by that rank's own scalar";
    if (b == CHORUS_BACKEND_HOST) break;
    if (n > CHORUS_PLAN_MAX_RANKS || c->count == 0) return "nothing to move";
    if (c->func != CHORUS_FUNC_ALLREDUCE && bytes % 16) return "blocks are not 16-byte units";
    if (!aligned16(c->send) || !aligned16(c->recv)) return "a buffer is not 16-byte aligned";
    break;
  case CHORUS_ALGO_CE:
    if (n > CHORUS_PLAN_MAX_RANKS || c->count == 0) return "nothing to move";
    if (c->func == CHORUS_FUNC_ALLTOALL && c->send == c->recv)
      return "an AlltoAll in place would overwrite blocks its peers still read";
    break;
  case CHORUS_ALGO_TWOSHOT:
  case CHORUS_ALGO_RING:
    if (b == CHORUS_BACKEND_GPU && c->func == CHORUS_FUNC_ALLREDUCE && c->count < (size_t)n)
      return "fewer elements than ranks";
    break;
  case CHORUS_ALGO_HIER:
    if (!m->env.nlocal) return "hosts hold different numbers of ranks";
    if (b == CHORUS_BACKEND_HOST) break; /* its rings take any count */
    if (c->count == 0) return "nothing to move";
    if ((c->func == CHORUS_FUNC_ALLREDUCE || c->func == CHORUS_FUNC_BROADCAST ||
         c->func == CHORUS_FUNC_REDUCE) &&
        c->count < (size_t)m->env.nlocal)
      return "fewer elements than ranks on a host";
    if (c->func != CHORUS_FUNC_ALLREDUCE && !m->hosts_in_order)
      return "a host's ranks are not consecutive, in place order (its blocks, or the root's host "
             "and place, are not one range)";
    break;
  default:
    break;
  }
  if ((needs & CHORUS_NEED_PEER_BUFS) && !(group && m->one_process) &&
      !fact(c, probe, CHORUS_FACT_SYM_WINDOWS))
    why = "it needs every rank's buffers: symmetric windows, or every rank's call in one group "
          "of this process";
  if (!why && (needs & CHORUS_NEED_ONE_PROC) &&
      !(group && m->one_process && fact(c, probe, CHORUS_FACT_STREAM_OK)))
    why = "it needs every rank's call in one group of this process, on streams of their own "
          "not being captured";
  return why;
}

/* The protocols algo can run c in (bits). */
static uint32_t protos_of(const chorus_plan_call *c, int algo) {
  const chorus_plan_comm *m = c->comm;
  uint32_t p = chorus_algo_get(algo)->on[m->env.backend].protos;
  if (m->env.backend != CHORUS_BACKEND_GPU) return p;
  /* Under maxCTAs an LL launch's few CTAs each carry more lines, and past
   * ll_peer_max bytes per peer (a two-shot's share twice: it sends it in
   * LL lines twice) the rule's algorithm runs faster in Simple steps; but
   * the two-shot on 2 GPUs, which pays only in LL, is passed over (2xH200,
   * 8 and 16 CTAs, 128 KiB-1 MiB: AllReduce and AllGather one-shot in
   * Simple steps 1.1-3.4x faster than in LL, the two-shot in Simple steps
   * 1.5-2.2x slower than the one-shot). */
  if (m->ll_peer_max && (algo == CHORUS_ALGO_ONESHOT || algo == CHORUS_ALGO_TWOSHOT) &&
      (algo == CHORUS_ALGO_TWOSHOT ? 2 * twoshot_share(c) : c->count * c->esize) > m->ll_peer_max) {
    p &= ~CHORUS_PROTO_BIT(CHORUS_PROTO_LL);
    if (algo == CHORUS_ALGO_TWOSHOT && m->env.nranks <= 2) p = 0;
  }
  if (algo == CHORUS_ALGO_TWOSHOT) {
    if (twoshot_share(c) > m->twoshot_ll_max) p &= ~CHORUS_PROTO_BIT(CHORUS_PROTO_LL);
    if (m->channels < 2) p &= ~CHORUS_PROTO_BIT(CHORUS_PROTO_SIMPLE);
  } else if (algo == CHORUS_ALGO_DIRECT) {
    if (c->count * c->esize > m->p2p_ll_max) p &= ~CHORUS_PROTO_BIT(CHORUS_PROTO_LL);
  }
  return p;
}

/* The protocol: `want` if it can run and is allowed, else the first of
 * LL, Simple that is; -1 when none. */
static int pick_proto(uint32_t can, uint32_t allowed, int want) {
  const uint32_t ok = can & allowed;
  if (want >= 0 && (ok & CHORUS_PROTO_BIT(want))) return want;
  if (ok & CHORUS_PROTO_BIT(CHORUS_PROTO_LL)) return CHORUS_PROTO_LL;
  if (ok & CHORUS_PROTO_BIT(CHORUS_PROTO_SIMPLE)) return CHORUS_PROTO_SIMPLE;
  return -1;
}

/* Channels and step of a GPU task, as its kernel runs it; protos: what
 * NCCL_PROTO allows. */
static void shape(const chorus_plan_call *c, uint32_t protos, chorus_task *t) {
  const chorus_plan_comm *m = c->comm;
  t->channels = t->chunk = 0;
  t->tail_proto = t->proto;
  if (m->env.backend != CHORUS_BACKEND_GPU) return;
  if (t->algo == CHORUS_ALGO_RING && c->func == CHORUS_FUNC_ALLREDUCE)
    t->tail_proto = (int8_t)(protos & CHORUS_PROTO_BIT(CHORUS_PROTO_LL) ? CHORUS_PROTO_LL
                                                                        : CHORUS_PROTO_SIMPLE);
  switch (t->algo) {
  case CHORUS_ALGO_RING:
  case CHORUS_ALGO_CHAIN:
    t->channels = m->ring_channels, t->chunk = m->ring_chunk;
    break;
  case CHORUS_ALGO_TWOSHOT:
    if (t->proto == CHORUS_PROTO_SIMPLE)
      t->channels = m->twoshot_channels, t->chunk = m->twoshot_chunk;
    break;
  case CHORUS_ALGO_ZEROCOPY: {
    /* at least zc_cta_bytes of the rank's block per CTA */
    const size_t n = (size_t)m->env.nranks, bytes = c->count * c->esize;
    const size_t block =
        c->func == CHORUS_FUNC_ALLREDUCE ? ((bytes + n - 1) / n + 15) / 16 * 16 : bytes;
    size_t grid = m->zc_cta_bytes ? (block + m->zc_cta_bytes - 1) / m->zc_cta_bytes : 1;
    if (grid < 1) grid = 1;
    if (grid > m->zc_channels) grid = m->zc_channels;
    t->channels = (uint32_t)grid;
    break;
  }
  case CHORUS_ALGO_ONESHOT:
    if (t->proto == CHORUS_PROTO_SIMPLE) t->channels = m->channels, t->chunk = m->chunk_bytes;
    break;
  default:
    break;
  }
}

/* The protocol the defaults give algo for c: that of the first default
 * rule for algo that matches c and names one; -1 when none does. A rule
 * naming an algorithm without a protocol gets it this way, so that the
 * defaults' crossovers between protocols hold for it. */
static int default_proto(const chorus_plan_call *c, int algo) {
  const chorus_plan_comm *m = c->comm;
  const uint64_t size = chorus_plan_size(c);
  for (size_t i = 0; i < m->ndefaults; i++) {
    const chorus_rule *r = &m->defaults[i];
    if (r->algo == algo && r->proto >= 0 &&
        chorus_rule_matches(r, m->env.backend, c->func, m->env.nranks, m->env.nhosts, size))
      return r->proto;
  }
  return -1;
}

/* Tries rule r: 1 with *t filled when it chooses for c. */
static int try_rule(chorus_plan_call *c, const chorus_plan_probe *probe, const chorus_rule *r,
                    uint32_t algos, uint32_t protos, int group, chorus_task *t,
                    chorus_explain *ex) {
  const chorus_plan_comm *m = c->comm;
  if (r->algo == CHORUS_RULE_AUTO) { /* the cheapest the cost model prices */
    double best = -1;
    int priced = 0;
    t->depends = 1; /* it looks at every algorithm */
    /* Why the others cannot run: said for what runs this function on
     * this side of the host boundary. */
    for (int a = 0; a < CHORUS_ALGO_COUNT && ex; a++) {
      const char *why = algos & (1u << a) ? cannot(c, probe, a, group) : NULL;
      if (why && chorus_algo_runs(a, m->env.backend, c->func) && !chorus_plan_hosts_misfit(m, a))
        chorus_explain_put(ex, "  skipped %s: %s\n", chorus_algo_name(a), why);
    }
    for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
      if (!(algos & (1u << a)) || cannot(c, probe, a, group)) continue;
      const int p = pick_proto(protos_of(c, a), protos, default_proto(c, a));
      if (p < 0) continue;
      const double us = chorus_cost_us(c->func, a, p, chorus_plan_size(c), &m->env);
      if (us < 0) continue;
      chorus_explain_put(ex, "%s %s/%s %.1f us", priced++ ? "," : "  priced:", chorus_algo_name(a),
                         chorus_proto_name(p), us);
      if (best < 0 || us < best) best = us, t->algo = (int8_t)a, t->proto = (int8_t)p;
    }
    if (priced) chorus_explain_put(ex, "\n");
    if (best >= 0)
      chorus_explain_put(ex, "  the cost model prices %s/%s cheapest (%.1f us)\n",
                         chorus_algo_name(t->algo), chorus_proto_name(t->proto), best);
    else
      chorus_explain_put(ex, "  the cost model prices nothing that may run\n");
    return best >= 0;
  }
  const uint32_t known = c->known;
  const char *why = NULL;
  if (!(algos & (1u << r->algo)))
    why = "NCCL_ALGO (or the group) excludes it";
  else
    why = cannot(c, probe, r->algo, group);
  /* A rule whose algorithm needs what only facts or the group show makes
   * the choice depend on them, whatever the outcome. */
  if (c->known != known || (chorus_algo_get(r->algo)->on[m->env.backend].needs &
                            (CHORUS_NEED_ONE_PROC | CHORUS_NEED_PEER_BUFS)))
    t->depends = 1;
  int p = -1;
  const int want = r->proto >= 0 ? r->proto : default_proto(c, r->algo);
  if (!why) {
    const uint32_t can = protos_of(c, r->algo);
    p = pick_proto(can, protos, want);
    if (p < 0)
      why = !can           ? "no protocol can run it here"
            : can & protos ? "no protocol"
                           : "NCCL_PROTO leaves it no protocol it can run";
  }
  if (why) {
    chorus_explain_put(ex, "  skipped: %s\n", why);
    return 0;
  }
  t->algo = (int8_t)r->algo;
  t->proto = (int8_t)p;
  if (want >= 0 && p != want)
    chorus_explain_put(ex, "  %s cannot run in %s here (or may not): %s\n",
                       chorus_algo_name(r->algo), chorus_proto_name(want), chorus_proto_name(p));
  return 1;
}

/* Goes through the rules (users' first) with the given masks. */
static int walk(chorus_plan_call *c, const chorus_plan_probe *probe, uint32_t algos,
                uint32_t protos, int group, chorus_task *t, chorus_explain *ex) {
  const chorus_plan_comm *m = c->comm;
  const uint64_t size = chorus_plan_size(c);
  const size_t total = m->nuser + m->ndefaults;
  for (size_t i = 0; i < total; i++) {
    const chorus_rule *r = i < m->nuser ? &m->user[i] : &m->defaults[i - m->nuser];
    if (!chorus_rule_matches(r, m->env.backend, c->func, m->env.nranks, m->env.nhosts, size))
      continue;
    if (ex) {
      char text[160];
      chorus_rule_format(r, text, sizeof text);
      chorus_explain_put(ex, "%s rule %zu matches: %s\n", i < m->nuser ? "CHORUS_TUNE" : "default",
                         i < m->nuser ? i + 1 : i - m->nuser + 1, text);
    }
    if (try_rule(c, probe, r, algos, protos, group, t, ex)) {
      t->rule = (int16_t)i;
      return 1;
    }
  }
  return 0;
}

int chorus_plan_tuner_cell(int func, int algo, int proto) {
  enum { TREE = 0, RING = 1, PAT = 6 };
  if (proto != CHORUS_PROTO_LL && proto != CHORUS_PROTO_SIMPLE) return -1;
  int a = -1;
  switch (algo) {
  case CHORUS_ALGO_RING:
    if (func == CHORUS_FUNC_ALLREDUCE || func == CHORUS_FUNC_ALLGATHER ||
        func == CHORUS_FUNC_REDUCESCATTER)
      a = RING;
    break;
  case CHORUS_ALGO_CHAIN:
    if (func == CHORUS_FUNC_BROADCAST || func == CHORUS_FUNC_REDUCE) a = RING;
    break;
  case CHORUS_ALGO_TREE:
    if (func == CHORUS_FUNC_ALLREDUCE) a = TREE;
    break;
  case CHORUS_ALGO_RD:
    if (func == CHORUS_FUNC_ALLGATHER || func == CHORUS_FUNC_REDUCESCATTER) a = PAT;
    break;
  default:
    break;
  }
  /* Chorus's protocols are numbered as NCCL's (LL 0, Simple 2). */
  return a < 0 ? -1 : a * CHORUS_TUNER_PROTOS + proto;
}

/* A tuner plugin's say where the defaults chose t (algos and protos: what
 * the filters allow). The table holds what can run the call at the cost
 * model's prices; the tuner may change any of them, as NCCL lets it, and
 * then the cheapest cell it left runs, unless Chorus's own choice, where
 * it has no cell, is cheaper still at its own price: a tuner that edits
 * nothing, or that fails, leaves the choice alone. Cells the tuner fills
 * where nothing of Chorus runs (nvls, collnet) are passed over. Sets
 * *max_channels to the channels it asks for at most (0: any). */
static void ask_tuner(chorus_plan_call *c, const chorus_plan_probe *probe, uint32_t algos,
                      uint32_t protos, int group, chorus_task *t, chorus_explain *ex,
                      int *max_channels) {
  const chorus_plan_comm *m = c->comm;
  const int nf = chorus_func_nccl_code(c->func);
  if (!m->tuner.reprice || m->env.nranks < 2 || nf > 4) return;
  enum { CELLS = CHORUS_TUNER_ALGOS * CHORUS_TUNER_PROTOS };
  const uint64_t size = chorus_plan_size(c);
  float cost[CHORUS_TUNER_ALGOS][CHORUS_TUNER_PROTOS], was[CELLS];
  int who[CELLS];
  float *cell = &cost[0][0];
  for (int k = 0; k < CELLS; k++) cell[k] = -1.0f, who[k] = -1;
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    if (!(algos & (1u << a)) || cannot(c, probe, a, group)) continue;
    const uint32_t can = protos_of(c, a) & protos;
    for (int p = 0; p < CHORUS_PROTO_COUNT; p++) {
      const int k = chorus_plan_tuner_cell(c->func, a, p);
      if (k < 0 || !(can & CHORUS_PROTO_BIT(p))) continue;
      const double us = chorus_cost_us(c->func, a, p, size, &m->env);
      if (us >= 0) cell[k] = (float)us, who[k] = a;
    }
  }
  memcpy(was, cell, sizeof was);
  t->depends = 1; /* the tuner may answer otherwise another time */
  int nch = 0;
  if (m->tuner.reprice(m->tuner.arg, nf, size, cost, &nch) != 0) {
    chorus_explain_put(ex, "  the tuner plugin failed: the choice stands\n");
    return;
  }
  *max_channels = nch > 0 ? nch : 0;
  int changed = 0, best = -1;
  for (int k = 0; k < CELLS; k++) {
    if (cell[k] == was[k]) continue;
    if (who[k] < 0) {
      chorus_explain_put(
          ex, "  the tuner plugin priced NCCL's cell %d/%d, which Chorus cannot run here\n",
          k / CHORUS_TUNER_PROTOS, k % CHORUS_TUNER_PROTOS);
      continue;
    }
    changed = 1;
    chorus_explain_put(ex, "  the tuner plugin repriced %s/%s: %.1f -> %.1f us\n",
                       chorus_algo_name(who[k]), chorus_proto_name(k % CHORUS_TUNER_PROTOS),
                       (double)was[k], (double)cell[k]);
  }
  if (!changed) return;
  for (int k = 0; k < CELLS; k++)
    if (who[k] >= 0 && cell[k] >= 0 && (best < 0 || cell[k] < cell[best])) best = k;
  const int own_cell = chorus_plan_tuner_cell(c->func, t->algo, t->proto);
  /* Chorus's own choice at its price: its cell's, as the tuner left it
   * (below 0: the tuner ruled it out), or where it has none, the model's
   * (none: the tuner's cheapest wins). */
  const double own = own_cell >= 0 && who[own_cell] >= 0
                         ? (double)cell[own_cell]
                         : chorus_cost_us(c->func, t->algo, t->proto, size, &m->env);
  if (best < 0 || (own >= 0 && own <= (double)cell[best])) {
    chorus_explain_put(ex, "  the choice stands after the tuner plugin\n");
    return;
  }
  t->algo = (int8_t)who[best];
  t->proto = (int8_t)(best % CHORUS_TUNER_PROTOS);
  chorus_explain_put(ex, "  the tuner plugin's table prices %s/%s cheapest (%.1f us)\n",
                     chorus_algo_name(t->algo), chorus_proto_name(t->proto), (double)cell[best]);
}

int chorus_plan_choose(chorus_plan_call *c, const chorus_plan_probe *probe, uint32_t exclude,
                       int group, chorus_task *t, chorus_explain *ex, char *err, size_t errlen) {
  const chorus_plan_comm *m = c->comm;
  const chorus_algo_filter *f = &m->filter;
  memset(t, 0, sizeof *t);
  t->lead = t->pair = t->round = -1;
  t->depends = exclude != 0; /* what was ruled out, the group ruled out */
  for (int p = 0; p < CHORUS_PLAN_MAX_RANKS; p++) t->peer_call[p] = -1;
  const uint32_t all_algos = (1u << CHORUS_ALGO_COUNT) - 1;
  const uint32_t all_protos = (1u << CHORUS_PROTO_COUNT) - 1;
  uint32_t algos = f->algos[c->func] & ~exclude, protos = f->protos[c->func];
  /* One rank: every algorithm is a local copy, and no filter applies (host
   * memory). A GPU AllReduce of fewer elements than ranks has no shares to
   * split: one exchange, whatever the lists say (nccl-tests' own result
   * checks are such calls). */
  if (m->env.backend == CHORUS_BACKEND_HOST) /* one protocol: NCCL_PROTO does not apply */
    protos = all_protos;
  if (m->env.nranks == 1 && m->env.backend == CHORUS_BACKEND_HOST) {
    algos = all_algos & ~exclude;
  } else if (m->env.backend == CHORUS_BACKEND_GPU && m->env.nhosts == 1 &&
             c->func == CHORUS_FUNC_ALLREDUCE && c->count < (size_t)m->env.nranks) {
    algos = 1u << CHORUS_ALGO_ONESHOT;
    chorus_explain_put(ex, "fewer elements than ranks: one exchange (oneshot)\n");
  }
  int ok = walk(c, probe, algos, protos, group, t, ex);
  /* A plain list that leaves this function nothing it can run here does
   * not bind it, as in NCCL: NCCL_ALGO's first, then NCCL_PROTO's. */
  if (!ok && !f->algo_named[c->func] && algos != (all_algos & ~exclude)) {
    chorus_explain_put(ex,
                       "NCCL_ALGO leaves %s nothing and does not name it: it does not "
                       "apply\n",
                       chorus_func_name(c->func));
    algos = all_algos & ~exclude;
    ok = walk(c, probe, algos, protos, group, t, ex);
  }
  if (!ok && !f->proto_named[c->func] && protos != all_protos) {
    chorus_explain_put(ex,
                       "NCCL_PROTO leaves %s nothing and does not name it: it does not "
                       "apply\n",
                       chorus_func_name(c->func));
    protos = all_protos;
    ok = walk(c, probe, algos, protos, group, t, ex);
  }
  if (!ok) {
    char have[160] = "";
    size_t o = 0;
    for (int a = 0; a < CHORUS_ALGO_COUNT && o < sizeof have - 16; a++)
      if (chorus_algo_runs(a, m->env.backend, c->func) && !cannot(c, probe, a, group))
        o +=
            (size_t)snprintf(have + o, sizeof have - o, "%s%s", o ? ", " : "", chorus_algo_name(a));
    snprintf(err, errlen,
             "NCCL_ALGO and NCCL_PROTO allow no algorithm Chorus can run for %s of %llu bytes on "
             "%d %s%s (it could run: %s)",
             chorus_func_name(c->func), (unsigned long long)chorus_plan_size(c), m->env.nranks,
             m->env.backend == CHORUS_BACKEND_GPU ? "GPU" : "rank", m->env.nranks == 1 ? "" : "s",
             o ? have : "nothing");
    return -1;
  }
  int max_channels = 0;
  if (t->rule >= (int)m->nuser) ask_tuner(c, probe, algos, protos, group, t, ex, &max_channels);
  shape(c, protos, t);
  /* Of the kernels, zero-copy's take their CTAs per call: a tuner's cap
   * applies there; the FIFO kernels' channels are their communicator's. */
  if (max_channels && t->algo == CHORUS_ALGO_ZEROCOPY && t->channels > (uint32_t)max_channels)
    t->channels = (uint32_t)max_channels;
  chorus_explain_put(ex, "-> %s/%s", chorus_algo_name(t->algo), chorus_proto_name(t->proto));
  if (t->channels) {
    chorus_explain_put(ex, ", %u channels", t->channels);
    /* The kernels double them from big_from where their FIFOs hold it
     * (device/ring.cu, pipe.cu): copies, rings and chains, not reductions
     * through the pipeline. */
    const int doubles = t->algo == CHORUS_ALGO_RING || t->algo == CHORUS_ALGO_CHAIN ||
                        (t->algo == CHORUS_ALGO_ONESHOT && !chorus_func_reduces(c->func));
    if (doubles && m->big_from && chorus_plan_size(c) >= m->big_from)
      chorus_explain_put(ex, " (up to twice that from CHORUS_GPU_BIG_FROM)");
  }
  if (t->chunk) chorus_explain_put(ex, ", steps of %u bytes", t->chunk);
  chorus_explain_put(ex, "\n");
  return 0;
}

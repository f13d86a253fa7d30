/*
 * algos.c - the algorithm table and the NCCL_ALGO / NCCL_PROTO filters
 * (algos.h).
 */
#include "algo/algos.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/misc.h"

#define F(x)    CHORUS_FUNC_BIT(CHORUS_FUNC_##x)
#define P(x)    CHORUS_PROTO_BIT(CHORUS_PROTO_##x)
#define NEED(x) CHORUS_NEED_##x
#define COLLS   CHORUS_FUNC_ALL_COLLS

static const chorus_algo_info algos[CHORUS_ALGO_COUNT] = {
    {CHORUS_ALGO_RING,
     "ring",
     "each rank streams chunks to the next around the ring (AllReduce: 2(n-1) steps)",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER), P(SIMPLE), 0},
      [CHORUS_BACKEND_GPU] = {F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER), P(SIMPLE),
                              NEED(RANKS2)}}},
    {CHORUS_ALGO_CHAIN,
     "chain",
     "Broadcast and Reduce: chunks flow along the ring from the root or to it",
     {[CHORUS_BACKEND_HOST] = {F(BROADCAST) | F(REDUCE), P(SIMPLE), 0},
      [CHORUS_BACKEND_GPU] = {F(BROADCAST) | F(REDUCE), P(SIMPLE), NEED(RANKS2)}}},
    {CHORUS_ALGO_DIRECT,
     "direct",
     "each rank's transfers go straight to each peer over its pair's channel, all at once",
     {[CHORUS_BACKEND_HOST] = {F(ALLTOALL) | F(GATHER) | F(SCATTER) | F(SEND), P(SIMPLE), 0},
      [CHORUS_BACKEND_GPU] = {F(SEND), P(LL) | P(SIMPLE), 0}}},
    {CHORUS_ALGO_ONESHOT,
     "oneshot",
     "every rank hands all its data to every peer at once; each takes what it needs",
     {[CHORUS_BACKEND_HOST] = {COLLS, P(SIMPLE), NEED(NODE_MEM)},
      [CHORUS_BACKEND_GPU] = {COLLS, P(LL) | P(SIMPLE), 0}}},
    {CHORUS_ALGO_TWOSHOT,
     "twoshot",
     "AllReduce: each rank reduces its share of everyone's data, then all gather the shares",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE), P(SIMPLE), NEED(NODE_MEM)},
      [CHORUS_BACKEND_GPU] = {F(ALLREDUCE), P(LL) | P(SIMPLE), NEED(RANKS2)}}},
    {CHORUS_ALGO_RD,
     "rd",
     "recursive doubling, log2(n) pairwise exchanges: AllReduce swaps the whole buffer, "
     "AllGather the blocks gathered so far; ReduceScatter halves the blocks each time",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER), P(SIMPLE),
                               NEED(FITS_MSG)}}},
    {CHORUS_ALGO_ZEROCOPY,
     "zerocopy",
     "ranks read the peers' own buffers, no staging: GPU kernels; on host memory one copy "
     "per byte (memcpy in a process, process_vm_readv between processes)",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER) | F(ALLTOALL) |
                                   F(BROADCAST) | F(GATHER) | F(SCATTER),
                               P(SIMPLE), NEED(RANKS2) | NEED(NODE_MEM) | NEED(PEER_READ)},
      [CHORUS_BACKEND_GPU] = {F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER), P(SIMPLE),
                              NEED(RANKS2) | NEED(PEER_ACCESS) | NEED(PEER_BUFS)}}},
    {CHORUS_ALGO_CE,
     "copyengine",
     "cudaMemcpyAsync between the ranks' buffers, joined by events; no kernel",
     {[CHORUS_BACKEND_GPU] = {F(BROADCAST) | F(ALLGATHER) | F(ALLTOALL) | F(SEND), P(SIMPLE),
                              NEED(RANKS2) | NEED(PEER_ACCESS) | NEED(ONE_PROC)}}},
    {CHORUS_ALGO_HIER,
     "hier",
     "across hosts: steps among each host's ranks around one step across hosts per place on "
     "the host (GPUs: kernels in the host, gpu/proxy.c; host memory: rings, coll/hier.c)",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE), P(SIMPLE), NEED(RANKS2) | NEED(HOSTS)},
      [CHORUS_BACKEND_GPU] = {F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER) | F(BROADCAST) |
                                  F(REDUCE),
                              P(SIMPLE), NEED(RANKS2) | NEED(HOSTS)}}},
    {CHORUS_ALGO_STAGED,
     "staged",
     "GPUs across hosts: the whole call copied to pinned host memory, run as a host call, "
     "copied back",
     {[CHORUS_BACKEND_GPU] = {COLLS | F(SEND), P(SIMPLE), NEED(HOSTS)}}},
    {CHORUS_ALGO_TREE,
     "tree",
     "AllReduce: each half of the buffer reduced up a binary tree and sent back down it, "
     "the two trees mirrored; Broadcast and Reduce: down or up a binomial tree from the root "
     "(depth log2(n), for many hosts)",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE) | F(BROADCAST) | F(REDUCE), P(SIMPLE), NEED(RANKS2)}}},
    {CHORUS_ALGO_ORDERED,
     "ordered",
     "every rank's contribution gathered, then added in rank order ((r0 + r1) + r2) + ...: "
     "the same bits whatever the sizes and paths; only with CHORUS_REPRODUCIBLE=1",
     {[CHORUS_BACKEND_HOST] = {F(ALLREDUCE) | F(REDUCESCATTER) | F(REDUCE), P(SIMPLE), 0}}},
};

static const char *const proto_names[CHORUS_PROTO_COUNT] = {"LL", "LL128", "Simple"};
static const char *const backend_names[CHORUS_BACKEND_COUNT] = {"host", "gpu"};

/* NCCL's algorithm names Chorus has no algorithm for: accepted and ignored. */
static const char *const nccl_only_algos[] = {"collnetdirect", "collnetchain", "nvls", "nvlstree",
                                              "pat"};

const chorus_algo_info *chorus_algo_get(int algo) {
  return algo >= 0 && algo < CHORUS_ALGO_COUNT ? &algos[algo] : NULL;
}

const char *chorus_algo_name(int algo) {
  return algo >= 0 && algo < CHORUS_ALGO_COUNT ? algos[algo].name : "?";
}

const char *chorus_proto_name(int proto) {
  return proto >= 0 && proto < CHORUS_PROTO_COUNT ? proto_names[proto] : "?";
}

const char *chorus_backend_name(int backend) {
  return backend >= 0 && backend < CHORUS_BACKEND_COUNT ? backend_names[backend] : "?";
}

int chorus_algo_by_name(const char *name, size_t len) {
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++)
    if (chorus_word_is(name, len, algos[a].name)) return a;
  return -1;
}

int chorus_proto_by_name(const char *name, size_t len) {
  for (int p = 0; p < CHORUS_PROTO_COUNT; p++)
    if (chorus_word_is(name, len, proto_names[p])) return p;
  return -1;
}

int chorus_algo_runs(int algo, int backend, int func) {
  const chorus_algo_info *a = chorus_algo_get(algo);
  return a && backend >= 0 && backend < CHORUS_BACKEND_COUNT &&
         (a->on[backend].funcs & chorus_func_bit(func)) != 0;
}

/* ---- NCCL_ALGO, NCCL_PROTO --------------------------------------------------- */

typedef struct vocab {
  const char *var; /* the variable, for messages */
  int count;
  int (*lookup)(const char *, size_t);
  int (*foreign)(const char *, size_t); /* NCCL's word Chorus lacks: ignored */
  int plain_p2p;                        /* a plain list also binds Send/Recv */
} vocab;

static int nccl_only_algo(const char *w, size_t len) {
  for (size_t i = 0; i < sizeof nccl_only_algos / sizeof nccl_only_algos[0]; i++)
    if (chorus_word_is(w, len, nccl_only_algos[i])) return 1;
  return 0;
}
static int nccl_only_proto(const char *w, size_t len) {
  return chorus_word_is(w, len, "LL128");
}

static const char *skip_space(const char *s, const char *end) {
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  return s;
}
static const char *trim_end(const char *s, const char *end) {
  while (end > s && (end[-1] == ' ' || end[-1] == '\t')) end--;
  return end;
}

/* One list over [s, end): "a,b" or "^a,b" into *mask (all bits of count
 * when empty). -1 with err on an unknown word. */
static int parse_list(const vocab *v, const char *s, const char *end, uint32_t *mask, char *err,
                      size_t errlen) {
  const uint32_t all = (1u << v->count) - 1;
  s = skip_space(s, end);
  int exclude = 0;
  if (s < end && *s == '^') exclude = 1, s++;
  uint32_t m = 0;
  while (s < end) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *wend = comma ? comma : end;
    const char *w = skip_space(s, wend), *we = trim_end(w, wend);
    if (we > w) {
      const int id = v->lookup(w, (size_t)(we - w));
      if (id >= 0) {
        m |= 1u << id;
      } else if (v->foreign(w, (size_t)(we - w))) {
        INFO(CHORUS_TUNING | CHORUS_ENV, "%s: \"%.*s\" is NCCL's, not Chorus's; ignoring it",
             v->var, (int)(we - w), w);
      } else {
        snprintf(err, errlen, "%s: unknown name \"%.*s\"", v->var, (int)(we - w), w);
        return -1;
      }
    }
    s = comma ? comma + 1 : end;
  }
  *mask = exclude ? all & ~m : m;
  return 0;
}

/* The whole variable into out[func] and named[func]. */
static int parse_var(const vocab *v, const char *spec, uint32_t *out, uint8_t *named, char *err,
                     size_t errlen) {
  const uint32_t all = (1u << v->count) - 1;
  for (int f = 0; f < CHORUS_FUNC_COUNT; f++) out[f] = all, named[f] = 0;
  if (!spec || !*spec) return 0;
  const char *end = spec + strlen(spec);
  if (!strchr(spec, ':')) { /* a plain list: every collective */
    uint32_t m;
    if (parse_list(v, spec, end, &m, err, errlen) != 0) return -1;
    for (int f = 1; f < (v->plain_p2p ? CHORUS_FUNC_COUNT : CHORUS_FUNC_SEND); f++) out[f] = m;
    return 0;
  }
  for (const char *s = spec; s < end;) {
    const char *semi = memchr(s, ';', (size_t)(end - s));
    const char *pend = semi ? semi : end;
    const char *colon = memchr(s, ':', (size_t)(pend - s));
    const char *k = skip_space(s, pend);
    if (k < pend) {
      if (!colon) {
        snprintf(err, errlen, "%s: \"%.*s\" names no function (use function:list)", v->var,
                 (int)(pend - k), k);
        return -1;
      }
      const char *ke = trim_end(k, colon);
      const int f = chorus_func_by_key(k, (size_t)(ke - k));
      if (!f) {
        snprintf(err, errlen, "%s: unknown function \"%.*s\"", v->var, (int)(ke - k), k);
        return -1;
      }
      uint32_t m;
      if (parse_list(v, colon + 1, pend, &m, err, errlen) != 0) return -1;
      out[f] = m;
      named[f] = 1;
      if (f == CHORUS_FUNC_SEND) out[CHORUS_FUNC_RECV] = m, named[CHORUS_FUNC_RECV] = 1;
    }
    s = semi ? semi + 1 : end;
  }
  return 0;
}

int chorus_algo_filter_parse(chorus_algo_filter *f, const char *algo, const char *proto, char *err,
                             size_t errlen) {
  /* NCCL_PROTO's plain list binds Send/Recv as well (whether they may
   * use LL), NCCL_ALGO's does not (NCCL's algorithms are collective). */
  const vocab va = {"NCCL_ALGO", CHORUS_ALGO_COUNT, chorus_algo_by_name, nccl_only_algo, 0};
  const vocab vp = {"NCCL_PROTO", CHORUS_PROTO_COUNT, chorus_proto_by_name, nccl_only_proto, 1};
  memset(f, 0, sizeof *f);
  if (parse_var(&va, algo, f->algos, f->algo_named, err, errlen) != 0) return -1;
  return parse_var(&vp, proto, f->protos, f->proto_named, err, errlen);
}

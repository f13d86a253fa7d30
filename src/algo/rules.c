/*
 * rules.c - the default rules of both backends and CHORUS_TUNE (rules.h).
 */
#include "algo/rules.h"

#include <stdio.h>
#include <string.h>

#include "util/misc.h"
#include "util/units.h"

#define KB      1024ull
#define MB      (1024ull * KB)
#define INF     UINT64_MAX
#define F(x)    CHORUS_FUNC_BIT(CHORUS_FUNC_##x)
#define ALGO(x) CHORUS_ALGO_##x
#define ANY     CHORUS_RULE_ANY
#define LL      CHORUS_PROTO_LL
#define SIMPLE  CHORUS_PROTO_SIMPLE
/* Functions whose buffers are one block per rank. */
#define BLOCKED (F(ALLGATHER) | F(REDUCESCATTER) | F(ALLTOALL) | F(GATHER) | F(SCATTER))
#define WHOLE   (F(ALLREDUCE) | F(BROADCAST) | F(REDUCE))
#define G       .backend = CHORUS_BACKEND_GPU

/* Host memory: the cost model (algo/cost.h) prices every algorithm the
 * communicator can run; its constants were fitted to measurements. */
static const chorus_rule host_rules[] = {
    {.funcs = CHORUS_FUNC_ALL,
     .backend = CHORUS_BACKEND_HOST,
     .algo = CHORUS_RULE_AUTO,
     .proto = ANY,
     .hi = INF},
};

/* GPUs: measured crossovers, first match wins (docs/PERFORMANCE.md has
 * the runs). */
static const chorus_rule gpu_rules[] = {
    /* Ranks on several hosts (only hier and staged run there): the cost
     * model prices both with the network's figures (probed at init, or
     * CHORUS_NET). AllReduce, AllGather and ReduceScatter in steps cross
     * the network once per host and copy one block per rank to and from
     * host memory (AllReduce on 2 hosts x 2 GPUs, 4xH200: 2.0-2.7x NCCL's
     * bus bandwidth from 8 MiB), staged whole costs the fewest steps: over
     * loopback (9.5 us, 3.5 GB/s a hop) they cross near 64 KiB. */
    {G, .funcs = CHORUS_FUNC_ALL, .algo = CHORUS_RULE_AUTO, .proto = ANY, .min_hosts = 2,
     .hi = INF},
    /* Copy engine. Send/Recv from 8 MiB: below, joining two streams
     * (about 19 us) costs more than the kernels take (2xH200). Broadcast,
     * AllGather and AlltoAll on 2 GPUs from 64 MiB (1 GiB on 2xH200:
     * Broadcast 1.10x the kernels, AllGather 1.11x, AlltoAll 1.34x; slower
     * below). Not on 3+ GPUs: at 1 GiB on 4xH100 the Broadcast chain of
     * copies took 3257 us against 3163 for the kernels, and each GPU pulling
     * from n-1 peers at once made AllGather and AlltoAll 2.4x slower. */
    {G, .funcs = F(SEND), .algo = ALGO(CE), .proto = ANY, .lo = 8 * MB, .hi = INF},
    {G, .funcs = F(BROADCAST) | F(ALLGATHER) | F(ALLTOALL), .algo = ALGO(CE), .proto = ANY,
     .min_ranks = 2, .max_ranks = 2, .lo = 64 * MB, .hi = INF},
    /* Zero-copy from 1 MiB (below, the LL kernels need no barriers and
     * were faster); AllReduce up to 16 MiB, where the ring overtakes it
     * (2xH100); AllGather and ReduceScatter on 3+ GPUs up to 64 MiB, where
     * the rings do (4xH200: by 1-3% at 128 MiB); on 2 GPUs AllGather to
     * 128 MiB and ReduceScatter to 256 MiB, where the ring on twice the
     * CTAs overtakes it (2xH200, -g 2 and windows, the ring against
     * zero-copy: AllGather 1.04-1.06x at 256 MiB-1 GiB, level at 128 MiB,
     * 0.94x at 64 MiB; ReduceScatter 1.03-1.05x at 512 MiB-1 GiB, level at
     * 256 MiB). */
    {G, .funcs = F(ALLREDUCE), .algo = ALGO(ZEROCOPY), .proto = ANY, .lo = 1 * MB, .hi = 16 * MB},
    {G, .funcs = F(ALLGATHER), .algo = ALGO(ZEROCOPY), .proto = ANY, .max_ranks = 2, .lo = 1 * MB,
     .hi = 128 * MB},
    {G, .funcs = F(REDUCESCATTER), .algo = ALGO(ZEROCOPY), .proto = ANY, .max_ranks = 2,
     .lo = 1 * MB, .hi = 256 * MB},
    {G, .funcs = F(ALLGATHER) | F(REDUCESCATTER), .algo = ALGO(ZEROCOPY), .proto = ANY,
     .min_ranks = 3, .lo = 1 * MB, .hi = 64 * MB},
    /* Rings from 2 MiB per rank's block: streaming to one peer at a time
     * is what the links carry fastest (345-353 GB/s against 310-320 for
     * exchanges with every peer at once, 4xH200). */
    {G, .funcs = F(ALLREDUCE) | F(ALLGATHER) | F(REDUCESCATTER), .algo = ALGO(RING), .proto = ANY,
     .lo = 2 * MB, .lo_per_rank = 1, .hi = INF},
    /* On 2 GPUs the one-shot goes on past 256 KiB: Broadcast and Reduce
     * in LL lines to 384 KiB, Reduce through the FIFOs to 3 MiB (2xH200,
     * 2 processes: Reduce 6.6 us at 256 KiB against 8.3 as a chain,
     * 7.5-11.6 against 8.8-12.2 at 512 KiB-2 MiB, level at 4 MiB;
     * Broadcast 5.9 against 6.9 at 256 KiB, level from 512 KiB). */
    {G, .funcs = F(BROADCAST) | F(REDUCE), .algo = ALGO(ONESHOT), .proto = LL, .max_ranks = 2,
     .lo = 256 * KB, .hi = 384 * KB},
    {G, .funcs = F(REDUCE), .algo = ALGO(ONESHOT), .proto = SIMPLE, .max_ranks = 2, .lo = 384 * KB,
     .hi = 3 * MB},
    /* Chains from 256 KiB; below, the root's fan-out is faster (a chain's
     * three hops cost 7.5-9 us against 5-6 on 4 GPUs). */
    {G, .funcs = F(BROADCAST) | F(REDUCE), .algo = ALGO(CHAIN), .proto = ANY, .lo = 256 * KB,
     .hi = INF},
    /* Two-shot AllReduce on 3+ GPUs from 16 KiB, in LL lines up to 1 MiB;
     * on 2 GPUs it moves what a one-shot moves, and only its LL form
     * (256 KiB-1 MiB) measured faster (FIFO steps at 2 MiB: 22.4 against
     * 19.0 us, 4xH200). */
    {G, .funcs = F(ALLREDUCE), .algo = ALGO(TWOSHOT), .proto = LL, .min_ranks = 3, .lo = 16 * KB,
     .hi = 1 * MB},
    {G, .funcs = F(ALLREDUCE), .algo = ALGO(TWOSHOT), .proto = SIMPLE, .min_ranks = 3,
     .lo = 16 * KB, .hi = INF},
    {G, .funcs = F(ALLREDUCE), .algo = ALGO(TWOSHOT), .proto = LL, .max_ranks = 2, .lo = 256 * KB,
     .hi = 1 * MB},
    /* Send/Recv kernels: LL lines up to 512 KiB, FIFO chunks above. */
    {G, .funcs = F(SEND), .algo = ALGO(DIRECT), .proto = LL, .hi = 512 * KB},
    {G, .funcs = F(SEND), .algo = ALGO(DIRECT), .proto = SIMPLE, .hi = INF},
    /* Exchanges: blocks of 256 KiB per peer and more (1 MiB on 2 GPUs)
     * stream through the FIFOs; smaller ones go in LL lines (4xH200, 4
     * processes, 128-512 KiB AllGather, ReduceScatter, AlltoAll, Gather,
     * Scatter: 8.5-12.8 us through the FIFOs, 5.0-8.9 in LL). */
    {G, .funcs = WHOLE, .algo = ALGO(ONESHOT), .proto = SIMPLE, .min_ranks = 3, .lo = 256 * KB,
     .hi = INF},
    {G, .funcs = WHOLE, .algo = ALGO(ONESHOT), .proto = SIMPLE, .max_ranks = 2, .lo = 1 * MB,
     .hi = INF},
    {G, .funcs = BLOCKED, .algo = ALGO(ONESHOT), .proto = SIMPLE, .min_ranks = 3, .lo = 256 * KB,
     .lo_per_rank = 1, .hi = INF},
    {G, .funcs = BLOCKED, .algo = ALGO(ONESHOT), .proto = SIMPLE, .max_ranks = 2, .lo = 1 * MB,
     .lo_per_rank = 1, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL_COLLS, .algo = ALGO(ONESHOT), .proto = LL, .hi = INF},
    /* Where the filters (NCCL_ALGO, NCCL_PROTO) leave none of the above:
     * the first of these that they allow and that can run the call. */
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(RING), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(CHAIN), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(TWOSHOT), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(ONESHOT), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(DIRECT), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(ZEROCOPY), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(HIER), .proto = ANY, .hi = INF},
    {G, .funcs = CHORUS_FUNC_ALL, .algo = ALGO(CE), .proto = ANY, .hi = INF},
};

const chorus_rule *chorus_rules_default(int backend, size_t *n) {
  if (backend == CHORUS_BACKEND_GPU) {
    *n = sizeof gpu_rules / sizeof gpu_rules[0];
    return gpu_rules;
  }
  *n = sizeof host_rules / sizeof host_rules[0];
  return host_rules;
}

static uint64_t bound(uint64_t b, int per_rank, int nranks) {
  if (!per_rank || b == INF) return b;
  return b > INF / (uint64_t)nranks ? INF : b * (uint64_t)nranks;
}

int chorus_rule_matches(const chorus_rule *r, int backend, int func, int nranks, int nhosts,
                        uint64_t size) {
  if (!(r->funcs & chorus_func_bit(func))) return 0;
  if (r->backend != ANY && r->backend != backend) return 0;
  if (nranks < r->min_ranks || (r->max_ranks && nranks > r->max_ranks)) return 0;
  if (nhosts < r->min_hosts || (r->max_hosts && nhosts > r->max_hosts)) return 0;
  return size >= bound(r->lo, r->lo_per_rank, nranks) &&
         size <= bound(r->hi, r->hi_per_rank, nranks);
}

/* ---- CHORUS_TUNE -------------------------------------------------------------- */

typedef struct span {
  const char *s;
  size_t len;
} span;

static int span_is(span w, const char *word) {
  return chorus_word_is(w.s, w.len, word);
}

/* One bound: a size, "inf", with an optional "*n". */
static int parse_bound(span w, uint64_t *v, uint8_t *per_rank) {
  *per_rank = 0;
  if (w.len >= 2 && (w.s[w.len - 1] == 'n' || w.s[w.len - 1] == 'N') && w.s[w.len - 2] == '*') {
    *per_rank = 1;
    w.len -= 2;
  }
  if (span_is(w, "inf")) {
    *v = INF;
    return *per_rank ? -1 : 0;
  }
  return chorus_size_parse(w.s, w.len, v);
}

/* "lo-hi", "lo-" */
static int parse_sizes(span w, chorus_rule *r) {
  const char *dash = memchr(w.s, '-', w.len);
  if (!dash) return -1;
  span lo = {w.s, (size_t)(dash - w.s)}, hi = {dash + 1, w.len - lo.len - 1};
  if (parse_bound(lo, &r->lo, &r->lo_per_rank) != 0) return -1;
  if (hi.len == 0) {
    r->hi = INF;
    r->hi_per_rank = 0;
  } else if (parse_bound(hi, &r->hi, &r->hi_per_rank) != 0) {
    return -1;
  }
  return 0;
}

/* "3", "3-8", "3-" after "n=" or "h=" */
static int parse_count(span w, uint16_t *min, uint16_t *max) {
  unsigned a = 0, b = 0;
  size_t i = 0;
  for (; i < w.len && w.s[i] >= '0' && w.s[i] <= '9' && a < 10000; i++)
    a = a * 10 + (unsigned)(w.s[i] - '0');
  if (i == 0) return -1;
  if (i == w.len) {
    *min = *max = (uint16_t)a;
    return a ? 0 : -1;
  }
  if (w.s[i++] != '-') return -1;
  size_t j = i;
  for (; i < w.len && w.s[i] >= '0' && w.s[i] <= '9' && b < 10000; i++)
    b = b * 10 + (unsigned)(w.s[i] - '0');
  if (i != w.len || a == 0 || (i > j && b < a)) return -1;
  *min = (uint16_t)a;
  *max = (uint16_t)(i > j ? b : 0);
  return 0;
}

/* "allreduce|allgather" or "*" */
static int parse_funcs(span w, uint32_t *funcs) {
  if (span_is(w, "*")) {
    *funcs = CHORUS_FUNC_ALL;
    return 0;
  }
  uint32_t m = 0;
  for (size_t i = 0; i < w.len;) {
    const char *bar = memchr(w.s + i, '|', w.len - i);
    const size_t end = bar ? (size_t)(bar - w.s) : w.len;
    const int f = chorus_func_by_key(w.s + i, end - i);
    if (!f) return -1;
    m |= chorus_func_bit(f);
    i = end + 1;
  }
  *funcs = m;
  return m ? 0 : -1;
}

/* "ring", "oneshot/LL", "auto" */
static int parse_choice(span w, chorus_rule *r) {
  const char *slash = memchr(w.s, '/', w.len);
  span a = {w.s, slash ? (size_t)(slash - w.s) : w.len};
  if (span_is(a, "auto")) {
    r->algo = CHORUS_RULE_AUTO;
  } else {
    const int id = chorus_algo_by_name(a.s, a.len);
    if (id < 0) return -1;
    r->algo = (int8_t)id;
  }
  r->proto = ANY;
  if (slash) {
    const int p = chorus_proto_by_name(slash + 1, w.len - a.len - 1);
    if (p < 0 || r->algo == CHORUS_RULE_AUTO) return -1;
    r->proto = (int8_t)p;
  }
  return 0;
}

static int looks_like_funcs(span w) {
  if (span_is(w, "*")) return 1;
  const char *bar = memchr(w.s, '|', w.len);
  return chorus_func_by_key(w.s, bar ? (size_t)(bar - w.s) : w.len) != 0;
}

/* Whether the rule's algorithm (and protocol) can run some of its
 * functions on its backends. */
static const char *check_rule(const chorus_rule *r) {
  if (r->algo == CHORUS_RULE_AUTO) return NULL;
  int funcs_ok = 0, proto_ok = 0;
  const chorus_algo_info *a = chorus_algo_get(r->algo);
  for (int b = 0; b < CHORUS_BACKEND_COUNT; b++) {
    if (r->backend != ANY && r->backend != b) continue;
    if (!(a->on[b].funcs & r->funcs)) continue;
    funcs_ok = 1;
    proto_ok |= r->proto == ANY || (a->on[b].protos & CHORUS_PROTO_BIT(r->proto));
  }
  if (!funcs_ok) return "the algorithm runs none of the rule's functions there";
  if (!proto_ok) return "the algorithm does not run in that protocol";
  return NULL;
}

static int parse_rule(span text, chorus_rule *r, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  r->funcs = CHORUS_FUNC_ALL;
  r->backend = ANY;
  r->hi = INF;
  int have_funcs = 0, have_sizes = 0, have_ranks = 0, have_hosts = 0, have_backend = 0,
      have_choice = 0;
  for (size_t i = 0; i <= text.len;) {
    const char *colon = memchr(text.s + i, ':', text.len - i);
    const size_t end = colon ? (size_t)(colon - text.s) : text.len;
    span w = {text.s + i, end - i};
    while (w.len && *w.s == ' ') w.s++, w.len--;
    while (w.len && w.s[w.len - 1] == ' ') w.len--;
    int bad = 0, dup = 0;
    const char *what = "field"; /* what the token looks like, for messages */
    if (w.len == 0) {
      bad = 1, what = "field (it is empty)";
    } else if (span_is(w, "host") || span_is(w, "gpu")) {
      dup = have_backend++, what = "backend";
      r->backend = (int8_t)(span_is(w, "gpu") ? CHORUS_BACKEND_GPU : CHORUS_BACKEND_HOST);
    } else if (w.len > 2 && (w.s[0] == 'n' || w.s[0] == 'N') && w.s[1] == '=') {
      dup = have_ranks++, what = "rank count (n=2, n=3-8, n=3-)";
      bad = parse_count((span){w.s + 2, w.len - 2}, &r->min_ranks, &r->max_ranks) != 0;
    } else if (w.len > 2 && (w.s[0] == 'h' || w.s[0] == 'H') && w.s[1] == '=') {
      dup = have_hosts++, what = "host count (h=1, h=2-)";
      bad = parse_count((span){w.s + 2, w.len - 2}, &r->min_hosts, &r->max_hosts) != 0;
    } else if (w.s[0] >= '0' && w.s[0] <= '9') {
      dup = have_sizes++, what = "size range (0-256K, 1M-inf, 2M*n-)";
      bad = parse_sizes(w, r) != 0 || r->lo > bound(r->hi, r->hi_per_rank, 1);
    } else if (looks_like_funcs(w)) {
      dup = have_funcs++, what = "function list (allreduce|allgather, *)";
      bad = parse_funcs(w, &r->funcs) != 0;
    } else {
      dup = have_choice++, what = "algorithm (auto, ring, oneshot/LL, ...; chorus_info --algos)";
      bad = parse_choice(w, r) != 0;
    }
    if (dup) {
      snprintf(err, errlen, "CHORUS_TUNE: rule \"%.*s\" has a second %s: \"%.*s\"", (int)text.len,
               text.s, what, (int)w.len, w.s);
      return -1;
    }
    if (bad) {
      snprintf(err, errlen, "CHORUS_TUNE: \"%.*s\" in rule \"%.*s\" is not a valid %s", (int)w.len,
               w.s, (int)text.len, text.s, what);
      return -1;
    }
    i = end + 1;
  }
  if (!have_choice) {
    snprintf(err, errlen, "CHORUS_TUNE: rule \"%.*s\" names no algorithm", (int)text.len, text.s);
    return -1;
  }
  const char *why = check_rule(r);
  if (why) {
    snprintf(err, errlen, "CHORUS_TUNE: rule \"%.*s\": %s", (int)text.len, text.s, why);
    return -1;
  }
  return 0;
}

int chorus_rules_parse(const char *text, chorus_rule *out, size_t cap, size_t *n, char *err,
                       size_t errlen) {
  *n = 0;
  if (!text) return 0;
  const size_t len = strlen(text);
  for (size_t i = 0; i < len;) {
    const char *comma = memchr(text + i, ',', len - i);
    const size_t end = comma ? (size_t)(comma - text) : len;
    span w = {text + i, end - i};
    while (w.len && *w.s == ' ') w.s++, w.len--;
    while (w.len && w.s[w.len - 1] == ' ') w.len--;
    if (w.len) {
      if (*n == cap) {
        snprintf(err, errlen, "CHORUS_TUNE: more than %zu rules", cap);
        return -1;
      }
      if (parse_rule(w, &out[*n], err, errlen) != 0) return -1;
      (*n)++;
    }
    i = end + 1;
  }
  return 0;
}

/* ---- printing ------------------------------------------------------------------ */

void chorus_size_format(uint64_t bytes, char *buf, size_t len) {
  if (bytes == INF)
    snprintf(buf, len, "inf");
  else
    chorus_size_print(bytes, buf, len);
}

/* Appends sep then s. */
static size_t put(char *buf, size_t len, size_t o, const char *sep, const char *s) {
  if (o >= len) return o;
  int k = snprintf(buf + o, len - o, "%s%s", sep, s);
  return k < 0 ? o : o + (size_t)k;
}

static size_t put_count(char *buf, size_t len, size_t o, char key, unsigned lo, unsigned hi) {
  char t[32];
  if (hi == lo)
    snprintf(t, sizeof t, "%c=%u", key, lo);
  else if (hi == 0)
    snprintf(t, sizeof t, "%c=%u-", key, lo ? lo : 1);
  else
    snprintf(t, sizeof t, "%c=%u-%u", key, lo ? lo : 1, hi);
  return put(buf, len, o, ":", t);
}

void chorus_rule_format(const chorus_rule *r, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  if ((r->funcs & CHORUS_FUNC_ALL) == CHORUS_FUNC_ALL) {
    o = put(buf, len, o, "", "*");
  } else {
    int first = 1;
    for (int f = 1; f < CHORUS_FUNC_RECV; f++)
      if (r->funcs & chorus_func_bit(f)) {
        o = put(buf, len, o, first ? "" : "|", chorus_func_get(f)->key);
        first = 0;
      }
  }
  if (r->backend != ANY) o = put(buf, len, o, ":", chorus_backend_name(r->backend));
  if (r->min_ranks > 1 || r->max_ranks) o = put_count(buf, len, o, 'n', r->min_ranks, r->max_ranks);
  if (r->min_hosts > 1 || r->max_hosts) o = put_count(buf, len, o, 'h', r->min_hosts, r->max_hosts);
  if (r->lo || r->hi != INF) {
    char lo[32], hi[32];
    chorus_size_format(r->lo, lo, sizeof lo);
    chorus_size_format(r->hi, hi, sizeof hi);
    char range[80];
    snprintf(range, sizeof range, "%s%s-%s%s", lo, r->lo_per_rank ? "*n" : "", hi,
             r->hi_per_rank ? "*n" : "");
    o = put(buf, len, o, ":", range);
  }
  o = put(buf, len, o, ":", r->algo == CHORUS_RULE_AUTO ? "auto" : chorus_algo_name(r->algo));
  if (r->proto != ANY) put(buf, len, o, "/", chorus_proto_name(r->proto));
}

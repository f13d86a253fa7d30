/*
 * rules.h - which algorithm and protocol a call takes, as data.
 *
 * A rule says: for these functions, on this backend, at these rank and
 * host counts, for sizes in this range, take this algorithm in this
 * protocol. Sizes are bytes of the call's larger buffer, as nccl-tests
 * reports them (chorus_func_size); a bound written "2M*n" is 2 MiB times
 * the rank count (a threshold per rank's block). Both bounds are
 * inclusive. The planner takes the first rule that matches the call and
 * whose algorithm can run it and is allowed (plan/plan.h); users' rules
 * (CHORUS_TUNE) come before the defaults.
 *
 * CHORUS_TUNE is a comma-separated list of rules; a rule is fields joined
 * by ':', each recognised by its form, in any order:
 *   allreduce|allgather   functions (NCCL_ALGO's spelling; "*" or none: all)
 *   0-256K, 2M*n-inf      size range (K, M, G, T: binary; "inf" or nothing after
 *                         the '-': no limit; no range: every size)
 *   n=2, n=3-8, n=3-      rank counts; h=1, h=2- host counts
 *   host, gpu             backend (none: both)
 *   ring, oneshot/LL      algorithm, optionally with its protocol (none: the one
 *                         the defaults give it at that size); "auto": the
 *                         cheapest by the cost model
 * e.g. CHORUS_TUNE=allreduce:0-256K:oneshot,allreduce:256K-inf:ring
 */
#ifndef CHORUS_ALGO_RULES_H
#define CHORUS_ALGO_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algos.h"

#define CHORUS_RULE_AUTO (-1) /* algo: the cheapest by the cost model */
#define CHORUS_RULE_ANY  (-1) /* backend, proto: any */
#define CHORUS_RULES_MAX 64   /* most rules of one CHORUS_TUNE */

typedef struct chorus_rule {
  uint32_t funcs;                   /* chorus_func_bit mask */
  int8_t backend;                   /* chorus_backend, or CHORUS_RULE_ANY */
  int8_t algo;                      /* chorus_algo, or CHORUS_RULE_AUTO */
  int8_t proto;                     /* preferred chorus_proto, or CHORUS_RULE_ANY */
  uint8_t lo_per_rank, hi_per_rank; /* the bound is times the rank count */
  uint16_t min_ranks, max_ranks;    /* max 0: no limit */
  uint16_t min_hosts, max_hosts;
  uint64_t lo, hi; /* bytes, inclusive; hi UINT64_MAX: no limit */
} chorus_rule;

/* The default rules of a backend (every measured crossover lives here and
 * nowhere else). */
const chorus_rule *chorus_rules_default(int backend, size_t *n);

/* Whether rule r covers a call of func on backend with nranks ranks on
 * nhosts hosts whose larger buffer is `size` bytes. */
int chorus_rule_matches(const chorus_rule *r, int backend, int func, int nranks, int nhosts,
                        uint64_t size);

/* Parses CHORUS_TUNE text into out[0..cap) (*n rules). Returns 0, or -1
 * with a message naming the bad token in err. NULL or "" is no rules. */
int chorus_rules_parse(const char *text, chorus_rule *out, size_t cap, size_t *n, char *err,
                       size_t errlen);

/* Rule r in CHORUS_TUNE's syntax ("allreduce:n=3-:16K-1M:twoshot/LL"). */
void chorus_rule_format(const chorus_rule *r, char *buf, size_t len);
/* A size as the rules write it ("256K", "inf"). */
void chorus_size_format(uint64_t bytes, char *buf, size_t len);

#endif

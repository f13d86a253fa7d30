/*
 * algos.c - algorithm names and the NCCL_ALGO filter (see algos.h).
 */
#include "algo/algos.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

static const chorus_algo_desc algos[CHORUS_ALGO_COUNT] = {
    {CHORUS_ALGO_RING, "ring",
     "pipelined ring over point-to-point connections (any transport, any rank count)"},
    {CHORUS_ALGO_DIRECT, "direct",
     "a transfer to or from every peer at once (AlltoAll, Gather, Scatter, Send/Recv)"},
    {CHORUS_ALGO_ONESHOT, "oneshot",
     "one host: every rank stages its data once and reads every other rank's (small sizes)"},
    {CHORUS_ALGO_TWOSHOT, "twoshot",
     "one host: every rank reduces its share of the staged data, then all gather (large sizes)"},
    {CHORUS_ALGO_RD, "rd",
     "recursive doubling: log2(n) pairwise exchanges (small AllReduce across hosts)"},
};

static const char *const func_names[CHORUS_FUNC_COUNT] = {
    "?",        "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
    "AlltoAll", "Gather",    "Scatter",   "Send",   "Recv"};

/* NCCL_ALGO's spelling of each function. */
static const char *const func_keys[CHORUS_FUNC_COUNT] = {
    "",         "allreduce", "broadcast", "reduce",   "allgather", "reducescatter",
    "alltoall", "gather",    "scatter",   "sendrecv", "sendrecv"};

const char *chorus_func_name(int func) {
  return (func > 0 && func < CHORUS_FUNC_COUNT) ? func_names[func] : "?";
}

const chorus_algo_desc *chorus_algo_get(chorus_algo id) {
  return (id >= 0 && id < CHORUS_ALGO_COUNT) ? &algos[id] : NULL;
}

static const char *algo_name(int i) {
  return algos[i].name;
}
static const char *proto_name(int i) {
  static const char *const names[CHORUS_PROTO_COUNT] = {"LL", "LL128", "Simple"};
  return names[i];
}

/* Applies one list ("ring,direct" or "^ring") of name(0..count-1) to the
 * mask; `var` names the variable for the log. */
static uint32_t apply_list(const char *list, const char *(*name)(int), int count, const char *var) {
  int exclude = 0;
  while (*list == ' ') list++;
  if (*list == '^') exclude = 1, list++;
  uint32_t mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    int found = 0;
    for (int a = 0; a < count; a++)
      if (strcasecmp(tok, name(a)) == 0) mask |= 1u << a, found = 1;
    if (!found) INFO(CHORUS_TUNING, "%s: ignoring unknown name \"%s\"", var, tok);
  }
  uint32_t all = (1u << count) - 1;
  return exclude ? all & ~mask : mask;
}

/* NCCL_ALGO's and NCCL_PROTO's grammar over name(0..count-1). */
static uint32_t allowed_ex(const char *spec, int func, int *explicit_out, const char *(*name)(int),
                           int count, const char *var) {
  uint32_t all = (1u << count) - 1;
  if (explicit_out) *explicit_out = 0;
  if (!spec || !*spec) return all;
  /* Per-function form: "func:list;func:list". A plain list applies to all. */
  if (!strchr(spec, ':')) return apply_list(spec, name, count, var);
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
    char *colon = strchr(part, ':');
    if (!colon) continue;
    *colon = '\0';
    while (*part == ' ') part++;
    if (func > 0 && func < CHORUS_FUNC_COUNT && strcasecmp(part, func_keys[func]) == 0) {
      if (explicit_out) *explicit_out = 1;
      return apply_list(colon + 1, name, count, var);
    }
  }
  return all;
}

uint32_t chorus_algo_allowed(const char *spec, int func) {
  return chorus_algo_allowed_ex(spec, func, NULL);
}

uint32_t chorus_algo_allowed_ex(const char *spec, int func, int *explicit_out) {
  return allowed_ex(spec, func, explicit_out, algo_name, CHORUS_ALGO_COUNT, "NCCL_ALGO");
}

uint32_t chorus_proto_allowed_ex(const char *spec, int func, int *explicit_out) {
  return allowed_ex(spec, func, explicit_out, proto_name, CHORUS_PROTO_COUNT, "NCCL_PROTO");
}

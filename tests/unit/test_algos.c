/*
 * test_algos.c - the tables of algo/: functions, algorithms, NCCL_ALGO and
 * NCCL_PROTO, the rules and CHORUS_TUNE's syntax, sizes with units.
 */
#include <string.h>

#include "algo/algos.h"
#include "algo/rules.h"
#include "unit.h"
#include "util/units.h"

#define BIT(f) chorus_func_bit(CHORUS_FUNC_##f)

/* Every function's buffers against NCCL's definitions, written out. */
static void functions(void) {
  const int n = 4, root = 2;
  static const struct {
    int func;
    size_t send_root, send_other, recv_root, recv_other; /* in counts of 10 elements */
  } want[] = {
      {CHORUS_FUNC_ALLREDUCE, 10, 10, 10, 10},
      {CHORUS_FUNC_BROADCAST, 10, 0, 10, 10},
      {CHORUS_FUNC_REDUCE, 10, 10, 10, 0},
      {CHORUS_FUNC_ALLGATHER, 10, 10, 40, 40},
      {CHORUS_FUNC_REDUCESCATTER, 40, 40, 10, 10},
      {CHORUS_FUNC_ALLTOALL, 40, 40, 40, 40},
      {CHORUS_FUNC_GATHER, 10, 10, 40, 0},
      {CHORUS_FUNC_SCATTER, 40, 0, 10, 10},
      {CHORUS_FUNC_SEND, 10, 10, 0, 0},
      {CHORUS_FUNC_RECV, 0, 0, 10, 10},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const int f = want[i].func;
    EXPECT_EQ_INT(chorus_func_send_elems(f, 10, root, root, n), want[i].send_root);
    EXPECT_EQ_INT(chorus_func_send_elems(f, 10, 0, root, n), want[i].send_other);
    EXPECT_EQ_INT(chorus_func_recv_elems(f, 10, root, root, n), want[i].recv_root);
    EXPECT_EQ_INT(chorus_func_recv_elems(f, 10, 0, root, n), want[i].recv_other);
    /* the larger buffer, as nccl-tests reports it, in bytes of 4-byte elements */
    const size_t big =
        want[i].send_root > want[i].recv_root ? want[i].send_root : want[i].recv_root;
    EXPECT_EQ_INT(chorus_func_size(f, 10, 4, n), 4 * (big ? big : 10));
    EXPECT_EQ_INT(chorus_func_by_key(chorus_func_get(f)->key, strlen(chorus_func_get(f)->key)),
                  f == CHORUS_FUNC_RECV ? CHORUS_FUNC_SEND : f);
    /* What peers read of a rank's input: all it sends, but a Reduce's or
     * Gather's root keeps its own block. */
    const int keeps = f == CHORUS_FUNC_REDUCE || f == CHORUS_FUNC_GATHER;
    EXPECT_EQ_INT(chorus_func_shared_elems(f, 10, root, root, n), keeps ? 0 : want[i].send_root);
    EXPECT_EQ_INT(chorus_func_shared_elems(f, 10, 0, root, n), want[i].send_other);
  }
  /* NCCL's signatures: which take a root, a peer, an operator; nothing for
   * what is not a function. */
  for (int f = 0; f <= CHORUS_FUNC_COUNT; f++) {
    const int rooted = f == CHORUS_FUNC_BROADCAST || f == CHORUS_FUNC_REDUCE ||
                       f == CHORUS_FUNC_GATHER || f == CHORUS_FUNC_SCATTER;
    const int p2p = f == CHORUS_FUNC_SEND || f == CHORUS_FUNC_RECV;
    const int reduces =
        f == CHORUS_FUNC_ALLREDUCE || f == CHORUS_FUNC_REDUCE || f == CHORUS_FUNC_REDUCESCATTER;
    EXPECT_EQ_INT(chorus_func_rooted(f), rooted);
    EXPECT_EQ_INT(chorus_func_p2p(f), p2p);
    EXPECT_EQ_INT(chorus_func_reduces(f), reduces);
  }
  EXPECT_STREQ(chorus_func_name(CHORUS_FUNC_ALLREDUCE), "AllReduce");
  EXPECT_STREQ(chorus_func_name(0), "?");
  EXPECT_EQ_INT(chorus_func_by_key("AllReduce", 9), CHORUS_FUNC_ALLREDUCE);
  EXPECT_EQ_INT(chorus_func_by_key("allreduc", 8), 0);
  EXPECT_EQ_INT(chorus_func_out_bytes(CHORUS_FUNC_GATHER, 10, 4, 4), 160);
  EXPECT_EQ_INT(chorus_func_out_bytes(CHORUS_FUNC_REDUCESCATTER, 10, 4, 4), 40);
}

/* Every algorithm runs something, by name both ways. */
static void algorithms(void) {
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    const chorus_algo_info *info = chorus_algo_get(a);
    REQUIRE(info != NULL);
    EXPECT_EQ_INT(info->id, a);
    EXPECT_EQ_INT(chorus_algo_by_name(info->name, strlen(info->name)), a);
    EXPECT(info->on[CHORUS_BACKEND_HOST].funcs || info->on[CHORUS_BACKEND_GPU].funcs);
    for (int b = 0; b < CHORUS_BACKEND_COUNT; b++)
      EXPECT(!info->on[b].funcs || info->on[b].protos); /* runs in some protocol */
  }
  EXPECT(chorus_algo_runs(CHORUS_ALGO_RING, CHORUS_BACKEND_HOST, CHORUS_FUNC_ALLREDUCE));
  EXPECT(!chorus_algo_runs(CHORUS_ALGO_RING, CHORUS_BACKEND_HOST, CHORUS_FUNC_BROADCAST));
  EXPECT(chorus_algo_runs(CHORUS_ALGO_CHAIN, CHORUS_BACKEND_GPU, CHORUS_FUNC_REDUCE));
  EXPECT(chorus_algo_runs(CHORUS_ALGO_CE, CHORUS_BACKEND_GPU, CHORUS_FUNC_RECV));
  EXPECT(chorus_algo_runs(CHORUS_ALGO_ZEROCOPY, CHORUS_BACKEND_HOST, CHORUS_FUNC_ALLREDUCE));
  EXPECT(!chorus_algo_runs(CHORUS_ALGO_ZEROCOPY, CHORUS_BACKEND_HOST, CHORUS_FUNC_REDUCE));
  EXPECT_EQ_INT(chorus_algo_by_name("RING", 4), CHORUS_ALGO_RING);
  EXPECT_EQ_INT(chorus_algo_by_name("Tree", 4), CHORUS_ALGO_TREE);
  EXPECT_EQ_INT(chorus_algo_by_name("nvls", 4), -1);
  EXPECT(chorus_algo_runs(CHORUS_ALGO_TREE, CHORUS_BACKEND_HOST, CHORUS_FUNC_ALLREDUCE));
  EXPECT(!chorus_algo_runs(CHORUS_ALGO_TREE, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLREDUCE));
  EXPECT_EQ_INT(chorus_proto_by_name("simple", 6), CHORUS_PROTO_SIMPLE);
  EXPECT_STREQ(chorus_algo_name(CHORUS_ALGO_CE), "copyengine");
}

static void filter_forms(void) {
  const uint32_t ring = 1u << CHORUS_ALGO_RING, all = (1u << CHORUS_ALGO_COUNT) - 1;
  chorus_algo_filter f;
  char err[128];
  const int AR = CHORUS_FUNC_ALLREDUCE, AG = CHORUS_FUNC_ALLGATHER, SEND = CHORUS_FUNC_SEND;
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, NULL, NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], all);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "", "", err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], all);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "ring", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], ring);
  EXPECT_EQ_INT(f.algo_named[AR], 0);
  EXPECT_EQ_INT(f.algos[SEND], all); /* a plain NCCL_ALGO is for collectives */
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "RING,nvls", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], ring); /* NCCL's NVLS: ignored */
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "Tree,ring", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], ring | 1u << CHORUS_ALGO_TREE);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "^ring", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], all & ~ring);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "allreduce:^ring", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], all & ~ring);
  EXPECT_EQ_INT(f.algo_named[AR], 1);
  EXPECT_EQ_INT(f.algos[AG], all);
  EXPECT_EQ_INT(f.algo_named[AG], 0);
  EXPECT_EQ_INT(
      chorus_algo_filter_parse(&f, "allgather:ring; allreduce:^ring", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], all & ~ring);
  EXPECT_EQ_INT(f.algos[AG], ring);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "sendrecv:^copyengine", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[SEND], all & ~(1u << CHORUS_ALGO_CE));
  EXPECT_EQ_INT(f.algos[CHORUS_FUNC_RECV], all & ~(1u << CHORUS_ALGO_CE));
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "nvls", NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.algos[AR], 0); /* allows nothing: the planner ignores a plain list then */
  /* Unknown words and functions are errors that name them. */
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "ring,rnig", NULL, err, sizeof err), -1);
  EXPECT(strstr(err, "NCCL_ALGO") && strstr(err, "\"rnig\""));
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "allreduse:ring", NULL, err, sizeof err), -1);
  EXPECT(strstr(err, "\"allreduse\""));
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, "allreduce:ring;oneshot", NULL, err, sizeof err), -1);
  EXPECT(strstr(err, "\"oneshot\""));
}

static void proto_forms(void) {
  const uint32_t ll = 1u << CHORUS_PROTO_LL, ll128 = 1u << CHORUS_PROTO_LL128,
                 simple = 1u << CHORUS_PROTO_SIMPLE, all = ll | ll128 | simple;
  chorus_algo_filter f;
  char err[128];
  const int AR = CHORUS_FUNC_ALLREDUCE;
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, NULL, NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(f.protos[AR], all);
  EXPECT_EQ_INT(f.proto_named[AR], 0);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, NULL, "Simple", err, sizeof err), 0);
  EXPECT_EQ_INT(f.protos[CHORUS_FUNC_BROADCAST], simple);
  EXPECT_EQ_INT(f.protos[CHORUS_FUNC_SEND], simple); /* NCCL_PROTO binds Send/Recv too */
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, NULL, "ll, simple", err, sizeof err), 0);
  EXPECT_EQ_INT(f.protos[AR], ll | simple);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, NULL, "^LL128", err, sizeof err), 0);
  EXPECT_EQ_INT(f.protos[AR], ll | simple);
  EXPECT_EQ_INT(
      chorus_algo_filter_parse(&f, NULL, "allreduce:LL;allgather:Simple", err, sizeof err), 0);
  EXPECT_EQ_INT(f.protos[CHORUS_FUNC_ALLGATHER], simple);
  EXPECT_EQ_INT(f.proto_named[CHORUS_FUNC_ALLGATHER], 1);
  EXPECT_EQ_INT(f.protos[CHORUS_FUNC_REDUCE], all);
  EXPECT_EQ_INT(f.proto_named[CHORUS_FUNC_REDUCE], 0);
  EXPECT_EQ_INT(chorus_algo_filter_parse(&f, NULL, "LL256", err, sizeof err), -1);
  EXPECT(strstr(err, "NCCL_PROTO") && strstr(err, "\"LL256\""));
}

/* Parses one rule, expecting success. */
static chorus_rule rule(const char *text) {
  chorus_rule r[2];
  size_t n = 0;
  char err[200] = "";
  const int rc = chorus_rules_parse(text, r, 2, &n, err, sizeof err);
  if (rc != 0) printf("  %s: %s\n", text, err);
  EXPECT_EQ_INT(rc, 0);
  EXPECT_EQ_INT(n, 1);
  return r[0];
}

/* Expects text to fail, the message naming `word`. */
static void bad(const char *text, const char *word) {
  chorus_rule r[4];
  size_t n = 0;
  char err[200] = "";
  EXPECT_EQ_INT(chorus_rules_parse(text, r, 4, &n, err, sizeof err), -1);
  if (!strstr(err, word)) printf("  %s: \"%s\" lacks \"%s\"\n", text, err, word);
  EXPECT(strstr(err, word) != NULL);
  EXPECT(strstr(err, "CHORUS_TUNE") != NULL);
}

static void tune_syntax(void) {
  chorus_rule r[CHORUS_RULES_MAX];
  size_t n = 9;
  char err[200];
  EXPECT_EQ_INT(chorus_rules_parse(NULL, r, CHORUS_RULES_MAX, &n, err, sizeof err), 0);
  EXPECT_EQ_INT(n, 0);
  /* The issue's own example. */
  EXPECT_EQ_INT(chorus_rules_parse("allreduce:0-256K:oneshot,allreduce:256K-inf:ring", r,
                                   CHORUS_RULES_MAX, &n, err, sizeof err),
                0);
  EXPECT_EQ_INT(n, 2);
  EXPECT_EQ_INT(r[0].funcs, BIT(ALLREDUCE));
  EXPECT_EQ_INT(r[0].lo, 0);
  EXPECT_EQ_INT(r[0].hi, 256 << 10);
  EXPECT_EQ_INT(r[0].algo, CHORUS_ALGO_ONESHOT);
  EXPECT_EQ_INT(r[0].proto, CHORUS_RULE_ANY);
  EXPECT_EQ_INT(r[1].lo, 256 << 10);
  EXPECT(r[1].hi == UINT64_MAX);
  /* Fields in any order; every kind. */
  chorus_rule a = rule(" gpu : 2M*n- : allgather|reducescatter : n=3-8 : h=1 : ring/Simple ");
  EXPECT_EQ_INT(a.funcs, BIT(ALLGATHER) | BIT(REDUCESCATTER));
  EXPECT_EQ_INT(a.backend, CHORUS_BACKEND_GPU);
  EXPECT_EQ_INT(a.lo, 2 << 20);
  EXPECT_EQ_INT(a.lo_per_rank, 1);
  EXPECT(a.hi == UINT64_MAX);
  EXPECT_EQ_INT(a.min_ranks, 3);
  EXPECT_EQ_INT(a.max_ranks, 8);
  EXPECT_EQ_INT(a.min_hosts, 1);
  EXPECT_EQ_INT(a.max_hosts, 1);
  EXPECT_EQ_INT(a.proto, CHORUS_PROTO_SIMPLE);
  chorus_rule b = rule("auto");
  EXPECT_EQ_INT(b.funcs, CHORUS_FUNC_ALL);
  EXPECT_EQ_INT(b.algo, CHORUS_RULE_AUTO);
  EXPECT_EQ_INT(b.backend, CHORUS_RULE_ANY);
  chorus_rule c = rule("sendrecv:n=2:copyengine");
  EXPECT_EQ_INT(c.funcs, BIT(SEND));
  EXPECT_EQ_INT(c.min_ranks, 2);
  EXPECT_EQ_INT(c.max_ranks, 2);
  /* Matching: bounds inclusive, per-rank bounds times n, counts. */
  EXPECT(chorus_rule_matches(&a, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLGATHER, 4, 1, 8 << 20));
  EXPECT(!chorus_rule_matches(&a, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLGATHER, 4, 1, (8 << 20) - 1));
  EXPECT(!chorus_rule_matches(&a, CHORUS_BACKEND_HOST, CHORUS_FUNC_ALLGATHER, 4, 1, 8 << 20));
  EXPECT(!chorus_rule_matches(&a, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLREDUCE, 4, 1, 8 << 20));
  EXPECT(!chorus_rule_matches(&a, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLGATHER, 2, 1, 8 << 20));
  EXPECT(!chorus_rule_matches(&a, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLGATHER, 9, 1, 1 << 30));
  EXPECT(!chorus_rule_matches(&a, CHORUS_BACKEND_GPU, CHORUS_FUNC_ALLGATHER, 4, 2, 8 << 20));
  EXPECT(chorus_rule_matches(&r[0], CHORUS_BACKEND_HOST, CHORUS_FUNC_ALLREDUCE, 2, 1, 256 << 10));
  EXPECT(chorus_rule_matches(&c, CHORUS_BACKEND_GPU, CHORUS_FUNC_RECV, 2, 1, 1));
  /* Bad strings name the token. */
  bad("allreduce:0-2Q:ring", "0-2Q");
  bad("allreduce:1M-4K:ring", "1M-4K");
  bad("allreduce:0-1M", "names no algorithm");
  bad("allreduce:0-1M:rnig", "rnig");
  bad("allreduse:0-1M:ring", "allreduse");
  bad("broadcast:ring", "runs none of the rule's functions");
  bad("allreduce:ring/LL", "protocol");
  bad("allreduce:0-1M:1M-2M:ring", "second size range");
  bad("allreduce:n=0:ring", "n=0");
  bad("allreduce:n=4-2:ring", "n=4-2");
  bad("allreduce:auto/LL", "auto/LL");
  bad("allreduce:ring,,allgather::ring", "empty");
  bad("allreduce:inf*n-inf:ring", "inf*n");
  /* Printing gives back what parses to the same rule. */
  const char *texts[] = {
      "allreduce:0-256K:oneshot",   "allgather|reducescatter:gpu:n=3-:2M*n-inf:ring",
      "sendrecv:8M-inf:copyengine", "*:host:auto",
      "broadcast:n=2:h=1-2:chain",  "allreduce:16K-1M:twoshot/LL"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    chorus_rule x = rule(texts[i]), y;
    char out[160];
    chorus_rule_format(&x, out, sizeof out);
    EXPECT_STREQ(out, texts[i]);
    y = rule(out);
    EXPECT(memcmp(&x, &y, sizeof x) == 0);
  }
  /* At most CHORUS_RULES_MAX rules. */
  char many[CHORUS_RULES_MAX * 8 + 16] = "";
  for (int i = 0; i <= CHORUS_RULES_MAX; i++) strcat(many, "ring,");
  EXPECT_EQ_INT(chorus_rules_parse(many, r, CHORUS_RULES_MAX, &n, err, sizeof err), -1);
  EXPECT(strstr(err, "more than") != NULL);
}

/* The defaults: each backend's rules name that backend's algorithms, and
 * nothing else decides a threshold. */
static void default_rules(void) {
  for (int b = 0; b < CHORUS_BACKEND_COUNT; b++) {
    size_t n = 0;
    const chorus_rule *r = chorus_rules_default(b, &n);
    EXPECT(n > 0);
    for (size_t i = 0; i < n; i++) {
      EXPECT_EQ_INT(r[i].backend, b);
      if (r[i].algo == CHORUS_RULE_AUTO) continue;
      const chorus_algo_info *a = chorus_algo_get(r[i].algo);
      EXPECT(a->on[b].funcs & r[i].funcs);
      /* A rule with a size range names only functions its algorithm runs. */
      if (r[i].lo || r[i].hi != UINT64_MAX) EXPECT_EQ_INT(a->on[b].funcs & r[i].funcs, r[i].funcs);
      if (r[i].proto != CHORUS_RULE_ANY) EXPECT(a->on[b].protos & CHORUS_PROTO_BIT(r[i].proto));
    }
  }
}

static void sizes(void) {
  uint64_t v = 0;
  EXPECT_EQ_INT(chorus_size_parse("4096", 4, &v), 0);
  EXPECT_EQ_INT(v, 4096);
  EXPECT_EQ_INT(chorus_size_parse("512K", 4, &v), 0);
  EXPECT_EQ_INT(v, 512 << 10);
  EXPECT_EQ_INT(chorus_size_parse(" 2mib ", 6, &v), 0);
  EXPECT_EQ_INT(v, 2 << 20);
  EXPECT_EQ_INT(chorus_size_parse("1GB", 3, &v), 0);
  EXPECT(v == 1ull << 30);
  EXPECT_EQ_INT(chorus_size_parse("1T", 2, &v), 0);
  EXPECT(v == 1ull << 40);
  EXPECT_EQ_INT(chorus_size_parse("", 0, &v), -1);
  EXPECT_EQ_INT(chorus_size_parse("K", 1, &v), -1);
  EXPECT_EQ_INT(chorus_size_parse("2X", 2, &v), -1);
  EXPECT_EQ_INT(chorus_size_parse("2KX", 3, &v), -1);
  EXPECT_EQ_INT(chorus_size_parse("-1", 2, &v), -1);
  EXPECT_EQ_INT(chorus_size_parse("99999999999999999999", 20, &v), -1);
  EXPECT_EQ_INT(chorus_size_parse("17179869184T", 12, &v), -1);
  char buf[32];
  chorus_size_print(256 << 10, buf, sizeof buf);
  EXPECT_STREQ(buf, "256K");
  chorus_size_print(3, buf, sizeof buf);
  EXPECT_STREQ(buf, "3");
  chorus_size_print((3 << 20) + 1024, buf, sizeof buf);
  EXPECT_STREQ(buf, "3073K");
  chorus_size_format(UINT64_MAX, buf, sizeof buf);
  EXPECT_STREQ(buf, "inf");
}

int main(void) {
  RUN(functions);
  RUN(algorithms);
  RUN(filter_forms);
  RUN(proto_forms);
  RUN(tune_syntax);
  RUN(default_rules);
  RUN(sizes);
  return unit_report();
}

/*
 * test_plan.c - the planner: which algorithm and protocol a call takes on
 * each backend (the default rules at every crossover, NCCL_ALGO,
 * NCCL_PROTO, CHORUS_TUNE), what it says about why, which calls of a group
 * move together (zero-copy, the copy engine, Send/Recv rounds), and what
 * ncclGroupSimulateEnd prices.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu/settings.h"
#include "plan/plan.h"
#include "plan_comm.h"
#include "unit.h"

#define AR  CHORUS_FUNC_ALLREDUCE
#define AG  CHORUS_FUNC_ALLGATHER
#define RS  CHORUS_FUNC_REDUCESCATTER
#define BC  CHORUS_FUNC_BROADCAST
#define RED CHORUS_FUNC_REDUCE
#define A2A CHORUS_FUNC_ALLTOALL
#define GA  CHORUS_FUNC_GATHER
#define SC  CHORUS_FUNC_SCATTER
#define KB  1024ull
#define MB  (1024ull * KB)

/* Settings for the next comm (NULL: unset). */
static void env(const char *algo, const char *proto, const char *tune) {
  if (algo)
    setenv("NCCL_ALGO", algo, 1);
  else
    unsetenv("NCCL_ALGO");
  if (proto)
    setenv("NCCL_PROTO", proto, 1);
  else
    unsetenv("NCCL_PROTO");
  if (tune)
    setenv("CHORUS_TUNE", tune, 1);
  else
    unsetenv("CHORUS_TUNE");
}

/* A GPU communicator of n ranks as the planner sees it, with the settings
 * in the environment; rank r of the communicator named key. */
static void gpu_comm(chorus_plan_comm *c, int n, int one_process, int rank, uint64_t key) {
  EXPECT_EQ_INT(plan_comm_gpu(c, n, rank, key, one_process, 0, 0, 0), 0);
  chorus_gpu_settings st;
  chorus_gpu_settings_read(&st, n, 0, 0);
  chorus_gpu_settings_plan(&st, c); /* every shape field, as the settings give it */
}

static void host_comm(chorus_plan_comm *c, int n, int nhosts, int node, int over) {
  memset(c, 0, sizeof *c);
  c->env =
      (chorus_cost_env){CHORUS_BACKEND_HOST, n, nhosts, node, over, 131072, 0, 0, 0, 0, 0, 0, 0, 0};
  char err[256];
  EXPECT_EQ_INT(chorus_plan_comm_settings(c, err, sizeof err), 0);
}

static char buf_a[64] __attribute__((aligned(16))), buf_b[64] __attribute__((aligned(16)));

/* The call of func whose larger buffer is `size` bytes of floats. */
static chorus_plan_call call_of(const chorus_plan_comm *c, int func, uint64_t size) {
  const uint64_t blocks = chorus_func_size(func, 1, 1, c->env.nranks);
  return (chorus_plan_call){c,     func, (size_t)(size / 4 / blocks), 4,   0, 0, 0, buf_a,
                            buf_b, 0,    CHORUS_FACT_PREMULSUM,       NULL};
}

/* What one call alone gets: algo, protocol (-1, -1 on error). */
static chorus_task choose_facts(const chorus_plan_comm *c, int func, uint64_t size, uint32_t facts,
                                int group) {
  chorus_plan_call k = call_of(c, func, size);
  chorus_plan_probe probe = {plan_probe_same, &facts};
  chorus_task t;
  char err[256];
  if (chorus_plan_choose(&k, &probe, 0, group, &t, NULL, err, sizeof err) != 0)
    t.algo = t.proto = -1;
  return t;
}
static chorus_task choose(const chorus_plan_comm *c, int func, uint64_t size) {
  return choose_facts(c, func, size, 0, 0);
}

#define EXPECT_CHOICE(t, a, p)                                                                     \
  do {                                                                                             \
    const chorus_task t_ = (t);                                                                    \
    if (t_.algo != (a) || ((p) >= 0 && t_.proto != (p)))                                           \
      printf("  %s:%d: got %s/%s\n", __FILE__, __LINE__, chorus_algo_name(t_.algo),                \
             chorus_proto_name(t_.proto));                                                         \
    EXPECT_EQ_INT(t_.algo, (a));                                                                   \
    if ((p) >= 0) EXPECT_EQ_INT(t_.proto, (p));                                                    \
  } while (0)

#define ONESHOT CHORUS_ALGO_ONESHOT
#define TWOSHOT CHORUS_ALGO_TWOSHOT
#define RING    CHORUS_ALGO_RING
#define CHAIN   CHORUS_ALGO_CHAIN
#define ZC      CHORUS_ALGO_ZEROCOPY
#define CE      CHORUS_ALGO_CE
#define DIRECT  CHORUS_ALGO_DIRECT
#define HIER    CHORUS_ALGO_HIER
#define STAGED  CHORUS_ALGO_STAGED
#define LL      CHORUS_PROTO_LL
#define SIMPLE  CHORUS_PROTO_SIMPLE

/* The GPU defaults on both sides of every crossover (4 GPUs). */
static void gpu_defaults_4(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c;
  gpu_comm(&c, 4, 0, 0, 1);
  /* AllReduce: LL exchange, two-shot in LL from 16 KiB, in FIFO chunks
   * above 1 MiB, the ring from 2 MiB per rank. */
  EXPECT_CHOICE(choose(&c, AR, 8), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 16 * KB - 4), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 16 * KB), TWOSHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), TWOSHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB + 16), TWOSHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 8 * MB - 16), TWOSHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 8 * MB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 2048 * MB), RING, SIMPLE);
  /* Broadcast and Reduce: the fan-out in LL lines, chains from 256 KiB
   * (a lost threshold once put 8-byte calls into three-hop chains). */
  EXPECT_CHOICE(choose(&c, BC, 8), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, RED, 256 * KB - 4), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, BC, 256 * KB), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose(&c, RED, 256 * KB), CHAIN, SIMPLE);
  /* Blocks below 256 KiB per peer in LL lines, FIFO chunks from there,
   * AllGather and ReduceScatter rings from 2 MiB per block. */
  EXPECT_CHOICE(choose(&c, AG, 512 * KB), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AG, 1 * MB), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, A2A, 1 * MB - 16), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, GA, 1 * MB), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, SC, 1 * MB), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, RS, 8 * MB - 16), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, RS, 8 * MB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 8 * MB), RING, SIMPLE);
  /* Send/Recv kernels: LL lines up to 512 KiB. */
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_SEND, 512 * KB), DIRECT, LL);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_RECV, 512 * KB + 4), DIRECT, SIMPLE);
  /* Zero-copy where every rank's buffers are reachable (here: symmetric
   * windows): AllReduce 1-16 MiB, AllGather and ReduceScatter 1-64 MiB. */
  const uint32_t win = CHORUS_FACT_SYM_WINDOWS;
  EXPECT_CHOICE(choose_facts(&c, AR, 1 * MB - 16, win, 0), TWOSHOT, LL);
  EXPECT_CHOICE(choose_facts(&c, AR, 1 * MB, win, 0), ZC, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AR, 16 * MB, win, 0), ZC, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AR, 16 * MB + 16, win, 0), RING, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AG, 64 * MB, win, 0), ZC, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, RS, 64 * MB + 64, win, 0), RING, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, GA, 4 * MB, win, 0), ONESHOT, SIMPLE); /* no zero-copy Gather */
  /* The copy engine stays off on 3+ GPUs. */
  gpu_comm(&c, 4, 1, 0, 1);
  const uint32_t all = PLAN_FACTS_ALL;
  EXPECT_CHOICE(choose_facts(&c, BC, 1024 * MB, all, 1), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AG, 1024 * MB, all, 1), RING, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, CHORUS_FUNC_SEND, 8 * MB, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, CHORUS_FUNC_SEND, 8 * MB - 4, all, 1), DIRECT, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AR, 4 * MB, all, 1), ZC, SIMPLE);
  /* Zero-copy and the copy engine need what only a group can show. */
  EXPECT_CHOICE(choose_facts(&c, AR, 4 * MB, all, 0), TWOSHOT, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, CHORUS_FUNC_SEND, 64 * MB, all & ~CHORUS_FACT_STREAM_OK, 1),
                DIRECT, SIMPLE);
}

/* Under maxCTAs (8 here: LL launches of 8 CTAs, 96 KiB of a peer's lines
 * at most) LL lines give way to Simple steps past that budget, a
 * two-shot's share counted twice, and 2 GPUs' two-shot is passed over. */
static void gpu_capped(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c;
  chorus_gpu_settings st;
  EXPECT_EQ_INT(plan_comm_gpu(&c, 2, 0, 1, 0, 0, 0, 0), 0);
  chorus_gpu_settings_read(&st, 2, 0, 8);
  chorus_gpu_settings_plan(&st, &c);
  EXPECT_EQ_INT(c.ll_peer_max, 96 * KB);
  EXPECT_CHOICE(choose(&c, AR, 96 * KB), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 96 * KB + 4), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 512 * KB), ONESHOT, SIMPLE); /* not the two-shot */
  EXPECT_CHOICE(choose(&c, AG, 192 * KB), ONESHOT, LL);     /* 96 KiB a peer */
  EXPECT_CHOICE(choose(&c, AG, 192 * KB + 16), ONESHOT, SIMPLE);
  EXPECT_EQ_INT(plan_comm_gpu(&c, 4, 0, 1, 0, 0, 0, 0), 0);
  chorus_gpu_settings_read(&st, 4, 0, 8);
  chorus_gpu_settings_plan(&st, &c);
  EXPECT_CHOICE(choose(&c, AR, 16 * KB), TWOSHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 192 * KB), TWOSHOT, LL); /* shares of 48 KiB */
  EXPECT_CHOICE(choose(&c, AR, 192 * KB + 64), TWOSHOT, SIMPLE);
  chorus_gpu_settings_read(&st, 4, 0, 0); /* no cap: no budget */
  chorus_gpu_settings_plan(&st, &c);
  EXPECT_EQ_INT(c.ll_peer_max, 0);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), TWOSHOT, LL);
}

/* 2 GPUs: larger LL region, two-shot only in LL at 256 KiB-1 MiB,
 * Broadcast's and Reduce's one-shot in LL to 384 KiB, Reduce's through
 * the FIFOs to 3 MiB, the chain kernel after, the copy engine from
 * 64 MiB. */
static void gpu_defaults_2(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c;
  gpu_comm(&c, 2, 1, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 256 * KB - 4), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 256 * KB), TWOSHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), TWOSHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB + 8), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 4 * MB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, BC, 256 * KB - 4), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, BC, 256 * KB), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, BC, 512 * KB), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_REDUCE, 384 * KB), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_REDUCE, 384 * KB + 4), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_REDUCE, 3 * MB), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_REDUCE, 3 * MB + 4), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 2 * MB - 16), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AG, 2 * MB), ONESHOT, SIMPLE);
  const uint32_t all = PLAN_FACTS_ALL;
  EXPECT_CHOICE(choose_facts(&c, BC, 64 * MB - 4, all, 1), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, BC, 64 * MB, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AG, 64 * MB, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, A2A, 64 * MB, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AG, 64 * MB - 32, all, 1), ZC, SIMPLE);
  /* On 2 GPUs the ring takes over above 128 MiB (AllGather without the
   * copy engine) and 256 MiB (ReduceScatter). */
  EXPECT_CHOICE(choose_facts(&c, RS, 256 * MB, all, 1), ZC, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, RS, 256 * MB + 8, all, 1), RING, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, RS, 4096 * MB, all, 1), RING, SIMPLE);
  /* An AlltoAll in place never goes on the copy engine. */
  chorus_plan_call k = call_of(&c, A2A, 64 * MB);
  k.recv = k.send;
  uint32_t facts = all;
  chorus_plan_probe probe = {plan_probe_same, &facts};
  chorus_task t;
  char err[200];
  EXPECT_EQ_INT(chorus_plan_choose(&k, &probe, 0, 1, &t, NULL, err, sizeof err), 0);
  EXPECT_CHOICE(t, ONESHOT, SIMPLE);
  /* PreMulSum, or unaligned buffers: no zero-copy. */
  k = call_of(&c, AR, 4 * MB);
  k.facts = CHORUS_FACT_PREMULSUM;
  EXPECT_EQ_INT(chorus_plan_choose(&k, &probe, 0, 1, &t, NULL, err, sizeof err), 0);
  EXPECT_CHOICE(t, RING, SIMPLE);
  k = call_of(&c, AR, 2 * MB);
  k.send = buf_a + 4;
  EXPECT_EQ_INT(chorus_plan_choose(&k, &probe, 0, 1, &t, NULL, err, sizeof err), 0);
  EXPECT_CHOICE(t, ONESHOT, SIMPLE);
}

/* NCCL_ALGO and NCCL_PROTO: what they allow runs even where the rules
 * would not take it, what they exclude never runs, a list naming a
 * function that leaves it nothing is an error, a plain one that does is
 * ignored for that function. */
static void gpu_filters(void) {
  chorus_plan_comm c;
  env("allreduce:ring", NULL, NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 4 * KB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 8), ONESHOT, LL); /* fewer elements than ranks */
  env("allreduce:twoshot", NULL, NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 12), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 4 * KB), TWOSHOT, LL); /* two shares fit an LL slot */
  env("allreduce:twoshot", "allreduce:Simple", NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 4 * KB), TWOSHOT, SIMPLE);
  c.channels = 1; /* no FIFO two-shot, no LL: nothing allowed can run */
  EXPECT_CHOICE(choose(&c, AR, 4 * KB), -1, -1);
  env("twoshot", "Simple", NULL); /* plain lists: the defaults, in Simple */
  gpu_comm(&c, 4, 0, 0, 1);
  c.channels = 1;
  EXPECT_CHOICE(choose(&c, AR, 4 * KB), ONESHOT, SIMPLE);
  env("allreduce:ring", "allreduce:LL", NULL); /* rings need Simple */
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 4 * KB), -1, -1);
  env(NULL, "LL", NULL); /* the rules say FIFO chunks; NCCL_PROTO says LL */
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AG, 4 * MB), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), ONESHOT, LL);
  env("allreduce:^ring", NULL, NULL); /* the ring by default; excluded, the next rule */
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), TWOSHOT, SIMPLE);
  env("alltoall:direct", NULL, NULL); /* GPU exchanges are oneshot; direct is Send/Recv's */
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, A2A, 64 * KB), -1, -1);
  env("alltoall:oneshot", NULL, NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, A2A, 64 * KB), ONESHOT, LL);
  env("broadcast:chain", NULL, NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, BC, 64), CHAIN, SIMPLE);
  gpu_comm(&c, 2, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, BC, 64), CHAIN, SIMPLE); /* a chain of one hop */
  env("broadcast:ring", NULL, NULL); /* Broadcast has no ring: its chain is named chain */
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, BC, 64), -1, -1);
  env("ring", NULL, NULL); /* plain: Broadcast keeps its defaults */
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, BC, 64), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_SEND, 64), DIRECT, LL); /* plain NCCL_ALGO: not Send/Recv */
  /* Send/Recv leave LL lines when NCCL_PROTO takes LL from them. */
  static const struct {
    const char *proto;
    int ll;
  } protos[] = {{"Simple", 0}, {"sendrecv:Simple", 0}, {"^LL", 0}, {"allreduce:Simple", 1},
                {"LL", 1},     {"LL,Simple", 1}};
  for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) {
    env(NULL, protos[i].proto, NULL);
    gpu_comm(&c, 4, 0, 0, 1);
    EXPECT_CHOICE(choose(&c, CHORUS_FUNC_SEND, 4 * KB), DIRECT, protos[i].ll ? LL : SIMPLE);
  }
  /* Zero-copy and the copy engine are algorithms the lists name too. */
  const uint32_t all = PLAN_FACTS_ALL;
  env("^zerocopy", NULL, NULL);
  gpu_comm(&c, 2, 1, 0, 1);
  EXPECT_CHOICE(choose_facts(&c, AR, 4 * MB, all, 1), RING, SIMPLE);
  env("sendrecv:^copyengine;allgather:^copyengine", NULL, NULL);
  gpu_comm(&c, 2, 1, 0, 1);
  EXPECT_CHOICE(choose_facts(&c, CHORUS_FUNC_SEND, 64 * MB, all, 1), DIRECT, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AG, 128 * MB, all, 1), ZC, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, BC, 128 * MB, all, 1), CE, SIMPLE);
  env(NULL, NULL, NULL);
}

/* CHORUS_TUNE's rules come first; the filters still apply to them. */
static void gpu_tune(void) {
  chorus_plan_comm c;
  env(NULL, NULL, "allreduce:0-256K:oneshot,allreduce:256K-inf:ring");
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * KB), ONESHOT, LL);
  EXPECT_CHOICE(choose(&c, AR, 256 * KB), ONESHOT, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 1 * MB), ONESHOT, SIMPLE); /* other functions: the defaults */
  env("^ring", NULL, "allreduce:0-256K:oneshot,allreduce:256K-inf:ring");
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), TWOSHOT, LL);
  env(NULL, NULL, "broadcast|allgather:n=3-:copyengine,sendrecv:1-inf:copyengine");
  gpu_comm(&c, 4, 1, 0, 1);
  const uint32_t all = PLAN_FACTS_ALL;
  EXPECT_CHOICE(choose_facts(&c, BC, 8, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, AG, 8 * MB, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, CHORUS_FUNC_RECV, 4, all, 1), CE, SIMPLE);
  EXPECT_CHOICE(choose_facts(&c, BC, 0, all, 1), ONESHOT, LL); /* nothing to copy */
  gpu_comm(&c, 2, 1, 0, 1);
  EXPECT_CHOICE(choose_facts(&c, BC, 8, all, 1), ONESHOT, LL); /* n=3- */
  env(NULL, NULL, "allreduce:gpu:twoshot/Simple");
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * KB), TWOSHOT, SIMPLE);
  /* A bad string fails the communicator's settings, naming the token. */
  env(NULL, NULL, "allreduce:0-256Q:oneshot");
  chorus_plan_comm d;
  memset(&d, 0, sizeof d);
  d.env.backend = CHORUS_BACKEND_GPU;
  char err[256];
  EXPECT_EQ_INT(chorus_plan_comm_settings(&d, err, sizeof err), -1);
  EXPECT(strstr(err, "0-256Q") != NULL);
  env("allreduce:rnig", NULL, NULL);
  EXPECT_EQ_INT(chorus_plan_comm_settings(&d, err, sizeof err), -1);
  EXPECT(strstr(err, "rnig") != NULL);
  env(NULL, NULL, NULL);
}

/* A tuner plugin as the planner sees it (core/tuner.h does the rest):
 * what it was asked, and what it answers. */
static struct {
  int calls, func, fail, channels;
  uint64_t bytes;
  int cell;    /* set to `price` (-1: none) */
  float price; /* ... */
  float seen[CHORUS_TUNER_ALGOS][CHORUS_TUNER_PROTOS];
} tuner;

static int fake_tuner(void *arg, int func, uint64_t bytes,
                      float cost[CHORUS_TUNER_ALGOS][CHORUS_TUNER_PROTOS], int *nchannels) {
  (void)arg;
  tuner.calls++, tuner.func = func, tuner.bytes = bytes;
  memcpy(tuner.seen, cost, sizeof tuner.seen);
  if (tuner.fail) return -1;
  if (tuner.cell >= 0) (&cost[0][0])[tuner.cell] = tuner.price;
  *nchannels = tuner.channels;
  return 0;
}

static void tuned(int cell, float price, int channels, int fail) {
  memset(&tuner, 0, sizeof tuner);
  tuner.cell = cell, tuner.price = price, tuner.channels = channels, tuner.fail = fail;
}

#define T_RING_LL     (1 * CHORUS_TUNER_PROTOS + LL)
#define T_RING_SIMPLE (1 * CHORUS_TUNER_PROTOS + SIMPLE)
#define T_TREE_SIMPLE (0 * CHORUS_TUNER_PROTOS + SIMPLE)
#define T_NVLS_SIMPLE (4 * CHORUS_TUNER_PROTOS + SIMPLE)
#define T_PAT_SIMPLE  (6 * CHORUS_TUNER_PROTOS + SIMPLE)

static void tuner_plugin(void) {
  /* Cells: ring (chains for Broadcast and Reduce), tree, pat (recursive
   * doubling for AllGather and ReduceScatter), in LL or Simple. */
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AR, RING, SIMPLE), T_RING_SIMPLE);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AR, RING, LL), T_RING_LL);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(BC, CHAIN, SIMPLE), T_RING_SIMPLE);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AR, CHORUS_ALGO_TREE, SIMPLE), T_TREE_SIMPLE);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AG, CHORUS_ALGO_RD, SIMPLE), T_PAT_SIMPLE);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AR, CHORUS_ALGO_RD, SIMPLE), -1);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AR, ONESHOT, LL), -1);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(AR, RING, CHORUS_PROTO_LL128), -1);
  EXPECT_EQ_INT(chorus_plan_tuner_cell(A2A, RING, SIMPLE), -1);
  env(NULL, NULL, NULL);
  chorus_plan_comm c;
  gpu_comm(&c, 4, 0, 0, 1);
  c.tuner.reprice = fake_tuner;
  /* Edits nothing: the defaults stand; it saw NCCL's code and the larger
   * buffer, the ring priced, the one-shot (no cell) not in the table. */
  tuned(-1, 0, 0, 0);
  chorus_task t = choose(&c, AR, 8 * KB);
  EXPECT_CHOICE(t, ONESHOT, LL);
  EXPECT_EQ_INT(tuner.calls, 1);
  EXPECT_EQ_INT(tuner.func, 4);
  EXPECT(tuner.bytes == 8 * KB);
  EXPECT(tuner.seen[1][SIMPLE] > 0);
  EXPECT(tuner.seen[0][SIMPLE] < 0 && tuner.seen[4][SIMPLE] < 0); /* no tree, nvls on one host */
  EXPECT_EQ_INT(t.depends, 1);
  /* The ring at no cost: taken, in the cell's protocol. */
  tuned(T_RING_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 8 * KB), RING, SIMPLE);
  tuned(T_RING_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, BC, 64 * KB), CHAIN, SIMPLE);
  EXPECT_EQ_INT(tuner.func, 0);
  /* Priced above the one-shot's own price, the ring does not win. */
  tuned(T_RING_SIMPLE, 1e6f, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 8 * KB), ONESHOT, LL);
  /* A cell Chorus cannot run (nvls), a failed query: the defaults. */
  tuned(T_NVLS_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 8 * KB), ONESHOT, LL);
  tuned(T_RING_SIMPLE, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 8 * KB), ONESHOT, LL);
  /* Only the five functions NCCL tunes are asked about. */
  tuned(T_RING_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, A2A, 8 * KB), ONESHOT, LL);
  EXPECT_EQ_INT(tuner.calls, 0);
  /* The ring ruled out (below 0) where it is the default: nothing else
   * has a cell here, so it stands. */
  tuned(T_RING_SIMPLE, -1, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), RING, SIMPLE);
  /* A channel cap reaches zero-copy's CTAs, which it takes per call. */
  tuned(-1, 0, 0, 0);
  const chorus_task zc = choose_facts(&c, AR, 4 * MB, CHORUS_FACT_SYM_WINDOWS, 0);
  EXPECT_CHOICE(zc, ZC, SIMPLE);
  EXPECT(zc.channels > 2);
  tuned(-1, 0, 2, 0);
  EXPECT_EQ_INT((int)choose_facts(&c, AR, 4 * MB, CHORUS_FACT_SYM_WINDOWS, 0).channels, 2);
  /* NCCL_ALGO first: an excluded ring has no cell to take. */
  env("allreduce:^ring", NULL, NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  c.tuner.reprice = fake_tuner;
  tuned(T_RING_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 8 * KB), ONESHOT, LL);
  EXPECT(tuner.seen[1][SIMPLE] < 0);
  /* A user's rule (CHORUS_TUNE) is not the tuner's to change. */
  env(NULL, NULL, "allreduce:0-64K:twoshot");
  gpu_comm(&c, 4, 0, 0, 1);
  c.tuner.reprice = fake_tuner;
  tuned(T_RING_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 8 * KB), TWOSHOT, -1);
  EXPECT_EQ_INT(tuner.calls, 0);
  /* Host memory across hosts: tree and pat cells. */
  env(NULL, NULL, NULL);
  host_comm(&c, 8, 2, 0, 0);
  c.tuner.reprice = fake_tuner;
  tuned(T_TREE_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), CHORUS_ALGO_TREE, SIMPLE);
  tuned(T_PAT_SIMPLE, 0, 0, 0);
  EXPECT_CHOICE(choose(&c, AG, 8 * KB), CHORUS_ALGO_RD, SIMPLE);
  /* What it did is said. */
  gpu_comm(&c, 4, 0, 0, 1);
  c.tuner.reprice = fake_tuner;
  tuned(T_RING_SIMPLE, 0, 0, 0);
  chorus_plan_call k = call_of(&c, AR, 8 * KB);
  char text[4096], err[128];
  chorus_explain ex = {text, sizeof text, 0};
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 0, 0, &t, &ex, err, sizeof err), 0);
  EXPECT(strstr(text, "the tuner plugin repriced ring/Simple: "));
  EXPECT(strstr(text, "-> ring/Simple"));
}

/* Host memory: the cost model's choice, and the filters. */
static void host_choices(void) {
  chorus_plan_comm c;
  env(NULL, NULL, NULL);
  host_comm(&c, 2, 1, 1, 0);
  const chorus_task small = choose(&c, AR, 8);
  EXPECT(small.algo == ONESHOT || small.algo == TWOSHOT);
  EXPECT_EQ_INT(small.proto, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 16 * MB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, BC, 1 * MB), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_SEND, 1 * MB), DIRECT, SIMPLE);
  host_comm(&c, 8, 2, 0, 0); /* across hosts */
  EXPECT_CHOICE(choose(&c, AR, 8), CHORUS_ALGO_RD, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), RING, SIMPLE);
  EXPECT_CHOICE(choose(&c, A2A, 64 * MB), DIRECT, SIMPLE);
  /* Hosts of 4 ranks each: AllReduce in steps (hier) from mid sizes;
   * NCCL_ALGO=allreduce:hier where hosts hold one rank each does not bind
   * (as a list of another backend's algorithms would not). */
  c.env.nlocal = 4;
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), HIER, SIMPLE);
  env("allreduce:hier", NULL, NULL);
  host_comm(&c, 4, 4, 0, 0);
  c.env.nlocal = 1;
  chorus_plan_unbind_foreign(&c);
  EXPECT_EQ_INT(choose(&c, AR, 1 * MB).algo >= 0, 1);
  EXPECT(choose(&c, AR, 1 * MB).algo != HIER);
  env("allreduce:rd", NULL, NULL); /* recursive doubling on one host when asked */
  host_comm(&c, 3, 1, 1, 0);
  EXPECT_CHOICE(choose(&c, AR, 1 * KB), CHORUS_ALGO_RD, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), -1, -1); /* does not fit a message */
  env("allreduce:oneshot", NULL, NULL);
  host_comm(&c, 3, 2, 0, 0); /* no node memory: nothing allowed can run */
  EXPECT_CHOICE(choose(&c, AR, 1 * KB), -1, -1);
  host_comm(&c, 1, 1, 1, 0); /* one rank: no filter applies */
  EXPECT_CHOICE(choose(&c, AR, 1 * KB), RING, SIMPLE);
  env("broadcast:chain;alltoall:direct", "allreduce:LL", NULL); /* NCCL_PROTO: not on hosts */
  host_comm(&c, 4, 1, 1, 1);
  EXPECT_CHOICE(choose(&c, BC, 8), CHAIN, SIMPLE);
  EXPECT_CHOICE(choose(&c, A2A, 8), DIRECT, SIMPLE);
  EXPECT_EQ_INT(choose(&c, AR, 8).proto, SIMPLE);
  env(NULL, NULL, "allreduce:host:twoshot,allreduce:gpu:ring");
  host_comm(&c, 4, 1, 1, 1);
  EXPECT_CHOICE(choose(&c, AR, 8), TWOSHOT, SIMPLE);
  env(NULL, NULL, NULL);
}

/* The explanation names the rules it went through and the outcome. */
static void explain(void) {
  chorus_plan_comm c;
  env("allreduce:^twoshot", NULL, "allreduce:0-64K:oneshot/Simple");
  gpu_comm(&c, 4, 0, 0, 1);
  env(NULL, NULL, NULL);
  chorus_plan_call k = call_of(&c, AR, 128 * KB);
  char text[4096], err[128];
  chorus_explain ex = {text, sizeof text, 0};
  chorus_task t;
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 0, 0, &t, &ex, err, sizeof err), 0);
  EXPECT(strstr(text, "default rule 12 matches: allreduce:gpu:n=3-:16K-1M:twoshot/LL"));
  EXPECT(strstr(text, "skipped: NCCL_ALGO"));
  EXPECT(strstr(text, "-> oneshot/LL"));
  EXPECT(!strstr(text, "CHORUS_TUNE rule 1 matches")); /* 256K is outside its range */
  k = call_of(&c, AR, 4 * KB);
  ex.used = 0;
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 0, 0, &t, &ex, err, sizeof err), 0);
  EXPECT(strstr(text, "CHORUS_TUNE rule 1 matches: allreduce:0-64K:oneshot/Simple"));
  EXPECT(strstr(text, "-> oneshot/Simple, 64 channels"));
  /* Small buffers are cut short, never overrun. */
  char tiny[16];
  chorus_explain small = {tiny, sizeof tiny, 0};
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 0, 0, &t, &small, err, sizeof err), 0);
  EXPECT(strlen(tiny) < sizeof tiny);
}

/* ---- groups --------------------------------------------------------------------- */

typedef struct facts_table {
  uint32_t of[16];
} facts_table;

static uint32_t table_facts(void *arg, const chorus_plan_call *c, uint32_t want) {
  const facts_table *t = arg;
  return want & t->of[(size_t)(uintptr_t)c->user];
}

/* Rank r of a communicator: call i of the group. */
static chorus_plan_call gcall(const chorus_plan_comm *c, int func, size_t count, uint64_t desc,
                              uint64_t seq, const void *send, void *recv, int root, size_t i) {
  return (chorus_plan_call){c,
                            func,
                            count,
                            4,
                            root,
                            desc,
                            seq,
                            send,
                            recv,
                            0,
                            CHORUS_FACT_PREMULSUM,
                            (void *)(uintptr_t)i};
}

/* Buffers far apart (never touched): the copy engine's pairing looks for
 * overlaps. */
#define BIG(i) ((char *)((uintptr_t)((i) + 1) << 36))

static void group_zero_copy(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c[2];
  for (int r = 0; r < 2; r++) gpu_comm(&c[r], 2, 1, r, 77);
  facts_table ft;
  const uint32_t all = PLAN_FACTS_ALL;
  for (int i = 0; i < 16; i++) ft.of[i] = all;
  chorus_plan_probe probe = {table_facts, &ft};
  chorus_plan_call k[4];
  chorus_task t[4];
  char err[200];
  /* Both ranks' AllReduce of 4 MiB: zero-copy, each naming the other's call. */
  k[0] = gcall(&c[0], AR, MB, 5, 10, BIG(0), BIG(1), -1, 0);
  k[1] = gcall(&c[1], AR, MB, 5, 10, BIG(2), BIG(3), -1, 1);
  EXPECT_EQ_INT(chorus_plan_group(k, 2, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], ZC, SIMPLE);
  EXPECT_CHOICE(t[1], ZC, SIMPLE);
  EXPECT_EQ_INT(t[0].peer_call[0], 0);
  EXPECT_EQ_INT(t[0].peer_call[1], 1);
  EXPECT_EQ_INT(t[1].peer_call[0], 0);
  EXPECT_EQ_INT(t[0].channels, 64);
  /* One rank's buffer not reachable: both fall back together. */
  ft.of[1] = all & ~CHORUS_FACT_SEND_REACH;
  k[0] = gcall(&c[0], AR, MB, 5, 10, BIG(0), BIG(1), -1, 0);
  k[1] = gcall(&c[1], AR, MB, 5, 10, BIG(2), BIG(3), -1, 1);
  EXPECT_EQ_INT(chorus_plan_group(k, 2, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], RING, SIMPLE);
  EXPECT_CHOICE(t[1], RING, SIMPLE);
  ft.of[1] = all;
  /* The other rank's call not in the group, or another call: no partner. */
  k[0] = gcall(&c[0], AR, MB, 5, 10, BIG(0), BIG(1), -1, 0);
  k[1] = gcall(&c[1], AR, MB, 5, 11, BIG(2), BIG(3), -1, 1);
  EXPECT_EQ_INT(chorus_plan_group(k, 2, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], RING, SIMPLE);
  EXPECT_CHOICE(t[1], RING, SIMPLE);
  k[0] = gcall(&c[0], AR, MB, 5, 10, BIG(0), BIG(1), -1, 0);
  EXPECT_EQ_INT(chorus_plan_group(k, 1, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], RING, SIMPLE);
}

static void group_copy_engine(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c[2], o[2];
  for (int r = 0; r < 2; r++) {
    gpu_comm(&c[r], 2, 1, r, 77);
    gpu_comm(&o[r], 2, 1, r, 78);
  }
  facts_table ft;
  const uint32_t all = PLAN_FACTS_ALL;
  for (int i = 0; i < 16; i++) ft.of[i] = all;
  chorus_plan_probe probe = {table_facts, &ft};
  chorus_plan_call k[6];
  chorus_task t[6];
  char err[200];
  const size_t n64 = 16 * MB; /* floats: 64 MiB */
  /* Both ranks' Broadcast, side by side: one program, run at the first. */
  k[0] = gcall(&c[0], BC, n64, 9, 3, BIG(0), BIG(0), 0, 0);
  k[1] = gcall(&c[1], BC, n64, 9, 3, NULL, BIG(1), 0, 1);
  EXPECT_EQ_INT(chorus_plan_group(k, 2, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], CE, SIMPLE);
  EXPECT_EQ_INT(t[0].lead, 0);
  EXPECT_EQ_INT(t[1].lead, 0);
  /* Another communicator's call between them: the kernels (the GPUs'
   * calls would run out of order otherwise). */
  k[0] = gcall(&c[0], BC, n64, 9, 3, BIG(0), BIG(0), 0, 0);
  k[1] = gcall(&o[0], AR, 4, 1, 0, BIG(2), BIG(2), -1, 1);
  k[2] = gcall(&c[1], BC, n64, 9, 3, NULL, BIG(1), 0, 2);
  k[3] = gcall(&o[1], AR, 4, 1, 0, BIG(3), BIG(3), -1, 3);
  EXPECT_EQ_INT(chorus_plan_group(k, 4, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], CHAIN, SIMPLE);
  EXPECT_CHOICE(t[2], CHAIN, SIMPLE);
  EXPECT_EQ_INT(t[0].lead, -1);
  /* A stream being captured: the kernels, on every rank. */
  ft.of[1] = all & ~CHORUS_FACT_STREAM_OK;
  k[0] = gcall(&c[0], BC, n64, 9, 3, BIG(0), BIG(0), 0, 0);
  k[1] = gcall(&c[1], BC, n64, 9, 3, NULL, BIG(1), 0, 1);
  EXPECT_EQ_INT(chorus_plan_group(k, 2, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], CHAIN, SIMPLE);
  EXPECT_CHOICE(t[1], CHAIN, SIMPLE);
  ft.of[1] = all;
  /* Send/Recv: large ones pair on the copy engine, small ones go in
   * kernel rounds, numbered per peer in call order. */
  k[0] = gcall(&c[0], CHORUS_FUNC_SEND, 4 * MB, 0, 0, BIG(0), NULL, 1, 0);
  k[1] = gcall(&c[1], CHORUS_FUNC_RECV, 4 * MB, 0, 0, NULL, BIG(1), 0, 1);
  k[2] = gcall(&c[0], CHORUS_FUNC_SEND, 16, 0, 0, BIG(2), NULL, 1, 2);
  k[3] = gcall(&c[1], CHORUS_FUNC_RECV, 16, 0, 0, NULL, BIG(3), 0, 3);
  k[4] = gcall(&c[0], CHORUS_FUNC_SEND, 32, 0, 0, BIG(4), NULL, 1, 4);
  k[5] = gcall(&c[1], CHORUS_FUNC_RECV, 32, 0, 0, NULL, BIG(5), 0, 5);
  EXPECT_EQ_INT(chorus_plan_group(k, 6, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], CE, SIMPLE);
  EXPECT_EQ_INT(t[0].pair, 1);
  EXPECT_EQ_INT(t[1].pair, 0);
  EXPECT_EQ_INT(t[0].round, -1);
  EXPECT_CHOICE(t[2], DIRECT, LL);
  EXPECT_EQ_INT(t[2].round, 0);
  EXPECT_EQ_INT(t[3].round, 0);
  EXPECT_EQ_INT(t[4].round, 1);
  EXPECT_EQ_INT(t[5].round, 1);
  /* A Recv of another size: no pair, both in the kernels. */
  k[1] = gcall(&c[1], CHORUS_FUNC_RECV, 4 * MB + 4, 0, 0, NULL, BIG(1), 0, 1);
  EXPECT_EQ_INT(chorus_plan_group(k, 2, &probe, t, err, sizeof err), 0);
  EXPECT_CHOICE(t[0], DIRECT, SIMPLE);
  EXPECT_CHOICE(t[1], DIRECT, SIMPLE);
  EXPECT_EQ_INT(t[0].round, 0);
}

/* Whether a choice looked at facts or partners (executors may keep only
 * choices that did not), and the rounds executors recompute for kept
 * tasks. */
static void depends_and_rounds(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c[2];
  for (int r = 0; r < 2; r++) gpu_comm(&c[r], 2, 1, r, 77);
  const uint32_t all = PLAN_FACTS_ALL;
  EXPECT_EQ_INT(choose_facts(&c[0], AR, 8, all, 1).depends, 0);
  EXPECT_EQ_INT(choose_facts(&c[0], BC, 1 * MB, all, 1).depends, 0);
  EXPECT_EQ_INT(choose_facts(&c[0], AR, 4 * MB, all, 1).depends, 1); /* zero-copy's range */
  EXPECT_EQ_INT(choose_facts(&c[0], AR, 4 * MB, all, 0).depends, 1); /* asked for windows */
  EXPECT_EQ_INT(choose_facts(&c[0], CHORUS_FUNC_SEND, 64 * MB, all, 1).depends, 1);
  chorus_plan_call k = call_of(&c[0], AR, 8);
  chorus_task t;
  char err[200];
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 1u << CE, 1, &t, NULL, err, sizeof err), 0);
  EXPECT_EQ_INT(t.depends, 1); /* something was ruled out for it */
  host_comm(&c[0], 2, 1, 1, 0);
  EXPECT_EQ_INT(choose(&c[0], AR, 8).depends, 1); /* the cost model looked at everything */
  /* Rounds as the group planner numbers them, from tasks alone. */
  for (int r = 0; r < 2; r++) gpu_comm(&c[r], 2, 0, r, 77);
  chorus_plan_call g[5];
  chorus_task a[5], b[5];
  g[0] = gcall(&c[0], CHORUS_FUNC_SEND, 4, 0, 0, BIG(0), NULL, 1, 0);
  g[1] = gcall(&c[0], AR, 4, 0, 0, BIG(1), BIG(1), -1, 1);
  g[2] = gcall(&c[0], CHORUS_FUNC_SEND, 0, 0, 0, BIG(2), NULL, 1, 2);
  g[3] = gcall(&c[0], CHORUS_FUNC_SEND, 8, 0, 0, BIG(3), NULL, 1, 3);
  g[4] = gcall(&c[0], CHORUS_FUNC_RECV, 8, 0, 0, NULL, BIG(4), 1, 4);
  EXPECT_EQ_INT(chorus_plan_group(g, 5, NULL, a, err, sizeof err), 0);
  memcpy(b, a, sizeof b);
  for (int i = 0; i < 5; i++) b[i].round = 77;
  chorus_plan_rounds(g, 5, b);
  const int32_t want[5] = {0, -1, -1, 1, 0};
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ_INT(a[i].round, want[i]);
    EXPECT_EQ_INT(b[i].round, want[i]);
  }
}

/* What ncclGroupSimulateEnd reports: per communicator the sum, across
 * communicators the largest. */
static void simulate(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm a, b;
  host_comm(&a, 2, 1, 1, 0);
  host_comm(&b, 2, 1, 1, 0);
  chorus_plan_call k[3];
  chorus_task t[3];
  char err[200];
  k[0] = gcall(&a, AR, 1 << 20, 0, 0, BIG(0), BIG(1), -1, 0);
  k[1] = gcall(&a, AR, 1 << 20, 0, 0, BIG(0), BIG(1), -1, 1);
  k[2] = gcall(&b, AR, 1 << 20, 0, 0, BIG(0), BIG(1), -1, 2);
  EXPECT_EQ_INT(chorus_plan_group(k, 3, NULL, t, err, sizeof err), 0);
  const double one = chorus_plan_cost_us(k, t, 1), all = chorus_plan_cost_us(k, t, 3);
  EXPECT(one > 0);
  EXPECT(all > 1.99 * one && all < 2.01 * one);
  EXPECT(chorus_plan_cost_us(k + 2, t + 2, 1) > 0.99 * one);
}

/* GPUs on several hosts: nlocal per host (0: hosts differ), hosts in
 * rank order or not. */
static void hosts_comm(chorus_plan_comm *c, int n, int nhosts, int nlocal, int in_order) {
  gpu_comm(c, n, 0, 0, 7);
  c->env.nhosts = nhosts;
  c->env.nlocal = nlocal;
  c->env.lanes = 4;
  c->env.max_msg = 128 * KB;
  c->env.net_us = 9.5, c->env.net_bw = 3500; /* loopback's probe (docs/PERFORMANCE.md) */
  c->hosts_in_order = in_order;
}

/* Across hosts only hier and staged run, the cost model choosing: over
 * loopback's figures on 2 hosts x 2 GPUs hier from about 64 KiB for
 * AllReduce, AllGather and ReduceScatter, and only where its steps can
 * cut the call (NCCL_ALGO names both). */
static void gpu_hosts(void) {
  env(NULL, NULL, NULL);
  chorus_plan_comm c;
  hosts_comm(&c, 4, 2, 2, 1);
  EXPECT_CHOICE(choose(&c, AR, 8), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 16 * KB), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, AR, 256 * KB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 128 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, RS, 1 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, BC, 128 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_REDUCE, 4 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, BC, 8), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, A2A, 1 * MB), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_SEND, 8 * MB), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_RECV, 8), STAGED, SIMPLE);
  /* Hosts out of rank order: a host's AllGather blocks are not one
   * range, nor is the root's host and place one rank's division by L. */
  hosts_comm(&c, 4, 2, 2, 0);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 1 * MB), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, RS, 1 * MB), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, BC, 1 * MB), STAGED, SIMPLE);
  EXPECT_CHOICE(choose(&c, CHORUS_FUNC_REDUCE, 1 * MB), STAGED, SIMPLE);
  /* Hosts of different sizes, or of one rank each: no parts. */
  hosts_comm(&c, 3, 2, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 1 * MB), STAGED, SIMPLE);
  /* An AllReduce of fewer elements than ranks on a host. */
  hosts_comm(&c, 16, 2, 8, 1);
  chorus_plan_call k = call_of(&c, AR, 64 * KB);
  k.count = 7;
  chorus_task t;
  char err[320];
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 0, 0, &t, NULL, err, sizeof err), 0);
  EXPECT_CHOICE(t, STAGED, SIMPLE);
  /* The kernels of one host never run across hosts, whatever the rules;
   * hier and staged never run on one host. */
  env(NULL, NULL, "allreduce:ring,allgather:zerocopy");
  hosts_comm(&c, 4, 2, 2, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 64 * MB), HIER, SIMPLE);
  env(NULL, NULL, "staged");
  gpu_comm(&c, 4, 0, 0, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), RING, SIMPLE);
  /* NCCL_ALGO names them; a list of one-host kernels does not bind across
   * hosts (it binds the host calls under them), nor does one of theirs on
   * one host; without that, a function bound to what cannot run fails
   * naming what could. */
  env("staged", NULL, NULL);
  hosts_comm(&c, 4, 2, 2, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), STAGED, SIMPLE);
  env("hier", NULL, NULL);
  hosts_comm(&c, 4, 2, 2, 1);
  EXPECT_CHOICE(choose(&c, AR, 8), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, BC, 8), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, A2A, 8), STAGED, SIMPLE);
  env("^hier", NULL, NULL);
  hosts_comm(&c, 4, 2, 2, 1);
  EXPECT_CHOICE(choose(&c, RS, 64 * MB), STAGED, SIMPLE);
  env("ring", NULL, NULL);
  hosts_comm(&c, 4, 2, 2, 1);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), HIER, SIMPLE);
  env("allreduce:ring;allgather:staged", NULL, NULL);
  hosts_comm(&c, 4, 2, 2, 1);
  k = call_of(&c, AR, 64 * MB);
  EXPECT_EQ_INT(chorus_plan_choose(&k, NULL, 0, 0, &t, NULL, err, sizeof err), -1);
  EXPECT_EQ_INT(strstr(err, "could run: hier, staged") != NULL, 1);
  chorus_plan_unbind_foreign(&c);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), HIER, SIMPLE);
  EXPECT_CHOICE(choose(&c, AG, 64 * MB), STAGED, SIMPLE);
  env("allreduce:hier", NULL, NULL);
  gpu_comm(&c, 4, 0, 0, 1);
  chorus_plan_unbind_foreign(&c);
  EXPECT_CHOICE(choose(&c, AR, 64 * MB), RING, SIMPLE);
  /* The host calls that carry them choose their own algorithm unless the
   * filter names one of theirs. */
  env("allreduce:hier;allgather:ring", NULL, NULL);
  host_comm(&c, 4, 2, 0, 0);
  chorus_plan_unbind_foreign(&c);
  EXPECT_EQ_INT(choose(&c, AR, 1 * MB).algo >= 0, 1);
  EXPECT_CHOICE(choose(&c, AG, 1 * MB), RING, -1);
  env(NULL, NULL, NULL);
}

int main(void) {
  RUN(gpu_defaults_4);
  RUN(gpu_hosts);
  RUN(gpu_defaults_2);
  RUN(gpu_capped);
  RUN(gpu_filters);
  RUN(gpu_tune);
  RUN(host_choices);
  RUN(tuner_plugin);
  RUN(explain);
  RUN(group_zero_copy);
  RUN(group_copy_engine);
  RUN(depends_and_rounds);
  RUN(simulate);
  return unit_report();
}

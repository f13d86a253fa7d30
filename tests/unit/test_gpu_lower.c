/*
 * test_gpu_plan.c - the exchanges that GPU communicators run for each
 * collective compute the collective.
 *
 * chorus_gpu_plan says, per rank, which blocks go to which peers and what
 * each rank does with what it receives; the kernel carries that out. Here
 * the plans of all ranks are replayed on host memory with the kernel's
 * semantics (every rank pushes its blocks, then every rank copies or
 * reduces in rank order; rings and chains step by step), split into
 * pieces as the LL launcher splits them, and the outputs are compared with the collective
 * computed directly: every function, 1 to 5 ranks, several counts, in
 * place and not, one-shot, two-shot (one launch) and ring AllReduce, ring AllGather and
 * ReduceScatter (the ring's steps as kernels.h defines them, chunk by
 * chunk), fan-out and chained Broadcast/Reduce, whole and tiny pieces.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "host/reduce.h"
#include "unit.h"

#define MAXN 5

typedef struct world {
  int n;
  size_t count;   /* the API's count */
  int func, root; /* chorus_func */
  int inplace;
  int32_t *send[MAXN], *recv[MAXN]; /* recv is the buffer the call writes */
  int32_t *expect[MAXN];
  size_t send_elems, recv_elems;
} world;

static int32_t value(int rank, size_t i) {
  return (int32_t)(rank * 1000 + (int)(i % 997) - 300);
}

/* Element counts of each rank's buffers, as the API defines them. */
static void shapes(world *w) {
  size_t c = w->count, n = (size_t)w->n;
  switch (w->func) {
  case CHORUS_FUNC_ALLGATHER:
    w->send_elems = c, w->recv_elems = c * n;
    break;
  case CHORUS_FUNC_REDUCESCATTER:
    w->send_elems = c * n, w->recv_elems = c;
    break;
  case CHORUS_FUNC_ALLTOALL:
    w->send_elems = w->recv_elems = c * n;
    break;
  case CHORUS_FUNC_GATHER:
    w->send_elems = c, w->recv_elems = c * n;
    break;
  case CHORUS_FUNC_SCATTER:
    w->send_elems = c * n, w->recv_elems = c;
    break;
  default:
    w->send_elems = w->recv_elems = c;
    break;
  }
}

/* Buffers (in place: NCCL's layouts) and the expected outputs. */
static void setup(world *w) {
  shapes(w);
  size_t c = w->count;
  for (int r = 0; r < w->n; r++) {
    size_t big = w->send_elems > w->recv_elems ? w->send_elems : w->recv_elems;
    int32_t *base = calloc(big + 1, sizeof *base);
    if (w->inplace) {
      if (w->func == CHORUS_FUNC_ALLGATHER) {
        w->recv[r] = base, w->send[r] = base + (size_t)r * c;
      } else if (w->func == CHORUS_FUNC_REDUCESCATTER) {
        w->send[r] = base, w->recv[r] = base + (size_t)r * c;
      } else {
        w->send[r] = w->recv[r] = base;
      }
    } else {
      w->send[r] = base;
      w->recv[r] = calloc(w->recv_elems + 1, sizeof(int32_t));
    }
    for (size_t i = 0; i < w->send_elems; i++) w->send[r][i] = value(r, i);
    w->expect[r] = calloc(w->recv_elems + 1, sizeof(int32_t));
  }
  for (int r = 0; r < w->n; r++) {
    int32_t *e = w->expect[r];
    for (size_t i = 0; i < w->recv_elems; i++) {
      int64_t sum = 0;
      switch (w->func) {
      case CHORUS_FUNC_ALLREDUCE:
      case CHORUS_FUNC_REDUCE:
        for (int s = 0; s < w->n; s++) sum += value(s, i);
        e[i] = (w->func == CHORUS_FUNC_REDUCE && r != w->root) ? 0 : (int32_t)sum;
        break;
      case CHORUS_FUNC_REDUCESCATTER:
        for (int s = 0; s < w->n; s++) sum += value(s, (size_t)r * c + i);
        e[i] = (int32_t)sum;
        break;
      case CHORUS_FUNC_ALLGATHER:
        e[i] = value((int)(i / c), i % c);
        break;
      case CHORUS_FUNC_BROADCAST:
        e[i] = value(w->root, i);
        break;
      case CHORUS_FUNC_ALLTOALL:
        e[i] = value((int)(i / c), (size_t)r * c + i % c);
        break;
      case CHORUS_FUNC_GATHER:
        e[i] = r == w->root ? value((int)(i / c), i % c) : 0;
        break;
      case CHORUS_FUNC_SCATTER:
        e[i] = value(w->root, (size_t)r * c + i);
        break;
      default:
        break;
      }
    }
  }
}

static void teardown(world *w) {
  for (int r = 0; r < w->n; r++) {
    int32_t *base = w->inplace && w->func == CHORUS_FUNC_ALLGATHER ? w->recv[r] : w->send[r];
    free(base);
    if (!w->inplace) free(w->recv[r]);
    free(w->expect[r]);
  }
}

/* One exchange of every rank (xs[r]), as the kernels run it: every rank
 * pushes its blocks; then each rank takes its sources' (copies, or
 * reduces in rank order). */
static void replay(const world *w, chorus_kern_xchg *xs) {
  int n = w->n;
  unsigned char *slot[MAXN][MAXN];
  for (int d = 0; d < n; d++)
    for (int s = 0; s < n; s++) slot[d][s] = NULL;
  for (int r = 0; r < n; r++) /* the pushes */
    for (int p = 0; p < n; p++)
      if ((xs[r].send_to >> p) & 1) {
        slot[p][r] = malloc(xs[r].bytes + 1);
        memcpy(slot[p][r], (const char *)xs[r].send + xs[r].soff[p], xs[r].bytes);
      }
  for (int r = 0; r < n; r++) {
    const chorus_kern_xchg *x = &xs[r];
    const void *src[MAXN];
    int k = 0;
    for (int s = 0; s < n; s++) {
      if (!((x->recv_from >> s) & 1)) continue;
      const void *from = s == r ? (const char *)x->send + x->soff[r] : (const void *)slot[r][s];
      EXPECT(from != NULL); /* no rank waits for a source that never comes */
      if (!from) continue;
      if (x->reduce) {
        src[k++] = from;
        continue;
      }
      memmove((char *)x->recv + x->roff[s], from, x->bytes);
    }
    if (x->reduce && k > 0) {
      chorus_red red = {CHORUS_RED_SUM, 2 /* ncclInt32 */, {0}, 0, NULL};
      chorus_reduce(&red, (char *)x->recv + x->roff[0], src, k, x->bytes / 4, 0,
                    CHORUS_RED_FINALIZE);
    }
  }
  for (int d = 0; d < n; d++)
    for (int s = 0; s < n; s++) free(slot[d][s]);
}

/* A ring or chain of every rank (xs[r]) over bytes [off, off + len) of
 * each block, as ring.cu runs one chunk position: at step s every rank
 * that runs it handles block chorus_ring_block(s), taking what the
 * previous rank pushed at step s - 1 (adding its own input where the step
 * reduces) and pushing the result on. */
static void replay_ring(const world *w, const chorus_kern_xchg *xs, size_t off, size_t len) {
  const int n = w->n, kind = xs[0].ring, steps = chorus_ring_steps(kind, n);
  const size_t elems = len / 4;
  int32_t *pushed[MAXN] = {NULL}, *now[MAXN] = {NULL};
  for (int s = 0; s < steps; s++) {
    for (int r = 0; r < n; r++) {
      const chorus_kern_xchg *x = &xs[r];
      EXPECT_EQ_INT(x->ring, kind);
      now[r] = NULL;
      if (s < chorus_ring_first(kind, r, n, x->root) || s > chorus_ring_last(kind, r, n, x->root))
        continue;
      const int32_t *got = s > 0 ? pushed[(r + n - 1) % n] : NULL;
      EXPECT(s == 0 || got != NULL); /* the previous rank ran step s - 1 */
      if (s > 0 && !got) continue;
      const size_t blk = (size_t)chorus_ring_block(kind, r, n, s);
      const int32_t *own =
          (const int32_t *)((const char *)x->send +
                            (chorus_ring_in_blocks(kind) ? blk * x->bytes : 0) + off);
      int32_t *d = malloc(len + 4);
      if (s == 0) {
        memcpy(d, own, len);
      } else {
        memcpy(d, got, len);
        if (chorus_ring_reduces(kind, n, s))
          for (size_t e = 0; e < elems; e++) d[e] = (int32_t)((uint32_t)d[e] + (uint32_t)own[e]);
      }
      if (chorus_ring_writes(kind, n, s))
        memmove((char *)x->recv + (chorus_ring_out_blocks(kind) ? blk * x->bytes : 0) + off, d,
                len);
      now[r] = d;
    }
    for (int r = 0; r < n; r++) {
      free(pushed[r]);
      pushed[r] = now[r];
    }
  }
  for (int r = 0; r < n; r++) free(pushed[r]);
}

/* A one-launch two-shot AllReduce of every rank (xs[r]), as twoshot.cu
 * computes it: block p of every rank's input (p * bytes, clipped to total)
 * reduced in rank order, then copied to block p of every rank's output.
 * Every rank's blocks must agree. */
static void replay_twoshot(const world *w, const chorus_kern_xchg *xs) {
  const int n = w->n;
  for (int r = 0; r < n; r++) {
    EXPECT(xs[r].twoshot && xs[r].bytes == xs[0].bytes && xs[r].total == xs[0].total);
    EXPECT(xs[r].bytes % 16 == 0); /* blocks start aligned where the buffer does */
  }
  const size_t bytes = xs[0].bytes, total = xs[0].total;
  for (int p = 0; p < n; p++) {
    const size_t start = (size_t)p * bytes;
    if (start >= total) continue;
    const size_t len = total - start < bytes ? total - start : bytes;
    int32_t *sum = calloc(len / 4 + 1, 4);
    for (int s = 0; s < n; s++) {
      const int32_t *in = (const int32_t *)((const char *)xs[s].send + start);
      for (size_t e = 0; e < len / 4; e++) sum[e] = (int32_t)((uint32_t)sum[e] + (uint32_t)in[e]);
    }
    for (int r = 0; r < n; r++) memcpy((char *)xs[r].recv + start, sum, len);
    free(sum);
  }
}

static void run(world *w, const chorus_gpu_tune *tune, size_t piece) {
  setup(w);
  chorus_kern_xchg steps[MAXN][CHORUS_GPU_MAX_STEPS];
  int nsteps = -1;
  for (int r = 0; r < w->n; r++) {
    chorus_op op;
    memset(&op, 0, sizeof op);
    op.func = w->func;
    op.sendbuff = w->send[r];
    op.recvbuff = w->recv[r];
    op.count = w->count;
    op.esize = 4;
    op.root = w->root;
    int k = chorus_gpu_plan(r, w->n, tune, &op, steps[r]);
    if (nsteps >= 0) EXPECT_EQ_INT(k, nsteps); /* every rank runs the same steps */
    nsteps = k;
  }
  REQUIRE(nsteps > 0);
  for (int i = 0; i < nsteps; i++) {
    size_t bytes = steps[0][i].bytes;
    if (steps[0][i].twoshot) {
      chorus_kern_xchg xs[MAXN];
      for (int r = 0; r < w->n; r++) xs[r] = steps[r][i];
      replay_twoshot(w, xs);
      continue;
    }
    for (size_t off = 0; off < bytes && steps[0][i].ring; off += piece) {
      chorus_kern_xchg xs[MAXN];
      for (int r = 0; r < w->n; r++) xs[r] = steps[r][i];
      replay_ring(w, xs, off, bytes - off < piece ? bytes - off : piece);
    }
    for (size_t off = 0; off < bytes && !steps[0][i].ring; off += piece) {
      chorus_kern_xchg xs[MAXN];
      for (int r = 0; r < w->n; r++) {
        EXPECT(steps[r][i].bytes == bytes);
        chorus_gpu_piece(&steps[r][i], w->n, off, piece, &xs[r]);
      }
      replay(w, xs);
    }
  }
  for (int r = 0; r < w->n; r++) {
    if ((w->func == CHORUS_FUNC_REDUCE || w->func == CHORUS_FUNC_GATHER) && r != w->root) continue;
    size_t bad = 0;
    for (size_t i = 0; i < w->recv_elems; i++) bad += w->recv[r][i] != w->expect[r][i];
    if (bad)
      printf("  func %d n %d count %zu inplace %d rank %d: %zu wrong\n", w->func, w->n, w->count,
             w->inplace, r, bad);
    EXPECT(bad == 0);
  }
  teardown(w);
}

static void every_collective(void) {
  static const int funcs[] = {
      CHORUS_FUNC_ALLREDUCE, CHORUS_FUNC_REDUCESCATTER, CHORUS_FUNC_REDUCE, CHORUS_FUNC_ALLGATHER,
      CHORUS_FUNC_BROADCAST, CHORUS_FUNC_ALLTOALL,      CHORUS_FUNC_GATHER, CHORUS_FUNC_SCATTER};
  static const size_t counts[] = {1, 7, 64, 1001};
  for (size_t f = 0; f < sizeof funcs / sizeof funcs[0]; f++)
    for (int n = 1; n <= MAXN; n++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (int inplace = 0; inplace < 2; inplace++) {
          int func = funcs[f];
          int has_inplace = func == CHORUS_FUNC_ALLREDUCE || func == CHORUS_FUNC_REDUCESCATTER ||
                            func == CHORUS_FUNC_ALLGATHER || func == CHORUS_FUNC_BROADCAST ||
                            func == CHORUS_FUNC_REDUCE;
          if (inplace && !has_inplace) continue;
          for (size_t piece = 8; piece <= 1u << 20; piece <<= 17) /* 8 B and 1 MiB */
            for (int big = 0; big < 3; big++) { /* 1: two-shot AllReduce, chains; 2: rings too */
              world w = {
                  .n = n, .count = counts[c], .func = func, .root = n / 2, .inplace = inplace};
              chorus_gpu_tune tune = {.twoshot_bytes = big ? 0 : SIZE_MAX,
                                      .twoshot_max = SIZE_MAX,
                                      .chain_bytes = big ? 0 : SIZE_MAX,
                                      .ring_bytes = big == 2 ? 0 : SIZE_MAX,
                                      .fifo_twoshot = 1};
              run(&w, &tune, piece);
            }
        }
}

/* Above twoshot_max an AllReduce runs one-shot again. */
static void twoshot_bounds(void) {
  int32_t buf[64] = {0};
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.func = CHORUS_FUNC_ALLREDUCE;
  op.sendbuff = op.recvbuff = buf;
  op.esize = 4;
  chorus_gpu_tune tune = {.twoshot_bytes = 64,
                          .twoshot_max = 128,
                          .chain_bytes = SIZE_MAX,
                          .ring_bytes = SIZE_MAX,
                          .fifo_twoshot = 1};
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  const size_t counts[] = {8, 16, 32, 64};
  const int twoshot[] = {0, 1, 1, 0};
  for (int i = 0; i < 4; i++) {
    op.count = counts[i];
    EXPECT_EQ_INT(chorus_gpu_plan(0, 2, &tune, &op, x), 1);
    EXPECT_EQ_INT(x[0].twoshot, twoshot[i]);
  }
}

/* What one rank of n plans for func on count floats under t: the number of
 * steps, and the first step's kind: 'r' ring or chain, 't' two-shot, 'o'
 * one-shot exchange; *ll its protocol. */
static int plan_kind(int func, int n, size_t count, const chorus_gpu_tune *t, int *ll) {
  static float buf[1 << 16];
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.func = func;
  op.sendbuff = op.recvbuff = buf;
  op.count = count;
  op.esize = 4;
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  const int k = chorus_gpu_plan(0, n, t, &op, x);
  if (k <= 0) return k;
  *ll = x[0].ll;
  return x[0].ring ? 'r' : x[0].twoshot ? 't' : 'o';
}

/* NCCL_ALGO and NCCL_PROTO (as the masks gpu.c makes of them) steer the
 * plan; what they allow runs even where the thresholds would not pick
 * it, what they exclude never runs, and a list naming a function that
 * leaves it nothing is an error (-1) rather than a silent default. */
static void filters(void) {
  const uint32_t all = ~0u, ll = 1u << CHORUS_PROTO_LL, simple = 1u << CHORUS_PROTO_SIMPLE;
  const int AR = CHORUS_FUNC_ALLREDUCE;
  chorus_gpu_tune t = {.twoshot_bytes = SIZE_MAX,
                       .twoshot_max = SIZE_MAX,
                       .chain_bytes = SIZE_MAX,
                       .ring_bytes = SIZE_MAX,
                       .pipe_bytes = 1 << 20,
                       .twoshot_ll_bytes = 1 << 20,
                       .ll_lines = 131072,
                       .ll_cta_lines = 256,
                       .fifo_twoshot = 1};
  int pll = -1;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), 'o');
  EXPECT_EQ_INT(pll, 1); /* 4 KiB: LL lines */
  t.algo_deny[AR] = all & ~(1u << CHORUS_ALGO_RING);
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), 'r');
  t.algo_deny[AR] = all & ~(1u << CHORUS_ALGO_TWOSHOT);
  t.algo_named[AR] = 1;
  EXPECT_EQ_INT(plan_kind(AR, 4, 3, &t, &pll), 'o'); /* fewer elements than ranks */
  t.algo_named[AR] = 0;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), 't');
  EXPECT_EQ_INT(pll, 1); /* two shares fit an LL slot */
  t.proto_deny[AR] = ll;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), 't');
  EXPECT_EQ_INT(pll, 0); /* FIFO chunks */
  t.fifo_twoshot = 0;    /* no FIFO two-shot, no LL: nothing allowed can run */
  t.algo_named[AR] = 1;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), -1);
  t.algo_named[AR] = 0; /* a global list: the default still runs */
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), 'o');
  EXPECT_EQ_INT(pll, 0);
  t.fifo_twoshot = 1;
  t.proto_deny[AR] = simple; /* rings need Simple */
  t.algo_deny[AR] = all & ~(1u << CHORUS_ALGO_RING);
  t.algo_named[AR] = 1;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1024, &t, &pll), -1);
  t.algo_deny[AR] = 0;
  t.algo_named[AR] = 0;
  t.pipe_bytes = 0; /* the thresholds say Simple; NCCL_PROTO says LL */
  EXPECT_EQ_INT(plan_kind(AR, 4, 1 << 16, &t, &pll), 'o');
  EXPECT_EQ_INT(pll, 1);
  t.proto_deny[AR] = 0;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1 << 16, &t, &pll), 'o');
  EXPECT_EQ_INT(pll, 0);
  t.ring_bytes = 0; /* the ring by default; excluded, the two-shot in LL lines */
  EXPECT_EQ_INT(plan_kind(AR, 4, 1 << 16, &t, &pll), 'r');
  t.algo_deny[AR] = 1u << CHORUS_ALGO_RING;
  EXPECT_EQ_INT(plan_kind(AR, 4, 1 << 16, &t, &pll), 't');
  EXPECT_EQ_INT(pll, 1);
  /* AlltoAll is an exchange, allowed as "direct" or "oneshot". */
  const int A2A = CHORUS_FUNC_ALLTOALL;
  t.algo_deny[A2A] = all & ~(1u << CHORUS_ALGO_DIRECT);
  t.algo_named[A2A] = 1;
  EXPECT_EQ_INT(plan_kind(A2A, 4, 64, &t, &pll), 'o');
  t.algo_deny[A2A] = all & ~(1u << CHORUS_ALGO_RING);
  EXPECT_EQ_INT(plan_kind(A2A, 4, 64, &t, &pll), -1);
  /* Broadcast: "ring" is a chain on 3+ GPUs and the fan-out on 2. */
  const int BC = CHORUS_FUNC_BROADCAST;
  t.algo_deny[BC] = all & ~(1u << CHORUS_ALGO_RING);
  t.algo_named[BC] = 1;
  EXPECT_EQ_INT(plan_kind(BC, 4, 64, &t, &pll), 'r');
  EXPECT_EQ_INT(plan_kind(BC, 2, 64, &t, &pll), 'r'); /* a chain of one hop */
}

/* The settings as gpu.c reads them: every crossover set to its documented
 * default, and the plans that the defaults make at both sides of the
 * chain's crossover (a lost chain_bytes once put 8-byte Broadcasts and
 * Reduces on 4 GPUs into three-hop chains). */
static void tune_defaults(void) {
  chorus_gpu_tune t;
  chorus_gpu_tune_read(&t, 4, 64, 131072, 256);
  EXPECT_EQ_INT(t.pipe_bytes, 262144);
  EXPECT_EQ_INT(t.twoshot_bytes, 16384);
  EXPECT(t.twoshot_max == SIZE_MAX);
  EXPECT_EQ_INT(t.twoshot_ll_bytes, 1 << 20);
  EXPECT_EQ_INT(t.chain_bytes, 262144);
  EXPECT_EQ_INT(t.ring_bytes, 2 << 20);
  EXPECT_EQ_INT(t.ll_lines, 131072);
  EXPECT_EQ_INT(t.ll_cta_lines, 256);
  EXPECT_EQ_INT(t.fifo_twoshot, 1);
  EXPECT_EQ_INT(t.p2p_ll_bytes, 524288);
  EXPECT_EQ_INT(t.bcast_ce_bytes, 0); /* copy engine on 3+ GPUs: off (slower on 4xH100) */
  EXPECT_EQ_INT(t.xchg_ce_bytes, 0);
  int pll = -1;
  const int funcs[] = {CHORUS_FUNC_BROADCAST, CHORUS_FUNC_REDUCE};
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ_INT(plan_kind(funcs[i], 4, 2, &t, &pll), 'o'); /* 8 B: the fan-out, in LL */
    EXPECT_EQ_INT(pll, 1);
    EXPECT_EQ_INT(plan_kind(funcs[i], 4, 65536, &t, &pll), 'r'); /* 256 KiB: a chain */
  }
  EXPECT_EQ_INT(plan_kind(CHORUS_FUNC_ALLGATHER, 4, 32768, &t, &pll), 'o');
  EXPECT_EQ_INT(pll, 1); /* 128 KiB blocks: LL lines */
  EXPECT_EQ_INT(plan_kind(CHORUS_FUNC_ALLGATHER, 4, 65536, &t, &pll), 'o');
  EXPECT_EQ_INT(pll, 0); /* 256 KiB blocks: the pipeline */
  chorus_gpu_tune_read(&t, 2, 64, 131072, 256);
  EXPECT_EQ_INT(t.chain_bytes, 262144);
  for (int i = 0; i < 2; i++) { /* 2 GPUs: the chain kernel from 256 KiB */
    EXPECT_EQ_INT(plan_kind(funcs[i], 2, 65535, &t, &pll), 'o');
    EXPECT_EQ_INT(plan_kind(funcs[i], 2, 65536, &t, &pll), 'r');
  }
  EXPECT_EQ_INT(t.twoshot_bytes, 262144);
  EXPECT_EQ_INT(t.twoshot_max, 1 << 20);
  EXPECT_EQ_INT(t.pipe_bytes, 1 << 20);
  EXPECT_EQ_INT(t.bcast_ce_bytes, 64 << 20); /* copy engine on 2 GPUs from 64 MiB */
  EXPECT_EQ_INT(t.xchg_ce_bytes, 64 << 20);
  chorus_gpu_tune_read(&t, 4, 1, 131072, 256);
  EXPECT_EQ_INT(t.fifo_twoshot, 0);
  setenv("CHORUS_GPU_CHAIN_BYTES", "4096", 1);
  setenv("CHORUS_GPU_RING_BYTES", "0", 1);
  chorus_gpu_tune_read(&t, 4, 64, 131072, 256);
  EXPECT_EQ_INT(t.chain_bytes, 4096);
  EXPECT(t.ring_bytes == SIZE_MAX); /* 0: never */
  unsetenv("CHORUS_GPU_CHAIN_BYTES");
  unsetenv("CHORUS_GPU_RING_BYTES");
  /* Send/Recv leave LL lines when NCCL_PROTO takes LL from them, and only
   * then; the setting is clipped to what the slots can hold. */
  static const struct {
    const char *proto;
    size_t want;
  } protos[] = {{"Simple", 0},  {"sendrecv:Simple", 0}, {"^LL", 0}, {"allreduce:Simple", 524288},
                {"LL", 524288}, {"LL,Simple", 524288}};
  for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) {
    setenv("NCCL_PROTO", protos[i].proto, 1);
    chorus_gpu_tune_read(&t, 4, 64, 131072, 256);
    EXPECT_EQ_INT(t.p2p_ll_bytes, protos[i].want);
  }
  unsetenv("NCCL_PROTO");
  setenv("CHORUS_GPU_P2P_LL_BYTES", "1073741824", 1);
  chorus_gpu_tune_read(&t, 4, 64, 131072, 256);
  EXPECT_EQ_INT(t.p2p_ll_bytes, CHORUS_GPU_P2P_LL_MAX);
  unsetenv("CHORUS_GPU_P2P_LL_BYTES");
}

static void unsupported(void) {
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.func = CHORUS_FUNC_SEND;
  op.count = 4;
  op.esize = 4;
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  chorus_gpu_tune tune = {.twoshot_max = SIZE_MAX, .fifo_twoshot = 1};
  EXPECT_EQ_INT(chorus_gpu_plan(0, 2, &tune, &op, x), 0);
}

/* The call description LL launches compare: equal for the same call,
 * different when any field that must match differs, ignoring what may
 * differ (the root of an unrooted call, the operator of a copy); carried
 * by every exchange of a plan; described by name. */
static void call_desc(void) {
  static float buf[4096];
  chorus_op a;
  memset(&a, 0, sizeof a);
  a.func = CHORUS_FUNC_ALLREDUCE;
  a.dtype = 7; /* ncclFloat */
  a.esize = 4;
  a.nccl_op = 0;
  a.count = 256;
  a.sendbuff = a.recvbuff = buf;
  chorus_op b = a;
  EXPECT(chorus_gpu_call_desc(&a) == chorus_gpu_call_desc(&b));
  b.root = 3; /* not a rooted call */
  EXPECT(chorus_gpu_call_desc(&a) == chorus_gpu_call_desc(&b));
  chorus_op v[5];
  for (int i = 0; i < 5; i++) v[i] = a;
  v[0].func = CHORUS_FUNC_BROADCAST;
  v[1].count = 257;
  v[2].dtype = 8;
  v[3].nccl_op = 2;
  v[4].count = (size_t)256 << 32; /* high count bits count too */
  for (int i = 0; i < 5; i++) EXPECT(chorus_gpu_call_desc(&a) != chorus_gpu_call_desc(&v[i]));
  chorus_op r1 = v[0], r2 = v[0];
  r2.root = 1;
  EXPECT(chorus_gpu_call_desc(&r1) != chorus_gpu_call_desc(&r2)); /* Broadcast roots */
  r2 = r1;
  r2.nccl_op = 3; /* a copy has no operator */
  EXPECT(chorus_gpu_call_desc(&r1) == chorus_gpu_call_desc(&r2));
  char d[160];
  chorus_gpu_call_describe(chorus_gpu_call_desc(&a), d, sizeof d);
  EXPECT_STREQ(d, "AllReduce(count=256, float, sum)");
  r2.root = 1;
  chorus_gpu_call_describe(chorus_gpu_call_desc(&r2), d, sizeof d);
  EXPECT_STREQ(d, "Broadcast(count=256, float, root=1)");
  chorus_gpu_tune tune = {.twoshot_bytes = SIZE_MAX,
                          .twoshot_max = SIZE_MAX,
                          .chain_bytes = SIZE_MAX,
                          .ring_bytes = 1024,
                          .pipe_bytes = 1 << 20,
                          .ll_lines = 131072,
                          .ll_cta_lines = 256,
                          .fifo_twoshot = 1};
  a.count = 4095; /* a ring and its one-shot tail */
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  const int k = chorus_gpu_plan(0, 4, &tune, &a, x);
  EXPECT_EQ_INT(k, 2);
  for (int i = 0; i < k; i++) EXPECT(x[i].desc == chorus_gpu_call_desc(&a));
}

/* Settings every rank must share: equal ones pass, one that differs is
 * named with both values and ranks, string settings by name. */
static void settings_agree(void) {
  chorus_gpu_agree a[3];
  char err[256] = "";
  chorus_gpu_agree_read(&a[0]);
  a[1] = a[0];
  a[2] = a[0];
  EXPECT(a[0].count > 20);
  EXPECT_EQ_INT(chorus_gpu_agree_check(a, 3, err, sizeof err), -1);
  setenv("CHORUS_GPU_P2P_PULL", "1", 1);
  chorus_gpu_agree_read(&a[2]);
  unsetenv("CHORUS_GPU_P2P_PULL");
  EXPECT(chorus_gpu_agree_check(a, 3, err, sizeof err) >= 0);
  EXPECT(strstr(err, "CHORUS_GPU_P2P_PULL is 0 on rank 0 but 1 on rank 2") != NULL);
  EXPECT_EQ_INT(chorus_gpu_agree_check(a, 2, err, sizeof err), -1); /* ranks 0 and 1 alike */
  setenv("NCCL_ALGO", "ring", 1);
  chorus_gpu_agree_read(&a[1]);
  unsetenv("NCCL_ALGO");
  EXPECT(chorus_gpu_agree_check(a, 2, err, sizeof err) >= 0);
  EXPECT(strstr(err, "NCCL_ALGO differs between ranks 0 and 1") != NULL);
  a[1] = a[0];
  a[1].count--;
  EXPECT(chorus_gpu_agree_check(a, 2, err, sizeof err) >= 0);
  EXPECT(strstr(err, "different builds") != NULL);
}

int main(void) {
  RUN(call_desc);
  RUN(settings_agree);
  RUN(every_collective);
  RUN(twoshot_bounds);
  RUN(filters);
  RUN(tune_defaults);
  RUN(unsupported);
  return unit_report();
}

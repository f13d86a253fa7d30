/*
 * test_gpu_lower.c - the exchanges that GPU communicators run for each
 * collective compute the collective; the structural settings and the
 * arena's layout.
 *
 * The planner chooses an algorithm (forced here through CHORUS_TUNE), and
 * chorus_gpu_lower says, per rank, which blocks go to which peers and what
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
#include "gpu/layout.h"
#include "gpu/settings.h"
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
 * that runs it handles block chorus_kern_ring_block(s), taking what the
 * previous rank pushed at step s - 1 (adding its own input where the step
 * reduces) and pushing the result on. */
static void replay_ring(const world *w, const chorus_kern_xchg *xs, size_t off, size_t len) {
  const int n = w->n, kind = xs[0].ring, steps = chorus_kern_ring_steps(kind, n);
  const size_t elems = len / 4;
  int32_t *pushed[MAXN] = {NULL}, *now[MAXN] = {NULL};
  for (int s = 0; s < steps; s++) {
    for (int r = 0; r < n; r++) {
      const chorus_kern_xchg *x = &xs[r];
      EXPECT_EQ_INT(x->ring, kind);
      now[r] = NULL;
      if (s < chorus_kern_ring_first(kind, r, n, x->root) ||
          s > chorus_kern_ring_last(kind, r, n, x->root))
        continue;
      const int32_t *got = s > 0 ? pushed[(r + n - 1) % n] : NULL;
      EXPECT(s == 0 || got != NULL); /* the previous rank ran step s - 1 */
      if (s > 0 && !got) continue;
      const size_t blk = (size_t)chorus_kern_ring_block(kind, r, n, s);
      const int32_t *own =
          (const int32_t *)((const char *)x->send +
                            (chorus_kern_ring_in_blocks(kind) ? blk * x->bytes : 0) + off);
      int32_t *d = malloc(len + 4);
      if (s == 0) {
        memcpy(d, own, len);
      } else {
        memcpy(d, got, len);
        if (chorus_kern_ring_reduces(kind, n, s))
          for (size_t e = 0; e < elems; e++) d[e] = (int32_t)((uint32_t)d[e] + (uint32_t)own[e]);
      }
      if (chorus_kern_ring_writes(kind, n, s))
        memmove((char *)x->recv + (chorus_kern_ring_out_blocks(kind) ? blk * x->bytes : 0) + off, d,
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

/* A planner's view of a communicator of n GPUs, rules from CHORUS_TUNE =
 * tune (NULL: the defaults alone). */
static void comm_of(chorus_plan_comm *c, int n, const char *tune) {
  memset(c, 0, sizeof *c);
  c->env.backend = CHORUS_BACKEND_GPU;
  c->env.nranks = n;
  c->env.nhosts = 1;
  chorus_gpu_settings st;
  chorus_gpu_settings_read(&st, n, 0, 0);
  chorus_gpu_settings_plan(&st, c);
  if (tune) setenv("CHORUS_TUNE", tune, 1);
  char err[256];
  EXPECT_EQ_INT(chorus_plan_comm_settings(c, err, sizeof err), 0);
  unsetenv("CHORUS_TUNE");
}

/* The task the planner gives rank r's call op. */
static chorus_task task_of(const chorus_plan_comm *c, const chorus_op *op) {
  chorus_plan_call call = {c, op->func,     op->count,    op->esize, op->root, 0,
                           0, op->sendbuff, op->recvbuff, 0,         0,        NULL};
  chorus_task t;
  char err[256];
  EXPECT_EQ_INT(chorus_plan_choose(&call, NULL, 0, 0, &t, NULL, err, sizeof err), 0);
  return t;
}

static void run(world *w, const char *tune, size_t piece) {
  setup(w);
  chorus_plan_comm comm;
  comm_of(&comm, w->n, tune);
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
    const chorus_task t = task_of(&comm, &op);
    int k = chorus_gpu_lower(r, w->n, &op, &t, steps[r]);
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
              static const char *const tunes[] = {
                  "oneshot", "allreduce:twoshot,broadcast|reduce:chain,oneshot",
                  "allreduce|allgather|reducescatter:ring,broadcast|reduce:chain,oneshot"};
              world w = {
                  .n = n, .count = counts[c], .func = func, .root = n / 2, .inplace = inplace};
              run(&w, tunes[big], piece);
            }
        }
}

/* Which algorithms each run took: every forced one that can run did. */
static void forced_algorithms(void) {
  static float buf[1 << 12];
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.sendbuff = op.recvbuff = buf;
  op.esize = 4;
  op.count = 1024;
  chorus_plan_comm c;
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  static const struct {
    const char *tune;
    int func, n, ring, twoshot, ll;
  } cases[] = {
      {"oneshot/LL", CHORUS_FUNC_ALLREDUCE, 4, 0, 0, 1},
      {"oneshot/Simple", CHORUS_FUNC_ALLREDUCE, 4, 0, 0, 0},
      {"twoshot/LL", CHORUS_FUNC_ALLREDUCE, 4, 0, 1, 1},
      {"twoshot/Simple", CHORUS_FUNC_ALLREDUCE, 4, 0, 1, 0},
      {"ring", CHORUS_FUNC_ALLREDUCE, 4, CHORUS_KERN_RING_ALLREDUCE, 0, 0},
      {"ring", CHORUS_FUNC_REDUCESCATTER, 3, CHORUS_KERN_RING_REDUCESCATTER, 0, 0},
      {"chain", CHORUS_FUNC_BROADCAST, 2, CHORUS_KERN_RING_BROADCAST, 0, 0},
      {"chain", CHORUS_FUNC_REDUCE, 4, CHORUS_KERN_RING_REDUCE, 0, 0},
      {"twoshot", CHORUS_FUNC_ALLREDUCE, 1, 0, 0, 1}, /* one rank: the defaults, one LL exchange */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    comm_of(&c, cases[i].n, cases[i].tune);
    op.func = cases[i].func;
    const chorus_task t = task_of(&c, &op);
    EXPECT_EQ_INT(chorus_gpu_lower(0, cases[i].n, &op, &t, x), 1);
    EXPECT_EQ_INT(x[0].ring, cases[i].ring);
    EXPECT_EQ_INT(x[0].twoshot, cases[i].twoshot);
    if (!cases[i].ring) EXPECT_EQ_INT(x[0].ll, cases[i].ll);
  }
  /* A task whose algorithm has no exchange for the function: none. */
  chorus_task t;
  memset(&t, 0, sizeof t);
  t.algo = CHORUS_ALGO_CHAIN;
  op.func = CHORUS_FUNC_ALLREDUCE;
  EXPECT_EQ_INT(chorus_gpu_lower(0, 4, &op, &t, x), 0);
  t.algo = CHORUS_ALGO_ZEROCOPY;
  EXPECT_EQ_INT(chorus_gpu_lower(0, 4, &op, &t, x), 0);
  /* A ring AllReduce's tail takes its own protocol. */
  comm_of(&c, 4, "ring");
  op.count = 1023;
  t = task_of(&c, &op);
  EXPECT_EQ_INT(chorus_gpu_lower(0, 4, &op, &t, x), 2);
  EXPECT_EQ_INT(x[1].ll, 1);
  setenv("NCCL_PROTO", "Simple", 1);
  comm_of(&c, 4, "ring");
  unsetenv("NCCL_PROTO");
  t = task_of(&c, &op);
  EXPECT_EQ_INT(chorus_gpu_lower(0, 4, &op, &t, x), 2);
  EXPECT_EQ_INT(x[1].ll, 0);
}

/* The settings as the kernels take them: "auto" by rank count, clamps. */
static void settings_read(void) {
  chorus_gpu_settings s;
  chorus_gpu_settings_read(&s, 4, 0, 0);
  EXPECT_EQ_INT(s.fifo_bytes, 512 << 10);
  EXPECT_EQ_INT(s.chunk_bytes, 64 << 10);
  EXPECT_EQ_INT(s.channels, 64);
  EXPECT_EQ_INT(s.ll_bytes, 1 << 20);
  EXPECT_EQ_INT(s.p2p_ll_bytes, 512 << 10);
  chorus_gpu_settings_read(&s, 2, 0, 0);
  EXPECT_EQ_INT(s.fifo_bytes, 1 << 20);
  EXPECT_EQ_INT(s.chunk_bytes, 128 << 10);
  chorus_gpu_settings_read(&s, 4, 1, 0); /* staged: fewer channels */
  EXPECT_EQ_INT(s.channels, CHORUS_GPU_STAGED_CHANNELS);
  setenv("CHORUS_GPU_FIFO_BYTES", "2M", 1);
  setenv("CHORUS_GPU_CHUNK_BYTES", "5000", 1);
  setenv("CHORUS_GPU_P2P_LL_BYTES", "1G", 1);
  setenv("CHORUS_GPU_RING_CHANNELS", "99", 1);
  chorus_gpu_settings_read(&s, 2, 0, 0);
  EXPECT_EQ_INT(s.fifo_bytes, 2 << 20);                 /* set: the same on every rank count */
  EXPECT_EQ_INT(s.chunk_bytes, 4096);                   /* whole pages */
  EXPECT_EQ_INT(s.p2p_ll_bytes, CHORUS_GPU_P2P_LL_MAX); /* what the slots can hold */
  EXPECT_EQ_INT(s.ring_channels, 64);                   /* no more than the FIFOs have */
  setenv("CHORUS_GPU_P2P_LL_BYTES", "off", 1);
  chorus_gpu_settings_read(&s, 2, 0, 0);
  EXPECT_EQ_INT(s.p2p_ll_bytes, 0);
  EXPECT_EQ_INT(s.p2p_ll_parts, 0);
  unsetenv("CHORUS_GPU_FIFO_BYTES");
  unsetenv("CHORUS_GPU_CHUNK_BYTES");
  unsetenv("CHORUS_GPU_P2P_LL_BYTES");
  unsetenv("CHORUS_GPU_RING_CHANNELS");
  /* maxCTAs: no launch takes more CTAs than the cap. */
  chorus_gpu_settings_read(&s, 4, 0, 0);
  EXPECT_EQ_INT(s.ll_blocks, CHORUS_KERN_MAX_BLOCKS);
  EXPECT(s.big_from > 0);
  for (int cap = 1; cap <= 64; cap *= 2) {
    chorus_gpu_settings_read(&s, 4, 0, cap);
    EXPECT(s.channels <= (uint32_t)cap && s.ring_channels <= s.channels);
    EXPECT(s.channels < 2 || s.twoshot_channels <= s.channels / 2); /* twoshot.cu's launch */
    EXPECT(s.ll_blocks == (uint32_t)cap && s.zc_channels <= (uint32_t)cap);
    EXPECT(s.p2p_ll_parts >= 1 && s.p2p_ll_parts <= (uint32_t)cap);
    EXPECT((uint64_t)s.p2p_ll_lines * 8 * s.p2p_ll_parts >= s.p2p_ll_bytes); /* every size fits */
    EXPECT_EQ_INT(s.big_from, 0); /* twice the channels would pass the cap */
  }
  chorus_gpu_settings_read(&s, 2, 1, 8); /* staged: 16 channels, capped lower */
  EXPECT_EQ_INT(s.channels, 8);
  /* The channels a cap takes away leave their FIFO memory (up to 4x) to
   * the others, and rings larger steps, where those are auto. */
  const struct {
    int cap;
    uint32_t fifo, ring_chunk;
  } grown[] = {{64, 1 << 20, 256 << 10}, {48, 1 << 20, 256 << 10}, {32, 2 << 20, 512 << 10},
               {16, 4 << 20, 1 << 20},   {8, 4 << 20, 1 << 20},    {1, 4 << 20, 1 << 20}};
  for (size_t i = 0; i < sizeof grown / sizeof grown[0]; i++) {
    chorus_gpu_settings_read(&s, 2, 0, grown[i].cap);
    EXPECT_EQ_INT(s.fifo_bytes, grown[i].fifo);
    EXPECT_EQ_INT(s.ring_chunk, grown[i].ring_chunk);
    EXPECT((uint64_t)s.fifo_bytes * s.channels <= (uint64_t)(1 << 20) * 64); /* no more memory */
  }
  setenv("CHORUS_GPU_FIFO_BYTES", "1M", 1); /* set: as set */
  setenv("CHORUS_GPU_RING_CHUNK_BYTES", "128K", 1);
  chorus_gpu_settings_read(&s, 2, 0, 8);
  EXPECT_EQ_INT(s.fifo_bytes, 1 << 20);
  EXPECT_EQ_INT(s.ring_chunk, 128 << 10);
  unsetenv("CHORUS_GPU_FIFO_BYTES");
  unsetenv("CHORUS_GPU_RING_CHUNK_BYTES");
  chorus_gpu_settings_read(&s, 4, 0, 0); /* uncapped: 512 KiB FIFOs, 256 KiB ring steps */
  EXPECT_EQ_INT(s.fifo_bytes, 512 << 10);
  EXPECT_EQ_INT(s.ring_chunk, 256 << 10);
  EXPECT_EQ_INT(s.pdl, 1);
  /* The two-shot's LL form fits exactly where its two halves do. */
  for (uint32_t blocks = 4; blocks <= CHORUS_KERN_MAX_BLOCKS; blocks *= 4) {
    const size_t max = chorus_gpu_twoshot_ll_max(131072, 256, blocks);
    EXPECT(max > 0 && max % 8 == 0);
    EXPECT(chorus_kern_ll_second(max / 8, 256, blocks) + max / 8 <= 131072);
    EXPECT(chorus_kern_ll_second(max / 8 + 1, 256, blocks) + max / 8 + 1 > 131072);
  }
  EXPECT_EQ_INT(chorus_gpu_twoshot_ll_max(0, 256, CHORUS_KERN_MAX_BLOCKS), 0);
}

/* The arena: regions in order, aligned, apart, and (for the default
 * settings) where the kernels were measured with them. */
static void arena_layout(void) {
  for (int n = 1; n <= 8; n++)
    for (int staged = 0; staged < 2; staged++) {
      chorus_gpu_settings s;
      chorus_gpu_settings_read(&s, n, staged, 0);
      chorus_gpu_arena_layout a;
      chorus_gpu_arena_layout_make(&s, n, &a);
      EXPECT_EQ_INT(a.regions.n, 16);
      for (int i = 0; i < a.regions.n; i++) {
        const chorus_layout_region *r = &a.regions.region[i];
        EXPECT_EQ_INT(r->off % r->align, 0);
        if (i) EXPECT(r->off >= a.regions.region[i - 1].off + a.regions.region[i - 1].bytes);
      }
      const size_t fifos = (size_t)s.channels * (size_t)n * s.fifo_bytes;
      /* Big copies' added channels have FIFOs of half the size (not staged). */
      EXPECT_EQ_INT(s.big_from != 0, !staged);
      EXPECT_EQ_INT(a.bytes, a.fifos + (staged ? fifos : fifos + fifos / 2));
      EXPECT(a.counters + 2 * (size_t)CHORUS_KERN_MAX_CHANNELS * CHORUS_KERN_MAX_RANKS *
                              CHORUS_KERN_CTL_STRIDE <=
             a.p2p_epochs);
      EXPECT_EQ_INT(a.p2p_slots, a.ll_slots + 2 * (size_t)n * (s.ll_bytes / 8) * 16);
    }
  chorus_gpu_settings s;
  chorus_gpu_settings_read(&s, 4, 0, 0);
  chorus_gpu_arena_layout a;
  chorus_gpu_arena_layout_make(&s, 4, &a);
  const size_t want[] = {0,      256,    512,    1024,   4096,   16384,  278528,
                         280576, 281600, 282624, 283648, 327680, 344064, 393216};
  const size_t got[] = {a.epochs,   a.zc_epochs,  a.test,     a.acks,        a.totals,
                        a.counters, a.p2p_epochs, a.p2p_acks, a.p2p_barrier, a.failures,
                        a.board,    a.ll_headers, a.zc_lines, a.ll_slots};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) EXPECT_EQ_INT(got[i], want[i]);
  EXPECT_EQ_INT(a.fifos % 65536, 0);
  chorus_layout l;
  memset(&l, 0, sizeof l);
  EXPECT_EQ_INT(chorus_layout_add(&l, "a", 3, 1), 0);
  EXPECT_EQ_INT(chorus_layout_add(&l, "b", 10, 16), 16);
  EXPECT_EQ_INT(chorus_layout_add(&l, "c", 0, 64), 64);
  EXPECT_EQ_INT(l.end, 64);
}

static void unsupported(void) {
  chorus_op op;
  memset(&op, 0, sizeof op);
  op.func = CHORUS_FUNC_SEND;
  op.count = 4;
  op.esize = 4;
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  chorus_task t;
  memset(&t, 0, sizeof t);
  t.algo = CHORUS_ALGO_ONESHOT;
  EXPECT_EQ_INT(chorus_gpu_lower(0, 2, &op, &t, x), 0);
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
  chorus_plan_comm c;
  comm_of(&c, 4, "allreduce:ring");
  a.count = 4095; /* a ring and its one-shot tail */
  chorus_kern_xchg x[CHORUS_GPU_MAX_STEPS];
  const chorus_task t = task_of(&c, &a);
  const int k = chorus_gpu_lower(0, 4, &a, &t, x);
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
  EXPECT(a[0].count > 15); /* every AGREE setting of param_table.h */
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
  RUN(forced_algorithms);
  RUN(settings_read);
  RUN(arena_layout);
  RUN(unsupported);
  return unit_report();
}

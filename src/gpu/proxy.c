/*
 * proxy.c - see proxy.h: GPU calls carried by the host.
 *
 * A batch is one communicator's calls of one group: the calls rewritten
 * onto pinned staging memory, the copies around them, and an id the
 * kernel posts. A batch queued outside graph capture is reused once the
 * event recorded after its last copy has passed; one captured into a graph
 * may be replayed at any time, so it is kept until the communicator goes.
 *
 * The progress thread reads the ring in number order. Each batch runs as
 * the host executor runs a group of host calls (collectives in order,
 * Send/Recv together), so what the host path checks holds here too: calls
 * that differ across ranks fail naming both, a rank that dies is named,
 * CHORUS_OP_TIMEOUT bounds every wait. When a batch fails the failed word
 * stops the waiting kernels, and later batches complete at once without
 * running (ncclCommGetAsyncError reports the first failure).
 */
#include "gpu/proxy.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "algo/func.h"
#include "coll/coll.h"
#include "coll/exec.h"
#include "coll/lanes.h"
#include "coll/steps.h"
#include "device/device.h"
#include "device/kernels.h"
#include "gpu/arena.h"
#include "gpu/cut.h"
#include "gpu/gpu.h"
#include "gpu/scratch.h"
#include "plan/plan.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/doorbell.h"
#include "util/log.h"
#include "util/misc.h"
#include "util/param.h"

#define RING CHORUS_KERN_PROXY_RING
/* Copies of at most this many bytes run inside the kernel: a copy-engine
 * copy costs microseconds of launch and completion whatever its size. */
#define KERNEL_COPY_MAX (16u << 10)
#define STAGE_ALIGN     256 /* each staged buffer, for the copy engine */
#define MAX_FLIGHT      4   /* eager batches in flight before a new one waits */
/* The progress thread polls without sleeping while a queued batch has not
 * come, or this long after the last one (graph replays come unannounced). */
#define HOT_NS (2 * 1000000ll)
#define NAP_NS 50000
/* How long a communicator that goes lets the host finish the calls whose
 * streams went on without it (chorus_proxy_settle), as destroy's drain. */
#define SETTLE_NS (10 * 1000000000ll)
/* A ring entry's batch: its id, and the piece in the top bits. */
#define PIECE_SHIFT 24
#define ID_MASK     ((1u << PIECE_SHIFT) - 1)
/* The head of a batch's staging: the words the host releases pieces by,
 * one per piece. */
#define WORDS_BYTES 256
_Static_assert(CHORUS_CUT_MAX_PIECES * sizeof(uint32_t) <= WORDS_BYTES, "a word per piece");

/* Host-mapped: the kernels write the ring, the thread the rest. */
typedef struct ctl {
  uint64_t ring[RING];
  chorus_kern_proxy_state st;
} ctl;
_Static_assert(offsetof(ctl, st) % 16 == 0, "the kernel reads the state in one 16-byte load");

typedef struct batch batch;
struct batch {
  uint32_t id;
  int kept;    /* captured into a graph */
  void *event; /* recorded after the batch's last copy */
  char *host;  /* pinned staging; the device reaches it at dev */
  char *dev;
  size_t cap;
  int lanes;  /* its one call is cut across this many lanes */
  int pieces; /* ... and in this many pieces in turn (1: whole) */
  /* Queued with word waits: the stream waits for piece j until the host
   * sets words[j] (the staging's head) to gen, this queuing's number;
   * else its kernel polls. */
  int words;
  uint32_t gen;
  /* In pieces, staged in two slots per side (cut.h): each side's slot
   * bytes (the ops' buffers are slot 0's); 0: the call staged whole. */
  size_t slot[2];
  chorus_op *ops;       /* the calls on staged buffers */
  const char **scalars; /* per call: its staged PreMulSum scalar, or NULL */
  int nops, opcap;
  /* Eager: its number among the eager batches queued (proxy.queued), and
   * whether its stream went on without waiting for the host (it writes
   * nothing back on this rank): it is free again once the host has run
   * it, not once its stream passed it. */
  uint64_t seq;
  int detached;
  batch *next; /* in flight (oldest first) or free */
};

struct chorus_proxy {
  chorus_coll_comm *cc;
  int device;
  ctl *ctl_host;
  void *ctl_dev;
  uint32_t *issued;     /* device memory */
  void *last_event;     /* after the last batch's copies: batches queue in call order */
  void *last_stream;    /* where it was recorded (compared only) */
  pthread_mutex_t lock; /* the table (the thread looks ids up) */
  batch **table;
  uint32_t ntable, table_cap;
  batch *free_list, *flight_head, *flight_tail;
  uint64_t queued; /* eager batches queued (atomic) */
  uint64_t ran;    /* eager batches the thread ran (atomic) */
  int stop;        /* atomic */
  pthread_t thread;
  int has_thread;
  chorus_op *work; /* the thread's copies of a batch's calls */
  int work_cap;
  /* The parts (chorus_proxy_set_parts), or NULL; this rank is `place` of
   * `plan.env.nlocal` on its host. */
  struct chorus_gpu *local;
  chorus_coll_comm *local_cc, *cross_cc[CHORUS_LANES_MAX];
  int place, nlanes;
  /* The choice between hier and staged (the cost model, NCCL_ALGO); its
   * env.nhosts, env.nlocal (ranks per host, once the parts are set) and
   * hosts_in_order shape the steps too. */
  chorus_plan_comm plan;
  /* Device scratch between the steps of a hierarchical call (scratch.h;
   * last_event follows the last eager one). */
  chorus_gpu_scratch scratch;
  /* Lanes 1..nlanes-1: a thread each, running its share of a cut call on
   * its own cross-host part while the progress thread runs lane 0's. */
  chorus_lanes *lanes;
  /* Eager calls wait on words the host writes, not in a polling kernel,
   * where the driver allows (word_waits): whole calls too (whole_words)
   * where another process of the job shares this GPU (a polling kernel
   * would hold the GPU through the others' time slices), and calls in
   * pieces (piece_bytes, 0: none) always, their copies made between the
   * pieces' waits. */
  int word_waits, whole_words;
  size_t piece_bytes;
  /* the staging of any call in pieces up to 64 of them (0: no pieces),
   * and whether the eager batches have it (prime) */
  size_t stage_big;
  int primed;
};

/* Piece j of batch b's queuing gen has run (or will not): its stream,
 * waiting for words[j] to reach gen, goes on. */
static void release_word(const batch *b, int j) {
  __atomic_store_n(&((uint32_t *)b->host)[j], b->gen, __ATOMIC_RELEASE);
}

/* Every piece of b's queuings so far. */
static void release_every_word(const batch *b) {
  for (int j = 0; j < CHORUS_CUT_MAX_PIECES; j++) release_word(b, j);
}

/* ---- the progress thread ------------------------------------------------------- */

static batch *lookup(chorus_proxy *px, uint32_t id) {
  pthread_mutex_lock(&px->lock);
  batch *b = id < px->ntable ? px->table[id] : NULL;
  pthread_mutex_unlock(&px->lock);
  return b;
}

/* How a call w (on the staging) is cut, for a batch on `lanes` in
 * `pieces` (cut.h). */
static chorus_cut cut_of(const chorus_op *w, int lanes, int pieces) {
  return (chorus_cut){w->func, w->count, w->esize, w->cc->nranks, lanes, pieces};
}

/* Op's share k of n, on lane k's cross-host part (lane 0's: the call's
 * own). A buffer this rank does not use stays NULL. */
static chorus_op share_op(const chorus_proxy *px, const chorus_op *op, const chorus_cut *c, int k,
                          int n) {
  size_t first, len, soff, roff;
  chorus_cut_share(op->count, k, n, &first, &len);
  chorus_cut_offsets(c, first, &soff, &roff);
  chorus_op o = *op;
  o.cc = k % c->lanes ? px->cross_cc[k % c->lanes] : op->cc;
  o.whole_count = chorus_op_whole_count(op);
  o.count = len;
  o.sendbuff = op->sendbuff ? (const char *)op->sendbuff + soff * op->esize : NULL;
  o.recvbuff = op->recvbuff ? (char *)op->recvbuff + roff * op->esize : NULL;
  return o;
}

/* Runs piece j of call `whole` cut as c: share j * L + k on lane k's
 * cross-host part, lane 0's here, the others on their threads, all at
 * once. */
static ncclResult_t run_lanes(chorus_proxy *px, const chorus_op *whole, const chorus_cut *c,
                              int j) {
  const int n = c->lanes;
  for (int k = 1; k < n; k++) {
    CHECK(chorus_lanes_clear(px->lanes, k, 1));
    const chorus_op o = share_op(px, whole, c, j * n + k, n * c->pieces);
    chorus_lanes_push(px->lanes, k, &o);
  }
  chorus_op mine = share_op(px, whole, c, j * n, n * c->pieces);
  chorus_lanes_begin(px->lanes, n);
  return chorus_lanes_end(px->lanes, n, chorus_lanes_run_calls(&mine, 1));
}

/* The lanes a call of `bytes` staged as it stands goes on, with one rank
 * per host: as many as carry 512 KiB each from CHORUS_CUT_HALVES_FROM,
 * up to `most`. On 2 hosts sharing an H200, 1 MiB on two lanes ran at
 * 0.91-0.96x one lane's speed; 4 MiB in halves on four, 1.14-1.30x. */
static int staged_cut_lanes(size_t bytes, int most) {
  return bytes < CHORUS_CUT_HALVES_FROM ? 1 : chorus_hier_lanes(bytes, most);
}

/* A Send's or Recv's lanes: by its own bytes, which the peer's matching
 * call has too. */
static int p2p_lanes(const chorus_op *op, int most) {
  return staged_cut_lanes(op->count * op->esize, most);
}

/* Runs a group of Sends and Recvs (ops[0, n)) on nlanes lanes: each cut
 * into its p2p_lanes shares, share k on lane k, each lane's shares a
 * group in the calls' order (so a peer's lane k holds the matching ones). */
static ncclResult_t run_p2p_lanes(chorus_proxy *px, chorus_op *ops, int n, int nlanes) {
  for (int k = 1; k < nlanes; k++) CHECK(chorus_lanes_clear(px->lanes, k, n));
  chorus_op *mine = chorus_malloc((size_t)n * sizeof *mine);
  if (!mine) return chorus_error(ncclSystemError, "out of memory running %d staged calls", n);
  int nmine = 0;
  for (int i = 0; i < n; i++) {
    const int L = p2p_lanes(&ops[i], nlanes);
    const chorus_cut c = cut_of(&ops[i], L, 1);
    mine[nmine++] = share_op(px, &ops[i], &c, 0, L);
    for (int k = 1; k < L; k++) {
      const chorus_op o = share_op(px, &ops[i], &c, k, L);
      chorus_lanes_push(px->lanes, k, &o);
    }
  }
  chorus_lanes_begin(px->lanes, nlanes);
  const ncclResult_t res = chorus_lanes_end(
      px->lanes, nlanes, nmine ? chorus_lanes_run_calls(mine, nmine) : ncclSuccess);
  chorus_free(mine);
  return res;
}

/* Moves the buffers of t (b's one call on its staging, cut as c) to
 * where piece j's elements lie: slot j % 2 of each side, where b stages
 * its pieces in slots. A buffer the rank does not use stays NULL. */
static void piece_view(const batch *b, const chorus_cut *c, int j, chorus_op *t) {
  if (!b->slot[0] && !b->slot[1]) return;
  /* One staged region for both (in place, or the side a rank does not
   * use kept as the other): the slot of the side that has one. Only
   * functions whose sides are not laid share by share stage so, and
   * their pieces lie at the same offsets on both sides. */
  const int one = t->sendbuff == t->recvbuff;
  for (int recv = 0; recv < 2; recv++) {
    const void *buf = recv ? t->recvbuff : t->sendbuff;
    if (!buf) continue;
    size_t off, len, slot = b->slot[recv];
    if (one && b->slot[!recv] > slot) slot = b->slot[!recv];
    chorus_cut_piece_span(c, recv, j, &off, &len);
    /* slot j % 2, less the piece's offset in the whole staging (as an
     * address: the base may lie before the slot) */
    const uintptr_t at = (uintptr_t)buf + (size_t)(j % 2) * slot - off * c->esize;
    if (recv)
      t->recvbuff = (void *)at;
    else
      t->sendbuff = (const void *)at;
  }
}

/* Runs batch b's calls (piece j of its one call, where it has pieces). */
static ncclResult_t run_batch(chorus_proxy *px, const batch *b, int j) {
  if (b->nops > px->work_cap) {
    chorus_op *w = chorus_malloc((size_t)b->nops * sizeof *w);
    if (!w) return chorus_error(ncclSystemError, "out of memory running %d staged calls", b->nops);
    chorus_free(px->work);
    px->work = w;
    px->work_cap = b->nops;
  }
  for (int i = 0; i < b->nops; i++) {
    chorus_op *op = &px->work[i];
    *op = b->ops[i];
    if (b->scalars[i]) { /* ncclScalarDevice: the value when the call ran */
      memcpy(op->red.scalar, b->scalars[i], sizeof op->red.scalar);
      op->red.scalar_dev = NULL;
    }
  }
  if (b->lanes > 1 && chorus_func_p2p(px->work[0].func))
    return run_p2p_lanes(px, px->work, b->nops, b->lanes);
  if (b->pieces > 1 || b->lanes > 1) {
    const chorus_cut c = cut_of(&px->work[0], b->lanes, b->pieces);
    piece_view(b, &c, j, &px->work[0]);
    return run_lanes(px, &px->work[0], &c, j);
  }
  return chorus_lanes_run_calls(px->work, b->nops);
}

static void nap(void) {
  struct timespec ts = {0, NAP_NS};
  nanosleep(&ts, NULL);
}

static void *progress(void *arg) {
  chorus_proxy *px = arg;
  chorus_log_ctx_set(px->cc->log_ctx);
  volatile ctl *c = px->ctl_host;
  uint32_t head = 0;
  int64_t active = chorus_now_ns();
  unsigned spins = 0;
  void *sleep = NULL; /* a profiler's ProxyCtrl event while it naps */
  for (;;) {
    const uint64_t e = __atomic_load_n(&px->ctl_host->ring[head % RING], __ATOMIC_ACQUIRE);
    if ((uint32_t)(e >> 32) == head + 1) {
      batch *b = lookup(px, (uint32_t)e & ID_MASK);
      const int piece = (int)((uint32_t)e >> PIECE_SHIFT);
      if (b && piece >= b->pieces) b = NULL;
      chorus_ctrl_end(px->cc, sleep, CHORUS_CTRL_WAKEUP, 0);
      sleep = NULL;
      chorus_ctrl_append(px->cc, b ? b->nops : 0);
      void *ev = chorus_ctrl_begin(px->cc, CHORUS_CTRL_ACTIVE);
      if (!c->st.failed) {
        __atomic_add_fetch(&px->cc->busy, 1, __ATOMIC_ACQ_REL);
        ncclResult_t res = b ? run_batch(px, b, piece)
                             : chorus_error(ncclInternalError,
                                            "rank %d: a staged GPU call posted batch %u, which "
                                            "does not exist",
                                            px->cc->rank, (unsigned)(uint32_t)e);
        if (res != ncclSuccess) {
          if (px->cc->failed == ncclSuccess)
            __atomic_store_n(&px->cc->failed, res, __ATOMIC_RELEASE);
          __atomic_store_n(&px->ctl_host->st.failed, 1, __ATOMIC_RELEASE);
        }
        __atomic_sub_fetch(&px->cc->busy, 1, __ATOMIC_ACQ_REL);
      }
      /* The piece is done (or failed, or skipped after a failure): its
       * stream goes on, and may queue the batch again at once, so what
       * is read of it is read first. */
      const int ran_last = b && !b->kept && piece == b->pieces - 1;
      if (b && b->words) release_word(b, piece);
      if (ran_last) __atomic_add_fetch(&px->ran, 1, __ATOMIC_RELEASE);
      chorus_ctrl_end(px->cc, ev, CHORUS_CTRL_IDLE, 0);
      head++;
      __atomic_store_n(&px->ctl_host->st.done, head, __ATOMIC_RELEASE);
      active = chorus_now_ns();
      continue;
    }
    if (__atomic_load_n(&px->stop, __ATOMIC_ACQUIRE)) break;
    const int waiting = __atomic_load_n(&px->queued, __ATOMIC_ACQUIRE) !=
                        __atomic_load_n(&px->ran, __ATOMIC_ACQUIRE);
    if (waiting || chorus_now_ns() - active < HOT_NS) {
      chorus_cpu_relax();
      if (++spins % 64 == 0) sched_yield();
    } else {
      if (!sleep) sleep = chorus_ctrl_begin(px->cc, CHORUS_CTRL_SLEEP);
      nap();
    }
  }
  chorus_ctrl_end(px->cc, sleep, CHORUS_CTRL_WAKEUP, 0);
  return NULL;
}

/* ---- batches -------------------------------------------------------------------- */

static void batch_free(batch *b) {
  if (!b) return;
  chorus_dev_event_free(b->event);
  chorus_dev_host_free(b->host);
  chorus_free(b->ops);
  chorus_free(b->scalars);
  chorus_free(b);
}

/* Whether the host is done with eager batch b: it ran it (or skipped it
 * after a failure; it runs them in the order queued), or never will (the
 * calls failed or the communicator aborted, so b's kernel may not have
 * posted it). */
static int batch_ran(const chorus_proxy *px, const batch *b) {
  const volatile chorus_kern_proxy_state *st = &px->ctl_host->st;
  return __atomic_load_n(&px->ran, __ATOMIC_ACQUIRE) >= b->seq ||
         __atomic_load_n(&st->failed, __ATOMIC_ACQUIRE) ||
         __atomic_load_n(&st->abort, __ATOMIC_ACQUIRE);
}

/* Eager batches done with go back to the free list: their last copy has
 * passed, and the host has run those their streams did not wait for. */
static void reclaim(chorus_proxy *px) {
  while (px->flight_head && chorus_dev_event_done(px->flight_head->event) == 1 &&
         (!px->flight_head->detached || batch_ran(px, px->flight_head))) {
    batch *b = px->flight_head;
    px->flight_head = b->next;
    if (!px->flight_head) px->flight_tail = NULL;
    b->next = px->free_list;
    px->free_list = b;
  }
}

/* A new batch, registered in the table (no staging yet). */
static ncclResult_t new_batch(chorus_proxy *px, batch **out) {
  batch *b = chorus_calloc(1, sizeof *b);
  if (!b) return chorus_error(ncclSystemError, "out of memory staging GPU calls");
  if (chorus_dev_event_new(&b->event) != 0) {
    chorus_free(b);
    return chorus_gpu_cuda_error("making an event for staged GPU calls");
  }
  pthread_mutex_lock(&px->lock);
  if (px->ntable == px->table_cap) {
    const uint32_t cap = px->table_cap ? 2 * px->table_cap : 16;
    batch **t = chorus_calloc(cap, sizeof *t);
    if (t) {
      if (px->table) memcpy(t, px->table, px->ntable * sizeof *t);
      chorus_free(px->table);
      px->table = t;
      px->table_cap = cap;
    }
  }
  const int added = px->ntable < px->table_cap;
  if (added) {
    b->id = px->ntable;
    px->table[px->ntable++] = b;
  }
  pthread_mutex_unlock(&px->lock);
  if (!added) {
    batch_free(b);
    return chorus_error(ncclSystemError, "out of memory staging GPU calls");
  }
  *out = b;
  return ncclSuccess;
}

/* Gives b at least `bytes` of pinned staging: `cap` of it where it must
 * grow. */
static ncclResult_t grow(batch *b, size_t bytes, size_t cap) {
  if (b->cap >= bytes) return ncclSuccess;
  chorus_dev_host_free(b->host);
  b->host = b->dev = NULL;
  b->cap = 0;
  void *h, *d;
  if (chorus_dev_host_alloc(cap, &h, &d) != 0)
    return chorus_gpu_cuda_error("allocating pinned host memory to stage GPU calls");
  b->host = h;
  b->dev = d;
  b->cap = cap;
  release_every_word(b); /* fresh words hold 0, and gen wraps */
  return ncclSuccess;
}

/* The eager batches, pinned when the first eager call comes, as NCCL
 * sets its buffers up at its first call: each of MAX_FLIGHT with the
 * staging of any call up to 256 MiB (stage_big), so that no later call
 * pins memory (which waits for the device and takes milliseconds)
 * inside the caller's call, as programs that time calls of every size
 * would see. Without pieces (stage_big 0) batches are pinned to size. */
static ncclResult_t prime(chorus_proxy *px) {
  px->primed = 1;
  for (int i = 0; i < MAX_FLIGHT && px->stage_big; i++) {
    batch *b;
    CHECK(new_batch(px, &b));
    b->next = px->free_list;
    px->free_list = b; /* freed with the table, whatever grow does */
    CHECK(grow(b, px->stage_big, px->stage_big));
  }
  return ncclSuccess;
}

/* A batch for nops calls and `bytes` of staging. An eager call takes a
 * free one that fits, else a free one grown, else a new one; programs
 * queue calls far ahead of the GPU, so with MAX_FLIGHT eager batches in
 * flight and none free that fits, this waits for the oldest. A captured
 * call, whose batch a graph keeps, gets one of its own, pinned to size. */
static ncclResult_t take_batch(chorus_proxy *px, size_t bytes, int nops, int captured,
                               batch **out) {
  if (!captured && !px->primed) CHECK(prime(px));
  reclaim(px);
  batch **fit = NULL;
  if (!captured) {
    int flying = 0;
    for (batch *f = px->flight_head; f; f = f->next) flying++;
    for (batch *f = px->free_list; f; f = f->next)
      if (f->cap >= bytes) flying = 0;
    if (flying >= MAX_FLIGHT) {
      const batch *h = px->flight_head;
      if (chorus_dev_event_wait(h->event) != 0)
        return chorus_gpu_cuda_error("waiting for an earlier staged GPU call");
      while (h->detached && !batch_ran(px, h)) nap(); /* its kernel posted it, or stopped */
      reclaim(px);
    }
    for (batch **pb = &px->free_list; *pb && !fit; pb = &(*pb)->next)
      if ((*pb)->cap >= bytes) fit = pb;
    if (!fit && px->free_list) fit = &px->free_list;
  }
  batch *b = NULL;
  if (fit) {
    b = *fit;
    *fit = b->next;
  } else {
    CHECK(new_batch(px, &b));
  }
  b->next = NULL;
  const size_t cap = !captured && bytes <= px->stage_big ? px->stage_big : bytes;
  ncclResult_t res = grow(b, bytes, cap);
  if (res == ncclSuccess && b->opcap < nops) {
    chorus_free(b->ops);
    chorus_free(b->scalars);
    b->ops = chorus_calloc((size_t)nops, sizeof *b->ops);
    b->scalars = chorus_calloc((size_t)nops, sizeof *b->scalars);
    b->opcap = b->ops && b->scalars ? nops : 0;
    if (!b->opcap) res = chorus_error(ncclSystemError, "out of memory staging GPU calls");
  }
  if (res != ncclSuccess) { /* back to the free list, whatever it holds */
    b->next = px->free_list;
    px->free_list = b;
    return res;
  }
  b->nops = nops;
  b->kept = 0;
  *out = b;
  return ncclSuccess;
}

/* ---- staging one batch ---------------------------------------------------------- */

static size_t round_up(size_t v) {
  return (v + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

/* The bytes op reads from sendbuff and writes to recvbuff on this rank,
 * and the staging both take: one region where they overlap (the in-place
 * forms), so their offsets in it are those of the user's buffers; but
 * two where one side is laid out share by share (cut.h), as a share's
 * input would then sit among other shares' output. */
typedef struct span {
  size_t sbytes, rbytes;
  uintptr_t lo; /* start of the region, in the user's addresses */
  size_t bytes; /* 0: two regions, send then receive */
} span;

/* A Send/Recv with a peer whose network takes GPU memory itself
 * (chorus_conn.dev_mem: a plugin with NCCL_PTR_CUDA) moves the user's
 * buffer as it is: nothing staged, nothing copied. */
static int goes_direct(const chorus_op *op) {
  if ((op->func != CHORUS_FUNC_SEND && op->func != CHORUS_FUNC_RECV) || !op->count) return 0;
  const chorus_conn *c =
      chorus_cc_conn(op->cc, op->root, CHORUS_CH_P2P,
                     op->func == CHORUS_FUNC_SEND ? CHORUS_DIR_SEND : CHORUS_DIR_RECV);
  return c && c->dev_mem;
}

/* A Broadcast's root: its output is its input, so the host's part gives
 * it nothing back. */
static int output_is_input(const chorus_op *op) {
  return op->func == CHORUS_FUNC_BROADCAST && op->cc->rank == op->root;
}

static size_t stage_bytes(const chorus_op *op, int rank, int nranks, const chorus_cut *c, span *s) {
  if (goes_direct(op)) {
    *s = (span){0, 0, 0, 0};
    return 0;
  }
  s->sbytes = chorus_func_send_elems(op->func, op->count, rank, op->root, nranks) * op->esize;
  s->rbytes = chorus_func_recv_elems(op->func, op->count, rank, op->root, nranks) * op->esize;
  const uintptr_t a = (uintptr_t)op->sendbuff, b = (uintptr_t)op->recvbuff;
  s->lo = 0;
  s->bytes = 0;
  const int laid = chorus_cut_laid(c, 0) || chorus_cut_laid(c, 1);
  if (!laid && s->sbytes && s->rbytes && a < b + s->rbytes && b < a + s->sbytes) {
    s->lo = a < b ? a : b;
    const uintptr_t hi = a + s->sbytes > b + s->rbytes ? a + s->sbytes : b + s->rbytes;
    s->bytes = hi - s->lo;
    return round_up(s->bytes);
  }
  return round_up(s->sbytes) + round_up(s->rbytes);
}

/* Where op (cut as c, in pieces; its staging s) can stage one piece at a
 * time: each side's slot bytes in slot[] (one region, in place: slot[0]
 * = slot[1]). 0 where it stages whole: in one piece, or in place with
 * buffers that overlap without being one. */
static int piece_slots(const chorus_op *op, const chorus_cut *c, const span *s, size_t slot[2]) {
  if (c->pieces < 2 || (s->bytes && op->sendbuff != op->recvbuff)) return 0;
  const size_t sb = s->sbytes ? round_up(chorus_cut_slot_elems(c, 0) * c->esize) : 0,
               rb = s->rbytes ? round_up(chorus_cut_slot_elems(c, 1) * c->esize) : 0;
  slot[0] = s->bytes && rb > sb ? rb : sb;
  slot[1] = s->bytes ? slot[0] : rb;
  return 1;
}

/* cut.h's copier: the copy engine, on the stream arg. */
static int copy_on(void *stream, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                   size_t width, size_t rows) {
  return rows == 1 ? chorus_dev_copy(dst, src, width, stream)
                   : chorus_dev_copy_rows(dst, dst_pitch, src, src_pitch, width, rows, stream);
}

/* Queues the copies of shares [s0, s1) of op (on the user's buffers; t,
 * the same call on the staging; cut as c) on stream: its input into the
 * staging (in) or its output back. */
static int share_copies(const chorus_op *op, const chorus_op *t, const chorus_cut *c, int s0,
                        int s1, int in, void *stream) {
  const int rank = op->cc->rank, nranks = op->cc->nranks;
  const size_t elems = in ? chorus_func_send_elems(op->func, op->count, rank, op->root, nranks)
                          : chorus_func_recv_elems(op->func, op->count, rank, op->root, nranks);
  return chorus_cut_copies(c, !in, elems, s0, s1, (char *)(in ? op->sendbuff : op->recvbuff),
                           (char *)(in ? t->sendbuff : t->recvbuff), in, copy_on, stream);
}

typedef struct copies {
  chorus_kern_copy *k; /* in the batch's staging: kernel copies, ins then outs */
  uint32_t nin, nk;
} copies;

/* How many pieces a batch of ops[0, n) on `lanes` moves in: a lone
 * call's (cut.h), else 1. */
static int batch_pieces(const chorus_proxy *px, chorus_op *const *ops, int n, int lanes) {
  if (n != 1) return 1;
  const chorus_op *op = ops[0];
  return chorus_cut_pieces(op->func, op->count, op->esize, op->cc->nranks, lanes, px->piece_bytes);
}

/* Queues the kernel of piece j of batch b in `mode`, with the copies
 * list[0, nin) before its post and list[nin, ncopies) after (list: in
 * b's staging, as the host sees it). */
static int launch(const chorus_proxy *px, const batch *b, int j, uint32_t mode,
                  const chorus_kern_copy *list, uint32_t nin, uint32_t ncopies, void *stream) {
  chorus_kern_proxy k = {
      .ring = (volatile uint64_t *)px->ctl_dev,
      .st = (volatile chorus_kern_proxy_state *)((char *)px->ctl_dev + offsetof(ctl, st)),
      .issued = px->issued,
      .copies = (const chorus_kern_copy *)((const char *)list + (b->dev - b->host)),
      .batch = b->id | (uint32_t)j << PIECE_SHIFT,
      .nin = nin,
      .ncopies = ncopies,
      .mode = mode,
      .word = (volatile uint32_t *)b->dev + j,
      .gen = b->gen};
  if (ncopies <= CHORUS_KERN_PROXY_INLINE) memcpy(k.inl, list, ncopies * sizeof *list);
  return chorus_kern_proxy_run(&k, stream);
}

/* Makes stream wait until the host has run piece j of b's queuing. */
static int wait_piece(const batch *b, int j, void *stream) {
  return chorus_dev_stream_wait_word(stream, (const uint32_t *)b->dev + j, b->gen);
}

/* share_copies of piece j's shares, to or from where b stages them. */
static int piece_copies(const batch *b, const chorus_op *op, const chorus_op *t,
                        const chorus_cut *c, int j, int in, void *stream) {
  chorus_op v = *t;
  piece_view(b, c, j, &v);
  return share_copies(op, &v, c, j * c->lanes, (j + 1) * c->lanes, in, stream);
}

/* The stream's part of a call in pieces (op; t, on the staging): each
 * piece's input copied, then posted. With word waits, piece j's output
 * is copied back once the host has run it, while it runs piece j + 1,
 * whose input went before: the copies overlap the network. Without, each
 * piece's kernel polls until it has run. */
static int queue_pieces(const chorus_proxy *px, const batch *b, const chorus_op *op,
                        const chorus_op *t, const copies *cp, void *stream) {
  const int P = b->pieces, L = b->lanes;
  const chorus_cut c = cut_of(op, L, P);
  const uint32_t mode = b->words ? CHORUS_KERN_PROXY_POST : CHORUS_KERN_PROXY_SPIN;
  for (int j = 0; j < P; j++) {
    const uint32_t nin = j ? 0 : cp->nin; /* the scalar, with the first */
    if (piece_copies(b, op, t, &c, j, 1, stream) != 0 ||
        launch(px, b, j, mode, cp->k, nin, nin, stream) != 0)
      return -1;
    /* The piece whose output may go back. Its copy is queued before the
     * next piece's input: that piece takes its slot. */
    const int out = b->words ? j - 1 : j;
    if (out >= 0 && ((b->words && wait_piece(b, out, stream) != 0) ||
                     piece_copies(b, op, t, &c, out, 0, stream) != 0))
      return -1;
  }
  if (b->words &&
      (wait_piece(b, P - 1, stream) != 0 || piece_copies(b, op, t, &c, P - 1, 0, stream) != 0))
    return -1;
  return 0;
}

static ncclResult_t stage_batch(chorus_proxy *px, chorus_op **ops, int n, int lanes, void *stream,
                                int captured, batch **out) {
  const int rank = ops[0]->cc->rank, nranks = ops[0]->cc->nranks;
  const int pieces = batch_pieces(px, ops, n, lanes);
  span stackspan[16], *sp = n <= 16 ? stackspan : chorus_malloc((size_t)n * sizeof *sp);
  if (!sp) return chorus_error(ncclSystemError, "out of memory staging %d GPU calls", n);
  /* Layout: the words, the kernel's copy list (three per call at most:
   * scalar, input, output), the scalars, then each call's buffers. */
  const size_t list = WORDS_BYTES + round_up((size_t)3 * (size_t)n * sizeof(chorus_kern_copy));
  size_t bytes = list + round_up((size_t)n * 16);
  size_t slot[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    const chorus_cut c = cut_of(ops[i], lanes, pieces);
    const size_t whole = stage_bytes(ops[i], rank, nranks, &c, &sp[i]);
    if (!piece_slots(ops[i], &c, &sp[i], slot)) {
      bytes += whole;
      continue;
    }
    bytes += 2 * (sp[i].bytes ? slot[0] : slot[0] + slot[1]);
  }
  batch *b = NULL;
  ncclResult_t res = take_batch(px, bytes, n, captured, &b);
  if (res != ncclSuccess) goto out;
  /* before the launch: the thread may take the batch at once */
  b->lanes = lanes;
  b->pieces = pieces;
  b->slot[0] = slot[0];
  b->slot[1] = slot[1];
  b->words = px->word_waits && !captured && (pieces > 1 || px->whole_words);
  if (b->words) b->gen++;
  /* A batch of collectives that take nothing back from the host on this
   * rank (a Reduce's or Gather's other ranks, a Broadcast's root, whose
   * output is its input, copied on the GPU) has its stream wait for
   * nothing but its input's staging, as NCCL's kernels end once their
   * data is handed to the network: where hosts share a GPU a stream
   * waiting on the host kept that GPU from the other host's calls, and
   * elsewhere the next call's copies overlap this one's network step.
   * Not Sends: a Send whose Recv differs is an error on both ranks, which
   * a sender that went on and aborted would turn into its abort. */
  b->detached = !captured && pieces == 1;
  for (int i = 0; i < n; i++)
    if (chorus_func_p2p(ops[i]->func) || (sp[i].rbytes && !output_is_input(ops[i])))
      b->detached = 0;
  const ptrdiff_t to_dev = b->dev - b->host;
  copies cp = {(chorus_kern_copy *)(b->host + WORDS_BYTES), 0, 0};
  char *scal = b->host + list;
  char *at = scal + round_up((size_t)n * 16);
  chorus_kern_copy *outs = chorus_malloc((size_t)n * sizeof *outs); /* kernel outs, for after */
  uint32_t nouts = 0;
  if (!outs) {
    res = chorus_error(ncclSystemError, "out of memory staging %d GPU calls", n);
    goto out;
  }
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    const chorus_op *op = ops[i];
    const span *s = &sp[i];
    char *send = NULL, *recv = NULL;
    if (b->slot[0] || b->slot[1]) { /* a lone call in pieces, two slots a side */
      if (s->sbytes) send = at;
      at += 2 * b->slot[0];
      if (s->bytes) {
        recv = send;
      } else {
        if (s->rbytes) recv = at;
        at += 2 * b->slot[1];
      }
    } else if (s->bytes) {
      send = at + ((uintptr_t)op->sendbuff - s->lo);
      recv = at + ((uintptr_t)op->recvbuff - s->lo);
      at += round_up(s->bytes);
    } else {
      if (s->sbytes) send = at;
      at += round_up(s->sbytes);
      if (s->rbytes) recv = at;
      at += round_up(s->rbytes);
    }
    /* A buffer this rank does not use keeps the user's in-place relation,
     * or is NULL. */
    if (!send && op->sendbuff && op->sendbuff == op->recvbuff) send = recv;
    if (!recv && op->recvbuff && op->recvbuff == op->sendbuff) recv = send;
    chorus_op *t = &b->ops[i];
    *t = *op;
    t->dev_mem = goes_direct(op);
    t->sendbuff = t->dev_mem ? op->sendbuff : send;
    t->recvbuff = t->dev_mem ? op->recvbuff : recv;
    t->cuda_stream = NULL;
    t->next_op = NULL;
    t->scratch = NULL;
    b->scalars[i] = NULL;
    if (op->red.scalar_dev) {
      char *sc = scal + (size_t)i * 16;
      cp.k[cp.nk++] = (chorus_kern_copy){sc + to_dev, op->red.scalar_dev, op->esize};
      b->scalars[i] = sc;
    }
    const chorus_cut c = cut_of(op, lanes, pieces);
    if (s->sbytes && pieces == 1) { /* in pieces: queue_pieces copies */
      int rc = 0;
      if (chorus_cut_laid(&c, 0))
        rc = share_copies(op, t, &c, 0, lanes, 1, stream);
      else if (s->sbytes <= KERNEL_COPY_MAX)
        cp.k[cp.nk++] = (chorus_kern_copy){send + to_dev, op->sendbuff, s->sbytes};
      else
        rc = chorus_dev_copy(send, op->sendbuff, s->sbytes, stream);
      if (rc != 0) res = chorus_gpu_cuda_error("staging a GPU call's input in host memory");
    }
    if (b->detached && s->rbytes) { /* output_is_input */
      if (op->recvbuff != op->sendbuff &&
          chorus_dev_copy(op->recvbuff, op->sendbuff, s->rbytes, stream) != 0)
        res = chorus_gpu_cuda_error("copying a Broadcast root's input to its output");
    } else if (s->rbytes && s->rbytes <= KERNEL_COPY_MAX && pieces == 1) {
      outs[nouts++] = (chorus_kern_copy){op->recvbuff, recv + to_dev, s->rbytes};
    }
  }
  cp.nin = cp.nk;
  for (uint32_t j = 0; j < nouts; j++) cp.k[cp.nk++] = outs[j];
  chorus_free(outs);
  if (res == ncclSuccess && pieces > 1) {
    if (queue_pieces(px, b, ops[0], &b->ops[0], &cp, stream) != 0)
      res = chorus_gpu_cuda_error("queuing a staged GPU call in pieces");
  } else if (res == ncclSuccess) {
    const int rc =
        b->detached ? launch(px, b, 0, CHORUS_KERN_PROXY_POST, cp.k, cp.nin, cp.nin, stream)
        : !b->words ? launch(px, b, 0, CHORUS_KERN_PROXY_SPIN, cp.k, cp.nin, cp.nk, stream)
                    : launch(px, b, 0, CHORUS_KERN_PROXY_POST, cp.k, cp.nin, cp.nin, stream) ||
                          wait_piece(b, 0, stream) ||
                          (cp.nk > cp.nin &&
                           launch(px, b, 0, CHORUS_KERN_PROXY_OUTS, cp.k, cp.nin, cp.nk, stream));
    if (rc != 0) res = chorus_gpu_cuda_error("launching a staged GPU call");
  }
  for (int i = 0; i < n && res == ncclSuccess; i++) { /* the large outputs, after */
    const chorus_op *t = &b->ops[i];
    if (sp[i].rbytes <= KERNEL_COPY_MAX || pieces > 1 || b->detached) continue;
    const chorus_cut c = cut_of(ops[i], lanes, pieces);
    const int rc = chorus_cut_laid(&c, 1)
                       ? share_copies(ops[i], t, &c, 0, lanes, 0, stream)
                       : chorus_dev_copy(ops[i]->recvbuff, t->recvbuff, sp[i].rbytes, stream);
    if (rc != 0) res = chorus_gpu_cuda_error("copying a staged GPU call's output back");
  }
out:
  if (sp != stackspan) chorus_free(sp);
  if (b && res != ncclSuccess) { /* nothing of it can run: reuse at once */
    b->next = px->free_list;
    px->free_list = b;
    b = NULL;
  }
  *out = b;
  return res;
}

/* Stages calls ops[0, n) (one communicator's) on stream and queues them
 * as one batch. */
static ncclResult_t post_batch(chorus_proxy *px, chorus_op **ops, int n, void *stream, int captured,
                               int lanes) {
  batch *b;
  CHECK(stage_batch(px, ops, n, lanes, stream, captured, &b));
  if (captured) {
    b->kept = 1;
    return ncclSuccess;
  }
  if (chorus_dev_event_record(b->event, stream) != 0)
    return chorus_gpu_cuda_error("recording a staged GPU call's event");
  if (px->flight_tail)
    px->flight_tail->next = b;
  else
    px->flight_head = b;
  px->flight_tail = b;
  b->seq = __atomic_add_fetch(&px->queued, 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}

/* One communicator's calls of a group, as they are queued: on the first
 * call's stream, the others joined to it before and after.
 *
 * A lone AllReduce, AllGather, ReduceScatter, Broadcast or Reduce may run
 * in steps (where the cost model prices them cheaper), so that each byte
 * crosses the network once per host instead of once per rank, and the
 * host-local work runs on NVLink:
 * - AllReduce: ReduceScatter among this host's GPUs (the host-local
 *   part's kernels) leaves each its block, place p of the elements; each
 *   AllReduces its block with the same place on every other host (the
 *   cross-host part, staged), all places at once; AllGather among this
 *   host's GPUs. Elements past the last whole block per place go staged
 *   whole.
 * - AllGather (hosts in order): each rank gathers its block from the same
 *   place on every host (staged) into device scratch, host by host; then
 *   one AllGather per host among this host's GPUs puts that host's blocks
 *   in place.
 * - ReduceScatter (hosts in order): one ReduceScatter per host among this
 *   host's GPUs sums that host's blocks into device scratch; then each
 *   rank ReduceScatters the scratch with the same place on every host.
 * - Broadcast (hosts in order): the root's host Scatters the root's buffer
 *   among its GPUs, share p to place p; each place Broadcasts its share
 *   from the root's host to the same place on every host; AllGather among
 *   each host's GPUs.
 * - Reduce (hosts in order): ReduceScatter among each host's GPUs into
 *   device scratch; each place Reduces its share to the root's host;
 *   the root's host Gathers the shares to the root.
 * Broadcast and Reduce, like AllReduce, send the elements past the last
 * whole share per place staged whole.
 * The host-local steps of every communicator of the group are launched
 * together, as a group of the local parts, so that a process driving
 * several GPUs of a host launches them as it would any group. */
typedef struct unit {
  chorus_proxy *px;
  chorus_op **ops;
  int n;
  void *stream;
  int captured, hier;
  chorus_op cross, tail; /* hier: the staged step; AllReduce's rest */
  chorus_op *pre, *post; /* hier: the host-local steps before and after */
  int npre, npost;
  chorus_op local_one[2]; /* AllReduce's */
  chorus_op *local_many;  /* AllGather's or ReduceScatter's, one per host */
} unit;

/* The reductions of a hierarchical call's steps, each applied once: a
 * PreMulSum's scalar inside the host, an integer average's division
 * across. */
static void split_red(const chorus_red *red, chorus_red *local, chorus_red *cross) {
  *local = *cross = *red;
  if (red->kind == CHORUS_RED_PREMULSUM) {
    cross->kind = CHORUS_RED_SUM;
    cross->scalar_dev = NULL;
  } else if (red->kind == CHORUS_RED_SUMPOSTDIV) {
    local->kind = CHORUS_RED_SUM;
  }
}

/* A host-local step of op: func on `count` elements. */
static chorus_op local_step(const unit *u, const chorus_op *op, int func, size_t count,
                            const chorus_red *red, const void *send, void *recv) {
  chorus_op l = *op;
  l.cc = u->px->local_cc;
  l.func = func;
  l.count = count;
  l.red = *red;
  l.root = -1;
  l.sendbuff = send;
  l.recvbuff = recv;
  l.cuda_stream = u->stream;
  l.next_op = NULL;
  l.scratch = NULL;
  return l;
}

/* The staged step of op: the same call on the cross-host part. */
static chorus_op cross_step(const unit *u, const chorus_op *op, size_t count, const chorus_red *red,
                            const void *send, void *recv) {
  chorus_op c = *op;
  c.cc = u->px->cross_cc[0];
  c.count = count;
  c.red = *red;
  c.sendbuff = send;
  c.recvbuff = recv;
  return c;
}

/* Device scratch of `bytes` for unit u's steps. */
static ncclResult_t unit_scratch(unit *u, size_t bytes, char **out) {
  return chorus_gpu_scratch_get(&u->px->scratch, bytes, u->captured, u->px->last_event,
                                "calls across hosts", out);
}

/* Does the unit run hierarchically (hier) or staged whole? The planner
 * says, alike on every rank: the call, the rules and the filters are.
 * Grouped calls go staged, as one batch. */
static ncclResult_t unit_choose(unit *u) {
  u->hier = 0;
  const chorus_op *op = u->ops[0];
  if (u->n != 1) return ncclSuccess;
  chorus_plan_call call = {.comm = &u->px->plan,
                           .func = op->func,
                           .count = op->count,
                           .esize = op->esize,
                           .root = op->root,
                           .send = op->sendbuff,
                           .recv = op->recvbuff,
                           .known = CHORUS_FACT_PREMULSUM};
  if (op->red.kind == CHORUS_RED_PREMULSUM) call.facts = CHORUS_FACT_PREMULSUM;
  chorus_task t;
  char err[320];
  if (chorus_plan_choose(&call, NULL, 0, 0, &t, NULL, err, sizeof err) != 0)
    return chorus_error(ncclInvalidUsage, "rank %d: %s", u->px->cc->rank, err);
  u->hier = t.algo == CHORUS_ALGO_HIER && u->px->nlanes > 0;
  return ncclSuccess;
}

/* The elements of op past per * L of each buffer, staged whole (AllReduce,
 * Broadcast, Reduce); buffers a rank does not use may be NULL. */
static void whole_tail(unit *u, const chorus_op *op, size_t done) {
  const size_t off = done * op->esize;
  u->tail = *op;
  u->tail.count = op->count - done;
  u->tail.sendbuff = op->sendbuff ? (const char *)op->sendbuff + off : NULL;
  u->tail.recvbuff = op->recvbuff ? (char *)op->recvbuff + off : NULL;
}

/* Broadcast and Reduce in steps (hosts in order: the root is place
 * root % L of host root / L, and that host is rank root / L of every
 * place's cross-host part). */
static ncclResult_t rooted_steps(unit *u, const chorus_op *op, const chorus_red *local,
                                 const chorus_red *cross) {
  const chorus_proxy *px = u->px;
  const int L = px->plan.env.nlocal, root_host = op->root / L, root_place = op->root % L;
  const int at_root_host = px->cc->rank / L == root_host;
  const size_t per = op->count / (size_t)L, es = op->esize;
  chorus_op *first = &u->local_one[0], *last = &u->local_one[1];
  if (op->func == CHORUS_FUNC_BROADCAST) {
    char *mine = (char *)op->recvbuff + (size_t)px->place * per * es;
    *first = local_step(u, op, CHORUS_FUNC_SCATTER, per, local, op->sendbuff, mine);
    first->root = root_place;
    *last = local_step(u, op, CHORUS_FUNC_ALLGATHER, per, local, mine, op->recvbuff);
    u->pre = first, u->npre = at_root_host;
    u->post = last, u->npost = 1;
    u->cross = cross_step(u, op, per, cross, mine, mine);
  } else {
    char *x = NULL;
    CHECK(unit_scratch(u, per * es, &x));
    *first = local_step(u, op, CHORUS_FUNC_REDUCESCATTER, per, local, op->sendbuff, x);
    *last = local_step(u, op, CHORUS_FUNC_GATHER, per, local, x, op->recvbuff);
    last->root = root_place;
    u->pre = first, u->npre = 1;
    u->post = last, u->npost = at_root_host;
    u->cross = cross_step(u, op, per, cross, x, x);
  }
  u->cross.root = root_host;
  whole_tail(u, op, per * (size_t)L);
  return ncclSuccess;
}

static ncclResult_t hier_steps(unit *u, const chorus_op *op) {
  const chorus_proxy *px = u->px;
  const size_t L = (size_t)px->plan.env.nlocal, H = (size_t)px->plan.env.nhosts, es = op->esize;
  if (L == 1) {
    /* One rank per host: no steps in the host, the call itself goes
     * across (on lanes, unit_batches), reduced there as it stands; the
     * unit came zeroed, so it has no tail. */
    u->cross = cross_step(u, op, op->count, &op->red, op->sendbuff, op->recvbuff);
    return ncclSuccess;
  }
  chorus_red local, cross;
  split_red(&op->red, &local, &cross);
  if (op->func == CHORUS_FUNC_BROADCAST || op->func == CHORUS_FUNC_REDUCE)
    return rooted_steps(u, op, &local, &cross);
  if (op->func == CHORUS_FUNC_ALLREDUCE) {
    const size_t per = op->count / L;
    char *recv = op->recvbuff, *mine = recv + (size_t)px->place * per * es;
    u->local_one[0] = local_step(u, op, CHORUS_FUNC_REDUCESCATTER, per, &local, op->sendbuff, mine);
    u->local_one[1] = local_step(u, op, CHORUS_FUNC_ALLGATHER, per, &local, mine, recv);
    u->pre = &u->local_one[0];
    u->post = &u->local_one[1];
    u->npre = u->npost = 1;
    u->cross = cross_step(u, op, per, &cross, mine, mine);
    whole_tail(u, op, per * L);
    return ncclSuccess;
  }
  const size_t c = op->count, block = c * es;
  char *x = NULL;
  CHECK(unit_scratch(u, H * block, &x));
  if (!(u->local_many = chorus_malloc(H * sizeof *u->local_many)))
    return chorus_error(ncclSystemError, "out of memory composing a call across hosts");
  const int ag = op->func == CHORUS_FUNC_ALLGATHER;
  for (size_t h = 0; h < H; h++) {
    char *host_blocks = (char *)(ag ? op->recvbuff : (void *)op->sendbuff) + h * L * block;
    u->local_many[h] =
        ag ? local_step(u, op, CHORUS_FUNC_ALLGATHER, c, &local, x + h * block, host_blocks)
           : local_step(u, op, CHORUS_FUNC_REDUCESCATTER, c, &local, host_blocks, x + h * block);
  }
  if (ag) {
    u->post = u->local_many;
    u->npost = (int)H;
    u->cross = cross_step(u, op, c, &cross, op->sendbuff, x);
  } else {
    u->pre = u->local_many;
    u->npre = (int)H;
    u->cross = cross_step(u, op, c, &cross, x, op->recvbuff);
  }
  return ncclSuccess;
}

static ncclResult_t unit_begin(unit *u) {
  chorus_proxy *px = u->px;
  if (__atomic_load_n(&px->ctl_host->st.failed, __ATOMIC_ACQUIRE))
    return chorus_error(px->cc->failed != ncclSuccess ? px->cc->failed : ncclRemoteError,
                        "rank %d: an earlier call on this communicator failed; abort it "
                        "(ncclCommAbort)",
                        px->cc->rank);
  CHECK(chorus_proxy_async_error(px));
  if (chorus_dev_use(px->device) != 0) return chorus_gpu_cuda_error("selecting the GPU");
  u->stream = u->ops[0]->cuda_stream;
  u->captured = chorus_dev_stream_capturing(u->stream) == 1;
  for (int i = 1; i < u->n; i++)
    if (u->ops[i]->cuda_stream != u->stream &&
        chorus_dev_stream_wait(u->stream, u->ops[i]->cuda_stream) != 0)
      return chorus_gpu_cuda_error("joining the streams of grouped calls");
  /* Batches must reach the ring in call order; calls on another stream
   * than the last wait for the last's copies (not in capture, where the
   * graph's own order holds). */
  if (!u->captured && px->last_event && px->last_stream != u->stream &&
      chorus_dev_stream_wait_event(u->stream, px->last_event) != 0)
    return chorus_gpu_cuda_error("ordering staged GPU calls");
  CHECK(unit_choose(u));
  return u->hier ? hier_steps(u, u->ops[0]) : ncclSuccess;
}

/* The lanes a unit staged as it stands goes on. With one rank per host
 * each lane's part holds every rank in rank order, so a lone AlltoAll,
 * Gather or Scatter from CHORUS_CUT_HALVES_FROM is cut across them as
 * hier's step is (by its bytes, alike on every rank), and a group of
 * Sends and Recvs each by its own (run_p2p_lanes); other calls staged so
 * go on one. */
static int staged_lanes(const unit *u) {
  const chorus_op *op = u->ops[0];
  const chorus_proxy *px = u->px;
  if (px->nlanes < 2 || px->plan.env.nlocal != 1) return 1;
  int most = 1, p2p = 1;
  for (int i = 0; i < u->n && p2p; i++) {
    const chorus_op *o = u->ops[i];
    p2p = chorus_func_p2p(o->func) && !goes_direct(o);
    if (p2p) most = CHORUS_MAX(most, p2p_lanes(o, px->nlanes));
  }
  if (p2p) return most;
  if (u->n != 1 || (op->func != CHORUS_FUNC_ALLTOALL && op->func != CHORUS_FUNC_GATHER &&
                    op->func != CHORUS_FUNC_SCATTER))
    return 1;
  return staged_cut_lanes(op->count * op->esize * (size_t)op->cc->nranks, px->nlanes);
}

/* The staged batches of a unit (after its host-local steps before). */
static ncclResult_t unit_batches(unit *u) {
  /* Events belong to the device current at their making. */
  if (chorus_dev_use(u->px->device) != 0) return chorus_gpu_cuda_error("selecting the GPU");
  if (!u->hier) return post_batch(u->px, u->ops, u->n, u->stream, u->captured, staged_lanes(u));
  /* The staged step goes across on lanes (alike on every rank: the step's
   * size is). */
  const chorus_op *x = &u->cross;
  const int blocks = x->func == CHORUS_FUNC_ALLGATHER || x->func == CHORUS_FUNC_REDUCESCATTER;
  const size_t bytes = x->count * x->esize * (blocks ? (size_t)u->px->plan.env.nhosts : 1);
  chorus_op *one = &u->cross;
  CHECK(
      post_batch(u->px, &one, 1, u->stream, u->captured, chorus_hier_lanes(bytes, u->px->nlanes)));
  if (u->tail.count == 0) return ncclSuccess;
  one = &u->tail;
  return post_batch(u->px, &one, 1, u->stream, u->captured, 1);
}

static ncclResult_t unit_end(unit *u) {
  chorus_proxy *px = u->px;
  if (chorus_dev_use(px->device) != 0) return chorus_gpu_cuda_error("selecting the GPU");
  if (!u->captured) {
    if (!px->last_event && chorus_dev_event_new(&px->last_event) != 0)
      return chorus_gpu_cuda_error("making an event for staged GPU calls");
    if (chorus_dev_event_record(px->last_event, u->stream) != 0)
      return chorus_gpu_cuda_error("recording a staged GPU call's event");
    px->last_stream = u->stream;
  }
  for (int i = 1; i < u->n; i++)
    if (u->ops[i]->cuda_stream != u->stream &&
        chorus_dev_stream_wait(u->ops[i]->cuda_stream, u->stream) != 0)
      return chorus_gpu_cuda_error("joining the streams of grouped calls");
  return ncclSuccess;
}

/* The host-local steps before (or after) of every hierarchical unit, as
 * one group; tmp holds the largest such group. */
static ncclResult_t local_steps(unit *us, int nu, int after, chorus_op **tmp) {
  size_t k = 0;
  for (int i = 0; i < nu; i++) {
    const int m = after ? us[i].npost : us[i].npre;
    chorus_op *steps = after ? us[i].post : us[i].pre;
    for (int j = 0; j < m; j++) tmp[k++] = &steps[j];
  }
  return k ? chorus_gpu_run_ops(tmp, k) : ncclSuccess;
}

ncclResult_t chorus_proxy_run_ops(chorus_op **ops, size_t n) {
  /* Each communicator's calls in call order, communicators in order of
   * first call. */
  chorus_op **sel = chorus_malloc(n * sizeof *sel), **tmp = NULL;
  unsigned char *done = chorus_calloc(n, 1);
  unit *us = chorus_calloc(n, sizeof *us);
  ncclResult_t res = ncclSuccess;
  int nu = 0;
  if (!sel || !done || !us) {
    res = chorus_error(ncclSystemError, "out of memory running %zu grouped calls", n);
    goto out;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (done[i]) continue;
    unit *u = &us[nu++];
    u->px = ops[i]->cc->proxy;
    u->ops = &sel[m];
    for (size_t j = i; j < n; j++)
      if (!done[j] && ops[j]->cc == ops[i]->cc) {
        done[j] = 1;
        sel[m++] = ops[j];
        u->n++;
      }
  }
  size_t steps = 0;
  for (int i = 0; i < nu && res == ncclSuccess; i++) {
    chorus_log_ctx old = chorus_log_ctx_set(us[i].px->cc->log_ctx);
    res = unit_begin(&us[i]);
    chorus_log_ctx_set(old);
    steps += (size_t)CHORUS_MAX(us[i].npre, us[i].npost);
  }
  if (res == ncclSuccess && steps && !(tmp = chorus_malloc(steps * sizeof *tmp)))
    res = chorus_error(ncclSystemError, "out of memory running %zu grouped calls", n);
  if (res == ncclSuccess) res = local_steps(us, nu, 0, tmp);
  for (int i = 0; i < nu && res == ncclSuccess; i++) {
    chorus_log_ctx old = chorus_log_ctx_set(us[i].px->cc->log_ctx);
    res = unit_batches(&us[i]);
    chorus_log_ctx_set(old);
  }
  if (res == ncclSuccess) res = local_steps(us, nu, 1, tmp);
  for (int i = 0; i < nu && res == ncclSuccess; i++) res = unit_end(&us[i]);
out:
  for (int i = 0; i < nu; i++) chorus_free(us[i].local_many);
  chorus_free(tmp);
  chorus_free(sel);
  chorus_free(done);
  chorus_free(us);
  return res;
}

/* ---- life cycle -------------------------------------------------------------------- */

ncclResult_t chorus_proxy_setup(chorus_proxy **out, chorus_coll_comm *cc, int device) {
  *out = NULL;
  if (chorus_dev_use(device) != 0) return chorus_gpu_cuda_error("selecting the communicator's GPU");
  chorus_proxy *px = chorus_calloc(1, sizeof *px);
  if (!px) return chorus_error(ncclSystemError, "out of memory setting up a GPU communicator");
  px->cc = cc;
  px->device = device;
  /* The host communicator's figures (the network's, its slot size) price
   * the host calls under GPU calls. */
  px->plan.env = cc->plan.env;
  px->plan.env.backend = CHORUS_BACKEND_GPU;
  px->plan.rank = cc->rank;
  const int64_t piece = chorus_param_int(CHORUS_P_GPU_STAGE_PIECE);
  px->piece_bytes = piece > 0 ? (size_t)piece : 0;
  /* two slots a side of a piece each (an AllReduce out of place whose
   * size is a whole number of pieces), with room for the head and the
   * copy list */
  px->stage_big = px->piece_bytes ? 4 * px->piece_bytes + ((size_t)1 << 20) : 0;
  const chorus_topo *t = cc->topo;
  const chorus_rank_info *me = &t->info[cc->rank];
  int shared = 0;
  for (int r = 0; r < cc->nranks; r++)
    if (r != cc->rank && me->bus_id[0] && t->info[r].machine_hash == me->machine_hash &&
        strcmp(t->info[r].bus_id, me->bus_id) == 0)
      shared = 1;
  /* CHORUS_GPU_STAGE_WAIT: kernel never waits on words, word always
   * (eager calls, as on a shared GPU), auto as above. */
  const char *wait = chorus_param_str(CHORUS_P_GPU_STAGE_WAIT);
  const int never = wait && strcmp(wait, "kernel") == 0, always = wait && strcmp(wait, "word") == 0;
  if (wait && !never && !always && strcmp(wait, "auto") != 0)
    WARN("CHORUS_GPU_STAGE_WAIT=\"%s\" is not auto, kernel or word; using auto", wait);
  px->word_waits = !never && chorus_dev_word_waits();
  px->whole_words = shared || always;
  char err[256];
  if (chorus_plan_comm_settings(&px->plan, err, sizeof err) != 0) {
    chorus_free(px);
    return chorus_error(ncclInvalidUsage, "rank %d: %s", cc->rank, err);
  }
  chorus_plan_unbind_foreign(&px->plan);
  pthread_mutex_init(&px->lock, NULL);
  ncclResult_t res = ncclSuccess;
  void *h;
  if (chorus_dev_host_alloc(sizeof(ctl), &h, &px->ctl_dev) != 0) {
    res = chorus_gpu_cuda_error("allocating host-mapped words for staged GPU calls");
    goto fail;
  }
  px->ctl_host = h;
  void *d;
  if (chorus_dev_alloc(sizeof(uint32_t), &d) != 0 || chorus_dev_zero(d, sizeof(uint32_t)) != 0) {
    res = chorus_gpu_cuda_error("allocating the staged calls' counter");
    goto fail;
  }
  px->issued = d;
  if (pthread_create(&px->thread, NULL, progress, px) != 0) {
    res = chorus_error(ncclSystemError, "cannot start the progress thread of a GPU communicator");
    goto fail;
  }
  px->has_thread = 1;
  INFO(CHORUS_INIT,
       "rank %d GPU %d: ranks on %d hosts; calls staged through host memory by a progress "
       "thread (inputs up to %u bytes copied by its kernel, larger by the copy engine; "
       "large collectives in pieces of %zu "
       "bytes (0: whole)); streams wait for the host %s",
       cc->rank, device, cc->topo->nhosts, KERNEL_COPY_MAX, px->piece_bytes,
       !px->word_waits   ? "in a polling kernel (no stream word waits, or CHORUS_GPU_STAGE_WAIT)"
       : px->whole_words ? "on a word (another process shares this GPU, or CHORUS_GPU_STAGE_WAIT)"
                         : "on a word for calls in pieces, else in a polling kernel");
  *out = px;
  return ncclSuccess;
fail:
  chorus_proxy_free(px);
  return res;
}

ncclResult_t chorus_proxy_set_parts(chorus_proxy *px, struct chorus_gpu *local,
                                    chorus_coll_comm *local_cc, chorus_coll_comm *const *cross_cc,
                                    int nlanes) {
  px->local = local;
  px->local_cc = local_cc;
  px->nlanes = nlanes;
  for (int k = 0; k < nlanes; k++) px->cross_cc[k] = cross_cc[k];
  CHECK(chorus_lanes_start(&px->lanes, px->cross_cc, nlanes, &px->cc->log_ctx));
  px->place = local ? chorus_gpu_rank(local) : 0;
  const int L = local ? chorus_gpu_nranks(local) : 1;
  const chorus_topo *t = px->cc->topo;
  px->plan.env.nlocal = L;
  px->plan.env.lanes = nlanes;
  px->plan.hosts_in_order = 1;
  for (int r = 0; r < px->cc->nranks; r++) {
    const int first = r - r % L;
    if (t->local_index[r] != r % L || t->host_of[r] != t->host_of[first])
      px->plan.hosts_in_order = 0;
  }
  INFO(CHORUS_INIT | CHORUS_TUNING,
       "rank %d: place %d of %d on its host; AllReduce%s may run in steps (hier: in the host, "
       "across hosts on up to %d lanes, in the host again; chorus_info --explain)",
       px->cc->rank, px->place, L, px->plan.hosts_in_order ? ", AllGather and ReduceScatter" : "",
       nlanes);
  return ncclSuccess;
}

ncclResult_t chorus_proxy_async_error(chorus_proxy *px) {
  if (!px) return ncclSuccess;
  if (px->cc->failed != ncclSuccess) return px->cc->failed;
  return px->local ? chorus_gpu_async_error(px->local) : ncclSuccess;
}

/* Every stream waiting on a word of a batch goes on, the host having
 * run it or not: nothing waits for a communicator that stops (what its
 * outputs then hold is undefined, as after NCCL's abort). */
static void release_words(chorus_proxy *px) {
  pthread_mutex_lock(&px->lock);
  for (uint32_t i = 0; i < px->ntable; i++) {
    if (px->table[i]->host) release_every_word(px->table[i]);
  }
  pthread_mutex_unlock(&px->lock);
}

void chorus_proxy_abort(chorus_proxy *px) {
  if (!px || !px->ctl_host) return;
  __atomic_store_n(&px->ctl_host->st.abort, 1, __ATOMIC_RELEASE);
  release_words(px);
}

void chorus_proxy_settle(chorus_proxy *px) {
  if (!px) return;
  const int64_t end = chorus_now_ns() + SETTLE_NS;
  for (batch *b = px->flight_head; b; b = b->next)
    if (b->detached && chorus_dev_event_done(b->event) == 1)
      while (!batch_ran(px, b) && chorus_now_ns() < end) nap();
}

/* Waits, up to a second in all, for the eager batches in flight to pass
 * their last copy: their memory goes next. */
static void settle_flights(chorus_proxy *px) {
  const int64_t end = chorus_now_ns() + 1000000000ll;
  for (batch *b = px->flight_head; b; b = b->next)
    while (chorus_dev_event_done(b->event) == 0 && chorus_now_ns() < end) nap();
}

void chorus_proxy_free(chorus_proxy *px) {
  if (!px) return;
  chorus_dev_use(px->device);
  chorus_proxy_abort(px);
  if (px->has_thread) {
    /* A call still running ends now (its peers learn why) instead of at
     * its deadline. */
    if (__atomic_load_n(&px->cc->busy, __ATOMIC_ACQUIRE) > 0) {
      __atomic_store_n(px->cc->abort_flag, 1, __ATOMIC_RELEASE);
      for (int k = 0; k < px->nlanes; k++)
        __atomic_store_n(px->cross_cc[k]->abort_flag, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&px->stop, 1, __ATOMIC_RELEASE);
    pthread_join(px->thread, NULL);
  }
  chorus_lanes_free(px->lanes);
  /* The batches queued since (their streams may finish before their
   * memory goes). */
  release_words(px);
  settle_flights(px);
  for (uint32_t i = 0; i < px->ntable; i++) batch_free(px->table[i]);
  chorus_free(px->table);
  chorus_gpu_scratch_free(&px->scratch);
  chorus_free(px->work);
  chorus_dev_event_free(px->last_event);
  chorus_dev_free(px->issued);
  chorus_dev_host_free(px->ctl_host);
  pthread_mutex_destroy(&px->lock);
  chorus_free(px);
}

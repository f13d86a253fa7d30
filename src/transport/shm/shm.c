/*
 * shm.c - the shared-memory transport: ranks of one host (threads of one
 * process or separate processes) exchange messages through FIFOs in POSIX
 * shared memory.
 *
 * Layout. Every rank creates one segment: a header page (identity and the
 * rank's doorbell), its call board (the calls it posted, coll/calls.h,
 * read in place by its peers), then one FIFO control block per (sending rank, channel),
 * then the FIFOs' slots. The FIFO that carries S -> R on channel c lives in
 * R's segment at index pos(S) * CHORUS_NCHANNELS + c, where pos is S's index
 * among the ranks that share memory (all ranks of the host, or only itself
 * when NCCL_SHM_DISABLE=1 leaves just the self-connection).
 *
 * Protocol of one FIFO (single producer, single consumer), message k
 * (from 0) in slot k % nslots:
 *   seq   of slot k's header, written k + 1 by the sender (release) after
 *         filling the slot and the rest of the header; polled by the
 *         receiver (acquire), which then finds the header in the same line.
 *   head  written by the receiver (release) after it is done with slot
 *         head % nslots; read by the sender (acquire) to find free slots.
 *   error written (release) by either side after it wrote `reason`; both
 *         check it before every slot operation.
 * After posting a message or moving head the writer rings the other
 * rank's doorbell.
 *
 * Node memory. When every rank of the communicator is on this host, each
 * segment also ends with the rank's node counters (one cache line each) and
 * its stage buffers (transport.h explains their protocol).
 *
 * Lifetime. The creator unlinks the segment's name in finish(), i.e. after
 * every peer mapped it; from then on the memory goes away with the last
 * mapping, however the processes end.
 *
 * Death. A peer's exit is seen by its pid (util/proc.h: exited, zombies
 * included) where it shares this rank's PID namespace. A peer of another
 * namespace (another container on the host) has no pid here: each such
 * pair holds a life line instead, a socket that carries nothing, which
 * the kernel closes when either process ends, however it ends.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/shm/readrate.h"
#include "transport/transport.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/proc.h"
#include "util/shm.h"

#define SEG_MAGIC 0x43484f5253484d31ull /* "CHORSHM1" */
#define MAX_SLOTS 64
#define CACHELINE 64

typedef struct seg_header {
  uint64_t magic;
  int32_t rank;
  int32_t pid;
  uint64_t pid_ns; /* the PID namespace pid belongs to (chorus_proc_pid_ns) */
  uint64_t self;   /* the segment's address in its owner's memory: peer reads probe it */
  uint32_t nfifo, nslots;
  uint64_t slot_bytes;
  chorus_doorbell db __attribute__((aligned(CACHELINE)));
} seg_header;

/* A message's header, a line of its own: the sender fills it, then
 * release-stores seq (the message's place in the FIFO + 1), which is what
 * the receiver polls, so one miss across cores tells it both that the
 * message is there and what it is. */
typedef struct __attribute__((aligned(CACHELINE))) slot_header {
  uint64_t seq;
  uint64_t bytes;
  uint64_t ref; /* nonzero: the message is at this address of the sender, not in the slot */
  chorus_msg_meta meta;
} slot_header;

typedef struct fifo_ctrl {
  uint64_t head __attribute__((aligned(CACHELINE)));
  uint32_t error __attribute__((aligned(CACHELINE)));
  char reason[CHORUS_REASON_MAX];
  slot_header slot[MAX_SLOTS] __attribute__((aligned(CACHELINE)));
} fifo_ctrl;

typedef struct shm_conn {
  chorus_conn base;
  fifo_ctrl *ctrl;
  char *data;
  uint32_t nslots;
  int dir;
  uint64_t pos;   /* messages posted (send) or done with (recv): head */
  uint64_t other; /* last seen head (send) */
  int holding;
  chorus_doorbell *peer_db;
  chorus_doorbell *my_db;
  pid_t peer_pid; /* 0: not in this PID namespace, not watched by pid */
  int life_fd;    /* peers of another PID namespace: the pair's life line (else -1) */
  /* Messages the peer reads from our memory (peer_reads): those before
   * read_until went by reference, so flush waits for the peer's head to
   * pass it. */
  uint64_t read_until;
} shm_conn;

typedef struct node_counters {
  uint64_t posted __attribute__((aligned(CACHELINE)));
  uint64_t reduced __attribute__((aligned(CACHELINE)));
  uint32_t failed __attribute__((aligned(CACHELINE)));
  char reason[CHORUS_NODE_REASON];
  chorus_msg_meta meta[CHORUS_NODE_META_SLOTS] __attribute__((aligned(CACHELINE)));
  uint64_t addr[CHORUS_NODE_MAX_BUFS] __attribute__((aligned(CACHELINE)));
  uint64_t addr_out[CHORUS_NODE_MAX_BUFS];
  uint64_t lead[CHORUS_NODE_MAX_BUFS];
  chorus_fast_line fast[CHORUS_FAST_SETS * CHORUS_FAST_LINES];
} node_counters;

typedef struct shm_state {
  int rank, nranks;
  int full;     /* FIFOs for all local ranks (else self only) */
  int has_node; /* node memory: every rank of the communicator is local */
  size_t stage_bytes;
  int nstages;
  chorus_node node;
  const chorus_topo *topo;
  chorus_shm own;
  chorus_shm *peer_seg; /* indexed by rank; base NULL when not mapped */
  shm_conn *conns;      /* [rank][channel][dir], only shm peers valid */
  uint8_t *is_peer;
  int *life_fd; /* per rank: the life line to a peer of another PID namespace, else -1 */
  uint32_t nfifo, nslots;
  size_t slot_bytes, ctrl_bytes;
} shm_state;

typedef struct seg_record {
  char name[CHORUS_SHM_NAME_MAX];
  uint64_t size;
} seg_record;

static size_t page_up(size_t x) {
  return CHORUS_ALIGN_UP(x, (size_t)4096);
}

/* The rank's call board (coll/calls.h) follows the header page. */
static chorus_call_entry *board_at(void *base) {
  return (chorus_call_entry *)((char *)base + page_up(sizeof(seg_header)));
}

static size_t fifo_start(void) {
  return page_up(sizeof(seg_header)) + page_up(CHORUS_NODE_CALLS * sizeof(chorus_call_entry));
}

static size_t fifo_end(const shm_state *s) {
  return fifo_start() + s->ctrl_bytes + (size_t)s->nfifo * s->nslots * s->slot_bytes;
}

static size_t seg_size(const shm_state *s) {
  size_t end = fifo_end(s);
  if (s->has_node) end = page_up(end + sizeof(node_counters)) + (size_t)s->nstages * s->stage_bytes;
  return end;
}

/* Points node.rank[r] into rank r's segment. */
static void init_node(shm_state *s) {
  for (int r = 0; r < s->nranks; r++) {
    char *base = s->peer_seg[r].base;
    node_counters *nc = (node_counters *)(base + fifo_end(s));
    const seg_header *h = (const seg_header *)base;
    s->node.rank[r] =
        (chorus_node_rank){&nc->posted,
                           &nc->reduced,
                           nc->meta,
                           &nc->failed,
                           nc->reason,
                           base + page_up(fifo_end(s) + sizeof(node_counters)),
                           &((seg_header *)base)->db,
                           nc->addr,
                           nc->addr_out,
                           nc->lead,
                           h->pid,
                           h->pid == (int32_t)getpid() && h->pid_ns == chorus_proc_pid_ns(),
                           nc->fast,
                           0};
  }
  s->node.nranks = s->nranks;
  s->node.chunk = s->stage_bytes;
  s->node.nbuf = s->nstages;
  s->node.next_chunk = 0;
  s->node.last_fast = 0;
}

static fifo_ctrl *fifo_at(const shm_state *s, void *base, uint32_t idx) {
  return (fifo_ctrl *)((char *)base + fifo_start() + (size_t)idx * sizeof(fifo_ctrl));
}

static char *data_at(const shm_state *s, void *base, uint32_t idx) {
  return (char *)base + fifo_start() + s->ctrl_bytes + (size_t)idx * s->nslots * s->slot_bytes;
}

static int pos_of(const shm_state *s, int rank) {
  return s->full ? s->topo->local_index[rank] : 0;
}

static shm_conn *conn_of(shm_state *s, int peer, int ch, int dir) {
  return &s->conns[((size_t)peer * CHORUS_NCHANNELS + (size_t)ch) * 2 + (size_t)dir];
}

static ncclResult_t peer_failed(shm_conn *c) {
  char reason[sizeof c->ctrl->reason];
  memcpy(reason, c->ctrl->reason, sizeof reason);
  reason[sizeof reason - 1] = '\0';
  if (reason[0]) {
    snprintf(c->base.err, sizeof c->base.err, "%s", reason);
    c->base.relayed = 1;
  } else {
    snprintf(c->base.err, sizeof c->base.err, "rank %d failed (no reason given)", c->base.peer);
  }
  return ncclRemoteError;
}

static ncclResult_t shm_send_slot(chorus_conn *cc, void **buf, size_t *cap) {
  shm_conn *c = (shm_conn *)cc;
  if (__atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE)) return peer_failed(c);
  if (c->pos - c->other >= c->nslots) {
    c->other = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
    if (c->pos - c->other >= c->nslots) return ncclInProgress;
  }
  *buf = c->data + (size_t)(c->pos % c->nslots) * c->base.slot_bytes;
  *cap = c->base.slot_bytes;
  c->holding = 1;
  return ncclSuccess;
}

static ncclResult_t post(shm_conn *c, size_t bytes, const void *ref, const chorus_msg_meta *meta) {
  slot_header *h = &c->ctrl->slot[c->pos % c->nslots];
  h->bytes = bytes;
  h->ref = (uint64_t)(uintptr_t)ref;
  h->meta = *meta;
  c->pos++;
  c->holding = 0;
  __atomic_store_n(&h->seq, c->pos, __ATOMIC_RELEASE);
  chorus_doorbell_ring(c->peer_db);
  return ncclSuccess;
}

static ncclResult_t shm_send_post(chorus_conn *cc, size_t bytes, const chorus_msg_meta *meta) {
  return post((shm_conn *)cc, bytes, NULL, meta);
}

static ncclResult_t shm_send_post_read(chorus_conn *cc, const void *src, size_t bytes,
                                       const chorus_msg_meta *meta) {
  shm_conn *c = (shm_conn *)cc;
  if (!cc->peer_reads) {
    snprintf(cc->err, sizeof cc->err, "a message by reference where rank %d cannot read it",
             cc->peer);
    return ncclInternalError;
  }
  ncclResult_t res = post(c, bytes, src, meta);
  c->read_until = c->pos;
  return res;
}

/* Messages in slots are the peer's once posted; those it reads from our
 * memory are done once it released them. */
static ncclResult_t shm_send_flush(chorus_conn *cc) {
  shm_conn *c = (shm_conn *)cc;
  if (c->other >= c->read_until) return ncclSuccess;
  c->other = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
  if (c->other >= c->read_until) return ncclSuccess;
  if (__atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE)) return peer_failed(c);
  return ncclInProgress;
}

/* Copies the message at h, sent by reference, out of the sender's memory
 * into dst. */
static ncclResult_t fetch(shm_conn *c, const slot_header *h, char *dst) {
  const int err = chorus_proc_read(c->peer_pid, dst, h->ref, h->bytes);
  /* A sender that failed returns while its message may be unread, and
   * its buffer is then the application's again: a copy is good only if
   * the sender had not failed once it was made. */
  if (__atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE)) return peer_failed(c);
  if (!err) return ncclSuccess;
  snprintf(c->base.err, sizeof c->base.err,
           "reading a message from rank %d's memory (pid %d) with process_vm_readv: %s",
           c->base.peer, (int)c->peer_pid, strerror(err));
  return err == ESRCH ? ncclRemoteError : ncclSystemError;
}

/* Whether the message at a receiving connection's place is posted. */
static int posted(const shm_conn *c) {
  return __atomic_load_n(&c->ctrl->slot[c->pos % c->nslots].seq, __ATOMIC_ACQUIRE) == c->pos + 1;
}

/* The next message's header: ncclSuccess, ncclInProgress (none yet) or
 * the peer's failure. */
static ncclResult_t next_message(shm_conn *c, const slot_header **h) {
  if (!posted(c)) {
    if (!__atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE)) return ncclInProgress;
    /* The peer may have posted its last message and then failed between
     * our two loads: what it sent before failing is still delivered (a
     * receiver whose count differs hears that, not the later abort). */
    if (!posted(c)) return peer_failed(c);
  }
  *h = &c->ctrl->slot[c->pos % c->nslots];
  return ncclSuccess;
}

static ncclResult_t shm_recv_slot(chorus_conn *cc, const void **buf, size_t *bytes,
                                  chorus_msg_meta *meta) {
  shm_conn *c = (shm_conn *)cc;
  const slot_header *h = NULL;
  ncclResult_t res = next_message(c, &h);
  if (res != ncclSuccess) return res;
  if (h->ref) { /* only recv_read takes these */
    snprintf(c->base.err, sizeof c->base.err,
             "rank %d sent %llu bytes for this rank to read in place where this rank's call "
             "takes none (the ranks' calls differ)",
             c->base.peer, (unsigned long long)h->bytes);
    return ncclInvalidUsage;
  }
  *buf = c->data + (size_t)(c->pos % c->nslots) * c->base.slot_bytes;
  *bytes = h->bytes;
  *meta = h->meta;
  c->holding = 1;
  return ncclSuccess;
}

static ncclResult_t shm_recv_read(chorus_conn *cc, void *dst, size_t room,
                                  const chorus_msg_meta *want, const void **buf, size_t *bytes,
                                  chorus_msg_meta *meta, int *read) {
  shm_conn *c = (shm_conn *)cc;
  const slot_header *h = NULL;
  *read = 0;
  ncclResult_t res = next_message(c, &h);
  if (res != ncclSuccess) return res;
  *buf = c->data + (size_t)(c->pos % c->nslots) * cc->slot_bytes;
  *bytes = h->bytes;
  *meta = h->meta;
  c->holding = 1;
  /* In a slot, or not what the caller's call expects (left unread: the
   * caller's own checks of its description and size report it). */
  if (!h->ref || h->bytes > room || !chorus_meta_equal(&h->meta, want)) return ncclSuccess;
  if ((res = fetch(c, h, dst)) != ncclSuccess) return res;
  *buf = dst;
  *read = 1;
  return ncclSuccess;
}

static ncclResult_t shm_recv_release(chorus_conn *cc) {
  shm_conn *c = (shm_conn *)cc;
  c->pos++;
  c->holding = 0;
  __atomic_store_n(&c->ctrl->head, c->pos, __ATOMIC_RELEASE);
  chorus_doorbell_ring(c->peer_db);
  return ncclSuccess;
}

static void shm_wait_info(chorus_conn *cc, int dir, chorus_waitset *ws) {
  (void)dir;
  chorus_waitset_add_db(ws, ((shm_conn *)cc)->my_db);
}

/* Whether a receiving connection holds messages not yet read: a peer
 * that posted its last one and exited is not lost until they are read
 * (a slow rank among many may wake only after its peer is gone). */
static int unread(const shm_conn *c) {
  return c->dir == CHORUS_DIR_RECV && posted(c);
}

static ncclResult_t shm_check(chorus_conn *cc) {
  shm_conn *c = (shm_conn *)cc;
  if (__atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE)) return peer_failed(c);
  if (chorus_proc_exited(c->peer_pid)) {
    if (unread(c)) return ncclSuccess; /* looked at after the exit: all it posted */
    snprintf(c->base.err, sizeof c->base.err, "rank %d (pid %d on this host) has exited",
             c->base.peer, (int)c->peer_pid);
    return ncclRemoteError;
  }
  if (c->life_fd >= 0) { /* nothing ever arrives on it: readable means closed */
    struct pollfd pf = {c->life_fd, POLLIN, 0};
    if (poll(&pf, 1, 0) > 0 && !unread(c)) {
      snprintf(c->base.err, sizeof c->base.err,
               "rank %d (in another PID namespace on this host) has exited: its life line "
               "closed",
               c->base.peer);
      return ncclRemoteError;
    }
  }
  return ncclSuccess;
}

static ncclResult_t shm_hear(chorus_conn *cc) {
  shm_conn *c = (shm_conn *)cc;
  return __atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE) ? peer_failed(c) : ncclSuccess;
}

static void shm_fail(chorus_conn *cc, const char *reason) {
  shm_conn *c = (shm_conn *)cc;
  if (__atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE)) return;
  snprintf(c->ctrl->reason, sizeof c->ctrl->reason, "%s", reason);
  __atomic_store_n(&c->ctrl->error, 1, __ATOMIC_RELEASE);
  chorus_doorbell_ring(c->peer_db);
}

static const chorus_conn_ops shm_ops = {
    .send_slot = shm_send_slot,
    .send_post = shm_send_post,
    .send_flush = shm_send_flush,
    .send_post_read = shm_send_post_read,
    .recv_slot = shm_recv_slot,
    .recv_release = shm_recv_release,
    .recv_read = shm_recv_read,
    .wait_info = shm_wait_info,
    .check = shm_check,
    .fail = shm_fail,
    .hear = shm_hear,
};

static void shm_destroy(void *p) {
  shm_state *s = p;
  if (!s) return;
  if (s->peer_seg)
    for (int r = 0; r < s->nranks; r++)
      if (r != s->rank) chorus_shm_close(&s->peer_seg[r]);
  chorus_shm_close(&s->own);
  if (s->life_fd)
    for (int r = 0; r < s->nranks; r++)
      if (s->life_fd[r] >= 0) close(s->life_fd[r]);
  chorus_free(s->life_fd);
  chorus_free(s->peer_seg);
  chorus_free(s->conns);
  chorus_free(s->is_peer);
  chorus_free(s->node.rank);
  chorus_free(s);
}

static void init_conn(shm_state *s, int peer, int ch, int dir) {
  shm_conn *c = conn_of(s, peer, ch, dir);
  void *seg = dir == CHORUS_DIR_SEND ? s->peer_seg[peer].base : s->own.base;
  void *peer_base = s->peer_seg[peer].base;
  uint32_t idx =
      (uint32_t)(dir == CHORUS_DIR_SEND ? pos_of(s, s->rank) : pos_of(s, peer)) * CHORUS_NCHANNELS +
      (uint32_t)ch;
  c->base.ops = &shm_ops;
  c->base.transport = "SHM";
  c->base.shared = 1;
  c->base.peer = peer;
  c->base.channel = ch;
  c->base.slot_bytes = s->slot_bytes;
  c->ctrl = fifo_at(s, seg, idx);
  c->data = data_at(s, seg, idx);
  c->nslots = s->nslots;
  c->dir = dir;
  c->peer_db = &((seg_header *)peer_base)->db;
  c->my_db = &((seg_header *)s->own.base)->db;
  const seg_header *ph = peer_base;
  c->peer_pid = ph->pid_ns == chorus_proc_pid_ns() ? ph->pid : 0;
  c->life_fd = s->life_fd[peer];
  if (dir == CHORUS_DIR_RECV && ch == CHORUS_CH_COLL && peer != s->rank)
    c->base.heard = board_at(peer_base);
}

/* The bootstrap tag of a life line (no other connection uses it). */
#define LIFE_TAG 0x6c6966656c696e65ull /* "lifeline" */

/* A life line to every peer of another PID namespace (the test is
 * symmetric, so both ends make it): the lower rank connects. */
static ncclResult_t life_lines(shm_state *s, const chorus_transport_ctx *ctx, const int *peers,
                               int npeers) {
  const uint64_t my_ns = chorus_proc_pid_ns();
  for (int pass = 0; pass < 2; pass++) /* connects to higher ranks first, then accepts */
    for (int i = 0; i < npeers; i++) {
      const int p = peers[i];
      if (p == s->rank || ((const seg_header *)s->peer_seg[p].base)->pid_ns == my_ns) continue;
      if (pass == 0 && p > s->rank)
        CHECK(chorus_bootstrap_connect(ctx->bs, p, LIFE_TAG, &s->life_fd[p]));
      if (pass == 1 && p < s->rank)
        CHECK(chorus_bootstrap_accept(ctx->bs, p, LIFE_TAG, &s->life_fd[p]));
    }
  return ncclSuccess;
}

/* Why this rank cannot read rank r's memory (NULL: it can). Its own
 * process: it can. Another: if
 * it is in our PID namespace (else its pid names some other process here)
 * and process_vm_readv of its segment's header, at the address where r
 * maps it, gives that header back (ptrace rules, seccomp and Yama can
 * forbid it). */
static const char *cannot_read(const shm_state *s, int r) {
  const seg_header *h = s->peer_seg[r].base;
  if (s->node.rank[r].same_process) return NULL;
  if (h->pid_ns != chorus_proc_pid_ns() || h->pid <= 0) return "it is in another PID namespace";
  uint64_t got[2] = {0, 0};
  struct iovec mine = {got, sizeof got}, theirs = {(void *)(uintptr_t)h->self, sizeof got};
  const ssize_t n = process_vm_readv(h->pid, &mine, 1, &theirs, 1, 0);
  if (n < 0) return strerror(errno);
  if (n != (ssize_t)sizeof got || memcmp(got, h, sizeof got) != 0) /* our mapping of it */
    return "process_vm_readv read something else";
  return NULL;
}

/* A rank's verdict on peer reads, and its read slowdown x 100 (0: not
 * measured, every peer is in its process). */
typedef struct read_verdict {
  uint8_t ok;
  uint8_t pad;
  uint16_t slowdown_x100;
} read_verdict;

/* Peer reads, where every rank can read every other's memory: each rank
 * probes its peers, then all take the verdict of all (a bootstrap
 * allgather), and the mean of the slowdowns measured, so every rank plans
 * alike. (NCCL_ALGO=^zerocopy leaves them unused.) */
static ncclResult_t agree_peer_read(shm_state *s, chorus_bootstrap *bs) {
  read_verdict *v = chorus_calloc((size_t)s->nranks, sizeof *v);
  if (!v) return chorus_error(ncclSystemError, "SHM transport: out of memory");
  const char *why = NULL;
  int other_process = 0;
  for (int r = 0; r < s->nranks && !why; r++) {
    if (r == s->rank) continue;
    other_process |= !s->node.rank[r].same_process;
    if ((why = cannot_read(s, r)))
      INFO(CHORUS_SHM | CHORUS_INIT,
           "SHM transport: cannot read rank %d's memory (pid %d): %s; no peer reads", r,
           (int)s->node.rank[r].pid, why);
  }
  v[s->rank].ok = why == NULL;
  if (!why && other_process) {
    const double x = chorus_shm_read_slowdown() * 100.0 + 0.5;
    v[s->rank].slowdown_x100 = (uint16_t)(x < 1 ? 1 : x > UINT16_MAX ? UINT16_MAX : x);
  }
  ncclResult_t res = chorus_bootstrap_allgather(bs, v, sizeof *v);
  s->node.peer_read = res == ncclSuccess;
  uint64_t sum = 0, n = 0;
  for (int r = 0; r < s->nranks && s->node.peer_read; r++) {
    s->node.peer_read = v[r].ok;
    sum += v[r].slowdown_x100;
    n += v[r].slowdown_x100 > 0;
  }
  s->node.read_slowdown = s->node.peer_read && n ? (double)sum / (100.0 * (double)n) : 0;
  if (s->node.read_slowdown > 0 && s->rank == 0)
    INFO(CHORUS_SHM | CHORUS_INIT | CHORUS_TUNING,
         "SHM transport: peer reads between processes take %.2fx memcpy's time (the ranks' "
         "mean at 1 MiB): zerocopy priced by it",
         s->node.read_slowdown);
  chorus_free(v);
  return res;
}

/* Where peer reads are agreed, messages between processes may go by
 * reference (send_post_read, recv_read) unless reads cost more than the
 * two copies through the slots (read slowdown over CHORUS_READ_DEAR):
 * measured on a guest whose reads took 4.2x memcpy's time, Send/Recv
 * (ring shift) by reference against slots at 64-256 KiB: 0.35-0.52x the
 * speed on 2 and 4 processes, from 1 MiB 0.5-0.7x. Ranks of this
 * process keep to slots, read where the sender wrote them. */
static void read_by_peers(shm_state *s, const int *peers, int npeers) {
  const int dear = s->node.read_slowdown > CHORUS_READ_DEAR;
  int told = 0;
  for (int i = 0; i < npeers; i++) {
    const int p = peers[i];
    if (p == s->rank || s->node.rank[p].same_process) continue;
    if (!told++)
      INFO(CHORUS_SHM | CHORUS_INIT, "SHM transport: rank %d sends to other processes %s", s->rank,
           dear ? "through the slots (peer reads cost over two copies here)"
                : "by reference from 32-64 KiB (xfer.h)");
    if (dear) return;
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      shm_conn *in = conn_of(s, p, ch, CHORUS_DIR_RECV);
      if (!in->peer_pid) continue;
      in->base.peer_reads = 1;
      conn_of(s, p, ch, CHORUS_DIR_SEND)->base.peer_reads = 1;
    }
  }
}

static ncclResult_t shm_setup(const chorus_transport_ctx *ctx, const int *peers, int npeers,
                              void **out) {
  *out = NULL;
  char err[512];
  ncclResult_t res = ncclSuccess;
  seg_record *rec = NULL;
  shm_state *s = chorus_calloc(1, sizeof *s);
  if (!s) return chorus_error(ncclSystemError, "SHM transport: out of memory");
  s->rank = ctx->rank;
  s->nranks = ctx->nranks;
  s->topo = ctx->topo;
  s->full = npeers > 1;
  if (s->full && npeers != ctx->topo->nlocal) {
    res = chorus_error(ncclInternalError, "SHM transport: peers must be all ranks of the host");
    goto fail;
  }
  s->nfifo = (uint32_t)(s->full ? ctx->topo->nlocal : 1) * CHORUS_NCHANNELS;
  s->has_node = ctx->stage_bytes > 0 && ctx->nstages > 0 && npeers == ctx->nranks;
  s->stage_bytes = ctx->stage_bytes;
  s->nstages = CHORUS_MIN(ctx->nstages, CHORUS_NODE_MAX_BUFS);
  s->nslots = (uint32_t)CHORUS_MIN(ctx->nslots, MAX_SLOTS);
  s->slot_bytes = ctx->slot_bytes;
  s->ctrl_bytes = page_up((size_t)s->nfifo * sizeof(fifo_ctrl));
  s->peer_seg = chorus_calloc((size_t)s->nranks, sizeof *s->peer_seg);
  s->conns = chorus_calloc((size_t)s->nranks * CHORUS_NCHANNELS * 2, sizeof *s->conns);
  s->is_peer = chorus_calloc((size_t)s->nranks, 1);
  s->node.rank = chorus_calloc((size_t)s->nranks, sizeof *s->node.rank);
  s->life_fd = chorus_malloc((size_t)s->nranks * sizeof *s->life_fd);
  rec = chorus_calloc((size_t)s->nranks, sizeof *rec);
  if (s->life_fd)
    for (int r = 0; r < s->nranks; r++) s->life_fd[r] = -1;
  if (!s->peer_seg || !s->conns || !s->is_peer || !s->node.rank || !s->life_fd || !rec) {
    res = chorus_error(ncclSystemError, "SHM transport: out of memory");
    goto fail;
  }
  int swept = chorus_shm_sweep_stale();
  if (swept) INFO(CHORUS_SHM, "SHM transport: removed %d segment(s) left by dead processes", swept);
  /* This rank's segment (always: the self-connection lives in it). */
  res = chorus_shm_create(&s->own, "fifo", seg_size(s), err, sizeof err);
  if (res != ncclSuccess) {
    res = chorus_error(res, "SHM transport: %s", err);
    goto fail;
  }
  seg_header *hdr = s->own.base;
  hdr->magic = SEG_MAGIC;
  hdr->rank = s->rank;
  hdr->pid = (int32_t)getpid();
  hdr->pid_ns = chorus_proc_pid_ns();
  hdr->self = (uint64_t)(uintptr_t)s->own.base;
  hdr->nfifo = s->nfifo;
  hdr->nslots = s->nslots;
  hdr->slot_bytes = s->slot_bytes;
  chorus_doorbell_init_fenced(&hdr->db); /* before the peers map it */
  s->peer_seg[s->rank] = s->own;         /* same mapping; never closed twice (see destroy) */
  snprintf(rec[s->rank].name, sizeof rec[s->rank].name, "%s", s->own.name);
  rec[s->rank].size = seg_size(s);
  CHECK_GOTO(chorus_bootstrap_allgather(ctx->bs, rec, sizeof *rec), res, fail);
  for (int i = 0; i < npeers; i++) {
    int p = peers[i];
    s->is_peer[p] = 1;
    if (p == s->rank) continue;
    res = chorus_shm_open(&s->peer_seg[p], rec[p].name, rec[p].size, err, sizeof err);
    if (res == ncclSuccess && ((seg_header *)s->peer_seg[p].base)->magic != SEG_MAGIC)
      res = chorus_errmsg(err, sizeof err, ncclSystemError, "segment %s is not ours", rec[p].name);
    /* A rank whose init failed removes its segment, and so does each rank
     * that failed in turn for want of it: the first cause comes from a
     * neighbour in a moment, and names the rank that failed first. */
    if (res != ncclSuccess && chorus_bootstrap_hear_failure(ctx->bs) == ncclRemoteError) {
      res = ncclRemoteError;
      goto fail;
    }
    if (res != ncclSuccess) {
      res = chorus_error(res,
                         "SHM transport: cannot map the segment of rank %d (%s): %s. Ranks that "
                         "look like one host must share /dev/shm; set NCCL_SHM_DISABLE=1 or "
                         "NCCL_HOSTID to tell them apart",
                         p, ctx->topo->info[p].hostname, err);
      goto fail;
    }
  }
  CHECK_GOTO(life_lines(s, ctx, peers, npeers), res, fail);
  for (int i = 0; i < npeers; i++)
    for (int ch = 0; ch < CHORUS_NCHANNELS; ch++) {
      init_conn(s, peers[i], ch, CHORUS_DIR_SEND);
      init_conn(s, peers[i], ch, CHORUS_DIR_RECV);
    }
  if (s->has_node) init_node(s);
  if (s->has_node) CHECK_GOTO(agree_peer_read(s, ctx->bs), res, fail);
  if (s->has_node && s->node.peer_read) read_by_peers(s, peers, npeers);
  chorus_free(rec);
  INFO(CHORUS_SHM | CHORUS_INIT,
       "SHM transport: %d peer(s), %u slots of %zu bytes per FIFO, node memory %s (%d x %zu "
       "bytes), peer reads %s",
       npeers, s->nslots, s->slot_bytes, s->has_node ? "on" : "off", s->nstages, s->stage_bytes,
       s->has_node && s->node.peer_read ? "on" : "off");
  *out = s;
  return ncclSuccess;
fail:
  chorus_free(rec);
  shm_destroy(s);
  return res;
}

static ncclResult_t shm_finish(void *p) {
  shm_state *s = p;
  chorus_shm_unlink(&s->own);
  return ncclSuccess;
}

static chorus_conn *shm_conn_get(void *p, int peer, int ch, int dir) {
  shm_state *s = p;
  if (!s->is_peer[peer]) return NULL;
  return &conn_of(s, peer, ch, dir)->base;
}

/* A sequence lock (coll/calls.c reads it): `posted` is set busy, the
 * entry written, then `posted` set. */
static void shm_post_call(void *p, const chorus_call_entry *e) {
  shm_state *s = p;
  chorus_call_entry *mine = &board_at(s->own.base)[(e->posted - 1) % CHORUS_NODE_CALLS];
  /* No doorbell: a rank waits for a post only calls later (calls.h), by
   * when it is there, and naps are short. */
  chorus_call_entry_write(mine, e->posted, e->chain, &e->meta);
}

static ncclResult_t shm_progress(void *p) {
  (void)p;
  return ncclSuccess;
}

static void shm_state_wait_info(void *p, chorus_waitset *ws) {
  (void)p;
  (void)ws;
}

static chorus_node *shm_node(void *p) {
  shm_state *s = p;
  return s->has_node ? &s->node : NULL;
}

static chorus_doorbell *shm_doorbell(void *p) {
  shm_state *s = p;
  return &((seg_header *)s->own.base)->db;
}

const chorus_transport chorus_transport_shm = {
    .name = "SHM",
    .setup = shm_setup,
    .finish = shm_finish,
    .conn = shm_conn_get,
    .progress = shm_progress,
    .wait_info = shm_state_wait_info,
    .doorbell = shm_doorbell,
    .post_call = shm_post_call,
    .node = shm_node,
    .destroy = shm_destroy,
};

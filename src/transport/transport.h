/*
 * transport.h - the contract between schedules and transports.
 *
 * A connection (chorus_conn) carries an ordered stream of messages from one
 * rank to one peer on one channel. Channels are independent: collectives use
 * CHORUS_CH_COLL and point-to-point calls CHORUS_CH_P2P, so a pending
 * collective can never block a send/recv pair or the reverse.
 *
 * Messages live in slots of at most slot_bytes. Both sides work in place:
 *
 *   sender                              receiver
 *   send_slot(c, &buf, &cap)            recv_slot(c, &buf, &n, &meta)
 *   ... write up to cap bytes ...       ... read n bytes in place ...
 *   send_post(c, n, &meta)              recv_release(c)
 *
 * so a schedule reduces straight into a send slot and straight out of a
 * receive slot, and no interface forces an extra copy. Where bytes only
 * move, a transport that copies them anyway (sockets) can also send from
 * and receive into the caller's memory (send_post_ref, recv_expect). Every message carries
 * a chorus_msg_meta that describes the call it belongs to; receivers compare
 * it with their own call, which is how mismatched calls across ranks are
 * caught and named instead of hanging or corrupting data.
 *
 * All data-path functions are non-blocking and return:
 *   ncclSuccess     done (for send_slot/recv_slot: the slot is yours);
 *   ncclInProgress  not possible yet, call again later;
 *   ncclRemoteError the peer failed or the connection broke; c->err says how.
 * At most one send slot and one receive slot are held per connection at a
 * time. Buffers returned stay valid until send_post / recv_release.
 *
 * Waiting: when nothing can progress the executor asks each blocked
 * connection what to sleep on (wait_info) and sleeps; transports wake it by
 * ringing the rank's doorbell (shared memory) or through the socket (TCP).
 */
#ifndef CHORUS_TRANSPORT_TRANSPORT_H
#define CHORUS_TRANSPORT_TRANSPORT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "nccl.h"
#include "topo/topo.h"
#include "util/doorbell.h"

enum { CHORUS_CH_COLL = 0, CHORUS_CH_P2P = 1, CHORUS_NCHANNELS = 2 };
enum { CHORUS_DIR_SEND = 0, CHORUS_DIR_RECV = 1 };

/* Describes the call a message belongs to (32 bytes on the wire). */
typedef struct chorus_msg_meta {
  uint64_t seq;   /* the call's sequence number on its communicator and channel */
  uint64_t count; /* the call's element count */
  uint32_t call;  /* function | datatype << 8 | algorithm << 16 */
  uint32_t redop; /* reduction (NCCL value) or 0 */
  int32_t root;   /* root or peer, -1 when none */
  uint32_t flags;
} chorus_msg_meta;

/* Whether two descriptions name the same call (flags aside). */
static inline int chorus_meta_equal(const chorus_msg_meta *a, const chorus_msg_meta *b) {
  return a->seq == b->seq && a->count == b->count && a->call == b->call && a->redop == b->redop &&
         a->root == b->root;
}

/* Calls a call board holds (coll/calls.h): a rank's last posted calls. */
#define CHORUS_NODE_CALLS 128
/* A transport may hold a posted call's entry back (to send several in one
 * write) until this rank's calls are this many further on, or until a call
 * stalls (stalled below): the checks that wait for peers' entries
 * (coll/calls.h) compare only calls at least this far back. */
#define CHORUS_CALLS_HELD 16

/* An entry of the call board (coll/calls.c): the description of call
 * k, at calls[k % CHORUS_NODE_CALLS]; `posted` is k + 1 once it is
 * complete, UINT64_MAX while its owner rewrites it, 0 before any call. A
 * line of its own: a peer's check of one call reads one line. */
typedef struct chorus_call_entry {
  uint64_t posted;
  uint64_t chain; /* a hash of the owner's posted calls 0..k, in order */
  chorus_msg_meta meta;
  uint64_t pad[2]; /* 64 bytes: one line in a page-aligned board */
} chorus_call_entry;

/* A board entry is a sequence lock: the writer marks `posted` busy, writes
 * the words, then sets `posted` (release); a reader reads `posted`, the
 * words, and `posted` again, and believes the words only if it did not
 * move. The words are accessed as relaxed atomics, so a reader racing a
 * writer gets stale words, never undefined ones. ThreadSanitizer models
 * no fences (GCC refuses them under it): its builds order with a
 * read-modify-write and a sequentially consistent load instead. */
static inline void chorus_call_entry_write(chorus_call_entry *e, uint64_t posted, uint64_t chain,
                                           const chorus_msg_meta *m) {
#if defined(__SANITIZE_THREAD__)
  (void)__atomic_exchange_n(&e->posted, UINT64_MAX, __ATOMIC_ACQ_REL);
#else
  __atomic_store_n(&e->posted, UINT64_MAX, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
  __atomic_store_n(&e->chain, chain, __ATOMIC_RELAXED);
  __atomic_store_n(&e->meta.seq, m->seq, __ATOMIC_RELAXED);
  __atomic_store_n(&e->meta.count, m->count, __ATOMIC_RELAXED);
  __atomic_store_n(&e->meta.call, m->call, __ATOMIC_RELAXED);
  __atomic_store_n(&e->meta.redop, m->redop, __ATOMIC_RELAXED);
  __atomic_store_n(&e->meta.root, m->root, __ATOMIC_RELAXED);
  __atomic_store_n(&e->meta.flags, m->flags, __ATOMIC_RELAXED);
  __atomic_store_n(&e->posted, posted, __ATOMIC_RELEASE);
}

/* Call k from entry e: 1 (into *m and *chain), 0 while e holds no post of
 * k (not yet, or being rewritten), -1 when its owner has moved on to a
 * later call there. */
static inline int chorus_call_entry_read(const chorus_call_entry *e, uint64_t k, chorus_msg_meta *m,
                                         uint64_t *chain) {
  const uint64_t before = __atomic_load_n(&e->posted, __ATOMIC_ACQUIRE);
  if (before == UINT64_MAX || before < k + 1) return 0;
  if (before > k + 1) return -1;
  *chain = __atomic_load_n(&e->chain, __ATOMIC_RELAXED);
  m->seq = __atomic_load_n(&e->meta.seq, __ATOMIC_RELAXED);
  m->count = __atomic_load_n(&e->meta.count, __ATOMIC_RELAXED);
  m->call = __atomic_load_n(&e->meta.call, __ATOMIC_RELAXED);
  m->redop = __atomic_load_n(&e->meta.redop, __ATOMIC_RELAXED);
  m->root = __atomic_load_n(&e->meta.root, __ATOMIC_RELAXED);
  m->flags = __atomic_load_n(&e->meta.flags, __ATOMIC_RELAXED);
#if defined(__SANITIZE_THREAD__)
  const uint64_t after = __atomic_load_n(&e->posted, __ATOMIC_SEQ_CST);
#else
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  const uint64_t after = __atomic_load_n(&e->posted, __ATOMIC_RELAXED);
#endif
  return after == before ? 1 : -1;
}

#define CHORUS_WAIT_MAX_FDS 64
#define CHORUS_WAIT_MAX_DBS 4

/* What a blocked executor may sleep on. */
typedef struct chorus_waitset {
  chorus_doorbell *db[CHORUS_WAIT_MAX_DBS];
  int ndb;
  struct pollfd fds[CHORUS_WAIT_MAX_FDS];
  int nfds;
  int must_poll; /* something moves only when polled (a network plugin): nap briefly */
} chorus_waitset;

void chorus_waitset_add_db(chorus_waitset *ws, chorus_doorbell *db);
void chorus_waitset_add_fd(chorus_waitset *ws, int fd, short events);

/* Bytes of a failure's description passed between ranks. */
#define CHORUS_REASON_MAX 320

typedef struct chorus_conn chorus_conn;

/* A profiler's handle of one message's step (coll/steps.h), which a
 * network plugin gets with the message (NCCL's phandle) and hands back to
 * report an event of its own under it; step NULL: the step is over. */
typedef struct chorus_step_ref {
  void *ctx;
  void *step;
} chorus_step_ref;

typedef struct chorus_conn_ops {
  ncclResult_t (*send_slot)(chorus_conn *c, void **buf, size_t *cap);
  ncclResult_t (*send_post)(chorus_conn *c, size_t bytes, const chorus_msg_meta *meta);
  /* ncclSuccess once every posted message can reach the peer without further
   * help from this rank (shared memory: at once; TCP: handed to the kernel). */
  ncclResult_t (*send_flush)(chorus_conn *c);
  ncclResult_t (*recv_slot)(chorus_conn *c, const void **buf, size_t *bytes, chorus_msg_meta *meta);
  ncclResult_t (*recv_release)(chorus_conn *c);
  /* Optional, for transports that copy a message out of this process (NET),
   * NULL where the peer reads send slots in place (SHM). Posts the slot that
   * send_slot gave as `bytes` taken from src rather than from the slot: no
   * copy into it. src must stay as it is until send_flush has succeeded. */
  ncclResult_t (*send_post_ref)(chorus_conn *c, const void *src, size_t bytes,
                                const chorus_msg_meta *meta);
  /* Optional (shared memory between processes that may read each other's
   * memory: chorus_conn.peer_reads). Posts the slot that send_slot gave as
   * a message the peer copies straight out of src in this process, with
   * process_vm_readv: no copy into the slot. src must stay as it is until
   * send_flush has succeeded, which it does once the peer has read it. */
  ncclResult_t (*send_post_read)(chorus_conn *c, const void *src, size_t bytes,
                                 const chorus_msg_meta *meta);
  /* Optional, with send_post_read: recv_slot, except that a message sent
   * by reference that belongs to the call `want` and fits `room` bytes is
   * first copied to dst, which is then its buffer (*read = 1). One that
   * does not is returned unread, for the caller's checks to report;
   * recv_slot refuses them. */
  ncclResult_t (*recv_read)(chorus_conn *c, void *dst, size_t room, const chorus_msg_meta *want,
                            const void **buf, size_t *bytes, chorus_msg_meta *meta, int *read);
  /* Optional, as send_post_ref. Asks that the message `ahead` places after
   * the next one recv_slot returns be received straight into dst, if it has
   * exactly `bytes` bytes and belongs to the call `meta`; recv_slot then
   * returns dst as its buffer. Too late (its payload is arriving already)
   * or not matching, it arrives in a slot as usual. Returns 0 when `ahead`
   * is beyond the messages the connection holds at once (ask again after a
   * release), else 1. */
  int (*recv_expect)(chorus_conn *c, unsigned ahead, void *dst, size_t bytes,
                     const chorus_msg_meta *meta);
  /* Optional (a network that takes GPU memory itself: chorus_conn.dev_mem).
   * Moves `bytes` of device memory at buf (sending: from it, receiving:
   * into it) past the messages of the connection, all of it to the peer's
   * one matching call; the message before it says how many bytes come
   * (coll/xfer.c). Call again while it returns ncclInProgress; one at a
   * time per connection, with the same arguments until done. */
  ncclResult_t (*dev_move)(chorus_conn *c, void *buf, size_t bytes);
  /* Optional (networks), for a profiler plugin's steps (coll/steps.h):
   * messages posted on this sending connection so far, and in *taken
   * those the network has taken whole, in order. */
  uint64_t (*send_count)(chorus_conn *c, uint64_t *taken);
  /* Adds what the owner should sleep on while this connection blocks it. */
  void (*wait_info)(chorus_conn *c, int dir, chorus_waitset *ws);
  /* Slow checks run while a wait drags on: is the peer still alive?
   * ncclSuccess or ncclRemoteError with c->err filled. */
  ncclResult_t (*check)(chorus_conn *c);
  /* Marks the connection failed and lets the peer know (best effort), so a
   * rank that fails a collective makes its peers fail fast instead of
   * waiting for their timeouts. reason is shown on the peer verbatim: the
   * first cause (see `relayed`). */
  void (*fail)(chorus_conn *c, const char *reason);
  /* Receiving collective connections: takes in what the peer sent so far,
   * as far as there is room, so that its posted calls reach `heard`
   * (cheap; no liveness check). ncclRemoteError once the peer failed. */
  ncclResult_t (*hear)(chorus_conn *c);
} chorus_conn_ops;

struct chorus_conn {
  const chorus_conn_ops *ops;
  const char *transport; /* "SHM", "NET" */
  int shared;            /* send slots are memory the peer reads in place (SHM) */
  int peer_reads;        /* sending: send_post_read may be used (the peer reads our
                            memory); receiving: the peer may send that way (recv_read) */
  int dev_mem;           /* dev_move may be used: GPU buffers go to the network as they are */
  int network;           /* its messages cross a network (NCCL's proxy events, coll/steps.h) */
  int peer;
  int channel;
  size_t slot_bytes;
  char err[CHORUS_REASON_MAX];
  /* err is a failure the peer passed on (its `fail` reason), not one of
   * this connection: the first cause, to be passed on unchanged. */
  int relayed;
  /* Receiving collective connections: the calls the peer posted on its
   * call board (coll/calls.h), read in place (shared memory) or as its
   * notes arrived (TCP). */
  const chorus_call_entry *heard;
  /* Owned by the schedules, not the transport: point-to-point calls on one
   * connection take tickets in call order and use it one after another. */
  uint64_t tickets_issued, ticket_serving;
  /* Payload bytes posted (sending) or taken (receiving) on it, counted by
   * the schedules' primitives (coll/prims.c) for the state dump, which
   * reads them from another thread. */
  uint64_t bytes_moved;
  /* Owned by coll/steps.c, freed with the connection: the steps of its
   * messages in flight (a ring, by message number), and the step of the
   * next message posted, which a network plugin's transport takes along
   * with it (NULL: none). */
  chorus_step_ref *step_refs;
  chorus_step_ref *step_next;
};

/*
 * Node memory: when every rank of a communicator shares one host, the
 * shared-memory transport also gives each rank a staging area that all the
 * others can read, plus three progress counters per rank. Schedules built on
 * it (the oneshot and twoshot schedules, coll/node.c) let every rank read the others'
 * data in place instead of passing it hop by hop.
 *
 * Counters count chunks since the communicator was created; each is written
 * only by its owner (release) and read by the others (acquire):
 *   posted    the owner's stage holds its data for chunks < posted
 *   reduced   the owner finished its share of chunks < reduced
 * A chunk g lives in stage buffer g % nbuf. Every rank finishes reading
 * chunk h before it posts chunk h+1, so once every rank has posted chunk
 * g-nbuf+1, nobody reads chunk g-nbuf any more and its buffer may be
 * overwritten: no separate "consumed" counter is needed. After moving a
 * counter the owner rings every peer's doorbell.
 */
#define CHORUS_NODE_MAX_BUFS 16

/* Small calls on node memory: the call's description, its data and a
 * flag in cache lines of their own, so that one line a peer just wrote
 * carries all a rank waits for. Line 0 holds the description and the
 * first CHORUS_FAST_HEAD bytes, each further line CHORUS_FAST_BODY more;
 * `flag` is the chunk number + 1 whose data the line holds, stored after
 * the rest of the line (release). CHORUS_FAST_SETS sets of lines per
 * rank, chunk g in set g % CHORUS_FAST_SETS, so a rank that waits for
 * nobody (a Broadcast's root) runs up to that many calls ahead: where
 * ranks outnumber the cores, a rank that shares its core then yields it
 * about once per that many calls, not once per call (132 KiB a rank).
 * Communicators of at most CHORUS_FAST_RANKS ranks use them, for calls
 * where no rank writes more than chorus_fast_max. A set's stride is not a
 * power of two, so that the sets' first lines spread over the L1 cache's
 * sets: 32 lines made 2-rank AllReduce of 8-32 B 4-8% slower than 8, 33
 * level with it and 1.1-1.2x faster at 128 B (AMD guest). */
#define CHORUS_FAST_LINES        33
#define CHORUS_FAST_SETS         64
#define CHORUS_FAST_RANKS        8
#define CHORUS_FAST_HEAD         24
#define CHORUS_FAST_BODY         56
#define CHORUS_FAST_BYTES(lines) (CHORUS_FAST_HEAD + ((lines)-1) * CHORUS_FAST_BODY)
#define CHORUS_FAST_MAX          CHORUS_FAST_BYTES(CHORUS_FAST_LINES)

/* The most a rank writes to its lines for a call (0: no lines). With a
 * core per rank, 8 lines (416 B): from 1 KiB the lines' flags cost more
 * than a stage and its counter (2 ranks, AMD guest: 0.67-0.87x the stage
 * path's speed at 1 KiB, level at 256 B). Where ranks outnumber the
 * cores, every line: the stage path's buffer or two ahead costs a yield
 * of the core or more per call (Scatter, Broadcast and Reduce of 512 B-1
 * KiB on 4 ranks 2.2-13.7x faster on lines). */
static inline size_t chorus_fast_max(int nranks, int crowded) {
  if (nranks > CHORUS_FAST_RANKS) return 0;
  return crowded ? CHORUS_FAST_MAX : CHORUS_FAST_BYTES(8);
}

/* The calls' descriptions (chorus_node_rank.meta), chunk g at g %
 * CHORUS_NODE_META_SLOTS: as deep as the farthest any rank may run ahead
 * (stage buffers or fast-line sets). */
#define CHORUS_NODE_META_SLOTS CHORUS_FAST_SETS
_Static_assert(CHORUS_NODE_META_SLOTS >= CHORUS_NODE_MAX_BUFS, "meta ring under the stages");

typedef struct chorus_fast_line {
  uint64_t flag;
  union {
    struct {
      chorus_msg_meta meta;
      char data[CHORUS_FAST_HEAD];
    } head;
    char data[CHORUS_FAST_BODY];
  } u;
} __attribute__((aligned(64))) chorus_fast_line;

typedef struct chorus_node_rank {
  uint64_t *posted, *reduced;
  chorus_msg_meta *meta; /* per chunk g, at g % CHORUS_NODE_META_SLOTS: the
                            call it is part of, written before `posted`
                            (so read after it) */
  uint32_t *failed;      /* set (release) by the owner when it fails or aborts */
  char *reason;          /* CHORUS_NODE_REASON bytes, written before `failed` */
  char *stage;           /* nbuf buffers of `chunk` bytes */
  chorus_doorbell *db;
  /* Peer reads (chorus_node.peer_read): per stage buffer, the addresses
   * in the owner's memory that the call it serves reads from (its input;
   * its output, for reductions that gather finished shares), written
   * before `posted`; the owner's pid, and whether it is this process. */
  uint64_t *addr, *addr_out;
  /* Broadcast by peer reads, per stage buffer: the leading bytes of each
   * reader's output that the root writes itself (0: none), written
   * before `posted`. */
  uint64_t *lead;
  int32_t pid;
  int same_process;
  chorus_fast_line *fast; /* CHORUS_FAST_SETS x CHORUS_FAST_LINES */
  /* The owner's `posted` as this rank last read it (its own memory):
   * counters only grow, so a wait it already covers reads nothing. */
  uint64_t seen_posted;
} chorus_node_rank;

#define CHORUS_NODE_REASON CHORUS_REASON_MAX

typedef struct chorus_node {
  int nranks; /* every rank of the communicator, indexed by rank */
  chorus_node_rank *rank;
  size_t chunk; /* bytes per stage buffer */
  int nbuf;
  uint64_t next_chunk;   /* this rank's next chunk number (same on all ranks) */
  uint64_t staged_bytes; /* written into this rank's stage for the peers (state dump) */
  /* Every rank can read every other rank's memory: memcpy within a
   * process, process_vm_readv between processes (probed at set-up and
   * agreed by all ranks). */
  int peer_read;
  /* Where peer reads cross processes: how many times slower they are than
   * memcpy (transport/shm/readrate.h), the ranks' mean (0: none cross). */
  double read_slowdown;
  /* The chunk number + 1 of this rank's last small AllReduce on fast
   * lines (0: none yet). */
  uint64_t last_fast;
  /* This rank's own copies of the peers' lines, whole, for a reduction
   * (kept here, warm, rather than 14 KiB of every call's stack). */
  char fast_copy[CHORUS_FAST_RANKS][CHORUS_FAST_MAX];
} chorus_node;

/* Socket threads per rank that a machine of `cpus` CPUs has room for with
 * `ranks` ranks on it: all their threads together take half the CPUs at
 * most, the rest left to the ranks' own threads and the kernel's TCP work
 * (the measurements: net.c, pumps_that_fit). */
static inline int chorus_socket_threads_room(long cpus, long ranks) {
  const long room = cpus / (2 * ranks) - 1;
  return room > 0 ? (int)room : 0;
}

/* A transport sets up the connections of one communicator to the peers the
 * core assigned to it. */
typedef struct chorus_transport_ctx {
  chorus_bootstrap *bs;
  const chorus_topo *topo;
  int rank, nranks;
  size_t slot_bytes;
  int nslots;
  size_t stage_bytes; /* node memory: bytes per stage buffer (0: none) */
  int nstages;        /* node memory: buffers per rank */
  int nstreams;       /* TCP sockets per peer and channel */
  int nthreads;       /* threads moving them (0: the executor) */
  /* The threads move only what the executor hands them per call (hint):
   * NCCL_SOCKET_NTHREADS=auto. Else they move every call's bytes. */
  int threads_on_hint;
  /* A network plugin's network (transport/plugin/netplug.h) for
   * chorus_transport_pnet, which takes it over; NULL for the others. */
  struct chorus_net *net;
} chorus_transport_ctx;

typedef struct chorus_transport {
  const char *name;
  /* Collective over the communicator: every rank calls every transport's
   * setup in the same order, with the peers (possibly none, possibly itself)
   * it reaches through this transport; the assignment must be symmetric.
   * Blocks (bounded by the bootstrap deadline). On failure *state is NULL. */
  ncclResult_t (*setup)(const chorus_transport_ctx *ctx, const int *peers, int npeers,
                        void **state);
  /* Second collective phase after every transport's setup succeeded on every
   * rank (e.g. remove shared-memory names once all peers mapped them). */
  ncclResult_t (*finish)(void *state);
  /* The connection to `peer` for channel and direction (NULL if not ours). */
  chorus_conn *(*conn)(void *state, int peer, int channel, int dir);
  /* Moves data that needs this rank's help (TCP output); called by the
   * executor on every pass. */
  ncclResult_t (*progress)(void *state);
  /* Adds what the executor must also wake for while it sleeps (TCP output
   * waiting for socket space). */
  void (*wait_info)(void *state, chorus_waitset *ws);
  /* The doorbell peers ring to wake this rank, if the transport has one. */
  chorus_doorbell *(*doorbell)(void *state);
  /* Posts e, this rank's entry for one call, on its call board for the
   * peers this transport reaches (coll/calls.h): in shared memory, or as a
   * note on a socket beside the data's. Never blocks. */
  void (*post_call)(void *state, const chorus_call_entry *e);
  /* Optional (NULL: none): a call of sequence number seq that is on the
   * board but not posted starts (entries held back age by calls). */
  void (*advance)(void *state, uint64_t seq);
  /* Node memory (see above) when this transport reaches every rank through
   * shared memory, else NULL. */
  chorus_node *(*node)(void *state);
  /* Optional (NULL: none): the calls the executor runs now only move
   * bytes, in messages large enough to hand to helper threads (moves = 1),
   * or they reduce on the way or are small (0). A hint for speed: any
   * thread may move any message either way. */
  void (*hint)(void *state, int moves);
  /* Optional (NULL: none): the executor's calls have waited a while
   * (exec.c, CHORUS_NOTES_DUE_NS): what the transport holds back to send together
   * (the NET transport's notes) goes now. */
  void (*stalled)(void *state);
  /* Frees everything; safe on a half-built state. */
  void (*destroy)(void *state);
} chorus_transport;

extern const chorus_transport chorus_transport_shm;
extern const chorus_transport chorus_transport_net;
/* Ranks on other hosts through a network plugin (transport/plugin/pnet.c),
 * in the NET transport's place when one is in use. */
extern const chorus_transport chorus_transport_pnet;

/* For tests: the socket of a TCP state (chorus_transport_net's) that
 * carries notes to and from peer, or -1. */
int chorus_net_notes_fd(void *state, int peer);

#endif

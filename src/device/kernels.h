/*
 * kernels.h - the plain-C launcher interface of the GPU collective kernels.
 *
 * Host code never includes a CUDA header: it fills these structs and calls
 * the launchers, which enqueue one kernel on the caller's stream and return
 * at once. Every launcher returns 0 on success, or -1 with a message for
 * chorus_dev_error().
 *
 * Synchronisation lives in the kernels: each rank's
 * arena holds per-block epoch counters that only the kernels advance, and
 * every 16-byte "LL" line carries its 8 bytes of data together with the
 * epoch twice, so a reader that sees the epoch in both halves has the data.
 * No host sequence number is involved, so launches can be captured in CUDA
 * graphs and replayed. Every wait watches the abort word and a deadline;
 * when either fires, the kernel records an error in the status word and
 * returns.
 */
#ifndef CHORUS_DEVICE_KERNELS_H
#define CHORUS_DEVICE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define CHORUS_KERN_MAX_RANKS    8
#define CHORUS_KERN_MAX_BLOCKS   64
#define CHORUS_KERN_LINE         16   /* bytes per LL line: 8 of data, 2 flags */
#define CHORUS_KERN_CHANNELS     64   /* CTAs of the FIFO kernels, at most */
#define CHORUS_KERN_MAX_CHANNELS 128  /* and of large copies (big_from), twice that */
#define CHORUS_KERN_CTL_STRIDE   128  /* bytes between pipeline counters peers write */
#define CHORUS_KERN_P2P_PARTS    32   /* most CTAs of an LL Send/Recv launch */
#define CHORUS_KERN_P2P_PART_MIN 4096 /* bytes of an LL Send/Recv each CTA moves at least */
#define CHORUS_KERN_BOARD_SLOTS  4    /* calls of each rank its peers can read back */

/* What a kernel reports in the status word (host-mapped), first error wins. */
enum {
  CHORUS_KERN_OK = 0,
  CHORUS_KERN_ABORTED = 1,
  CHORUS_KERN_TIMEOUT = 2,
  CHORUS_KERN_MISMATCH = 3,      /* a Send and its Recv differ in size (status_info says how) */
  CHORUS_KERN_PEER_EXITED = 4,   /* the process of the rank waited for exited (peer_gone) */
  CHORUS_KERN_CALL_MISMATCH = 5, /* a launch's header names another call (status_info:
                                    theirs, this rank's; chorus_kern_xchg.desc) */
  CHORUS_KERN_PEER_FAILED = 6,   /* another rank's kernel found a mismatch first and wrote it
                                    into this rank's arena (status_peer: that rank;
                                    status_info: its two infos, then its why << 32 | its peer) */
  CHORUS_KERN_SEND_OFFSET = 7,   /* a zero-copy launch's send buffer sits at another offset of
                                    its window than the peer's (status_info: theirs, this
                                    rank's) */
  CHORUS_KERN_RECV_OFFSET = 8    /* the same for the receive buffer */
};
/* The failures a kernel also writes into the other ranks' arenas. */
#define CHORUS_KERN_FORWARDED(why)                                                                 \
  ((why) == CHORUS_KERN_MISMATCH || (why) == CHORUS_KERN_CALL_MISMATCH ||                          \
   (why) == CHORUS_KERN_SEND_OFFSET || (why) == CHORUS_KERN_RECV_OFFSET)

/* One rank's view of the communicator's arenas. */
typedef struct chorus_kern_comm {
  int rank, nranks;
  /* Every rank's arena, as mapped in this process. Its LL area starts at
   * ll_off: slot [parity][src] at ((parity * nranks + src) * ll_lines) *
   * 16; rank src writes slot [.][src] of a peer, only the owner reads it.
   * Its ack words start at ack_off: [block][src] x 4 B, the last epoch of
   * that block that rank src finished. */
  char *arena[CHORUS_KERN_MAX_RANKS];
  uint32_t ll_off, ack_off;
  /* LL call headers from hdr_off: line [parity][src][block], each LL
   * launch's CTA b sending the call's description (chorus_kern_xchg.desc)
   * ahead of its lines, flagged with its epoch like them. */
  uint32_t hdr_off;
  size_t ll_lines;       /* lines per slot: ll_lines * 8 bytes of payload */
  uint32_t ll_cta_lines; /* lines per CTA of an LL launch (0: 2048) */
  /* CTAs an LL launch may take (CHORUS_KERN_MAX_BLOCKS, fewer where the
   * communicator caps them: maxCTAs); runs of ll_cta_lines lines go to
   * CTAs 0 .. ll_blocks - 1 in turn (0: CHORUS_KERN_MAX_BLOCKS). */
  uint32_t ll_blocks;
  /* LL launches (collectives and Send/Recv) start while the stream's
   * kernel before them ends (programmatic dependent launch), waiting for
   * its completion before their first access: only the launches overlap. */
  uint32_t pdl;
  /* The FIFO kernels (pipelined exchanges, rings and chains, Send/Recv).
   * Channel (CTA) b of every rank talks only to channel b of the others,
   * through a FIFO of fifo_bytes per source, [channel][src] from pipe_off.
   * Each launch cuts its FIFOs into slots of its chunk size (chunk_bytes at
   * most for exchanges with every peer at once, ring_chunk for rings and
   * chains, a FIFO / p2p_slots for Send/Recv), which both ends of a pair compute
   * from the size alone.
   * Counters, each on its own CHORUS_KERN_CTL_STRIDE line from ctl_off:
   * head [channel][src] (chunks src has delivered here; src writes it),
   * then done [channel][dst] (chunks dst has consumed from this rank; dst
   * writes it). The owner's own totals (sent [channel][dst], taken
   * [channel][src], 4 B each) live at cnt_off; only its kernels touch them. */
  uint64_t pipe_off;
  uint32_t ctl_off, cnt_off;
  uint32_t chunk_bytes, fifo_bytes, channels;
  /* Exchanges that both send to and take from peers, moving at least
   * wide_from bytes per rank (a block times the ranks), copy with CTAs of
   * twice the threads (0: never). Copies with peers of big_from bytes per
   * rank, rings and chains of big_from bytes in all, and Send/Recv
   * transfers of big_from bytes (p2p.cu) run on twice the channels:
   * channels c >= `channels` have FIFOs of fifo_bytes / 2 past the
   * others' ([channel - channels][src]; 0: never, and no such FIFOs). */
  uint64_t wide_from, big_from;
  uint32_t ring_chunk, ring_channels;       /* rings (chorus_kern_ring) */
  uint32_t twoshot_chunk, twoshot_channels; /* chorus_kern_twoshot: channels <= channels / 2 */
  /* Small Send/Recv in LL lines, per pair (chorus_kern_sendrecv_ll): a
   * transfer is cut into parts (chorus_kern_p2p_parts), part k moved by
   * CTA k. Slot [src][parity][part] at p2p_ll_off + ((src * 2 + parity) *
   * p2p_ll_parts + part) * (p2p_ll_lines + 1) * 16, a header line (the
   * transfer's size) then the part's payload; p2p_ll_lines 0: none. At
   * p2p_ep_off the owner's epochs, send [dst][part] then recv [src][part]
   * (4 B each, CHORUS_KERN_P2P_PARTS per peer); at p2p_ack_off
   * [dst][part] x 4 B, the last epoch of that part rank dst finished
   * reading from this rank (dst writes it); at p2p_bar_off a barrier
   * across the launch's CTAs (generation, then an arrival word per CTA). */
  uint64_t p2p_ll_off;
  uint32_t p2p_ll_lines, p2p_ll_parts, p2p_ep_off, p2p_ack_off, p2p_bar_off;
  uint32_t *epochs;             /* this rank's per-block counters (device memory) */
  volatile int32_t *abort;      /* host-mapped: nonzero stops every wait */
  volatile uint32_t *peer_gone; /* host-mapped: bit p stops the waits for rank p */
  int32_t *status;              /* host-mapped: CHORUS_KERN_* of the first failure */
  int32_t *status_peer;         /* host-mapped: the rank waited for at that failure */
  uint64_t *status_info;        /* host-mapped, 3 words: MISMATCH: bytes sent, bytes expected */
  /* At fail_off of every arena: [src] x 32 B, what rank src's kernel
   * found when it failed on a mismatch (why, its peer, its two infos; why
   * written last), so the ranks waiting for it stop at once too. */
  uint32_t fail_off;
  /* The call board, at board_off of every arena: [src][slot] x 16 B,
   * CHORUS_KERN_BOARD_SLOTS lines per rank that rank src writes at the
   * start of each collective launch, slot seq % CHORUS_KERN_BOARD_SLOTS:
   * its call's description and number as an LL line (description halves
   * flagged with seq + 1). Ranks whose calls wait on each other without
   * exchanging any data (both think they are a Broadcast's root, say)
   * compare the board while they wait; a launch also compares the calls
   * before its own, so a call that differed yet moved no data (both ranks
   * roots) fails the next launch of either rank. */
  uint32_t board_off;
  /* Zero-copy launches (chorus_kern_zc): at zc_off of every arena
   * a 32-byte line [CTA][src] that CTA b of rank src writes at each of its
   * barriers (the epoch, then the call's description and the buffers'
   * window offsets); at zc_ep_off the owner's epoch per CTA. */
  uint32_t zc_off, zc_ep_off;
  /* FIFO Send/Recv: a sender copies each chunk into its own arena's FIFO
   * [channel][destination] and the receiver loads it from there (a pull),
   * instead of the sender storing into the receiver's FIFO [channel]
   * [source] (CHORUS_GPU_P2P_PULL; every rank alike). */
  uint32_t p2p_pull;
  uint32_t p2p_slots;  /* FIFO slots of a Send/Recv stream, 2..16 (CHORUS_GPU_P2P_SLOTS) */
  uint64_t timeout_ns; /* per wait; 0: none */
} chorus_kern_comm;

/* Reduction, as host/reduce.h's chorus_red kinds. */
typedef struct chorus_kern_red {
  int kind;                /* chorus_red_kind */
  int dtype;               /* ncclDataType_t */
  unsigned char scalar[8]; /* PREMULSUM multiplier in dtype's format */
  const void *scalar_dev;  /* PREMULSUM multiplier in device memory, or NULL */
  uint64_t divisor;        /* SUMPOSTDIV */
} chorus_kern_red;

/* One exchange: this rank pushes a block of `bytes` (at most ll_lines * 8)
 * to each rank of send_to, then takes the blocks of the ranks in recv_from
 * (itself included when its own block counts, read from send + soff[me]):
 * copied to recv + roff[src], or, with reduce, reduced in rank order into
 * recv + roff[0] (bitwise the same result on every rank). PreMulSum scales
 * each rank's own block by its own scalar before anyone sees it. */
typedef struct chorus_kern_xchg {
  const void *send;
  void *recv;
  size_t bytes;
  uint32_t send_to, recv_from;        /* rank bit masks */
  size_t soff[CHORUS_KERN_MAX_RANKS]; /* block for rank p at send + soff[p] */
  size_t roff[CHORUS_KERN_MAX_RANKS]; /* block from rank s at recv + roff[s] */
  int reduce;
  /* A ring or chain (CHORUS_RING_*, chorus_kern_ring), else 0: the whole
   * collective in one launch; bytes is one rank's block (the buffer, for a
   * chain), send and recv the API's buffers (soff, roff, send_to and
   * recv_from unused). */
  int ring;
  int root; /* chains */
  /* An AllReduce as ReduceScatter then AllGather in one launch
   * (chorus_kern_twoshot): block p is bytes [p * bytes, p * bytes +
   * bytes) of send and recv, clipped to total (so the last ones may be
   * short or empty); send and recv the API's buffers. */
  int twoshot;
  size_t total;
  int ll; /* set by the plan: LL lines (chorus_kern_exchange), else FIFO chunks */
  /* The call, the same on every rank for matching calls (gpu.h,
   * chorus_gpu_call_desc); LL launches compare the senders' with their own. */
  uint64_t desc;
  uint32_t seq; /* the call's number among the communicator's collectives (the board) */
} chorus_kern_xchg;

/* Rings and chains: every rank streams to rank + 1 and takes from rank - 1
 * only, channel b of each rank moving the chunks of positions b, b + G, ...
 * of every block. Per chunk position, step s (0 <= s < chorus_kern_ring_steps)
 * handles block chorus_kern_ring_block(s): step 0 pushes the rank's own input
 * (scaled for PreMulSum), each later step takes what the previous rank
 * pushed at its step s - 1, for the same block, and every step but the
 * last pushes its result on. ReduceScatter steps 1..n-1 add the rank's own
 * input of the block (step n - 1 completes the rank's own block, the only
 * output of a ReduceScatter); AllReduce goes on with n - 1 AllGather steps
 * that copy and pass the completed blocks; an AllGather copies every block
 * it sees. A chain is the same with one block, where each rank runs only
 * the step of its place in the chain (chorus_kern_ring_first): Broadcast from
 * the root (step 0) along root + 1, ... (each copies what it takes),
 * Reduce from root + 1 (step 0) to the root (step n - 1, which alone
 * writes the result). Host and device share these. */
enum {
  CHORUS_KERN_RING_ALLGATHER = 1,
  CHORUS_KERN_RING_REDUCESCATTER,
  CHORUS_KERN_RING_ALLREDUCE,
  CHORUS_KERN_RING_BROADCAST, /* chain */
  CHORUS_KERN_RING_REDUCE     /* chain */
};
#ifdef __CUDACC__
#define CHORUS_KERN_HD __host__ __device__
#else
#define CHORUS_KERN_HD
#endif
static inline CHORUS_KERN_HD int chorus_kern_ring_is_chain(int ring) {
  return ring >= CHORUS_KERN_RING_BROADCAST;
}
/* Whether it reduces; whether its input, and its output, hold a block per
 * rank (else one block: the rank's own input, or output). */
static inline CHORUS_KERN_HD int chorus_kern_ring_is_reduction(int ring) {
  return ring != CHORUS_KERN_RING_ALLGATHER && ring != CHORUS_KERN_RING_BROADCAST;
}
static inline CHORUS_KERN_HD int chorus_kern_ring_in_blocks(int ring) {
  return ring == CHORUS_KERN_RING_REDUCESCATTER || ring == CHORUS_KERN_RING_ALLREDUCE;
}
static inline CHORUS_KERN_HD int chorus_kern_ring_out_blocks(int ring) {
  return ring == CHORUS_KERN_RING_ALLGATHER || ring == CHORUS_KERN_RING_ALLREDUCE;
}
static inline CHORUS_KERN_HD int chorus_kern_ring_steps(int ring, int n) {
  return ring == CHORUS_KERN_RING_ALLREDUCE ? 2 * n - 1 : n;
}
/* The steps rank me runs for each chunk position: first .. last. */
static inline CHORUS_KERN_HD int chorus_kern_ring_first(int ring, int me, int n, int root) {
  if (!chorus_kern_ring_is_chain(ring)) return 0;
  const int s = (me - root - (ring == CHORUS_KERN_RING_REDUCE ? 1 : 0)) % n;
  return s < 0 ? s + n : s;
}
static inline CHORUS_KERN_HD int chorus_kern_ring_last(int ring, int me, int n, int root) {
  return chorus_kern_ring_is_chain(ring) ? chorus_kern_ring_first(ring, me, n, root)
                                         : chorus_kern_ring_steps(ring, n) - 1;
}
/* Which block step s handles (0 for chains, whose buffers are one block). */
static inline CHORUS_KERN_HD int chorus_kern_ring_block(int ring, int me, int n, int s) {
  if (chorus_kern_ring_is_chain(ring)) return 0;
  const int b = (me - s - (ring == CHORUS_KERN_RING_ALLGATHER ? 0 : 1)) % n;
  return b < 0 ? b + n : b;
}
/* Whether step s adds the rank's own input, and whether it writes the
 * output. */
static inline CHORUS_KERN_HD int chorus_kern_ring_reduces(int ring, int n, int s) {
  return chorus_kern_ring_is_reduction(ring) && s < n;
}
static inline CHORUS_KERN_HD int chorus_kern_ring_writes(int ring, int n, int s) {
  switch (ring) {
  case CHORUS_KERN_RING_ALLGATHER:
  case CHORUS_KERN_RING_BROADCAST:
    return 1;
  case CHORUS_KERN_RING_ALLREDUCE:
    return s >= n - 1;
  default:
    return s == n - 1;
  }
}

/* Where an LL two-shot's second half starts in a slot: past the first
 * `lines` lines, at a line that the same CTA owns as line 0 (exchange.cu:
 * runs of q lines go to the `blocks` CTAs in turn). */
static inline CHORUS_KERN_HD size_t chorus_kern_ll_second(size_t lines, size_t q, size_t blocks) {
  const size_t round = blocks * q;
  return (lines + round - 1) / round * round;
}

/* Send/Recv (one round of a group's point-to-point calls): this rank
 * sends sbytes[p] bytes from send[p] to each peer p and receives rbytes[p]
 * bytes from each peer p into recv[p]; 0 bytes: nothing with that peer.
 * Its own entry copies send[me] into recv[me] (sbytes[me] == rbytes[me]).
 * Small transfers move as LL lines in the pair's slot, flagged with the
 * pair's own epoch (ranks outside the pair, and the collectives' epochs,
 * are not involved), a receiver of another size failing with
 * CHORUS_KERN_MISMATCH; larger ones in chunks through the same FIFOs and
 * counters as the pipelined kernel. Which way follows from the size alone,
 * so both ends agree (gpu.h: chorus_gpu_p2p_split). */
typedef struct chorus_kern_p2p {
  const void *send[CHORUS_KERN_MAX_RANKS];
  size_t sbytes[CHORUS_KERN_MAX_RANKS];
  void *recv[CHORUS_KERN_MAX_RANKS];
  size_t rbytes[CHORUS_KERN_MAX_RANKS];
  /* LL launch: a receive buffer overlaps a send buffer (an in-place ring
   * shift, say), so every CTA reads its sends before any CTA writes. */
  uint32_t overlap;
  /* FIFO launch: the descriptions of a Send and of a Recv of 0 bytes
   * (chorus_gpu_p2p_descs); call headers carry the Send's with the
   * transfer's size as the count, a receiver names its call by the Recv's. */
  uint64_t send_desc, recv_desc;
} chorus_kern_p2p;

/* How an LL Send/Recv of nbytes is cut: into parts of *part bytes (a
 * multiple of 16; the last may be shorter), at least
 * CHORUS_KERN_P2P_PART_MIN bytes each where there is that much, at most
 * `most` of them. Returns their number (0 for nbytes 0). Both ends
 * compute it from the size alone. */
static inline CHORUS_KERN_HD uint32_t chorus_kern_p2p_parts(size_t nbytes, uint32_t most,
                                                            size_t *part) {
  size_t n = (nbytes + CHORUS_KERN_P2P_PART_MIN - 1) / CHORUS_KERN_P2P_PART_MIN;
  if (n > most) n = most;
  *part = n ? ((nbytes + n - 1) / n + 15) / 16 * 16 : 0;
  return (uint32_t)n;
}

/* The bytes a part slot holds so that every transfer of at most ll_bytes
 * fits: a part is at most CHORUS_KERN_P2P_PART_MIN bytes (or the whole
 * transfer, when smaller) until `most` of them are needed. */
static inline CHORUS_KERN_HD size_t chorus_kern_p2p_part_cap(size_t ll_bytes, uint32_t most) {
  size_t whole = (ll_bytes + 15) / 16 * 16, part;
  chorus_kern_p2p_parts(ll_bytes, most, &part);
  if (whole > CHORUS_KERN_P2P_PART_MIN) whole = CHORUS_KERN_P2P_PART_MIN;
  return part > whole ? part : whole;
}

/* Zero-copy collectives: every rank's buffers are reachable from every GPU
 * of the communicator (GPUs of one process, which map each other's memory,
 * or windows registered with NCCL_WIN_COLL_SYMMETRIC), so data moves
 * between the user buffers themselves, through no arena. CTA b of each
 * rank meets CTA b of every other rank at two barriers: at its start (the
 * peers' kernels have begun, so their inputs are ready and their outputs
 * free; the calls and window offsets are compared there) and at its end
 * (its peers are done with this rank's buffers). In between:
 *   AllReduce: rank r reduces block r (`block` bytes) of every rank's send
 *     buffer, in rank order, and writes it into every rank's receive buffer;
 *   AllGather: rank r writes its input into block r of every rank's output;
 *   ReduceScatter: rank r reduces block r of every rank's input into its
 *     own output.
 * Every block is reduced by one rank, so all ranks end bitwise equal. */
enum { CHORUS_KERN_ZC_ALLREDUCE = 1, CHORUS_KERN_ZC_ALLGATHER, CHORUS_KERN_ZC_REDUCESCATTER };
typedef struct chorus_kern_zc {
  int kind; /* CHORUS_DIRECT_*, 0: none */
  /* Every rank's buffers as this rank's GPU reaches them (only those the
   * kind reads or writes on other ranks need be set; all 16-byte aligned). */
  const void *send[CHORUS_KERN_MAX_RANKS];
  void *recv[CHORUS_KERN_MAX_RANKS];
  size_t bytes;  /* AllReduce: the buffer; AllGather and ReduceScatter: a rank's block */
  size_t block;  /* AllReduce: the bytes each rank reduces (a multiple of 16) */
  uint32_t grid; /* CTAs, the same on every rank (at most CHORUS_KERN_MAX_BLOCKS) */
  uint64_t desc; /* the call (chorus_gpu_call_desc) */
  uint32_t seq;  /* its number among the communicator's collectives (the board) */
  uint64_t soff; /* windows: offsets of the send and receive buffers in theirs */
  uint64_t roff; /* (compared at the first barrier; 0 in one process) */
} chorus_kern_zc;

/* Latency: LL lines (8 bytes of data per 16-byte line, the epoch in both
 * halves, no flags or barriers); bytes at most ll_lines * 8, ring 0. A
 * two-shot AllReduce (x->twoshot) runs here too when two shares fit a
 * slot (2 * bytes <= ll_lines * 8). */
int chorus_kern_exchange(const chorus_kern_comm *c, const chorus_kern_red *red,
                         const chorus_kern_xchg *x, void *stream);
/* Bandwidth: any size in one launch, chunks streamed through the FIFOs
 * with head/done credits, each CTA's pushing and taking warps overlapped. */
int chorus_kern_pipe(const chorus_kern_comm *c, const chorus_kern_red *red,
                     const chorus_kern_xchg *x, void *stream);
/* A ring or chain (x->ring set), in one launch of ring_channels CTAs (from
 * big_from, twice that) with chunks of at most ring_chunk bytes. */
int chorus_kern_ring(const chorus_kern_comm *c, const chorus_kern_red *red,
                     const chorus_kern_xchg *x, void *stream);
/* An AllReduce as ReduceScatter then AllGather, in one launch (x->twoshot
 * set): channel b of each rank pushes chunk b, b + G, ... of block p to
 * rank p, reduces the chunks of its own block that every rank pushed to
 * it and pushes the result to every rank, which copies it out. The
 * gathering half uses the FIFOs and counters of channel b + channels / 2,
 * so the two halves never wait for each other's slots. */
int chorus_kern_twoshot(const chorus_kern_comm *c, const chorus_kern_red *red,
                        const chorus_kern_xchg *x, void *stream);
/* Send/Recv: every transfer of p in LL lines (each at most p2p_ll_parts *
 * p2p_ll_lines * 8 bytes), part k of each by CTA k. */
int chorus_kern_sendrecv_ll(const chorus_kern_comm *c, const chorus_kern_p2p *p, void *stream);
/* Send/Recv: every transfer of p in FIFO chunks, in one launch. */
int chorus_kern_sendrecv(const chorus_kern_comm *c, const chorus_kern_p2p *p, void *stream);
/* A zero-copy collective (chorus_kern_zc), one launch of d->grid CTAs. */
int chorus_kern_zc_run(const chorus_kern_comm *c, const chorus_kern_red *red,
                       const chorus_kern_zc *d, void *stream);

/* Host-staged calls (gpu/proxy.h): a launch of one block copies the
 * call's small inputs to host memory (copies[0, nin)), posts
 * ((number + 1) << 32 | batch) at ring[number % CHORUS_KERN_PROXY_RING],
 * number taken from *issued (device memory, one per communicator), waits
 * until the host's done count passes it, and copies the small outputs
 * back (copies[nin, ncopies)). A nonzero abort or failed ends the wait
 * (outputs not copied). Larger buffers move as copies queued around the
 * launch. Modes: all of that (SPIN), the inputs and the post alone
 * (POST: the stream then waits on a word the host writes; stopped, the
 * kernel writes it), or the outputs alone (OUTS: after that wait). */
#define CHORUS_KERN_PROXY_RING 256
enum { CHORUS_KERN_PROXY_SPIN, CHORUS_KERN_PROXY_POST, CHORUS_KERN_PROXY_OUTS };
typedef struct chorus_kern_copy {
  void *dst;
  const void *src;
  uint64_t bytes;
} chorus_kern_copy;
/* The host's words a staged call's kernel polls, one 16-byte read apart
 * (host memory is a bus round trip away): batches the host finished, the
 * host's calls failed, the communicator aborted. */
typedef struct chorus_kern_proxy_state {
  uint32_t done;
  uint32_t failed;
  int32_t abort;
  uint32_t pad;
} chorus_kern_proxy_state;
/* Copy lists this long travel in the launch itself, not read from host
 * memory by the kernel. */
#define CHORUS_KERN_PROXY_INLINE 4
typedef struct chorus_kern_proxy {
  volatile uint64_t *ring;                        /* host-mapped */
  volatile chorus_kern_proxy_state *st;           /* host-mapped, 16-byte aligned */
  uint32_t *issued;                               /* device memory */
  const chorus_kern_copy *copies;                 /* host-mapped, where ncopies > INLINE */
  chorus_kern_copy inl[CHORUS_KERN_PROXY_INLINE]; /* the list, where ncopies <= INLINE */
  uint32_t batch, nin, ncopies;
  uint32_t mode; /* CHORUS_KERN_PROXY_* */
  /* POST: the word the stream then waits on, and the value it waits for,
   * written here where the host will not hear of the call (stopped). */
  volatile uint32_t *word;
  uint32_t gen;
} chorus_kern_proxy;
int chorus_kern_proxy_run(const chorus_kern_proxy *p, void *stream);

/* Reductions in rank order (CHORUS_REPRODUCIBLE, gpu/ordered.h), on the
 * current device: dst[i] = ((all[i] + all[stride + i]) + ...) over n
 * contributions stride elements apart, rounded to the type after each
 * pair, red's final division applied (a PreMulSum adds: its owners scaled
 * their contributions with chorus_kern_premul, dst = src * red's scalar).
 * Both take at most max_blocks CTAs where it is not 0 (maxCTAs). */
int chorus_kern_ordered_add(const chorus_kern_red *red, void *dst, const void *all, size_t count,
                            int n, size_t stride, unsigned max_blocks, void *stream);
int chorus_kern_premul(const chorus_kern_red *red, void *dst, const void *src, size_t count,
                       unsigned max_blocks, void *stream);

/* A timestamp of the GPU's global timer (ns) when stream reaches it, for
 * calls captured in graphs (core/trace.c): entry i % entries (a power of
 * two) of ring, host-mapped, two words: the time, then ((i + 1) << 32 |
 * tag), i taken from *counter (device memory, zeroed) on the GPU. */
int chorus_kern_stamp(volatile uint64_t *ring, uint32_t *counter, uint32_t entries, uint32_t tag,
                      void *stream);

#endif

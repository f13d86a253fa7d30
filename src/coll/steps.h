/*
 * steps.h - what a profiler plugin sees of a call's messages across the
 * network: NCCL's ProxyOp and ProxyStep events, fed by the schedules'
 * primitives (coll/prims.c) on connections whose messages cross a network
 * (chorus_conn.network); core/profiler.c turns them into the plugin's
 * descriptors through the hooks below.
 *
 * A call the plugin watches (its Coll or P2p event exists: chorus_op_prof)
 * gets, per such connection it uses, a ProxyOp (its communicator's lane as
 * the channel, the peer's rank in the application's communicator, send or
 * receive, the slot size as chunk, a Send's or Recv's number of messages),
 * started with its first message there
 * and stopped when the call ends on this rank; and per message a ProxyStep:
 *
 *   send  started when the schedule asks for a slot (SEND_FILL: until one
 *         is free, the peer's credit, and the schedule has filled it: a
 *         copy, a reduction, the GPU's staging), SEND_WAIT from its post
 *         (with its bytes) until the network has taken it whole;
 *   recv  started when the schedule asks for the next message (RECV_WAIT),
 *         RECV_HELD from its arrival (with its bytes) until the schedule,
 *         which reads it in place, releases it.
 *
 * A Send or Recv moves its range in slots, so its step count is known
 * when it starts; collectives' schedules size their messages as they go,
 * so theirs is 0: the steps themselves say how many there were.
 *
 * The threads that run calls for the application's thread (a host
 * communicator's lanes, a GPU communicator's proxy) report as NCCL's proxy
 * thread does, in ProxyCtrl events of no parent: SLEEP until woken for
 * work (WAKEUP), APPEND as they take calls (APPEND_END, with how many),
 * ACTIVE while they run them (IDLE when done).
 */
#ifndef CHORUS_COLL_STEPS_H
#define CHORUS_COLL_STEPS_H

#include <stddef.h>

#include "coll/op.h"

enum {
  CHORUS_STEP_SEND_FILL,
  CHORUS_STEP_SEND_WAIT,
  CHORUS_STEP_RECV_WAIT,
  CHORUS_STEP_RECV_HELD,
};

enum {
  CHORUS_CTRL_IDLE,
  CHORUS_CTRL_ACTIVE,
  CHORUS_CTRL_SLEEP,
  CHORUS_CTRL_WAKEUP,
  CHORUS_CTRL_APPEND,
  CHORUS_CTRL_APPEND_END,
};

/* What core gives a communicator whose calls a plugin watches; ctx is its
 * own (chorus_coll_comm.step_ctx). */
struct chorus_step_hooks {
  /* Whether the plugin asks for ProxyOp or ProxyStep events now. */
  int (*wanted)(void *ctx);
  /* A ProxyOp under parent (a Coll or P2p handle), of nsteps messages (0:
   * not known ahead); NULL: none. */
  void *(*op_start)(void *ctx, void *parent, int lane, int peer, int send, size_t chunk,
                    int nsteps);
  /* A ProxyStep under a ProxyOp; NULL: none. */
  void *(*step_start)(void *ctx, void *pop, int step);
  /* A step's state (CHORUS_STEP_*), with the message's bytes where known. */
  void (*record)(void *ctx, void *step, int state, size_t bytes);
  void (*stop)(void *ctx, void *ev);
  /* A ProxyCtrl event begun in `state` (CHORUS_CTRL_*); NULL: none. */
  void *(*ctrl_start)(void *ctx, int state);
  /* Its next state; appended: the calls taken (CHORUS_CTRL_APPEND_END). */
  void (*ctrl_record)(void *ctx, void *ev, int state, int appended);
};

/* The primitives' reports, on connection c of watched op. send_ask: after
 * a send_slot that returned res; posted: after a post of `bytes`; flushed:
 * every posted message of op is out; recv_ask: after a receive that
 * returned res (with the message's bytes on success); released: the
 * message received last is given back. */
void chorus_steps_send_ask(chorus_op *op, chorus_conn *c, ncclResult_t res);
void chorus_steps_posted(chorus_op *op, chorus_conn *c, size_t bytes);
void chorus_steps_flushed(chorus_op *op, chorus_conn *c);
void chorus_steps_recv_ask(chorus_op *op, chorus_conn *c, ncclResult_t res, size_t bytes);
void chorus_steps_released(chorus_op *op, chorus_conn *c);

/* op ended (done, failed or dropped): its open events stop. */
void chorus_steps_end(chorus_op *op);

/* A helper thread of cc's: a ProxyCtrl event begun in `state` (NULL when
 * none is watched), and its end in `state` (appended: the calls taken,
 * for CHORUS_CTRL_APPEND_END); ev NULL: nothing. */
void *chorus_ctrl_begin(const chorus_coll_comm *cc, int state);
void chorus_ctrl_end(const chorus_coll_comm *cc, void *ev, int state, int appended);
/* A ProxyCtrl Append event of `appended` calls taken at once. */
void chorus_ctrl_append(const chorus_coll_comm *cc, int appended);

/* Whether the primitives report c's messages of op: the connection's
 * flag first, which shared memory's calls, the fastest, stop at. */
static inline int chorus_steps_watch(const chorus_op *op, const chorus_conn *c) {
  return __builtin_expect(c->network, 0) && __atomic_load_n(&op->cc->step_hooks, __ATOMIC_RELAXED);
}

#endif

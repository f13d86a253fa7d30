/*
 * steps.c - see steps.h.
 *
 * An op keeps one link per connection it reported on: its ProxyOp, the
 * step being asked for (send: a slot; recv: a message, until released)
 * and, sending, the steps posted but not yet taken by the network, each
 * with its message's number on the connection (send_count), stopped as
 * the network takes them. A transport that cannot say (no send_count)
 * has its steps stop at their post.
 */
#include "coll/steps.h"

#include <limits.h>
#include <string.h>

#include "algo/func.h"
#include "util/alloc.h"

#define FLYING 64 /* no fewer than any connection's slots: posts wait for a free one */

typedef struct step_link {
  chorus_conn *c;
  void *pop;  /* its ProxyOp; NULL: the plugin took none */
  void *open; /* the step asked for (and, receiving, held); NULL: none */
  int state;  /* the last state recorded on it; -1: none */
  int nsteps;
  void *fly[FLYING];
  uint64_t msg[FLYING];
  unsigned head, tail;
} step_link;

struct chorus_steps {
  int off; /* the plugin wants none of these events for this call */
  int n, cap;
  step_link *l;
};

static const struct chorus_step_hooks *hooks_of(const chorus_op *op) {
  return __atomic_load_n(&op->cc->step_hooks, __ATOMIC_RELAXED);
}

/* The messages op moves over c, where known ahead: a Send's or Recv's
 * range in slots (coll/xfer.h), or the one that says how many bytes come
 * where the network moves GPU memory itself; 0 for a collective. */
static int steps_ahead(const chorus_op *op, const chorus_conn *c) {
  if (!chorus_func_p2p(op->func) || !c->slot_bytes) return 0;
  if (op->dev_mem) return 1;
  const size_t n = (op->count * op->esize + c->slot_bytes - 1) / c->slot_bytes;
  return n > INT_MAX ? INT_MAX : (int)n;
}

/* op's link for c (sending where send), made on first use; NULL when its
 * events are off or memory ran out. */
static step_link *link_of(chorus_op *op, chorus_conn *c, int send) {
  struct chorus_steps *s = op->steps;
  const struct chorus_step_hooks *h = hooks_of(op);
  if (!s) {
    s = op->steps = chorus_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->off = !chorus_op_prof(op) || !h->wanted(op->cc->step_ctx);
  }
  if (s->off) return NULL;
  for (int i = 0; i < s->n; i++)
    if (s->l[i].c == c) return &s->l[i];
  if (s->n == s->cap) {
    const int cap = s->cap ? 2 * s->cap : 4;
    step_link *l = chorus_malloc((size_t)cap * sizeof *l);
    if (!l) return NULL;
    if (s->n) memcpy(l, s->l, (size_t)s->n * sizeof *l);
    chorus_free(s->l);
    s->l = l;
    s->cap = cap;
  }
  step_link *l = &s->l[s->n++];
  *l = (step_link){.c = c, .state = -1};
  const chorus_coll_comm *cc = op->cc;
  const int peer = cc->step_ranks ? cc->step_ranks[c->peer] : c->peer;
  l->pop = h->op_start(cc->step_ctx, chorus_op_prof(op), cc->step_lane, peer, send, c->slot_bytes,
                       steps_ahead(op, c));
  return l;
}

static step_link *find(const chorus_op *op, const chorus_conn *c) {
  const struct chorus_steps *s = op->steps;
  for (int i = 0; s && i < s->n; i++)
    if (s->l[i].c == c) return &s->l[i];
  return NULL;
}

static void stop(const chorus_op *op, void *ev) {
  if (ev) hooks_of(op)->stop(op->cc->step_ctx, ev);
}

static void record(const chorus_op *op, step_link *l, int state, size_t bytes) {
  if (l->state == state) return;
  l->state = state;
  if (l->open) hooks_of(op)->record(op->cc->step_ctx, l->open, state, bytes);
}

/* The step asked for: the open one, else a new one. */
static void ask(const chorus_op *op, step_link *l) {
  if (l->open || !l->pop) return;
  l->open = hooks_of(op)->step_start(op->cc->step_ctx, l->pop, l->nsteps++);
  l->state = -1;
}

/* The step's handle for message m of c, which a network plugin may hold
 * until the network took m; cleared when the step stops. */
static chorus_step_ref *ref_of(chorus_conn *c, uint64_t m) {
  return c->step_refs ? &c->step_refs[m % FLYING] : NULL;
}

/* Stops a posted step: message m's. */
static void stop_posted(const chorus_op *op, step_link *l, unsigned i) {
  chorus_step_ref *r = ref_of(l->c, l->msg[i % FLYING]);
  if (r && r->step == l->fly[i % FLYING]) r->step = NULL;
  stop(op, l->fly[i % FLYING]);
}

/* Stops the posted steps the network has taken whole (all: every one). */
static void stop_taken(const chorus_op *op, step_link *l, int all) {
  uint64_t taken = UINT64_MAX;
  if (!all && l->c->ops->send_count) (void)l->c->ops->send_count(l->c, &taken);
  for (; l->head != l->tail && l->msg[l->head % FLYING] < taken; l->head++)
    stop_posted(op, l, l->head);
}

/* The open send step goes with the next message posted on c (the one
 * numbered by send_count), for a network plugin to report under it. */
static void offer_ref(const chorus_op *op, step_link *l) {
  chorus_conn *c = l->c;
  if (!l->open || !c->ops->send_count) return;
  if (!c->step_refs && !(c->step_refs = chorus_calloc(FLYING, sizeof *c->step_refs))) return;
  uint64_t taken;
  chorus_step_ref *r = ref_of(c, c->ops->send_count(c, &taken));
  *r = (chorus_step_ref){op->cc->step_ctx, l->open};
  c->step_next = r;
}

void chorus_steps_send_ask(chorus_op *op, chorus_conn *c, ncclResult_t res) {
  step_link *l = link_of(op, c, 1);
  if (!l || (res != ncclSuccess && res != ncclInProgress)) return;
  stop_taken(op, l, 0);
  ask(op, l);
  record(op, l, CHORUS_STEP_SEND_FILL, 0);
  if (res == ncclSuccess) offer_ref(op, l);
}

void chorus_steps_posted(chorus_op *op, chorus_conn *c, size_t bytes) {
  step_link *l = link_of(op, c, 1);
  if (!l) return;
  ask(op, l);
  record(op, l, CHORUS_STEP_SEND_WAIT, bytes);
  void *ev = l->open;
  l->open = NULL;
  c->step_next = NULL; /* taken along by the post, or not at all */
  if (!ev) return;
  if (!c->ops->send_count) {
    stop(op, ev);
    return;
  }
  uint64_t taken;
  const uint64_t posted = c->ops->send_count(c, &taken);
  if (l->tail - l->head == FLYING) stop_posted(op, l, l->head++);
  l->fly[l->tail % FLYING] = ev;
  l->msg[l->tail++ % FLYING] = posted - 1;
  stop_taken(op, l, 0);
}

void chorus_steps_flushed(chorus_op *op, chorus_conn *c) {
  step_link *l = find(op, c);
  if (l) stop_taken(op, l, 1);
}

void chorus_steps_recv_ask(chorus_op *op, chorus_conn *c, ncclResult_t res, size_t bytes) {
  step_link *l = link_of(op, c, 0);
  if (!l || (res != ncclSuccess && res != ncclInProgress)) return;
  if (!l->open) {
    ask(op, l);
    record(op, l, CHORUS_STEP_RECV_WAIT, 0);
  }
  if (res == ncclSuccess) record(op, l, CHORUS_STEP_RECV_HELD, bytes);
}

void chorus_steps_released(chorus_op *op, chorus_conn *c) {
  step_link *l = find(op, c);
  if (!l) return;
  stop(op, l->open);
  l->open = NULL;
}

void chorus_steps_end(chorus_op *op) {
  struct chorus_steps *s = op->steps;
  if (!s) return;
  for (int i = 0; i < s->n; i++) {
    step_link *l = &s->l[i];
    if (l->c->step_next && l->c->step_next->step == l->open) l->c->step_next = NULL;
    stop(op, l->open);
    stop_taken(op, l, 1);
    stop(op, l->pop);
  }
  chorus_free(s->l);
  chorus_free(s);
  op->steps = NULL;
}

/* The hooks as a helper thread sees them: set by core after the thread
 * started, so read with acquire (core/profiler.c stores them with release). */
static const struct chorus_step_hooks *ctrl_hooks(const chorus_coll_comm *cc) {
  return __atomic_load_n(&cc->step_hooks, __ATOMIC_ACQUIRE);
}

void *chorus_ctrl_begin(const chorus_coll_comm *cc, int state) {
  const struct chorus_step_hooks *h = ctrl_hooks(cc);
  return h ? h->ctrl_start(cc->step_ctx, state) : NULL;
}

void chorus_ctrl_end(const chorus_coll_comm *cc, void *ev, int state, int appended) {
  const struct chorus_step_hooks *h = ctrl_hooks(cc);
  if (!h || !ev) return;
  h->ctrl_record(cc->step_ctx, ev, state, appended);
  h->stop(cc->step_ctx, ev);
}

void chorus_ctrl_append(const chorus_coll_comm *cc, int appended) {
  chorus_ctrl_end(cc, chorus_ctrl_begin(cc, CHORUS_CTRL_APPEND), CHORUS_CTRL_APPEND_END, appended);
}

/*
 * lanes.c - lane threads (lanes.h).
 */
#include "coll/lanes.h"

#include <pthread.h>

#include "coll/coll.h"
#include "coll/exec.h"
#include "coll/steps.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/log.h"

typedef struct lane {
  chorus_lanes *ln;
  chorus_coll_comm *cc;
  chorus_log_ctx log_ctx;
  pthread_t thread;
  chorus_op *ops; /* its list, run as a group (cap of room) */
  int nops, cap;
  int job;      /* a list waits (under lock) */
  int finished; /* the list ran (under lock) */
  ncclResult_t res;
} lane;

struct chorus_lanes {
  lane lane[CHORUS_LANES_MAX]; /* [0]: its cc alone */
  int nthreads;                /* lanes 1..nthreads have a thread */
  int stop;
  pthread_mutex_t lock;
  pthread_cond_t go, done;
};

ncclResult_t chorus_lanes_run_calls(chorus_op *ops, int n) {
  chorus_exec_queue q = {.cc = ops[0].cc, .result = ncclSuccess};
  chorus_op *tail[2] = {NULL, NULL};
  ncclResult_t res = ncclSuccess;
  int prepared = 0;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    res = chorus_coll_prepare(&ops[i]);
    if (res != ncclSuccess) break;
    prepared++;
    chorus_exec_queue_push(&q, tail, &ops[i]);
  }
  if (res == ncclSuccess) res = chorus_exec_run(&q, 1);
  for (int i = 0; i < prepared; i++) chorus_coll_release(&ops[i]);
  return res;
}

static void *lane_main(void *arg) {
  lane *l = arg;
  chorus_lanes *ln = l->ln;
  chorus_log_ctx_set(l->log_ctx);
  pthread_mutex_lock(&ln->lock);
  for (;;) {
    void *sleep = l->job || ln->stop ? NULL : chorus_ctrl_begin(l->cc, CHORUS_CTRL_SLEEP);
    while (!l->job && !ln->stop) pthread_cond_wait(&ln->go, &ln->lock);
    chorus_ctrl_end(l->cc, sleep, CHORUS_CTRL_WAKEUP, 0);
    if (!l->job) break;
    l->job = 0;
    pthread_mutex_unlock(&ln->lock);
    /* the list is the thread's until it says finished */
    chorus_ctrl_append(l->cc, l->nops);
    void *ev = chorus_ctrl_begin(l->cc, CHORUS_CTRL_ACTIVE);
    const ncclResult_t res = l->nops ? chorus_lanes_run_calls(l->ops, l->nops) : ncclSuccess;
    chorus_ctrl_end(l->cc, ev, CHORUS_CTRL_IDLE, 0);
    pthread_mutex_lock(&ln->lock);
    l->res = res;
    l->finished = 1;
    pthread_cond_broadcast(&ln->done);
  }
  pthread_mutex_unlock(&ln->lock);
  return NULL;
}

ncclResult_t chorus_lanes_start(chorus_lanes **out, chorus_coll_comm *const *cc, int n,
                                const chorus_log_ctx *log_ctx) {
  *out = NULL;
  chorus_lanes *ln = chorus_calloc(1, sizeof *ln);
  if (!ln) return chorus_error(ncclSystemError, "out of memory starting %d lanes", n);
  ln->lane[0].cc = cc[0];
  pthread_mutex_init(&ln->lock, NULL);
  pthread_cond_init(&ln->go, NULL);
  pthread_cond_init(&ln->done, NULL);
  for (int k = 1; k < n && k < CHORUS_LANES_MAX; k++) {
    ln->lane[k].ln = ln;
    ln->lane[k].cc = cc[k];
    ln->lane[k].log_ctx = log_ctx ? *log_ctx : cc[k]->log_ctx;
    if (pthread_create(&ln->lane[k].thread, NULL, lane_main, &ln->lane[k]) != 0) {
      chorus_lanes_free(ln);
      return chorus_error(ncclSystemError, "cannot start the thread of lane %d", k);
    }
    ln->nthreads = k;
  }
  *out = ln;
  return ncclSuccess;
}

void chorus_lanes_free(chorus_lanes *ln) {
  if (!ln) return;
  pthread_mutex_lock(&ln->lock);
  ln->stop = 1;
  pthread_cond_broadcast(&ln->go);
  pthread_mutex_unlock(&ln->lock);
  for (int k = 1; k <= ln->nthreads; k++) pthread_join(ln->lane[k].thread, NULL);
  for (int k = 1; k < CHORUS_LANES_MAX; k++) chorus_free(ln->lane[k].ops);
  pthread_mutex_destroy(&ln->lock);
  pthread_cond_destroy(&ln->go);
  pthread_cond_destroy(&ln->done);
  chorus_free(ln);
}

int chorus_lanes_count(const chorus_lanes *ln) {
  return ln->nthreads + 1;
}

chorus_coll_comm *chorus_lanes_comm(const chorus_lanes *ln, int k) {
  return ln->lane[k].cc;
}

ncclResult_t chorus_lanes_clear(chorus_lanes *ln, int k, int room) {
  lane *l = &ln->lane[k];
  l->nops = 0;
  if (room <= l->cap) return ncclSuccess;
  chorus_op *o = chorus_malloc((size_t)room * sizeof *o);
  if (!o)
    return chorus_error(ncclSystemError, "out of memory handing %d calls to lane %d", room, k);
  chorus_free(l->ops);
  l->ops = o;
  l->cap = room;
  return ncclSuccess;
}

void chorus_lanes_push(chorus_lanes *ln, int k, const chorus_op *op) {
  lane *l = &ln->lane[k];
  l->ops[l->nops++] = *op;
}

void chorus_lanes_begin(chorus_lanes *ln, int n) {
  if (n <= 1) return;
  pthread_mutex_lock(&ln->lock);
  for (int k = 1; k < n; k++) {
    ln->lane[k].finished = 0;
    ln->lane[k].job = 1;
  }
  pthread_cond_broadcast(&ln->go);
  pthread_mutex_unlock(&ln->lock);
}

ncclResult_t chorus_lanes_end(chorus_lanes *ln, int n, ncclResult_t mine) {
  if (n <= 1) return mine;
  if (mine != ncclSuccess)
    for (int k = 1; k < n; k++) __atomic_store_n(ln->lane[k].cc->abort_flag, 1, __ATOMIC_RELEASE);
  ncclResult_t res = mine;
  pthread_mutex_lock(&ln->lock);
  for (int k = 1; k < n; k++) {
    while (!ln->lane[k].finished) pthread_cond_wait(&ln->done, &ln->lock);
    if (res == ncclSuccess) res = ln->lane[k].res;
  }
  pthread_mutex_unlock(&ln->lock);
  return res;
}

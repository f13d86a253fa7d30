/*
 * progress.c - see progress.h.
 */
#include "coll/progress.h"

#include <stdio.h>
#include <string.h>

#include "algo/func.h"
#include "util/clock.h"
#include "util/misc.h"

void chorus_progress_init(chorus_progress *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
  p->wait_peer = p->wait_dir = -1;
}

void chorus_progress_destroy(chorus_progress *p) {
  pthread_mutex_destroy(&p->lock);
}

static void store_desc(chorus_call_desc *to, const chorus_call_desc *d) {
  __atomic_store_n(&to->index, d->index, __ATOMIC_RELAXED);
  __atomic_store_n(&to->count, d->count, __ATOMIC_RELAXED);
  __atomic_store_n(&to->func, d->func, __ATOMIC_RELAXED);
  __atomic_store_n(&to->dtype, d->dtype, __ATOMIC_RELAXED);
  __atomic_store_n(&to->redop, d->redop, __ATOMIC_RELAXED);
  __atomic_store_n(&to->root, d->root, __ATOMIC_RELAXED);
}

static void load_desc(chorus_call_desc *to, const chorus_call_desc *d) {
  to->index = __atomic_load_n(&d->index, __ATOMIC_RELAXED);
  to->count = __atomic_load_n(&d->count, __ATOMIC_RELAXED);
  to->func = __atomic_load_n(&d->func, __ATOMIC_RELAXED);
  to->dtype = __atomic_load_n(&d->dtype, __ATOMIC_RELAXED);
  to->redop = __atomic_load_n(&d->redop, __ATOMIC_RELAXED);
  to->root = __atomic_load_n(&d->root, __ATOMIC_RELAXED);
}

/* The sequence lock of transport.h's call board entries, on a slot. */
static void slot_write(chorus_progress_slot *s, const chorus_call_desc *d, int64_t ns) {
#if defined(__SANITIZE_THREAD__)
  (void)__atomic_exchange_n(&s->seq, UINT64_MAX, __ATOMIC_ACQ_REL);
#else
  __atomic_store_n(&s->seq, UINT64_MAX, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
  store_desc(&s->d, d);
  __atomic_store_n(&s->ns, ns, __ATOMIC_RELAXED);
  __atomic_store_n(&s->seq, d->index + 1, __ATOMIC_RELEASE);
}

static void slot_read(const chorus_progress_slot *s, chorus_progress_slot *out) {
  const uint64_t before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
  load_desc(&out->d, &s->d);
  out->ns = __atomic_load_n(&s->ns, __ATOMIC_RELAXED);
#if defined(__SANITIZE_THREAD__)
  const uint64_t after = __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST);
#else
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  const uint64_t after = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
#endif
  out->seq = before == after && before != UINT64_MAX ? before : 0;
}

uint64_t chorus_progress_issue(chorus_progress *p, chorus_call_desc *d, int p2p) {
  uint64_t *counter = p2p ? &p->p2p_issued : &p->issued;
  d->index = __atomic_load_n(counter, __ATOMIC_RELAXED);
  slot_write(p2p ? &p->last_p2p : &p->recent[d->index % CHORUS_PROGRESS_RECENT], d,
             chorus_coarse_now_ns());
  __atomic_store_n(counter, d->index + 1, __ATOMIC_RELEASE);
  return d->index;
}

void chorus_progress_end(chorus_progress *p, uint64_t n, uint64_t m) {
  /* One writer, the thread that issues the calls (as in issue): a load
   * and a store, not a locked add, which costs a small call about 3%. */
  if (n)
    __atomic_store_n(&p->ended, __atomic_load_n(&p->ended, __ATOMIC_RELAXED) + n, __ATOMIC_RELEASE);
  if (m)
    __atomic_store_n(&p->p2p_ended, __atomic_load_n(&p->p2p_ended, __ATOMIC_RELAXED) + m,
                     __ATOMIC_RELEASE);
}

void chorus_progress_stall(chorus_progress *p, const chorus_call_desc *d, int p2p, int gpu,
                           int64_t since, int peer, int dir) {
  pthread_mutex_lock(&p->lock);
  if (p->stall_since != since || p->stall_p2p != p2p || p->stall_call.index != d->index)
    p->stall_id++;
  p->stall_since = since;
  p->stall_call = *d;
  p->stall_p2p = p2p;
  p->stall_gpu = gpu;
  p->wait_peer = peer;
  p->wait_dir = dir;
  pthread_mutex_unlock(&p->lock);
}

void chorus_progress_unstall(chorus_progress *p) {
  pthread_mutex_lock(&p->lock);
  p->stall_since = 0;
  p->wait_peer = p->wait_dir = -1;
  pthread_mutex_unlock(&p->lock);
}

void chorus_progress_read(chorus_progress *p, chorus_progress_view *out) {
  out->issued = __atomic_load_n(&p->issued, __ATOMIC_ACQUIRE);
  out->p2p_issued = __atomic_load_n(&p->p2p_issued, __ATOMIC_ACQUIRE);
  out->ended = __atomic_load_n(&p->ended, __ATOMIC_RELAXED);
  out->p2p_ended = __atomic_load_n(&p->p2p_ended, __ATOMIC_RELAXED);
  out->gpu_done = __atomic_load_n(&p->gpu_done, __ATOMIC_RELAXED);
  for (int i = 0; i < CHORUS_PROGRESS_RECENT; i++) slot_read(&p->recent[i], &out->recent[i]);
  slot_read(&p->last_p2p, &out->last_p2p);
  pthread_mutex_lock(&p->lock);
  out->stall_since = p->stall_since;
  out->stall_id = p->stall_id;
  out->stall_call = p->stall_call;
  out->stall_p2p = p->stall_p2p;
  out->stall_gpu = p->stall_gpu;
  out->wait_peer = p->wait_peer;
  out->wait_dir = p->wait_dir;
  pthread_mutex_unlock(&p->lock);
}

int chorus_progress_recent(const chorus_progress_view *v, uint64_t k, chorus_call_desc *d,
                           int64_t *ns) {
  const chorus_progress_slot *s = &v->recent[k % CHORUS_PROGRESS_RECENT];
  if (s->seq != k + 1) return 0;
  *d = s->d;
  *ns = s->ns;
  return 1;
}

void chorus_call_desc_str(const chorus_call_desc *d, char *buf, size_t size) {
  const int p2p = chorus_func_p2p(d->func);
  int n = snprintf(buf, size, "%s(count=%llu, %s", chorus_func_name(d->func),
                   (unsigned long long)d->count, chorus_type_name(d->dtype));
  if (n >= 0 && (size_t)n < size && chorus_func_reduces(d->func))
    n += snprintf(buf + n, size - (size_t)n, ", %s", chorus_redop_name(d->redop));
  if (n >= 0 && (size_t)n < size && d->root >= 0)
    n += snprintf(buf + n, size - (size_t)n, ", %s=%d", p2p ? "peer" : "root", d->root);
  if (n >= 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, ") #%llu", (unsigned long long)d->index);
}

/*
 * bufcache.c - large host buffers kept between calls (bufcache.h).
 */
#include "util/bufcache.h"

#include "util/alloc.h"

void chorus_bufcache_init(chorus_bufcache *c) {
  pthread_mutex_init(&c->lock, NULL);
  for (int i = 0; i < CHORUS_BUFCACHE_SLOTS; i++) {
    c->buf[i] = NULL;
    c->bytes[i] = 0;
  }
}

void *chorus_bufcache_get(chorus_bufcache *c, size_t bytes, size_t *got) {
  if (bytes == 0) bytes = 1;
  *got = bytes;
  if (bytes < CHORUS_BUFCACHE_MIN) return chorus_malloc(bytes);
  void *p = NULL;
  pthread_mutex_lock(&c->lock);
  int best = -1; /* the smallest kept block that is large enough */
  for (int i = 0; i < CHORUS_BUFCACHE_SLOTS; i++)
    if (c->buf[i] && c->bytes[i] >= bytes && (best < 0 || c->bytes[i] < c->bytes[best])) best = i;
  if (best >= 0) {
    p = c->buf[best];
    *got = c->bytes[best];
    c->buf[best] = NULL;
    c->bytes[best] = 0;
  }
  pthread_mutex_unlock(&c->lock);
  return p ? p : chorus_malloc(bytes);
}

void chorus_bufcache_put(chorus_bufcache *c, void *p, size_t bytes) {
  if (!p) return;
  if (bytes < CHORUS_BUFCACHE_MIN) {
    chorus_free(p);
    return;
  }
  pthread_mutex_lock(&c->lock);
  int slot = -1; /* an empty slot, else the smallest kept block */
  for (int i = 0; i < CHORUS_BUFCACHE_SLOTS && (slot < 0 || c->buf[slot]); i++)
    if (!c->buf[i] || slot < 0 || c->bytes[i] < c->bytes[slot]) slot = i;
  void *drop = p;
  if (!c->buf[slot] || c->bytes[slot] < bytes) {
    drop = c->buf[slot];
    c->buf[slot] = p;
    c->bytes[slot] = bytes;
  }
  pthread_mutex_unlock(&c->lock);
  chorus_free(drop);
}

void chorus_bufcache_free(chorus_bufcache *c) {
  for (int i = 0; i < CHORUS_BUFCACHE_SLOTS; i++) {
    chorus_free(c->buf[i]);
    c->buf[i] = NULL;
    c->bytes[i] = 0;
  }
  pthread_mutex_destroy(&c->lock);
}

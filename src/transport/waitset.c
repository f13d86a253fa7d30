/*
 * waitset.c - collecting what a blocked executor sleeps on.
 */
#include "transport/transport.h"

void chorus_waitset_add_db(chorus_waitset *ws, chorus_doorbell *db) {
  for (int i = 0; i < ws->ndb; i++)
    if (ws->db[i] == db) return;
  if (ws->ndb < CHORUS_WAIT_MAX_DBS) ws->db[ws->ndb++] = db;
}

void chorus_waitset_add_fd(chorus_waitset *ws, int fd, short events) {
  for (int i = 0; i < ws->nfds; i++)
    if (ws->fds[i].fd == fd) {
      ws->fds[i].events |= events;
      return;
    }
  if (ws->nfds < CHORUS_WAIT_MAX_FDS) ws->fds[ws->nfds++] = (struct pollfd){fd, events, 0};
}

/*
 * test_pidns.c - ranks in different PID namespaces of one host (containers
 * that share /dev/shm): they talk over shared memory, and a rank that dies
 * is noticed within 1 s although its pid means nothing to the others (its
 * life line closes; transport/shm/shm.c).
 *
 * Each rank is the first process of a PID namespace of its own (unshare,
 * then fork). Both run AllReduces and check them; then rank 1 kills
 * itself and rank 0's next AllReduce must fail within LIMIT, saying that
 * rank 1 exited. Exit 0 on success, 1 on failure, 77 where new PID
 * namespaces cannot be made (no privilege). (Rank 1 is killed by its
 * parent: the first process of a namespace ignores its own SIGKILL.)
 *
 * usage: test_pidns
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define LIMIT 1.0 /* seconds */

typedef struct shared {
  int id_ready, ranks_ready, rank1_gone;
  ncclUniqueId id;
  int result[2]; /* per rank: 0 ok, else what failed */
  double detect;
  char msg[300];
} shared;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int rank_main(shared *sh, int rank) {
  const double by = now() + 20;
  while (!__atomic_load_n(&sh->id_ready, __ATOMIC_ACQUIRE) && now() < by) pause_ms(1);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, sh->id, rank) != ncclSuccess) return 2;
  float v[1024];
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 1024; i++) v[i] = (float)(rank + 1);
    if (ncclAllReduce(v, v, 1024, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) return 3;
    for (int i = 0; i < 1024; i++)
      if (v[i] != 3.0f) return 4;
  }
  __atomic_add_fetch(&sh->ranks_ready, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&sh->ranks_ready, __ATOMIC_ACQUIRE) < 2 && now() < by) pause_ms(1);
  if (rank == 1) { /* the first process of a namespace ignores its own SIGKILL: its parent,
                      outside, sends it */
    __atomic_store_n(&sh->rank1_gone, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 30000; i++) pause_ms(1);
    return 10;
  }
  pause_ms(50); /* rank 1 is gone, or going */
  const double t0 = now();
  ncclResult_t r = ncclAllReduce(v, v, 1024, ncclFloat, ncclSum, comm, NULL);
  sh->detect = now() - t0;
  const char *m = ncclGetLastError(comm);
  snprintf(sh->msg, sizeof sh->msg, "%s", m ? m : "");
  ncclCommAbort(comm);
  if (r == ncclSuccess) return 5;
  if (sh->detect > LIMIT) return 6;
  if (!strstr(sh->msg, "rank 1")) return 7;
  return 0;
}

/* The first process of a new PID namespace runs rank `rank`; its parent
 * (this child) passes its status on. */
static int in_own_namespace(shared *sh, int rank) {
  if (unshare(CLONE_NEWPID) != 0) return 77;
  const pid_t pid = fork();
  if (pid < 0) return 8;
  if (pid == 0) _exit(rank_main(sh, rank));
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (rank == 1 && __atomic_load_n(&sh->rank1_gone, __ATOMIC_ACQUIRE)) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    pause_ms(1);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : (rank == 1 && WTERMSIG(st) == SIGKILL ? 0 : 9);
}

int main(void) {
  shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  memset(sh, 0, sizeof *sh);
  setenv("CHORUS_OP_TIMEOUT", "20", 1); /* a miss shows as slow, not as a hang */
  pid_t kid[2];
  for (int r = 0; r < 2; r++) { /* before ncclGetUniqueId starts its thread */
    kid[r] = fork();
    if (kid[r] == 0) _exit(in_own_namespace(sh, r));
  }
  if (ncclGetUniqueId(&sh->id) != ncclSuccess) return 1;
  __atomic_store_n(&sh->id_ready, 1, __ATOMIC_RELEASE);
  int st[2] = {0, 0}, code[2];
  for (int r = 0; r < 2; r++) {
    const double by = now() + 60;
    while (waitpid(kid[r], &st[r], WNOHANG) != kid[r]) {
      if (now() > by) {
        kill(kid[r], SIGKILL);
        waitpid(kid[r], &st[r], 0);
        break;
      }
      pause_ms(5);
    }
    code[r] = WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : 100 + WTERMSIG(st[r]);
  }
  if (code[0] == 77 || code[1] == 77) {
    printf("cannot make PID namespaces here (no privilege): skipped\n");
    return 77;
  }
  printf("ranks in two PID namespaces: rank 0 status %d, rank 1 status %d; rank 0 failed %.3f s "
         "after rank 1 died: %s\n",
         code[0], code[1], sh->detect, sh->msg);
  return code[0] == 0 && code[1] == 0 ? 0 : 1;
}

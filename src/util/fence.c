/*
 * fence.c - see fence.h.
 */
#include "util/fence.h"

#include <pthread.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#endif

int chorus_fence_full = 1;
#ifdef CHORUS_FENCE_TSAN
int chorus_fence_word;
#endif
int chorus_fence_global_target, chorus_fence_global_issuer;

static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__linux__) && defined(SYS_membarrier)
static long membarrier(int cmd) {
  return syscall(SYS_membarrier, cmd, 0, 0);
}
#endif

static void setup(void) {
  int full = 1, target = 0, issuer = 0;
#if defined(__linux__) && defined(SYS_membarrier) && !defined(CHORUS_FENCE_TSAN)
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
      membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
    full = 0;
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED)) {
    issuer = 1;
    target = membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
  }
#endif
  __atomic_store_n(&chorus_fence_global_target, target, __ATOMIC_SEQ_CST);
  __atomic_store_n(&chorus_fence_global_issuer, issuer, __ATOMIC_SEQ_CST);
  __atomic_store_n(&chorus_fence_full, full, __ATOMIC_SEQ_CST);
}

void chorus_fence_init(void) {
  pthread_once(&once, setup);
}

void chorus_fence_heavy(void) {
  CHORUS_FENCE_FULL();
#if defined(__linux__) && defined(SYS_membarrier)
  if (!__atomic_load_n(&chorus_fence_full, __ATOMIC_RELAXED) &&
      membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    return;
#endif
  CHORUS_FENCE_FULL();
}

void chorus_fence_global(void) {
  CHORUS_FENCE_FULL();
#if defined(__linux__) && defined(SYS_membarrier)
  if (__atomic_load_n(&chorus_fence_global_issuer, __ATOMIC_RELAXED))
    (void)membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
#endif
}

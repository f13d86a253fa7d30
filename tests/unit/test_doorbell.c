/*
 * test_doorbell.c - util/doorbell wakes a sleeper across processes.
 *
 * Ping-pong: a parent and a forked child each own a doorbell in a shared
 * mapping (fenced as a shared-memory segment's is: util/fence.h), and
 * each waits for the other's count by preparing, re-checking and sleeping
 * on its own doorbell, so every round crosses the sleep path in both
 * directions. A ring that wakes nobody would leave the sleeper to its
 * 2-second cap: no round may take that long. The doorbells take the
 * fenced form exactly where this process can issue the heavy fence. The
 * child is killed by pid if the parent fails first.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "util/clock.h"
#include "util/doorbell.h"
#include "util/fence.h"

#define ROUNDS  2000
#define CAP_NS  (2ll * 1000000000)
#define SLOW_NS (1ll * 1000000000)

typedef struct {
  chorus_doorbell db[2] __attribute__((aligned(64)));
  uint64_t count[2] __attribute__((aligned(64)));
  uint64_t slow[2];
} shared;

/* Waits (sleeping on db `me`) until count[me] reaches target; returns
 * whether a sleep ran into its cap. */
static int wait_count(shared *s, int me, uint64_t target) {
  int slow = 0;
  for (;;) {
    const uint32_t seen = chorus_doorbell_prepare(&s->db[me]);
    if (__atomic_load_n(&s->count[me], __ATOMIC_ACQUIRE) >= target) {
      chorus_doorbell_cancel(&s->db[me]);
      return slow;
    }
    const int64_t t0 = chorus_now_ns();
    chorus_doorbell_sleep(&s->db[me], seen, CAP_NS);
    if (chorus_now_ns() - t0 >= SLOW_NS) slow = 1;
  }
}

static void give(shared *s, int to) {
  __atomic_store_n(&s->count[to], __atomic_load_n(&s->count[to], __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELEASE);
  chorus_doorbell_ring(&s->db[to]);
}

static void ping_pong(void) {
  shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(s != MAP_FAILED);
  chorus_doorbell_init_fenced(&s->db[0]);
  chorus_doorbell_init_fenced(&s->db[1]);
#if !defined(__SANITIZE_THREAD__)
  EXPECT_EQ_INT(s->db[0].fences, (uint32_t)chorus_fence_global_issuer);
#endif
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (uint64_t r = 1; r <= ROUNDS; r++) {
      s->slow[1] += (uint64_t)wait_count(s, 1, r);
      give(s, 0);
    }
    _exit(0);
  }
  const int64_t t0 = chorus_now_ns();
  for (uint64_t r = 1; r <= ROUNDS; r++) {
    give(s, 1);
    s->slow[0] += (uint64_t)wait_count(s, 0, r);
    if (chorus_now_ns() - t0 > 60ll * 1000000000) break; /* bounded: the checks below fail */
  }
  int status = 0;
  if (__atomic_load_n(&s->count[0], __ATOMIC_ACQUIRE) < ROUNDS) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  EXPECT_EQ_INT((int)__atomic_load_n(&s->count[0], __ATOMIC_ACQUIRE), ROUNDS);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ_INT((int)s->slow[0], 0);
  EXPECT_EQ_INT((int)s->slow[1], 0);
  munmap(s, sizeof *s);
}

int main(void) {
  RUN(ping_pong);
  return unit_report();
}

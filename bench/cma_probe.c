/*
 * cma_probe.c - how fast one process copies another's memory with
 * process_vm_readv (CMA, what Open MPI's vader BTL uses for large
 * messages), beside memcpy in one process, on this machine.
 *
 *   cc -O2 -o /tmp/cma_probe bench/cma_probe.c && /tmp/cma_probe
 *
 * The parent fills a buffer; a forked child reads it with process_vm_readv
 * (64 KiB to 64 MiB, about 256 MB per size), then copies a buffer of its own
 * with memcpy the same number of times. Prints GB/s for each.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXB ((size_t)64 << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  char *src = aligned_alloc(4096, MAXB);
  if (!src) return 1;
  memset(src, 1, MAXB);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    char *dst = aligned_alloc(4096, MAXB), *own = aligned_alloc(4096, MAXB);
    if (!dst || !own) _exit(1);
    memset(dst, 0, MAXB);
    memset(own, 2, MAXB);
    for (size_t n = (size_t)64 << 10; n <= MAXB; n *= 4) {
      const int iters = (int)(256e6 / (double)n) + 3;
      const double t0 = now();
      for (int k = 0; k < iters; k++) {
        struct iovec l = {dst, n}, r = {src, n};
        if (process_vm_readv(parent, &l, 1, &r, 1, 0) != (ssize_t)n) {
          perror("process_vm_readv");
          _exit(1);
        }
      }
      const double t1 = now();
      for (int k = 0; k < iters; k++) memcpy(dst, own, n);
      const double t2 = now();
      printf("%9zu B  process_vm_readv %6.2f GB/s  memcpy %6.2f GB/s\n", n,
             (double)n * iters / (t1 - t0) / 1e9, (double)n * iters / (t2 - t1) / 1e9);
    }
    fflush(stdout);
    _exit(0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  free(src);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

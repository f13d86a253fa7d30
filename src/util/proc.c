/*
 * proc.c - see proc.h.
 */
#include "util/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

uint64_t chorus_proc_pid_ns(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int chorus_proc_exited(int32_t pid) {
  if (pid <= 0) return 0;
  if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* "pid (name) state ...": the name may hold spaces and parentheses. */
  const char *end = strrchr(buf, ')');
  return end && end[1] == ' ' && end[2] == 'Z';
}

/* Moves bytes between local memory and address remote of process pid:
 * process_vm_writev when `write`, else process_vm_readv, however many
 * calls it takes. */
static int vm_copy(int32_t pid, void *local, uint64_t remote, size_t bytes, int write) {
  for (size_t done = 0; done < bytes;) {
    struct iovec mine = {(char *)local + done, bytes - done};
    struct iovec theirs = {(void *)(uintptr_t)(remote + done), bytes - done};
    const ssize_t n = write ? process_vm_writev((pid_t)pid, &mine, 1, &theirs, 1, 0)
                            : process_vm_readv((pid_t)pid, &mine, 1, &theirs, 1, 0);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? errno : EIO;
  }
  return 0;
}

int chorus_proc_read(int32_t pid, void *dst, uint64_t src, size_t bytes) {
  return vm_copy(pid, dst, src, bytes, 0);
}

int chorus_proc_write(int32_t pid, uint64_t dst, const void *src, size_t bytes) {
  return vm_copy(pid, (void *)(uintptr_t)src, dst, bytes, 1);
}

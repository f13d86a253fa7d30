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

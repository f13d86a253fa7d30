/*
 * proc.h - whether another process of this host still lives.
 *
 * kill(pid, 0) answers for a process that has exited but that its parent
 * has not reaped (a zombie: a launcher busy elsewhere, a parent blocked in
 * a collective), and means nothing for a pid of another PID namespace
 * (ranks in containers that share /dev/shm but not their PIDs). These
 * answer both.
 */
#ifndef CHORUS_UTIL_PROC_H
#define CHORUS_UTIL_PROC_H

#include <stdint.h>

/* This process's PID namespace (the inode of /proc/self/ns/pid); 0 when
 * it cannot be read. Pids compare only within one namespace. */
uint64_t chorus_proc_pid_ns(void);

/* Whether process pid of this PID namespace has exited: gone, or a
 * zombie. 0 when it lives or cannot be told. */
int chorus_proc_exited(int32_t pid);

#endif

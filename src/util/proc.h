/*
 * proc.h - whether another process of this host still lives, and reading
 * its memory.
 *
 * kill(pid, 0) answers for a process that has exited but that its parent
 * has not reaped (a zombie: a launcher busy elsewhere, a parent blocked in
 * a collective), and means nothing for a pid of another PID namespace
 * (ranks in containers that share /dev/shm but not their PIDs). These
 * answer both.
 */
#ifndef CHORUS_UTIL_PROC_H
#define CHORUS_UTIL_PROC_H

#include <stddef.h>
#include <stdint.h>

/* This process's PID namespace (the inode of /proc/self/ns/pid); 0 when
 * it cannot be read. Pids compare only within one namespace. */
uint64_t chorus_proc_pid_ns(void);

/* Whether process pid of this PID namespace has exited: gone, or a
 * zombie. 0 when it lives or cannot be told. */
int chorus_proc_exited(int32_t pid);

/* Copies bytes at address src of process pid (this PID namespace) into
 * dst with process_vm_readv, however many calls it takes: 0, or the errno
 * of the call that failed (EIO for one that read nothing). */
int chorus_proc_read(int32_t pid, void *dst, uint64_t src, size_t bytes);

/* Copies bytes from src into address dst of process pid with
 * process_vm_writev, the same way. */
int chorus_proc_write(int32_t pid, uint64_t dst, const void *src, size_t bytes);

#endif

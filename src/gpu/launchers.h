/*
 * launchers.h - one launcher thread per GPU, so that a group call of a
 * process driving several GPUs launches their kernels at once.
 *
 * A kernel launch costs the launching thread a few microseconds; a group
 * of AllReduce calls on 4 GPUs from one thread (nccl-tests -g 4, or
 * ncclCommInitAll users) pays 4 of them in a row. chorus_launchers_run
 * gives each GPU's share of the group to that GPU's thread (started on
 * first use, its current device set once) and runs the first share on the
 * calling thread meanwhile; it returns once every share is launched, so
 * the group's calls are on their streams when ncclGroupEnd returns, as
 * with NCCL.
 *
 * A launcher spins for CHORUS_GPU_LAUNCH_SPIN_US after each job (the next
 * group usually follows within microseconds), then sleeps on a doorbell.
 * The threads live while a GPU communicator exists (hold/release); the
 * last release ends them. A launcher already busy with another thread's
 * job (two threads driving groups that share a GPU) is not waited for:
 * the caller runs that share itself.
 */
#ifndef CHORUS_GPU_LAUNCHERS_H
#define CHORUS_GPU_LAUNCHERS_H

#include "nccl.h"

#define CHORUS_LAUNCHERS_MAX 64 /* devices with a launcher thread */

typedef struct chorus_launch_job {
  int device;                     /* 0..CHORUS_LAUNCHERS_MAX-1; distinct within one run */
  ncclResult_t (*run)(void *arg); /* launches this device's share */
  void *arg;
  ncclResult_t res; /* out: what run returned */
  int done;         /* internal */
} chorus_launch_job;

/* Runs every job, jobs[0] on the calling thread and each other one on its
 * device's launcher at the same time (in turn on the calling thread when
 * threads are off or cannot start). Returns the first failure in job
 * order, else ncclSuccess. */
ncclResult_t chorus_launchers_run(chorus_launch_job *jobs, int njobs);

/* Whether runs use threads: CHORUS_GPU_LAUNCH_THREADS (default 1). */
int chorus_launchers_enabled(void);

/* Every GPU communicator holds the launchers from init to destroy; the
 * last release stops and joins the threads. */
void chorus_launchers_hold(void);
void chorus_launchers_release(void);

/* Launcher threads running now (tests). */
int chorus_launchers_running(void);

#endif

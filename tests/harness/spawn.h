/*
 * spawn.h - tests start every rank themselves.
 *
 * A multi-rank test names its rank bodies in a table of cases and calls
 * harness_spawn(), which runs one case on N ranks either as threads of this
 * process or as N child processes (fork + exec of this same binary, so each
 * child starts clean). The parent creates the unique id; children receive it
 * in their argument list. Every spawn has a timeout: a rank that does not
 * finish in time is reported and its process killed by pid.
 *
 * main() of such a test must begin with harness_init(argc, argv, cases):
 * in a child it runs the requested rank and exits; in the parent it sets
 * NCCL_SOCKET_IFNAME=lo (unless already set) so test traffic stays on
 * loopback.
 */
#ifndef CHORUS_TEST_SPAWN_H
#define CHORUS_TEST_SPAWN_H

#include "nccl.h"

/* A rank body: returns 0 on success. param is the string given to spawn. */
typedef int (*harness_rank_fn)(int rank, int nranks, ncclUniqueId id, const char *param);

typedef struct {
  const char *name;
  harness_rank_fn fn;
} harness_case;

typedef enum { HARNESS_THREADS = 0, HARNESS_PROCS = 1 } harness_mode;

void harness_init(int argc, char **argv, const harness_case *cases);

/* Runs case `name` on nranks ranks. Returns the number of ranks that failed
 * or did not finish within timeout_s (0 means all passed). */
int harness_spawn(harness_mode mode, int nranks, const char *name, const char *param,
                  int timeout_s);

/* As harness_spawn; make_id = 0 skips creating the id (for bodies that
 * make their own communicators, whose unused root would otherwise linger). */
int harness_spawn_ex(harness_mode mode, int nranks, const char *name, const char *param,
                     int timeout_s, int make_id);

/* A rank of a job whose launcher set RANK, WORLD_SIZE and NCCL_COMM_ID
 * (rank 0 hosts the rendezvous there): its communicator. 2 when one is
 * missing (a usage line naming `who` on stderr), 1 when the init fails
 * ("rank R: init failed: ..." on stderr), else 0. */
int harness_join_env(const char *who, int *rank, int *nranks, ncclComm_t *comm);

/* Printf-style progress line, prefixed with the rank, to stderr. */
void harness_log(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

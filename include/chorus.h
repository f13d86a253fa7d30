/*
 * chorus.h - what Chorus adds to the NCCL API.
 *
 * The library exports exactly the symbols of NVIDIA's libnccl.so.2, so the
 * extensions here are constants and static inline helpers built on the NCCL
 * API itself; nothing in this header needs a symbol NVIDIA's library lacks.
 */
#ifndef CHORUS_H_
#define CHORUS_H_

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

#define CHORUS_VERSION_MAJOR  0
#define CHORUS_VERSION_MINOR  1
#define CHORUS_VERSION_PATCH  0
#define CHORUS_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A communicator either moves device memory (it is bound to a CUDA device) or
 * host memory. Host communicators report device -1 from ncclCommCuDevice.
 * Returns 1 for a host-memory communicator, 0 for a device one, -1 on error.
 */
static inline int chorusCommIsHost(ncclComm_t comm) {
  int dev = 0;
  if (ncclCommCuDevice(comm, &dev) != ncclSuccess) return -1;
  return dev < 0 ? 1 : 0;
}

/*
 * Asks the library to write the state of every communicator of this process
 * (calls issued and ended, recent calls, a stalled call and the peer it
 * waits for, peers and transports) to CHORUS_DUMP_FILE, as the signal
 * CHORUS_DUMP_SIGNAL does: it raises that signal, which the environment
 * must name (USR1, USR2, HUP, QUIT, PWR, WINCH or a number). A thread of
 * the library writes the file within about 0.1 s. Returns 0, or -1 when
 * CHORUS_DUMP_SIGNAL is unset or no communicator of this process catches it
 * (the signal is then not raised).
 */
static inline int chorusDumpState(void) {
  static const char *const names[] = {"USR1", "USR2", "HUP", "QUIT", "PWR", "WINCH"};
  const int sigs[] = {SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT, SIGPWR, SIGWINCH};
  const char *v = getenv("CHORUS_DUMP_SIGNAL");
  int sig = 0;
  if (!v) return -1;
  if (!strncmp(v, "SIG", 3)) v += 3;
  for (int i = 0; i < 6; i++)
    if (!strcmp(v, names[i])) sig = sigs[i];
  if (!sig) {
    char *end;
    const long k = strtol(v, &end, 10);
    if (*end || k <= 0 || k > 64) return -1;
    sig = (int)k;
  }
  /* Only where a handler waits (plain C: the disposition is read by
   * swapping it, and put back). */
  void (*now)(int) = signal(sig, SIG_IGN);
  if (now == SIG_ERR) return -1;
  signal(sig, now);
  if (now == SIG_DFL || now == SIG_IGN) return -1;
  return raise(sig) == 0 ? 0 : -1;
}

#ifdef __cplusplus
}
#endif

/* Environment variables Chorus adds (every one is listed, with its default,
 * by `chorus_info`). */
#define CHORUS_ENV_HOST_COMM         "CHORUS_HOST_COMM"         /* 1: host memory even with GPUs */
#define CHORUS_ENV_BOOTSTRAP_TIMEOUT "CHORUS_BOOTSTRAP_TIMEOUT" /* seconds, init rendezvous */
#define CHORUS_ENV_OP_TIMEOUT        "CHORUS_OP_TIMEOUT"        /* seconds a collective may wait */

#endif /* CHORUS_H_ */

/*
 * plan_comm.h - GPU communicators as the planner sees them, for unit tests
 * of the planner and of what runs its tasks.
 */
#ifndef CHORUS_TEST_PLAN_COMM_H
#define CHORUS_TEST_PLAN_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"

/* Rank r of n GPUs of the communicator named key, the GPUs reaching each
 * other, every rank in this process or not (one_process), Send/Recv in LL
 * up to p2p_ll_max bytes, zero-copy over at most zc_channels CTAs of at
 * least zc_cta_bytes, the other shapes fixed (64 channels of 64 KiB, rings
 * 32 of 512 KiB, two-shot 32 of 64 KiB and LL shares to 64 KiB), and
 * NCCL_ALGO, NCCL_PROTO and CHORUS_TUNE as the environment holds them now.
 * Returns 0, or -1 after printing why the settings were refused. */
int plan_comm_gpu(chorus_plan_comm *m, int n, int r, uint64_t key, int one_process,
                  size_t p2p_ll_max, uint32_t zc_channels, size_t zc_cta_bytes);

/* A probe whose facts for a call of rank k are ((uint32_t *)arg)[k]. */
uint32_t plan_probe_by_rank(void *arg, const chorus_plan_call *c, uint32_t want);
/* A probe whose facts *(uint32_t *)arg hold for every call. */
uint32_t plan_probe_same(void *arg, const chorus_plan_call *c, uint32_t want);

/* The task the planner gives one call of func (count elements of esize
 * bytes, root 0, the buffers given) on m, planned with its group, the
 * facts `facts` holding for every rank (PreMulSum among them, or not);
 * algo -1, and the message on stderr, when planning fails. */
chorus_task plan_choose_one(const chorus_plan_comm *m, int func, size_t count, size_t esize,
                            const void *send, const void *recv, uint32_t facts);

#define PLAN_FACTS_ALL (CHORUS_FACT_STREAM_OK | CHORUS_FACT_SEND_REACH | CHORUS_FACT_RECV_REACH)

#endif

/*
 * readrate.h - how much slower this machine reads another process's
 * memory (process_vm_readv, the peer reads of algorithm zerocopy) than it
 * copies memory within a process (memcpy, what the algorithms through
 * shared-memory stages do). The ratio differs between machines: at 1 MiB
 * 1.6 on an Intel Xeon guest, 4.2 on an AMD EPYC one (memcpy 2.3x faster,
 * process_vm_readv alike), where zerocopy, the fastest AllReduce at 1-16
 * MiB on 2 ranks of the first, is 2.7x slower than the ring. So the cost
 * model prices zerocopy and direct by it (algo/cost.c); where it is over
 * CHORUS_READ_DEAR the model never prefers zerocopy (coll/prepare.c) and
 * sends between processes keep to the slots (shm.c).
 */
#ifndef CHORUS_TRANSPORT_SHM_READRATE_H
#define CHORUS_TRANSPORT_SHM_READRATE_H

/* process_vm_readv's time over memcpy's for 1 MiB, the best of a few of
 * each on this process's own memory (the kernel's path is a peer's),
 * measured once per process (about 0.3 ms); 0 where process_vm_readv
 * fails. CHORUS_READ_SLOWDOWN (testing) gives the value instead, so that
 * tests can check what each ratio makes the library choose. */
double chorus_shm_read_slowdown(void);

/* Where the ranks' agreed slowdown is over this, a read costs more than
 * the two copies through shared-memory slots, and sends between processes
 * go through the slots at every size (shm.c). */
#define CHORUS_READ_DEAR 2.0

#endif

/*
 * affinity.h - spreading a machine's ranks over its CPUs where they
 * outnumber them.
 *
 * With more ranks than CPUs the scheduler may leave three ranks on one CPU
 * and one on the other (2 vCPUs, 4 processes) for a run's whole life; a
 * call that needs every rank then waits for three turns on the crowded
 * CPU a step: a 4-rank AllReduce of 8-128 B took 4.8-5.1 us so placed and
 * 2.5 us with two ranks a CPU (taskset, either pairing), the two modes
 * turning up at random from run to run. Bound by its place among the
 * machine's ranks, every CPU holds as many ranks, give or take one.
 */
#ifndef CHORUS_UTIL_AFFINITY_H
#define CHORUS_UTIL_AFFINITY_H

/* Binds the calling thread (and the threads it starts later) to the
 * (place % n)-th of the n CPUs it may run on, where `ranks` outnumber
 * them. Leaves it alone where they do not, or where something already
 * bound it to fewer CPUs than the machine has online (a launcher, the
 * user, or this function for another communicator). Returns the CPU it
 * bound to, or -1. */
int chorus_affinity_spread(int place, int ranks);

#endif

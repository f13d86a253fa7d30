/*
 * device.h - the only header through which host code reaches CUDA.
 *
 * Plain C. Built without CUDA (device_none.c) every query reports no device,
 * so communicators use host memory. Built with CUDA, the .cu files behind
 * this header implement it with the CUDA runtime.
 */
#ifndef CHORUS_DEVICE_DEVICE_H
#define CHORUS_DEVICE_DEVICE_H

#include <stddef.h>

/* Number of CUDA devices this process can use (0 without CUDA, without a
 * driver, or without a GPU). Never fails. */
int chorus_device_count(void);

/* The calling thread's current CUDA device, or -1 when there is none. */
int chorus_device_current(void);

/* 1 if the library was built with CUDA support. */
int chorus_device_built(void);

#endif

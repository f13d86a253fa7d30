/*
 * ref.h - independent reference values for collective tests.
 *
 * Tests build inputs from exactly representable values and compute expected
 * results in double (or exact modular integer arithmetic), with their own
 * encoders and decoders for every NCCL data type: none of this uses the
 * library's conversion or reduction code.
 */
#ifndef CHORUS_TEST_REF_H
#define CHORUS_TEST_REF_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

size_t ref_type_size(ncclDataType_t t);
const char *ref_type_name(ncclDataType_t t);
int ref_is_float(ncclDataType_t t);

/* Reads element i of a buffer of type t as double (integers exactly up to
 * 2^53; 64-bit integers should use ref_get_u64). */
double ref_get(ncclDataType_t t, const void *buf, size_t i);
uint64_t ref_get_u64(ncclDataType_t t, const void *buf, size_t i);
/* Stores v (which must be exactly representable in t) at element i. */
void ref_set(ncclDataType_t t, void *buf, size_t i, double v);
void ref_set_u64(ncclDataType_t t, void *buf, size_t i, uint64_t v);

/* The input value of rank r, element i, for a test of op on type t: small
 * integers (or powers of two for products) so that every exact reduction
 * stays exactly representable with up to 8 ranks. */
double ref_input(ncclDataType_t t, int op, int r, size_t i);

/* The PreMulSum scalar tests give rank r: 2 on even ranks, 1 on odd ones, so
 * a library that applies one rank's scalar to another's data is caught. */
double ref_premul_scalar(int r);

/* Expected result of reducing the inputs of nranks ranks with op (0 sum,
 * 1 prod, 2 max, 3 min, 4 avg (scaled by `scalar` = 1/n for floats), 5
 * premulsum with each rank's ref_premul_scalar), for element i.
 * Integers: computed modulo 2^bits like the hardware (returned via u64). */
double ref_expected(ncclDataType_t t, int op, int nranks, size_t i, double scalar);
uint64_t ref_expected_u64(ncclDataType_t t, int op, int nranks, size_t i);

/* Acceptable absolute error for a result of magnitude |v| (0 when the
 * reduction is exact). */
double ref_tolerance(ncclDataType_t t, int op, double v);

/* Checks count elements of buf; returns the number of wrong ones and prints
 * the first few. */
size_t ref_check(ncclDataType_t t, int op, int nranks, const void *buf, size_t count, double scalar,
                 const char *what);
/* The same for elements that reduce input index first + i (ReduceScatter). */
size_t ref_check_at(ncclDataType_t t, int op, int nranks, const void *buf, size_t first,
                    size_t count, double scalar, const char *what);

/* Writes rank r's inputs for op: elements first .. first+count-1 of its
 * input sequence into buf[0..count). */
void ref_fill(ncclDataType_t t, int op, int r, void *buf, size_t first, size_t count);
/* Checks that buf[0..count) holds rank r's inputs first..first+count-1
 * (for data that is moved, not reduced). Returns the number of wrong ones. */
size_t ref_check_copy(ncclDataType_t t, int op, int r, const void *buf, size_t first, size_t count,
                      const char *what);

#endif

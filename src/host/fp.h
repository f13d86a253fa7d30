/*
 * fp.h - software conversions between float and the narrow floating types
 * NCCL supports: IEEE binary16 (ncclFloat16), bfloat16, and the OCP fp8
 * formats e4m3 (ncclFloat8e4m3: bias 7, no infinities, NaN = S.1111.111,
 * max 448) and e5m2 (ncclFloat8e5m2: bias 15, IEEE-like, max finite 57344).
 *
 * float -> narrow rounds to nearest even. Overflow: binary16 and bfloat16
 * give infinity; fp8 saturates to the largest finite value (CUDA's
 * __NV_SATFINITE, which cuda_fp8.h's constructors use). NaN stays NaN.
 * Subnormals are handled exactly in both directions.
 */
#ifndef CHORUS_HOST_FP_H
#define CHORUS_HOST_FP_H

#include <stdint.h>

float chorus_half_to_float(uint16_t h);
uint16_t chorus_float_to_half(float f);
float chorus_bf16_to_float(uint16_t b);
uint16_t chorus_float_to_bf16(float f);
float chorus_e4m3_to_float(uint8_t v);
uint8_t chorus_float_to_e4m3(float f);
float chorus_e5m2_to_float(uint8_t v);
uint8_t chorus_float_to_e5m2(float f);

/* Straight from double, rounding once (going through float could round twice
 * and miss the nearest value). Used for scalars such as 1/nranks. */
uint16_t chorus_double_to_half(double d);
uint16_t chorus_double_to_bf16(double d);
uint8_t chorus_double_to_e4m3(double d);
uint8_t chorus_double_to_e5m2(double d);

#endif

/*
 * core/half.h - IEEE half to float and back, inline, for loops that
 * convert many (core/dtype.c's rows, nn/gemm.c's f16 products).
 */
#ifndef CG_HALF_H
#define CG_HALF_H

#include <stdint.h>
#include <string.h>

static inline float
as_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t
as_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/*
 * Both conversions without a branch, so that a loop over them runs as
 * fast on subnormals and zeros as on normal values (updates hold many).
 * Half to float: a normal half's bits shift into place and the exponent
 * is rebiased by 112; inf and nan get the rest of the exponent; a
 * subnormal (man * 2^-24) is the float with those mantissa bits at
 * exponent 2^-14, less 2^-14, which is exact.
 */
static inline float
half_to_float(uint16_t h)
{
	uint32_t o = (uint32_t)(h & 0x7fff) << 13, e = o & 0x0f800000u;
	uint32_t normal = o + 0x38000000u;
	uint32_t special = normal + 0x38000000u;
	uint32_t sub = as_bits(as_float(normal + 0x00800000u) -
	                       as_float(0x38800000u));

	o = e == 0x0f800000u ? special : e == 0 ? sub : normal;
	return as_float(o | (uint32_t)(h & 0x8000) << 16);
}

/*
 * Float to half, to nearest even.  Normal halves (2^-14 <= |f| < 65520):
 * the exponent is rebiased by subtracting 112 << 23, and rounding adds
 * 0xfff plus the lowest kept bit before the shift; a carry into the
 * exponent is still the right half (65520 and up carry into inf).  Below
 * 2^-14 adding 0.5 puts the half's subnormal bits at the bottom of the
 * float's mantissa, rounded to nearest even by the addition itself.
 * |f| >= 65536 is inf, and a nan stays a (quiet) nan.
 */
static inline uint16_t
float_to_half(float x)
{
	uint32_t f = as_bits(x), sign = f & 0x80000000u;

	f ^= sign;
	uint32_t special = f > 0x7f800000u ? 0x7e00u : 0x7c00u;
	uint32_t sub = as_bits(as_float(f) + 0.5f) - 0x3f000000u;
	uint32_t normal = (f + 0xc8000fffu + ((f >> 13) & 1)) >> 13;
	uint32_t o = f >= 0x47800000u ? special
	             : f < 0x38800000u ? sub
	                               : normal;
	return (uint16_t)(o | sign >> 16);
}

#endif

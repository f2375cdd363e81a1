/*
 * nn/vmath.h - the exponential and log1p of the element-wise kernels, in
 * straight-line code the compiler vectorizes.
 *
 * libm's expf, log1pf and tanhf are calls that keep a loop scalar; these
 * are inline, branch-free and within 2 ulp over the ranges their callers
 * use, so that the softmaxes, GELU, sigmoid and binary cross-entropy of
 * every model run sixteen lanes at a time.  Every caller of an operation
 * takes the same function, so a model's training and sampling agree.
 */
#ifndef CG_VMATH_H
#define CG_VMATH_H

#include <stdint.h>

/*
 * e^x for x <= 0 (every caller passes a difference from a maximum, or
 * -|u|): x = n ln 2 + r with |r| <= ln 2 / 2 (Cody-Waite), Cephes'
 * polynomial for e^r, 2^n built in the exponent bits.  Below -87 the
 * result is e^-87 rather than smaller: beside the 1 of a softmax maximum
 * or of 1 + e^-|u| that is 0.
 */
static inline float
cg_exp_approx(float x)
{
	/*
	 * The clamp is done on the bits: a negative float's bits, unsigned,
	 * grow with its magnitude, and an integer min vectorizes where a
	 * float comparison (which may trap) blocks if-conversion.
	 */
	union {
		float f;
		uint32_t u;
	} c = {.f = x};
	c.u = c.u > 0xc2ae0000u ? 0xc2ae0000u : c.u; /* -87.0f */
	x = c.f;
	/* Round to nearest by the 1.5 * 2^23 trick. */
	float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
	float r = x - n * 0.693359375f + n * 2.12194440e-4f;
	float p = 1.9875691500e-4f;

	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	union {
		int32_t i;
		float f;
	} two = {.i = ((int32_t)n + 127) << 23};
	return p * two.f;
}

/*
 * log(1 + x) for 0 <= x < 2^24 (the callers pass e^-|u| <= 1).  u = 1 + x
 * is split as 2^k m with m in [sqrt(2)/2, sqrt(2)); log m = log(1 + f)
 * comes from s = f / (2 + f) and the minimax polynomial in s^2 of fdlibm's
 * logf, k ln 2 is added in two parts, and (x - (u - 1)) / u puts back
 * what rounding 1 + x lost, so that small x keep their relative accuracy.
 */
static inline float
cg_log1p_approx(float x)
{
	const float ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f;
	float u = 1.0f + x;
	union {
		float f;
		uint32_t i;
	} b = {.f = u};
	/* Bias the bits so that the exponent field counts from sqrt(2)/2. */
	uint32_t ix = b.i + (0x3f800000u - 0x3f3504f3u);
	float k = (float)((int32_t)(ix >> 23) - 127);

	b.i = (ix & 0x007fffffu) + 0x3f3504f3u;
	float f = b.f - 1.0f;
	float c = (x - (u - 1.0f)) / u;
	float s = f / (2.0f + f);
	float z = s * s, w = z * z;
	float R = z * (0.66666662693f + w * 0.28498786688f) +
	          w * (0.40000972152f + w * 0.24279078841f);
	float hfsq = 0.5f * f * f;

	return k * ln2_hi + ((s * (hfsq + R) + (k * ln2_lo + c)) - hfsq + f);
}

#endif

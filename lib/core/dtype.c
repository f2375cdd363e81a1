/*
 * core/dtype.c - the codec table: one row per dtype, its size and its
 * conversions to and from f32, as ggml's type_traits.
 *
 * Every reader and writer of tensor values goes through this table; no other
 * file switches on a dtype.  A plain type's elements are host words here
 * (files hold them little-endian: their readers and writers turn them
 * around); a block is bytes, its f16 scales little-endian on every host.  Block
 * types (q8_0, q4_0) follow ggml's layout and its reference quantizers bit for
 * bit: blocks of 32 elements, each with one f16 scale first; q8_0 holds 32
 * int8, q4_0 16 bytes of 4-bit values; q2_0, cg's own, q4_0's rule at 2 bits.
 * Half conversions round to nearest even.  The rules for values a dtype cannot
 * hold are in core/dtype.h, beside the table.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/half.h"
#include "core/error.h"
#include "core/rng.h"

#define QK 32 /* elements per q8_0 / q4_0 block */

/* ------------------------------------------------------- half precision */

float
cg_f16_to_f32(uint16_t h)
{
	return half_to_float(h);
}

uint16_t
cg_f32_to_f16(float f)
{
	return float_to_half(f);
}

float
cg_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

uint16_t
cg_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000) /* nan stays nan */
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* ---------------------------------------------------------- byte order */

/*
 * A block's f16 scales are little-endian bytes wherever the block lies
 * (blocks are bytes: a file's reader and writer leave them as they are).
 * A plain type's elements are host words in memory (the reader and writer
 * of a file turn them around on a big-endian host: core/util.h), so its
 * row reads and writes them as such.
 */
static uint16_t
get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void
put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

#define HOST_WORD(BITS)                                                        \
	static inline uint##BITS##_t host##BITS(const unsigned char *p)        \
	{                                                                      \
		uint##BITS##_t v;                                              \
		memcpy(&v, p, sizeof(v));                                      \
		return v;                                                      \
	}                                                                      \
	static inline void sethost##BITS(unsigned char *p, uint##BITS##_t v)   \
	{                                                                      \
		memcpy(p, &v, sizeof(v));                                      \
	}
HOST_WORD(16)
HOST_WORD(32)
HOST_WORD(64)

/* -------------------------------------------------------- float types */

/* The f32 of memory is the float: a copy (a model's views are read at
 * memory speed, nan payloads and all). */
static void
f32_decode(float *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n * 4);
}

static int
f32_encode(void *dst, const float *src, size_t n)
{
	if (n)
		memcpy(dst, src, n * 4);
	return 0;
}

/* The decode and encode of a 16-bit float type over its conversions. */
#define HALF_CODEC(NAME, TO_F32, FROM_F32)                                     \
	static void NAME##_decode(float *dst, const void *src, size_t n)       \
	{                                                                      \
		const unsigned char *p = src;                                  \
		for (size_t i = 0; i < n; i++)                                 \
			dst[i] = TO_F32(host16(p + 2 * i));                    \
	}                                                                      \
	static int NAME##_encode(void *dst, const float *src, size_t n)        \
	{                                                                      \
		unsigned char *p = dst;                                        \
		for (size_t i = 0; i < n; i++)                                 \
			sethost16(p + 2 * i, FROM_F32(src[i]));                \
		return 0;                                                      \
	}

HALF_CODEC(f16, half_to_float, float_to_half)
HALF_CODEC(bf16, cg_bf16_to_f32, cg_f32_to_bf16)

/* ------------------------------------------------------ integer types */

/* -1 with a message if src[n] holds a nan (the integer encoders' one
 * refusal), naming the first. */
static int
refuse_nan(const float *src, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (isnan(src[i]))
			return cg_seterr("element %zu is nan, which %s cannot "
			                 "hold",
			                 i, name);
	return 0;
}

/* x rounded to the nearest integer, ties to even, whatever the rounding
 * mode the caller left (an infinity stays itself). */
static double
round_even(float x)
{
	float r = floorf(x);
	float d = x - r; /* exact: x and r share their exponent range */

	if (d > 0.5f || (d == 0.5f && fmodf(r, 2.0f) != 0))
		r += 1.0f;
	return r;
}

#define INT_CODEC(NAME, T, BYTES, GET, PUT, LO, HI)                            \
	static void NAME##_decode(float *dst, const void *src, size_t n)       \
	{                                                                      \
		const unsigned char *p = src;                                  \
		for (size_t i = 0; i < n; i++)                                 \
			dst[i] = (float)(T)GET(p + (BYTES)*i);                 \
	}                                                                      \
	static void NAME##_to_u64(uint64_t *dst, const void *src, size_t n)    \
	{                                                                      \
		const unsigned char *p = src;                                  \
		for (size_t i = 0; i < n; i++)                                 \
			dst[i] = (uint64_t)(T)GET(p + (BYTES)*i);              \
	}                                                                      \
	static int NAME##_encode(void *dst, const float *src, size_t n)        \
	{                                                                      \
		unsigned char *p = dst;                                        \
		if (refuse_nan(src, n, #NAME) != 0)                            \
			return -1;                                             \
		for (size_t i = 0; i < n; i++) {                               \
			double r = round_even(src[i]);                         \
			T v = r <= (double)(LO)   ? (T)(LO)                    \
			      : r >= (double)(HI) ? (T)(HI)                    \
			                          : (T)r;                      \
			PUT(p + (BYTES)*i, v);                                 \
		}                                                              \
		return 0;                                                      \
	}

static uint8_t
get8(const unsigned char *p)
{
	return *p;
}

static void
put8(unsigned char *p, uint8_t v)
{
	*p = v;
}

/* The two's complement byte of v, without an implementation-defined
 * conversion of a negative value to unsigned. */
#define PUT_I8(p, v) put8(p, (uint8_t)((v) < 0 ? (v) + 256 : (v)))
#define GET_I8(p) ((int)get8(p) - (get8(p) & 0x80 ? 256 : 0))

/*
 * The rounded value is compared in double with the range's ends, exact
 * there (UINT64_MAX becomes 2^64, the first value above the range, which
 * is where saturation starts anyway): every integral float inside the
 * range converts exactly, everything beyond it saturates.
 */
INT_CODEC(i8, int8_t, 1, GET_I8, PUT_I8, -128, 127)
INT_CODEC(u8, uint8_t, 1, get8, put8, 0, 255)
INT_CODEC(u16, uint16_t, 2, host16, sethost16, 0, 65535)
INT_CODEC(u32, uint32_t, 4, host32, sethost32, 0, UINT32_MAX)
INT_CODEC(u64, uint64_t, 8, host64, sethost64, 0, UINT64_MAX)

/* --------------------------------------------------------- block types */

/* The largest |x| of block x [QK], by the bits of |x| (the order of
 * non-negative floats), and whether every element is finite. */
static int
block_amax(const float *x, float *amax)
{
	uint32_t top = 0;

	for (int j = 0; j < QK; j++) {
		uint32_t u;
		memcpy(&u, &x[j], sizeof(u));
		u &= 0x7fffffffu;
		top = u > top ? u : top;
	}
	memcpy(amax, &top, sizeof(*amax));
	return top <= 0x7f7fffffu; /* FLT_MAX: past it, inf and NaN */
}

/* -1 with a message if a block of src[n] is not finite or needs a scale
 * beyond f16 (|x| > 65504 * qmax): ggml's quantizers are undefined there. */
static int
check_blocks(const float *src, size_t n, float qmax, const char *name)
{
	for (size_t i = 0; i < n; i += QK) {
		float amax;
		/* x / qmax grows with |x|: the block's largest decides */
		if (block_amax(src + i, &amax) && !(amax / qmax > 65504.0f))
			continue;
		for (size_t j = i; j < i + QK; j++) {
			if (!isfinite(src[j]))
				return cg_seterr("element %zu is not finite, which "
				                 "%s cannot hold",
				                 j, name);
			if (fabsf(src[j]) == amax)
				return cg_seterr("element %zu (%g) needs a scale "
				                 "beyond f16, which %s cannot hold",
				                 j, (double)src[j], name);
		}
	}
	return 0;
}

/* The scale of a q4_0-style block of levels 0..2h-1 around h: max is the
 * element of largest magnitude with its sign (the first of equals), and
 * the block's d = max / -h.  The block is finite (check_blocks). */
static float
signed_max(const float *x)
{
	float amax;
	int j = 0;

	block_amax(x, &amax);
	while (j < QK - 1 && fabsf(x[j]) != amax)
		j++;
	return amax == 0 ? 0.0f : x[j];
}

/* roundf(v), halves away from zero, for |v| < 2^31: v less its
 * truncation is exact there. */
static int
round_away(float v)
{
	int i = (int)v;
	float r = v - (float)i;

	return i + (r >= 0.5f) - (r <= -0.5f);
}

static void
q8_0_decode(float *dst, const void *src, size_t n)
{
	const unsigned char *b = src;

	/* the product is taken in float, as ggml's dequantize_row_q8_0 */
	for (size_t i = 0; i < n; i += QK, b += 2 + QK) {
		float d = cg_f16_to_f32(get16(b));
		for (int j = 0; j < QK; j++)
			dst[i + j] = d * (float)GET_I8(b + 2 + j);
	}
}

/*
 * 1/d, the block encoders' multiplier, or 0 where d is 0 or so small
 * (a block of subnormals) that 1/d overflows: every level then encodes
 * 0, which is what such a block decodes to anyway, its scale being 0
 * in f16.  Without it x * inf would be an inf or a nan, and its
 * conversion to an integer undefined.
 */
static inline float
inv_scale(float d)
{
	float id = d != 0 ? 1.0f / d : 0.0f;

	return isfinite(id) ? id : 0.0f;
}

/* ggml's quantize_row_q8_0_reference: d = max|x| / 127, q = roundf(x / d)
 * taken as x * (1/d) with the float d (the stored scale is d in f16). */
static int
q8_0_encode(void *dst, const float *src, size_t n)
{
	unsigned char *b = dst;

	if (check_blocks(src, n, 127.0f, "q8_0") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 2 + QK) {
		float amax, d, id;
		block_amax(src + i, &amax);
		d = amax / 127;
		id = inv_scale(d);
		put16(b, cg_f32_to_f16(d));
		for (int j = 0; j < QK; j++) {
			int q = round_away(src[i + j] * id);
			PUT_I8(b + 2 + j, q);
		}
	}
	return 0;
}

static void
q4_0_decode(float *dst, const void *src, size_t n)
{
	const unsigned char *b = src;

	/* element j < 16 is the low nibble of byte j, element j >= 16 the
	 * high nibble of byte j - 16 */
	for (size_t i = 0; i < n; i += QK, b += 2 + QK / 2) {
		float d = cg_f16_to_f32(get16(b));
		for (int j = 0; j < QK / 2; j++) {
			dst[i + j] = d * (float)((b[2 + j] & 15) - 8);
			dst[i + j + QK / 2] = d * (float)((b[2 + j] >> 4) - 8);
		}
	}
}

/*
 * ggml's quantize_row_q4_0_reference: max is the element of largest
 * magnitude with its sign (the first of equals), d = max / -8, and
 * q = min(15, trunc(x * (1/d) + 8.5)).  The product is rounded to float
 * before the sum (the house build is ISO C: no contraction into an FMA),
 * which is what ggml's reference computes when compiled the same way.
 */
static int
q4_0_encode(void *dst, const float *src, size_t n)
{
	unsigned char *b = dst;

	if (check_blocks(src, n, 8.0f, "q4_0") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 2 + QK / 2) {
		float d, id;
		d = signed_max(src + i) / -8;
		id = inv_scale(d);
		put16(b, cg_f32_to_f16(d));
		for (int j = 0; j < QK / 2; j++) {
			float x0 = src[i + j] * id;
			float x1 = src[i + j + QK / 2] * id;
			int q0 = (int)(x0 + 8.5f), q1 = (int)(x1 + 8.5f);
			q0 = q0 > 15 ? 15 : q0;
			q1 = q1 > 15 ? 15 : q1;
			b[2 + j] = (unsigned char)(q0 | q1 << 4);
		}
	}
	return 0;
}

static void
q2_0_decode(float *dst, const void *src, size_t n)
{
	const unsigned char *b = src;

	for (size_t i = 0; i < n; i += QK, b += 2 + QK / 4) {
		float d = cg_f16_to_f32(get16(b));
		for (int k = 0; k < QK / 4; k++)
			for (int t = 0; t < 4; t++)
				dst[i + 4 * k + t] =
				    d * (float)(((b[2 + k] >> (2 * t)) & 3) - 2);
	}
}

static int
q2_0_encode(void *dst, const float *src, size_t n)
{
	unsigned char *b = dst;

	if (check_blocks(src, n, 2.0f, "q2_0") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 2 + QK / 4) {
		float d = signed_max(src + i) / -2;
		float id = inv_scale(d);
		put16(b, cg_f32_to_f16(d));
		for (int k = 0; k < QK / 4; k++) {
			unsigned byte = 0;
			for (int t = 0; t < 4; t++) {
				float xs = src[i + 4 * k + t] * id;
				int q = (int)(xs + 2.5f);
				q = q > 3 ? 3 : q;
				byte |= (unsigned)q << (2 * t);
			}
			b[2 + k] = (unsigned char)byte;
		}
	}
	return 0;
}

/* q4_1: the f16 scale d, the f16 minimum m, then 16 bytes of 4-bit
 * levels as q4_0's (element j < 16 the low nibble of byte j, element
 * j >= 16 the high nibble of byte j - 16); the value d * q + m. */
static void
q4_1_decode(float *dst, const void *src, size_t n)
{
	const unsigned char *b = src;

	for (size_t i = 0; i < n; i += QK, b += 4 + QK / 2) {
		float d = cg_f16_to_f32(get16(b)), m = cg_f16_to_f32(get16(b + 2));
		for (int j = 0; j < QK / 2; j++) {
			dst[i + j] = d * (float)(b[4 + j] & 15) + m;
			dst[i + j + QK / 2] = d * (float)(b[4 + j] >> 4) + m;
		}
	}
}

/* The least and greatest element of block x[QK], the first of equals
 * (as ggml's C reads them). */
static void
block_range(const float *x, float *min, float *max)
{
	*min = *max = x[0];
	for (int j = 1; j < QK; j++) {
		*min = x[j] < *min ? x[j] : *min;
		*max = x[j] > *max ? x[j] : *max;
	}
}

/* Levels q[QK] (0 to 15) as q4_0's and q4_1's nibbles into b[QK / 2]. */
static void
put_nibbles(unsigned char *b, const unsigned char *q)
{
	for (int j = 0; j < QK / 2; j++)
		b[j] = (unsigned char)(q[j] | q[j + QK / 2] << 4);
}

/*
 * ggml's quantize_row_q4_1_reference: min and max of the block, d =
 * (max - min) / 15, q = min(15, trunc((x - min) * (1/d) + 0.5)), the
 * float min (not its f16) subtracted.
 */
static int
q4_1_encode(void *dst, const float *src, size_t n)
{
	unsigned char *b = dst;

	/* |x| <= 65504 keeps min in f16, and (max - min) / 15 with it */
	if (check_blocks(src, n, 1.0f, "q4_1") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 4 + QK / 2) {
		float min, max, d, id;
		block_range(src + i, &min, &max);
		d = (max - min) / 15;
		id = inv_scale(d);
		put16(b, cg_f32_to_f16(d));
		put16(b + 2, cg_f32_to_f16(min));
		for (int j = 0; j < QK / 2; j++) {
			float x0 = (src[i + j] - min) * id;
			float x1 = (src[i + j + QK / 2] - min) * id;
			int q0 = (int)(x0 + 0.5f), q1 = (int)(x1 + 0.5f);
			q0 = q0 > 15 ? 15 : q0;
			q1 = q1 > 15 ? 15 : q1;
			b[4 + j] = (unsigned char)(q0 | q1 << 4);
		}
	}
	return 0;
}

/* ------------------------------------------------------ fitted blocks */

/*
 * The fitted encoders choose, per block, the stored scale (and q4_1's
 * minimum) whose decoded block lies nearest the input in squared error
 * weighted by fit_weights, the f16 rounding of the stored values
 * included: the reference rule's choice, and what alternating weighted
 * least squares reaches from it and from FIT_STARTS narrower spans of
 * the block (the levels assigned, then the scale and minimum that fit
 * those levels best, FIT_ROUNDS times).  The reference is a candidate,
 * so a fitted block is never further from the input than the
 * reference's, in that measure.  The bytes are a function of the block
 * alone and decode as any block of the type.
 */
#define FIT_STARTS 8
#define FIT_ROUNDS 3

/* A q4_1 block of d and m (rounded to f16 here): levels into q, the
 * squared error of the block as decoded returned. */
static double
q4_1_try(const float *x, const float *w, float d32, float m32, uint16_t *dh,
         uint16_t *mh, unsigned char *q)
{
	float d, m, id;
	double err = 0;

	*dh = cg_f32_to_f16(d32);
	*mh = cg_f32_to_f16(m32);
	d = cg_f16_to_f32(*dh);
	m = cg_f16_to_f32(*mh);
	if (!isfinite(d) || !isfinite(m))
		return INFINITY;
	id = inv_scale(d);
	for (int j = 0; j < QK; j++) {
		float t = (x[j] - m) * id + 0.5f;
		int l = t <= 0 ? 0 : t >= 15 ? 15 : (int)t;
		double e = (double)(d * (float)l + m) - (double)x[j];
		q[j] = (unsigned char)l;
		err += w[j] * e * e;
	}
	return err;
}

/* The d and m fitting levels q to x best (least squares); 0, or -1 when
 * the levels are all equal. */
static int
fit_line(const float *x, const float *w, const unsigned char *q, float *d,
         float *m)
{
	double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0, det;

	for (int j = 0; j < QK; j++) {
		sw += w[j];
		sq += w[j] * q[j];
		sqq += w[j] * q[j] * q[j];
		sx += w[j] * x[j];
		sqx += w[j] * q[j] * x[j];
	}
	det = sw * sqq - sq * sq;
	if (det <= 0)
		return -1;
	*d = (float)((sw * sqx - sq * sx) / det);
	*m = (float)((sqq * sx - sq * sqx) / det);
	return 0;
}

/* Each element's weight in a block's error: |x| plus the block's root
 * mean square, so that the large values, which carry most of a layer's
 * output, count the more, and the small ones still count. */
static void
fit_weights(const float *x, float *w)
{
	double ms = 0;
	float rms;

	for (int j = 0; j < QK; j++)
		ms += (double)x[j] * x[j];
	rms = (float)sqrt(ms / QK);
	for (int j = 0; j < QK; j++)
		w[j] = fabsf(x[j]) + rms;
}

/* A q4_1 try's levels of x at scale d (id its inverse) and minimum m
 * into q, and each element's error term into t, as q4_1_try makes them
 * (vectorized; see q4_0_terms). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-trapping-math")))
#endif
static void
q4_1_terms(const float *restrict x, const float *restrict w, float d,
           float m, float id, unsigned char *restrict q, double *restrict t)
{
	for (int j = 0; j < QK; j++) {
		float v = (x[j] - m) * id + 0.5f;
		/* q4_1_try's level: v truncated, within [0, 15] */
		int l = (int)(v <= 0 ? 0 : v >= 15 ? 15 : v);
		double e = (double)(d * (float)l + m) - (double)x[j];
		q[j] = (unsigned char)l;
		t[j] = w[j] * e * e;
	}
}

/* fit_line's terms of levels q that depend on them, as it makes them. */
static void
line_terms(const float *restrict x, const float *restrict w,
           const unsigned char *restrict q, double *restrict tq,
           double *restrict tqq, double *restrict tqx)
{
	for (int j = 0; j < QK; j++) {
		tq[j] = w[j] * q[j];
		tqq[j] = w[j] * q[j] * q[j];
		tqx[j] = w[j] * q[j] * x[j];
	}
}

static void sum9(double (*t)[QK], double *sum);

/*
 * A q4_1 block fitted as the loop of q4_1_fit_loop fits it, its starts
 * worked out side by side as q4_0_fit_starts works out q4_0's (each sum
 * of fit_line's in element order; the two that do not depend on the
 * levels made once).  best, bd, bm and bq as q4_0_fit_starts takes
 * them; -1, and they untouched, where a start's scale or minimum is no
 * f16 (the caller then fits the block by the loop).
 */
static int
q4_1_fit_starts(const float *x, const float *w, float min, float max,
                double *best, uint16_t *bd, uint16_t *bm, unsigned char *bq)
{
	enum { S = FIT_STARTS + 1, R = FIT_ROUNDS };
	float d[S], m[S], dd[S], mm[S], id[S];
	double err[S][R], t1[S][QK], t2[S][QK], t3[S][QK];
	double acc[S], sq[S], sqq[S], sqx[S], sw = 0, sx = 0;
	uint16_t dh[S][R], mh[S][R];
	unsigned char q[S][R][QK];
	int nr[S], on[S];

	for (int j = 0; j < QK; j++) {
		sw += w[j];
		sx += w[j] * x[j];
	}
	for (int k = 0; k < S; k++) {
		float cut = (max - min) * (float)k / 64;
		d[k] = (max - min - 2 * cut) / 15;
		m[k] = min + cut;
		nr[k] = 0;
		on[k] = 1;
	}
	for (int r = 0; r < R; r++) {
		for (int k = 0; k < S; k++) {
			dh[k][r] = cg_f32_to_f16(d[k]);
			mh[k][r] = cg_f32_to_f16(m[k]);
			dd[k] = cg_f16_to_f32(dh[k][r]);
			mm[k] = cg_f16_to_f32(mh[k][r]);
			if (!isfinite(dd[k]) || !isfinite(mm[k]))
				return -1;
			id[k] = inv_scale(dd[k]);
			q4_1_terms(x, w, dd[k], mm[k], id[k], q[k][r], t1[k]);
		}
		sum9(t1, acc);
		for (int k = 0; k < S; k++)
			if (on[k]) {
				err[k][r] = acc[k];
				nr[k] = r + 1;
			}
		if (r == R - 1)
			break;
		for (int k = 0; k < S; k++)
			line_terms(x, w, q[k][r], t1[k], t2[k], t3[k]);
		sum9(t1, sq);
		sum9(t2, sqq);
		sum9(t3, sqx);
		for (int k = 0; k < S; k++) {
			double det = sw * sqq[k] - sq[k] * sq[k];
			if (!on[k])
				continue;
			if (det <= 0) {
				on[k] = 0;
				continue;
			}
			float nd = (float)((sw * sqx[k] - sq[k] * sx) / det);
			float nm = (float)((sqq[k] * sx - sq[k] * sqx[k]) / det);
			/* an ended start keeps its last scale, which f16
			 * holds, so it cannot send the block to the loop */
			if (fabsf(nd) > 65504.0f || fabsf(nm) > 65504.0f) {
				on[k] = 0;
				continue;
			}
			d[k] = nd;
			m[k] = nm;
		}
	}
	for (int k = 0; k < S; k++)
		for (int r = 0; r < nr[k]; r++)
			if (err[k][r] < *best) {
				*best = err[k][r];
				*bd = dh[k][r];
				*bm = mh[k][r];
				memcpy(bq, q[k][r], QK);
			}
	return 0;
}

/* The block x fitted by the loop itself, as q4_1_fit_starts must
 * equal. */
static void
q4_1_fit_loop(const float *x, const float *w, float min, float max,
              double *best, uint16_t *bd, uint16_t *bm, unsigned char *bq)
{
	unsigned char q[QK];
	uint16_t dh, mh;
	double err;

	for (int k = 0; k <= FIT_STARTS; k++) {
		/* a span narrowed by k/64 on both sides */
		float cut = (max - min) * (float)k / 64;
		float d = (max - min - 2 * cut) / 15, m = min + cut;
		for (int r = 0; r < FIT_ROUNDS; r++) {
			err = q4_1_try(x, w, d, m, &dh, &mh, q);
			if (err < *best) {
				*best = err;
				*bd = dh;
				*bm = mh;
				memcpy(bq, q, QK);
			}
			if (fit_line(x, w, q, &d, &m) != 0 ||
			    fabsf(d) > 65504.0f || fabsf(m) > 65504.0f)
				break;
		}
	}
}

static int
q4_1_fit(void *dst, const float *src, size_t n, int loop)
{
	unsigned char *b = dst;

	if (check_blocks(src, n, 1.0f, "q4_1") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 4 + QK / 2) {
		const float *x = src + i;
		float min, max;
		unsigned char bq[QK];
		uint16_t bd, bm;
		double best;
		float w[QK];

		fit_weights(x, w);
		block_range(x, &min, &max);
		best = q4_1_try(x, w, (max - min) / 15, min, &bd, &bm, bq);
		if (loop || q4_1_fit_starts(x, w, min, max, &best, &bd, &bm,
		                            bq) != 0)
			q4_1_fit_loop(x, w, min, max, &best, &bd, &bm, bq);
		put16(b, bd);
		put16(b + 2, bm);
		put_nibbles(b + 4, bq);
	}
	return 0;
}

static int
q4_1_encode_fit(void *dst, const float *src, size_t n)
{
	return q4_1_fit(dst, src, n, 0);
}

int
cg_q4_1_encode_fit_loop(void *dst, const float *src, size_t n)
{
	return q4_1_fit(dst, src, n, 1);
}

/* A q4_0 block of scale d (rounded to f16 here), as q4_1_try. */
static double
q4_0_try(const float *x, const float *w, float d32, uint16_t *dh,
         unsigned char *q)
{
	float d, id;
	double err = 0;

	*dh = cg_f32_to_f16(d32);
	d = cg_f16_to_f32(*dh);
	if (!isfinite(d))
		return INFINITY;
	id = inv_scale(d);
	for (int j = 0; j < QK; j++) {
		float t = x[j] * id + 8.5f;
		int l = t <= 0 ? 0 : t >= 15 ? 15 : (int)t;
		double e = (double)(d * (float)(l - 8)) - (double)x[j];
		q[j] = (unsigned char)l;
		err += w[j] * e * e;
	}
	return err;
}

/* A try's levels of x at scale d (id its inverse) into q, and each
 * element's term of the squared error into t, made as q4_0_try makes
 * them (in a loop of their own, which the compiler vectorizes: GCC
 * makes the clamp's branches selects only where comparisons may not
 * trap, which none of these flags' values depend on). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-trapping-math")))
#endif
static void
q4_0_terms(const float *restrict x, const float *restrict w, float d,
           float id, unsigned char *restrict q, double *restrict t)
{
	for (int j = 0; j < QK; j++) {
		float v = x[j] * id + 8.5f;
		/* q4_0_try's level: v truncated, within [0, 15] */
		int l = (int)(v <= 0 ? 0 : v >= 15 ? 15 : v);
		double e = (double)(d * (float)(l - 8)) - (double)x[j];
		q[j] = (unsigned char)l;
		t[j] = w[j] * e * e;
	}
}

/* The refit's terms of levels q, as q4_0_encode_fit's loop makes them. */
static void
refit_terms(const float *restrict x, const float *restrict w,
            const unsigned char *restrict q, double *restrict tx,
            double *restrict tq)
{
	for (int j = 0; j < QK; j++) {
		int l = q[j] - 8;
		tx[j] = (double)w[j] * l * x[j];
		tq[j] = (double)w[j] * l * l;
	}
}

/* sum[k] = t[k][0] + t[k][1] + ... in that order, for the nine starts:
 * nine sums in registers at once (an array of them would make each add
 * wait on a store). */
_Static_assert(FIT_STARTS + 1 == 9, "sum9 sums nine starts");
static void
sum9(double (*t)[QK], double *sum)
{
	double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0,
	       a7 = 0, a8 = 0;

	for (int j = 0; j < QK; j++) {
		a0 += t[0][j];
		a1 += t[1][j];
		a2 += t[2][j];
		a3 += t[3][j];
		a4 += t[4][j];
		a5 += t[5][j];
		a6 += t[6][j];
		a7 += t[7][j];
		a8 += t[8][j];
	}
	sum[0] = a0;
	sum[1] = a1;
	sum[2] = a2;
	sum[3] = a3;
	sum[4] = a4;
	sum[5] = a5;
	sum[6] = a6;
	sum[7] = a7;
	sum[8] = a8;
}

/*
 * A q4_0 block fitted as q4_0_encode_fit's loop below would fit it, its
 * starts' rounds worked out side by side: round r of every start at once
 * (each start's own error summed in element order, in double, as
 * q4_0_try sums it, so every error has the same bits; the starts' sums
 * are independent, which keeps the core busy where one sum waits on the
 * last), then every try compared with the best in the loop's order (the
 * reference's try, then start 0's rounds, start 1's, ...), so the same
 * try wins.  best, bd and bq come in as the reference's try and leave as
 * the winner, or untouched with -1 where a start meets a scale f16
 * cannot hold (the loop then goes on from the levels of the try before,
 * which this does not keep): the caller fits that block with the loop.
 */
static int
q4_0_fit_starts(const float *x, const float *w, float max, double *best,
                uint16_t *bd, unsigned char *bq)
{
	enum { S = FIT_STARTS + 1, R = FIT_ROUNDS };
	float d[S], dd[S], id[S];
	double err[S][R], term[S][QK], term2[S][QK];
	uint16_t dh[S][R];
	unsigned char q[S][R][QK];
	int nr[S], on[S];

	for (int k = 0; k < S; k++) {
		d[k] = max / -(8.0f - (float)k / 4);
		nr[k] = 0;
		on[k] = 1;
	}
	/* Every start is worked out in every round, those that have ended
	 * too (their scale stays, and what is made of it is not kept), so
	 * that the sums run over a fixed count, in registers. */
	for (int r = 0; r < R; r++) {
		double acc[S], sqx[S], sqq[S];
		for (int k = 0; k < S; k++) {
			dh[k][r] = cg_f32_to_f16(d[k]);
			dd[k] = cg_f16_to_f32(dh[k][r]);
			if (!isfinite(dd[k]))
				return -1;
			id[k] = inv_scale(dd[k]);
			q4_0_terms(x, w, dd[k], id[k], q[k][r], term[k]);
		}
		sum9(term, acc);
		for (int k = 0; k < S; k++)
			if (on[k]) {
				err[k][r] = acc[k];
				nr[k] = r + 1;
			}
		if (r == R - 1)
			break;
		/* the refits; a start whose levels are all 8 ends here */
		for (int k = 0; k < S; k++)
			refit_terms(x, w, q[k][r], term[k], term2[k]);
		sum9(term, sqx);
		sum9(term2, sqq);
		for (int k = 0; k < S; k++)
			if (on[k] && sqq[k] == 0)
				on[k] = 0;
			else if (on[k])
				d[k] = (float)(sqx[k] / sqq[k]);
	}
	for (int k = 0; k < S; k++)
		for (int r = 0; r < nr[k]; r++)
			if (err[k][r] < *best) {
				*best = err[k][r];
				*bd = dh[k][r];
				memcpy(bq, q[k][r], QK);
			}
	return 0;
}

/* The block x fitted by the loop itself: every start's rounds in turn,
 * as q4_0_fit_starts must equal. */
static void
q4_0_fit_loop(const float *x, const float *w, float max, double *best,
              uint16_t *bd, unsigned char *bq)
{
	unsigned char q[QK];
	uint16_t dh;
	double err;

	for (int k = 0; k <= FIT_STARTS; k++) {
		/* the extreme level at 8 - k/4 steps instead of 8 */
		float d = max / -(8.0f - (float)k / 4);
		for (int r = 0; r < FIT_ROUNDS; r++) {
			double sqx = 0, sqq = 0;
			err = q4_0_try(x, w, d, &dh, q);
			if (err < *best) {
				*best = err;
				*bd = dh;
				memcpy(bq, q, QK);
			}
			for (int j = 0; j < QK; j++) {
				sqx += (double)w[j] * (q[j] - 8) * x[j];
				sqq += (double)w[j] * (q[j] - 8) * (q[j] - 8);
			}
			if (sqq == 0)
				break;
			d = (float)(sqx / sqq);
		}
	}
}

static int
q4_0_fit(void *dst, const float *src, size_t n, int loop)
{
	unsigned char *b = dst;

	if (check_blocks(src, n, 8.0f, "q4_0") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 2 + QK / 2) {
		const float *x = src + i;
		float max = signed_max(x);
		unsigned char bq[QK];
		uint16_t bd;
		double best;
		float w[QK];

		fit_weights(x, w);
		best = q4_0_try(x, w, max / -8, &bd, bq);
		if (loop || q4_0_fit_starts(x, w, max, &best, &bd, bq) != 0)
			q4_0_fit_loop(x, w, max, &best, &bd, bq);
		put16(b, bd);
		put_nibbles(b + 2, bq);
	}
	return 0;
}

static int
q4_0_encode_fit(void *dst, const float *src, size_t n)
{
	return q4_0_fit(dst, src, n, 0);
}

int
cg_q4_0_encode_fit_loop(void *dst, const float *src, size_t n)
{
	return q4_0_fit(dst, src, n, 1);
}

/* ------------------------------------------------ stochastic rounding */

/*
 * Stochastic rounding's draws: element j of a call takes the uniform
 * u = mix(j + key) / 2^32 in [0, 1), key drawn once a call from the
 * encoder's generator.  A counter hashed (the lowbias32 mixer of
 * Wellons' hash-prospector) rather than a generator stepped an element:
 * the draws of a block come in one loop the compiler vectorizes, and
 * any thread count or order makes the same ones.
 */
static inline uint32_t
sr_mix(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x7feb352dU;
	h ^= h >> 15;
	h *= 0x846ca68bU;
	h ^= h >> 16;
	return h;
}

/* u[QK]: the draws of the block of elements from i on. */
static void
sr_block(float u[QK], uint32_t key, size_t i)
{
	const uint32_t c = (uint32_t)i + key;

	for (int j = 0; j < QK; j++)
		u[j] = (float)(sr_mix(c + (uint32_t)j) >> 8) *
		       (1.0f / 16777216.0f);
}

static int
q8_0_encode_sr(void *dst, const float *src, size_t n, struct cg_rng *r)
{
	unsigned char *b = dst;
	const uint32_t key = (uint32_t)(cg_rng_u64(r) >> 32);

	if (check_blocks(src, n, 127.0f, "q8_0") != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 2 + QK) {
		float amax = 0, d, id, u[QK];
		for (int j = 0; j < QK; j++)
			if (fabsf(src[i + j]) > amax)
				amax = fabsf(src[i + j]);
		d = amax / 127;
		id = inv_scale(d);
		put16(b, cg_f32_to_f16(d));
		sr_block(u, key, i);
		for (int j = 0; j < QK; j++) {
			/* floor(v + u) as a truncation of a sum kept
			 * positive: v >= -127 */
			int q = (int)(src[i + j] * id + u[j] + 128.0f) - 128;
			q = q < -127 ? -127 : q > 127 ? 127 : q;
			PUT_I8(b + 2 + j, q);
		}
	}
	return 0;
}

/* q4_0 (h 8) and q2_0 (h 2) with stochastic rounding: the scale of the
 * nearest encoders, d = max / -h, and levels 0..2h-1 around h, packed
 * as their encoders pack them (q4_0: element j < 16 the low nibble of
 * byte j, j >= 16 the high nibble of byte j - 16; q2_0: element j bits
 * 2(j%4) of byte j/4). */
static int
offset_encode_sr(void *dst, const float *src, size_t n, struct cg_rng *r,
                 int h, const char *name)
{
	const size_t vbytes = QK * (h == 8 ? 4 : 2) / 8;
	const uint32_t key = (uint32_t)(cg_rng_u64(r) >> 32);
	unsigned char *b = dst;

	if (check_blocks(src, n, (float)h, name) != 0)
		return -1;
	for (size_t i = 0; i < n; i += QK, b += 2 + vbytes) {
		float d = signed_max(src + i) / (float)-h;
		float id = inv_scale(d), u[QK];
		int q[QK];

		put16(b, cg_f32_to_f16(d));
		sr_block(u, key, i);
		/* v + h + u >= 0 (|v| <= h): truncation is floor */
		for (int j = 0; j < QK; j++) {
			int l = (int)(src[i + j] * id + (float)h + u[j]);
			q[j] = l < 0 ? 0 : l > 2 * h - 1 ? 2 * h - 1 : l;
		}
		if (h == 8)
			for (int j = 0; j < QK / 2; j++)
				b[2 + j] = (unsigned char)(q[j] | q[j + 16] << 4);
		else
			for (int j = 0; j < QK / 4; j++)
				b[2 + j] = (unsigned char)(q[4 * j] |
				                           q[4 * j + 1] << 2 |
				                           q[4 * j + 2] << 4 |
				                           q[4 * j + 3] << 6);
	}
	return 0;
}

static int
q4_0_encode_sr(void *dst, const float *src, size_t n, struct cg_rng *r)
{
	return offset_encode_sr(dst, src, n, r, 8, "q4_0");
}

static int
q2_0_encode_sr(void *dst, const float *src, size_t n, struct cg_rng *r)
{
	return offset_encode_sr(dst, src, n, r, 2, "q2_0");
}

/* Every block's f16 scale finite: the one thing a block's bytes can get
 * wrong (any value bits are a valid value). */
static int
check_scales(const void *src, size_t n, unsigned bytes)
{
	const unsigned char *b = src;

	for (size_t i = 0; i < n / QK; i++, b += bytes)
		if (!isfinite(cg_f16_to_f32(get16(b))))
			return cg_seterr("block %zu has a scale that is not "
			                 "finite",
			                 i);
	return 0;
}

static int
q8_0_check(const void *src, size_t n)
{
	return check_scales(src, n, 2 + QK);
}

static int
q4_0_check(const void *src, size_t n)
{
	return check_scales(src, n, 2 + QK / 2);
}

static int
q2_0_check(const void *src, size_t n)
{
	return check_scales(src, n, 2 + QK / 4);
}

/* q4_1: the scale and the minimum both finite. */
static int
q4_1_check(const void *src, size_t n)
{
	const unsigned char *b = src;

	for (size_t i = 0; i < n / QK; i++, b += 4 + QK / 2)
		if (!isfinite(cg_f16_to_f32(get16(b))) ||
		    !isfinite(cg_f16_to_f32(get16(b + 2))))
			return cg_seterr("block %zu has a scale or minimum "
			                 "that is not finite",
			                 i);
	return 0;
}

/* --------------------------------------------------------------- table */

static const struct cg_codec codecs[CG_NDTYPES] = {
    [CG_F32] = {"f32", 1, 4, CG_KIND_FLOAT, f32_decode, f32_encode},
    [CG_F16] = {"f16", 1, 2, CG_KIND_FLOAT, f16_decode, f16_encode},
    [CG_BF16] = {"bf16", 1, 2, CG_KIND_FLOAT, bf16_decode, bf16_encode},
    [CG_I8] = {"i8", 1, 1, CG_KIND_SINT, i8_decode, i8_encode, i8_to_u64},
    [CG_U8] = {"u8", 1, 1, CG_KIND_UINT, u8_decode, u8_encode, u8_to_u64},
    [CG_U16] = {"u16", 1, 2, CG_KIND_UINT, u16_decode, u16_encode, u16_to_u64},
    [CG_U32] = {"u32", 1, 4, CG_KIND_UINT, u32_decode, u32_encode, u32_to_u64},
    [CG_U64] = {"u64", 1, 8, CG_KIND_UINT, u64_decode, u64_encode, u64_to_u64},
    [CG_Q8_0] = {"q8_0", QK, 2 + QK, CG_KIND_FLOAT, q8_0_decode, q8_0_encode,
                 NULL, q8_0_encode_sr, q8_0_check},
    [CG_Q4_0] = {"q4_0", QK, 2 + QK / 2, CG_KIND_FLOAT, q4_0_decode,
                 q4_0_encode, NULL, q4_0_encode_sr, q4_0_check,
                 q4_0_encode_fit},
    [CG_Q2_0] = {"q2_0", QK, 2 + QK / 4, CG_KIND_FLOAT, q2_0_decode,
                 q2_0_encode, NULL, q2_0_encode_sr, q2_0_check},
    [CG_Q4_1] = {"q4_1", QK, 4 + QK / 2, CG_KIND_FLOAT, q4_1_decode,
                 q4_1_encode, NULL, NULL, q4_1_check, q4_1_encode_fit},
};

const struct cg_codec *
cg_codec(enum cg_dtype t)
{
	if ((unsigned)t >= CG_NDTYPES) {
		cg_seterr("unknown dtype %d", (int)t);
		return NULL;
	}
	return &codecs[t];
}

const char *
cg_dtype_name(enum cg_dtype t)
{
	return (unsigned)t < CG_NDTYPES ? codecs[t].name : "?";
}

int
cg_dtype_parse(const char *s, enum cg_dtype *out)
{
	for (int i = 0; i < CG_NDTYPES; i++)
		if (strcmp(s, codecs[i].name) == 0) {
			*out = (enum cg_dtype)i;
			return 0;
		}
	return cg_seterr("unknown dtype '%.32s'", s);
}

unsigned
cg_dtype_word(enum cg_dtype t)
{
	if ((unsigned)t >= CG_NDTYPES || codecs[t].block != 1)
		return 1;
	return codecs[t].bytes;
}

int
cg_dtype_bytes(enum cg_dtype t, uint64_t n, uint64_t *out)
{
	const struct cg_codec *c = cg_codec(t);
	uint64_t blocks;

	if (c == NULL)
		return -1;
	if (n % c->block != 0)
		return cg_seterr(
		    "%s needs a multiple of %u elements, not %" PRIu64, c->name,
		    c->block, n);
	blocks = n / c->block;
	if (blocks > UINT64_MAX / c->bytes)
		return cg_seterr("tensor size overflows");
	*out = blocks * c->bytes;
	return 0;
}

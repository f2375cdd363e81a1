/*
 * dtype.c - element types of cg tensors and their conversions.
 *
 * Block types (q8_0, q4_0) follow ggml's layout: blocks of 32 weights, each
 * with one f16 scale first; q8_0 holds 32 int8, q4_0 holds 16 bytes of
 * 4-bit values.  Half conversions round to nearest even.
 */
#include <string.h>

#include "cg.h"

static const struct {
	const char *name;
	unsigned elsize; /* bytes per element, or per block for block types */
	unsigned block;	 /* elements per block; 1 for plain types */
} dtypes[CG_NDTYPES] = {
	[CG_F32] = {"f32", 4, 1},   [CG_F16] = {"f16", 2, 1},
	[CG_BF16] = {"bf16", 2, 1}, [CG_I8] = {"i8", 1, 1},
	[CG_U8] = {"u8", 1, 1},	    [CG_U16] = {"u16", 2, 1},
	[CG_U32] = {"u32", 4, 1},   [CG_U64] = {"u64", 8, 1},
	[CG_Q8_0] = {"q8_0", 34, 32}, [CG_Q4_0] = {"q4_0", 18, 32},
};

const char *
cg_dtype_name(enum cg_dtype t)
{
	return (unsigned)t < CG_NDTYPES ? dtypes[t].name : "?";
}

int
cg_dtype_parse(const char *s, enum cg_dtype *out)
{
	for (int i = 0; i < CG_NDTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0) {
			*out = (enum cg_dtype)i;
			return 0;
		}
	return cg_seterr("unknown dtype '%.32s'", s);
}

int
cg_dtype_bytes(enum cg_dtype t, uint64_t n, uint64_t *out)
{
	uint64_t blocks;

	if ((unsigned)t >= CG_NDTYPES)
		return cg_seterr("unknown dtype");
	if (n % dtypes[t].block != 0)
		return cg_seterr("%s needs a multiple of %u elements",
				 dtypes[t].name, dtypes[t].block);
	blocks = n / dtypes[t].block;
	if (blocks > UINT64_MAX / dtypes[t].elsize)
		return cg_seterr("tensor size overflows");
	*out = blocks * dtypes[t].elsize;
	return 0;
}

/* ------------------------------------------------------- half precision */

float
cg_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0) {
		/* zero or subnormal: value = man * 2^-24 */
		f = (float)man * (1.0f / 16777216.0f);
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (man << 13);
	else
		bits = sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t
cg_f32_to_f16(float f)
{
	uint32_t x;
	uint32_t sign, exp, man;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (x >> 23) & 0xff;
	man = x & 0x7fffff;
	if (exp == 0xff) /* inf or nan (keep a nan a nan) */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		/* subnormal: shift the mantissa with its implicit bit */
		man |= 0x800000;
		int shift = 14 - e;
		uint32_t half = man >> shift;
		uint32_t rem = man & ((1u << shift) - 1);
		uint32_t mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
	uint32_t rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent, which is still right */
	return (uint16_t)h;
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

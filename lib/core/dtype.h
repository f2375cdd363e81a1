/*
 * core/dtype.h - the element types of tensors and the codec table, one row
 * each.
 */
#ifndef CG_DTYPE_H
#define CG_DTYPE_H

#include <stddef.h>
#include <stdint.h>

struct cg_rng;

/*
 * The element types of tensors.  Each has one row in the codec table
 * (lib/core/dtype.c), as ggml's type_traits: its name, its size, and its
 * conversions to and from f32.  Nothing else in cg switches on a dtype.
 */
enum cg_dtype {
	CG_F32,
	CG_F16,
	CG_BF16,
	CG_I8,
	CG_U8,
	CG_U16,
	CG_U32,
	CG_U64,
	CG_Q8_0,
	CG_Q4_0,
	CG_Q2_0,
	CG_Q4_1,
	CG_NDTYPES
};

/* What the stored values are: how a reader should print them. */
enum cg_codec_kind {
	CG_KIND_FLOAT, /* real numbers, decoded through f32 */
	CG_KIND_UINT,  /* unsigned integers, exact through to_u64 */
	CG_KIND_SINT   /* signed integers, exact through to_u64 */
};

/*
 * One row of the codec table.  A plain type's elements are host words in
 * memory (files hold them little-endian; their readers and writers turn
 * them around on a big-endian host, cg_dtype_word); a block type's are
 * bytes, its f16 scales little-endian on every host.  n counts elements and is
 * always a multiple of block; src and dst hold n / block blocks of bytes bytes
 * each.  None of the functions allocates, and all may run on several threads at
 * once.
 *
 * decode (all rows; never fails): f32 exactly; f16 and bf16 exactly
 *   (nan, inf, -0 and subnormals kept); integers exactly up to 2^24 in
 *   magnitude, beyond that rounded to the nearest float, ties to even
 *   (u32 4294967295 decodes as 4294967296); q8_0 as d * q and q4_0 as
 *   d * (q - 8), the product taken in float as ggml's dequantize_row_*.
 * encode: f32 exactly; f16 and bf16 rounded to nearest even, beyond the
 *   range to inf, nan stays nan; integers rounded to nearest, ties to
 *   even, then saturated to the type's range (inf too), and a nan is
 *   refused; q8_0 and q4_0 as ggml's quantize_row_*_reference, bit for
 *   bit, refusing nan, inf and a block whose scale would overflow f16
 *   (|x| > 65504 * 127 for q8_0, 65504 * 8 for q4_0).  Returns 0, or -1
 *   with a message naming the first element refused and dst untouched.
 *   q2_0 is cg's own: q4_0's rule with four levels, d = max / -2 and
 *   q = min(3, trunc(x * (1/d) + 2.5)), decoded as d * (q - 2); 8 bytes
 *   of 2-bit values after the scale, element j in bits 2(j%4) of byte
 *   j/4 (2.5 bits an element).  q4_1 as ggml's quantize_row_q4_1_reference:
 *   d = (max - min) / 15, q = min(15, trunc((x - min) * (1/d) + 0.5)),
 *   stored as the f16 d, the f16 min and q4_0's nibbles (5 bits an
 *   element), decoded as d * q + m (the product rounded to float first);
 *   refused where |x| > 65504.
 * encode_sr (q8_0, q4_0, q2_0; NULL for the others): the same scale, but each
 *   value rounded up with probability its fraction (stochastic rounding,
 *   unbiased inside the range), the uniforms drawn from r in element
 *   order, so the bytes are a function of src and r's state.
 * check (block rows; NULL for the others): -1 with a message naming the
 *   first block whose scale is not finite (no encoder writes one), else
 *   0.  Readers call it on every tensor they read.
 * Error bounds, per element of a block of scale d (its f16 value): q8_0
 *   |x - y| <= |d|/2 + 127 |d - d32| where d32 is the f32 scale before
 *   rounding to f16; q4_0 and q2_0 |d| + qmax |d - d32| (the value of
 *   largest magnitude opposite to max is clipped one level short, as in
 *   ggml); stochastic rounding |d| + qmax |d - d32| for all three; q4_1
 *   |d|/2 + 15 |d - d32| + |m - m32| (m32 the block's minimum in f32).
 * encode_fit (q4_0, q4_1; NULL for the others): encode, but each block's
 *   stored scale (and minimum) chosen for the least squared error of the
 *   block as decoded, f16 rounding included, each element's error
 *   weighted by w = |x| + the block's root mean square: among the
 *   reference rule's choice and the fixed points of alternating
 *   weighted least squares (levels, then the scale and minimum that fit
 *   them) from a few narrower spans.  So a block is never further from
 *   src than encode's in that weighted error.  The same refusals as
 *   encode; the bytes a function of src alone.
 * to_u64 (integer rows; NULL for float kinds): the exact values, a signed
 *   one as its two's complement in 64 bits.
 */
struct cg_codec {
	const char *name; /* as in a manifest: "f32", "q8_0", ... */
	unsigned block;	  /* elements per block; 1 for plain types */
	unsigned bytes;	  /* bytes per block */
	enum cg_codec_kind kind;
	void (*decode)(float *dst, const void *src, size_t n);
	int (*encode)(void *dst, const float *src, size_t n);
	void (*to_u64)(uint64_t *dst, const void *src, size_t n);
	int (*encode_sr)(void *dst, const float *src, size_t n,
	                 struct cg_rng *r);
	int (*check)(const void *src, size_t n);
	int (*encode_fit)(void *dst, const float *src, size_t n);
};

/* The row of t, or NULL with a message for a value outside the enum. */
const struct cg_codec *cg_codec(enum cg_dtype t);
/* q4_0's and q4_1's encode_fit as their definition states them, one
 * start's rounds after another; encode_fit works the starts out side by
 * side (faster) and must give these bytes for every src (the tests hold
 * them to it). */
int cg_q4_0_encode_fit_loop(void *dst, const float *src, size_t n);
int cg_q4_1_encode_fit_loop(void *dst, const float *src, size_t n);
/* Its name, or "?" outside the enum. */
const char *cg_dtype_name(enum cg_dtype t);
/* Parse a dtype name; returns -1 (with message) if unknown. */
int cg_dtype_parse(const char *s, enum cg_dtype *out);
/* Bytes needed for n elements of t, or -1 with a message on overflow, an
 * unknown dtype or a block dtype whose n is not a multiple of its block. */
int cg_dtype_bytes(enum cg_dtype t, uint64_t n, uint64_t *out);

/* The word a byte-order turn of t's elements reverses (core/util.h's
 * cg_le_words): the element's size for a plain type of more than one
 * byte (f32, f16, bf16, u16, u32, u64); 1 for the others (bytes, and
 * blocks, which are bytes) and outside the enum. */
unsigned cg_dtype_word(enum cg_dtype t);

/* One element of the half-precision rows, as their decode and encode. */
float cg_f16_to_f32(uint16_t h);
uint16_t cg_f32_to_f16(float f);
float cg_bf16_to_f32(uint16_t h);
uint16_t cg_f32_to_bf16(float f);

#endif

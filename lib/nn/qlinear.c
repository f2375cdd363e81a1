/*
 * nn/qlinear.c - Linear layers over f16, q8_0 and q4_0 weights as stored.
 *
 * One dot product per (output row, input row): the weight row is read
 * once per output and stays in L1 while the rows of a batch pass over it,
 * so at batch 1 the cost is reading the weights, which is what a smaller
 * dtype saves.  Four paths compute the dot products: portable C, AVX2
 * and AVX-512 VNNI, each compiled with __attribute__((target)) so that a
 * build without -march=native carries them too, and NEON on arm64 (part
 * of AArch64 itself); the CPU's features pick one at run time (see
 * qlinear.h for CG_QKERNEL).  The NEON path sums a block's int8 products
 * in vectors and its f32 block terms in the portable path's order, so
 * its block products give the portable path's bits; its f16 product
 * sums in four lanes.  On the VNNI path a q8_0 matrix packed at load
 * (cg_wmat_pack) is multiplied 16 rows at a time instead: each 4 bytes
 * of the input broadcast against 16 rows' 4 weights, so that at batch 1
 * the weights stream through at the memory's rate, with no sum across
 * lanes per row.
 *
 * A block of a q8_0 weight row is 2 bytes of f16 scale d_w and 32 int8;
 * of a q4_0 row 2 bytes of scale and 16 bytes, element j < 16 the low
 * nibble of byte j and element j >= 16 the high nibble of byte j - 16,
 * value nibble - 8.  The input's blocks are 32 int8 q and an f32 scale
 * d_b.  The block's product is s_b = sum q_w q_x, exact in int32 (at most
 * 32 * 128 * 127 in magnitude), so every path computes the same integers;
 * the SIMD paths use |q_w| as the unsigned operand and q_x with q_w's
 * sign as the signed one (q_x is never -128, so the sign change cannot
 * overflow, and q_w may be any int8 a file holds).
 *
 * Error.  Write x_k = d_b q_k + e_k for the input's rounding: with
 * d_b = fl(m / 127) (m the block's largest |x|) and q_k = round(fl(x_k /
 * d_b)), |x_k / d_b - fl(x_k / d_b)| <= 127.0001 u and so |e_k| <= d_b
 * (1/2 + 127.0001 u) <= d_b (1/2 + 2^-17), u = 2^-24; and |fl(x / d_b)| <=
 * 127 (1 + u)^2 < 127.5 keeps |q_k| <= 127.  The exact product of the
 * stored weights w_k = d_w q_w,k with x is then sum_b d_w d_b s_b + sum_k
 * w_k e_k, the second sum at most sum_b d_b (1/2 + 2^-17) sum_{k in b}
 * |w_k|.  The f32 evaluation of sum_b d_w d_b s_b rounds the scale
 * product d_w d_b once, each lane's partial sum times it once, and adds
 * along any chain at most K / 32 + 8 times (a lane's blocks, the trees
 * over 16 and 8 lanes, the odd block, the bias; for one block the 11
 * roundings of the VNNI path are the most): its error is at most
 * gamma(K / 32 + 10) (sum_b |d_w d_b| a_b + |bias|), a_b = sum_{k in b}
 * |q_w,k q_x,k| >= |s_b| (a lane's partial sum may exceed |s_b|, never
 * a_b), gamma(n) = n u / (1 - n u).  The packed path converts each
 * block's integer sum exactly (|s_b| < 2^24), rounds d_w d_b once and
 * adds by one fused multiply-add a block, then the bias: a chain of
 * K / 32 + 1, within the same bound.  f16 weights are exact in f32, and
 * their dot product's error is gamma(K + 10) (sum_k |w_k x_k| + |bias|)
 * for the same reason (a chain of at most K products and sums, plus the
 * trees and the bias).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CG_QX86 1
#include <cpuid.h>
#include <immintrin.h>
#endif
#if defined(__GNUC__) && defined(__aarch64__) && defined(__ARM_NEON) && \
    defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CG_QNEON 1
#include <arm_neon.h>
#endif

#define QK CG_QBLOCK
#define Q8_BYTES (2 + QK)     /* a q8_0 block */
#define Q4_BYTES (2 + QK / 2) /* a q4_0 block */
/* Multiply-adds under which OpenMP costs more than it saves. */
#define QPAR_MIN ((size_t)1 << 16)

/* The dot products of one path: a weight row (nb blocks, or K halves)
 * against one input row. */
/* The block types' products, in the order of their rows (qrows[]). */
enum { BLK_Q8, BLK_Q4, NBLK };

struct qkernels {
	float (*blk[NBLK])(const unsigned char *w, const int8_t *q,
	                   const float *d, int nb);
	float (*f16)(const unsigned char *w, const float *x, int K);
};

/* A block's f16 scale (little-endian bytes), exactly. */
static inline float
scale_of(const unsigned char *b)
{
	return cg_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
}

/* ----------------------------------------------------------- portable */

/*
 * GCC 12 with -march=native on a CPU with AVX-VNNI or AVX-512 VNNI turns
 * the int8 dot product below into vpdpbusd with the weights as its
 * unsigned operand, which is wrong for every negative weight
 * (tests/unit/test_qlinear caught it); these loops are kept scalar
 * there.  The SIMD paths are written out by hand instead.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define SCALAR_LOOPS __attribute__((optimize("no-tree-vectorize")))
#else
#define SCALAR_LOOPS
#endif

SCALAR_LOOPS static float
q8_portable(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	float acc = 0;

	for (int b = 0; b < nb; b++, w += Q8_BYTES, q += QK) {
		int32_t s = 0;
		for (int j = 0; j < QK; j++)
			s += (int32_t)(int8_t)w[2 + j] * q[j];
		acc += scale_of(w) * d[b] * (float)s;
	}
	return acc;
}

SCALAR_LOOPS static float
q4_portable(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	float acc = 0;

	for (int b = 0; b < nb; b++, w += Q4_BYTES, q += QK) {
		int32_t s = 0;
		for (int j = 0; j < QK / 2; j++)
			s += ((w[2 + j] & 15) - 8) * q[j] +
			     ((w[2 + j] >> 4) - 8) * q[j + QK / 2];
		acc += scale_of(w) * d[b] * (float)s;
	}
	return acc;
}

/* An f16 weight row is a tensor of a plain type: host words in memory
 * (little-endian on every host with a SIMD path below). */
static float
f16_portable(const unsigned char *w, const float *x, int K)
{
	float acc = 0;

	for (int k = 0; k < K; k++) {
		uint16_t h;
		memcpy(&h, w + 2 * k, 2);
		acc += cg_f16_to_f32(h) * x[k];
	}
	return acc;
}

static const struct qkernels k_portable = {{q8_portable, q4_portable},
                                           f16_portable};

#ifdef CG_QX86
/* --------------------------------------------------------------- AVX2 */

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))

T_AVX2 static inline float
hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v),
	                      _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* The 8 int32 partial sums of a block: w signed int8 [32], x [32]. */
T_AVX2 static inline __m256i
block_avx2(__m256i w, __m256i x)
{
	__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
	                                 _mm256_sign_epi8(x, w));
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* A q4_0 block's 32 values as int8 in element order. */
T_AVX2 static inline __m256i
unpack_q4_avx2(const unsigned char *b)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(b + 2));
	__m128i m = _mm_set1_epi8(15);
	__m128i lo = _mm_and_si128(v, m);
	__m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
	return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

T_AVX2 static inline float
half_avx2(const unsigned char *b)
{
	return _cvtsh_ss((unsigned short)(b[0] | b[1] << 8));
}

T_AVX2 static float
q8_avx2(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	__m256 acc = _mm256_setzero_ps();

	for (int b = 0; b < nb; b++, w += Q8_BYTES, q += QK) {
		__m256i wv = _mm256_loadu_si256((const __m256i *)(w + 2));
		__m256i xv = _mm256_loadu_si256((const __m256i *)q);
		__m256 s = _mm256_set1_ps(half_avx2(w) * d[b]);
		acc = _mm256_fmadd_ps(
		    s, _mm256_cvtepi32_ps(block_avx2(wv, xv)), acc);
	}
	return hsum8(acc);
}

T_AVX2 static float
q4_avx2(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	__m256 acc = _mm256_setzero_ps();

	for (int b = 0; b < nb; b++, w += Q4_BYTES, q += QK) {
		__m256i xv = _mm256_loadu_si256((const __m256i *)q);
		__m256 s = _mm256_set1_ps(half_avx2(w) * d[b]);
		acc = _mm256_fmadd_ps(
		    s, _mm256_cvtepi32_ps(block_avx2(unpack_q4_avx2(w), xv)),
		    acc);
	}
	return hsum8(acc);
}

T_AVX2 static float
f16_avx2(const unsigned char *w, const float *x, int K)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
	int k = 0;
	float acc;

	for (; k + 16 <= K; k += 16) {
		__m256 w0 = _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)(w + 2 * k)));
		__m256 w1 = _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)(w + 2 * k + 16)));
		a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + k), a0);
		a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + k + 8), a1);
	}
	acc = hsum8(_mm256_add_ps(a0, a1));
	for (; k < K; k++)
		acc += half_avx2(w + 2 * k) * x[k];
	return acc;
}

static const struct qkernels k_avx2 = {{q8_avx2, q4_avx2}, f16_avx2};

/* ---------------------------------------------------- AVX-512 VNNI */

#define T_VNNI                                                                 \
	__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,"            \
	                      "avx512vnni,avx2,fma,f16c")))

/* Two blocks' 16 int32 partial sums: w signed int8 [64], x [64]. */
T_VNNI static inline __m512i
blocks_vnni(__m512i w, __m512i x)
{
	__mmask64 neg = _mm512_movepi8_mask(w);
	__m512i sx = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
	return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w),
	                           sx);
}

/* One block's 8 int32 partial sums on the 256-bit form. */
T_VNNI static inline __m256i
block_vnni(__m256i w, __m256i x)
{
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w),
	                           _mm256_sign_epi8(x, w));
}

T_VNNI static inline __m512i
join(__m256i lo, __m256i hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* The scales of blocks b and b + 1 over the 8 lanes of each. */
T_VNNI static inline __m512
scales2(float s0, float s1)
{
	return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

T_VNNI static float
q8_vnni(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	__m512 acc = _mm512_setzero_ps();
	__m256 tail = _mm256_setzero_ps();
	int b = 0;

	for (; b + 2 <= nb; b += 2, w += 2 * Q8_BYTES) {
		__m512i wv = join(
		    _mm256_loadu_si256((const __m256i *)(w + 2)),
		    _mm256_loadu_si256((const __m256i *)(w + Q8_BYTES + 2)));
		__m512i xv = _mm512_loadu_si512((const void *)(q + QK * b));
		__m512 s = scales2(half_avx2(w) * d[b],
		                   half_avx2(w + Q8_BYTES) * d[b + 1]);
		acc = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(blocks_vnni(wv, xv)),
		                      acc);
	}
	if (b < nb) {
		__m256i wv = _mm256_loadu_si256((const __m256i *)(w + 2));
		__m256i xv = _mm256_loadu_si256((const __m256i *)(q + QK * b));
		tail = _mm256_mul_ps(_mm256_set1_ps(half_avx2(w) * d[b]),
		                     _mm256_cvtepi32_ps(block_vnni(wv, xv)));
	}
	return _mm512_reduce_add_ps(acc) + hsum8(tail);
}

T_VNNI static float
q4_vnni(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	__m512 acc = _mm512_setzero_ps();
	__m256 tail = _mm256_setzero_ps();
	int b = 0;

	for (; b + 2 <= nb; b += 2, w += 2 * Q4_BYTES) {
		__m512i wv =
		    join(unpack_q4_avx2(w), unpack_q4_avx2(w + Q4_BYTES));
		__m512i xv = _mm512_loadu_si512((const void *)(q + QK * b));
		__m512 s = scales2(half_avx2(w) * d[b],
		                   half_avx2(w + Q4_BYTES) * d[b + 1]);
		acc = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(blocks_vnni(wv, xv)),
		                      acc);
	}
	if (b < nb) {
		__m256i xv = _mm256_loadu_si256((const __m256i *)(q + QK * b));
		tail = _mm256_mul_ps(
		    _mm256_set1_ps(half_avx2(w) * d[b]),
		    _mm256_cvtepi32_ps(block_vnni(unpack_q4_avx2(w), xv)));
	}
	return _mm512_reduce_add_ps(acc) + hsum8(tail);
}

T_VNNI static float
f16_vnni(const unsigned char *w, const float *x, int K)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
	int k = 0;
	float acc;

	for (; k + 32 <= K; k += 32) {
		__m512 w0 = _mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(w + 2 * k)));
		__m512 w1 = _mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(w + 2 * k + 32)));
		a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + k), a0);
		a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + k + 16), a1);
	}
	acc = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
	for (; k < K; k++)
		acc += half_avx2(w + 2 * k) * x[k];
	return acc;
}

static const struct qkernels k_vnni = {{q8_vnni, q4_vnni}, f16_vnni};

/*
 * cg_qlinear_quantize's blocks (nb of them) on AVX-512, with the same
 * bits: the same maximum, the same division for the scale and for each
 * value, rounded to nearest even as lrintf does (the default mode).
 * sums, when not NULL, gets -128 times each block's sum of q.
 */
T_VNNI static void
quantize_vnni(int8_t *q, float *d, int32_t *sums, const float *x, size_t nb)
{
	const __m512 sign = _mm512_set1_ps(-0.0f);

	for (size_t b = 0; b < nb; b++, x += QK, q += QK) {
		__m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
		/* nan, infinities: 0x01 | 0x80 (nans), 0x08 | 0x10 */
		if (_mm512_fpclass_ps_mask(x0, 0x99) |
		    _mm512_fpclass_ps_mask(x1, 0x99)) {
			d[b] = NAN;
			memset(q, 0, QK);
			if (sums)
				sums[b] = 0;
			continue;
		}
		float m = _mm512_reduce_max_ps(_mm512_max_ps(
		    _mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1)));
		if (m == 0) {
			d[b] = 0;
			memset(q, 0, QK);
			if (sums)
				sums[b] = 0;
			continue;
		}
		float s = m / 127;
		__m512 sv = _mm512_set1_ps(s);
		__m512i q0 = _mm512_cvtps_epi32(_mm512_div_ps(x0, sv));
		__m512i q1 = _mm512_cvtps_epi32(_mm512_div_ps(x1, sv));
		d[b] = s;
		_mm_storeu_si128((__m128i *)(void *)q,
		                 _mm512_cvtepi32_epi8(q0));
		_mm_storeu_si128((__m128i *)(void *)(q + 16),
		                 _mm512_cvtepi32_epi8(q1));
		if (sums)
			sums[b] = -128 * _mm512_reduce_add_epi32(
			                     _mm512_add_epi32(q0, q1));
	}
}

/* One group-block of cg_wmat_pack: blk the block of the group's first
 * row, rows rowbytes apart (15 rowbytes < 2^31): each run of 4 columns
 * gathered from the 16 rows. */
T_VNNI static void
pack_vnni(unsigned char *o, const unsigned char *blk, size_t rowbytes)
{
	const __m512i idx =
	    _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
	                                         10, 11, 12, 13, 14, 15),
	                       _mm512_set1_epi32((int)rowbytes));
	const __m512i flip = _mm512_set1_epi32((int)0x80808080u);

	for (size_t r = 0; r < 16; r++)
		memcpy(o + 2 * r, blk + r * rowbytes, 2);
	for (int j = 0; j < QK / 4; j++)
		_mm512_storeu_si512(
		    (void *)(o + 32 + 64 * j),
		    _mm512_xor_si512(
		        _mm512_i32gather_epi32(
		            idx, (const void *)(blk + 2 + 4 * j), 1),
		        flip));
}

/* 4 bytes of the input, read where they lie and broadcast (GCC 12 does
 * not fold the broadcast into vpdpbusd's memory operand; forced, it was
 * no faster). */
typedef int32_t __attribute__((may_alias, aligned(1))) q4bytes;
#define X4(q, j)                                                               \
	_mm512_set1_epi32(*(const q4bytes *)(const void *)((q) + 4 * (j)))

/* Row block of the packed kernels on weights w0..w7 and scales dw (f32:
 * LOAD_RUNS), input block q, scale d, correction c, into the f32
 * accumulator acc: four chains of vpdpbusd (integer sums: exact in any
 * order), then one rounding of the scales' product and one of the
 * fused multiply-add. */
#define PACKED_BLOCK(acc, q, d, c)                                             \
	do {                                                                   \
		__m512i s0_ =                                                  \
		    _mm512_dpbusd_epi32(_mm512_set1_epi32(c), w0, X4(q, 0));   \
		__m512i s1_ =                                                  \
		    _mm512_dpbusd_epi32(_mm512_setzero_si512(), w1, X4(q, 1)); \
		__m512i s2_ =                                                  \
		    _mm512_dpbusd_epi32(_mm512_setzero_si512(), w2, X4(q, 2)); \
		__m512i s3_ =                                                  \
		    _mm512_dpbusd_epi32(_mm512_setzero_si512(), w3, X4(q, 3)); \
		s0_ = _mm512_dpbusd_epi32(s0_, w4, X4(q, 4));                  \
		s1_ = _mm512_dpbusd_epi32(s1_, w5, X4(q, 5));                  \
		s2_ = _mm512_dpbusd_epi32(s2_, w6, X4(q, 6));                  \
		s3_ = _mm512_dpbusd_epi32(s3_, w7, X4(q, 7));                  \
		s0_ = _mm512_add_epi32(_mm512_add_epi32(s0_, s1_),             \
		                       _mm512_add_epi32(s2_, s3_));            \
		(acc) = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0_),               \
		                        _mm512_mul_ps(dw, _mm512_set1_ps(d)),  \
		                        (acc));                                \
	} while (0)

/* A packed block at pk: its 8 runs of weights w0..w7 and its 16
 * scales dw, for PACKED_BLOCK. */
#define LOAD_RUNS(pk)                                                          \
	const __m512i *wp_ = (const __m512i *)(const void *)((pk) + 32);       \
	const __m512i w0 = _mm512_loadu_si512(wp_),                            \
	              w1 = _mm512_loadu_si512(wp_ + 1),                        \
	              w2 = _mm512_loadu_si512(wp_ + 2),                        \
	              w3 = _mm512_loadu_si512(wp_ + 3),                        \
	              w4 = _mm512_loadu_si512(wp_ + 4),                        \
	              w5 = _mm512_loadu_si512(wp_ + 5),                        \
	              w6 = _mm512_loadu_si512(wp_ + 6),                        \
	              w7 = _mm512_loadu_si512(wp_ + 7);                        \
	const __m512 dw =                                                      \
	    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pk)))

/*
 * How far ahead (in packed blocks of 16 rows) the packed kernels ask for
 * their weights, which they read faster than the CPU's own prefetch
 * brings them: one row at a time, from memory (the 25.6M cgpt's 27 MB a
 * token, one thread, on an AMD EPYC of family 26: 0.56-0.63 ms a pass
 * without, 0.49-0.53 at 24 blocks; 4 blocks ahead was slower than none);
 * and four rows at a time, a group's blocks again for each four rows,
 * from the caches (the same matrices, one thread: 16 rows 2.64-2.70 ms
 * without, 1.80-1.83 at 16 blocks; 65 rows 7.35-7.45 and 6.81-6.84).
 */
#define PACK_AHEAD 24
#define PACK4_AHEAD 16

/* Ask for the packed block AHEAD blocks on from pk (an address past the
 * matrix is only a hint: nothing is read). */
#define PREFETCH_BLOCK(pk, ahead)                                              \
	do {                                                                   \
		uintptr_t a_ = (uintptr_t)(pk) + (ahead) * 16 * Q8_BYTES;     \
		for (int l_ = 0; l_ < 16 * Q8_BYTES; l_ += 64)                \
			_mm_prefetch((const char *)(a_ + (uintptr_t)l_),      \
			             _MM_HINT_T0);                            \
	} while (0)

/*
 * One packed group (cg_wmat_pack: 16 rows) against input row q of nb
 * blocks, scales d and sums' corrections c (-128 times each block's sum
 * of q): out [16] = the rows' products + bias [16] (bias may be NULL).
 * A block's 8 runs of 4 columns go to vpdpbusd with the 4 inputs
 * broadcast: lane r sums (w + 128) q over row r's 32 columns, from c,
 * which leaves sum w q exactly; then one rounding of the scales'
 * product and one of the fused multiply-add a block (PACKED_BLOCK).
 */
T_VNNI static void
q8_packed_vnni(float *out, const unsigned char *pk, const int8_t *q,
               const float *d, const int32_t *c, const float *bias, int nb)
{
	__m512 acc = _mm512_setzero_ps();

	for (int b = 0; b < nb; b++, pk += 16 * Q8_BYTES, q += QK) {
		PREFETCH_BLOCK(pk, PACK_AHEAD);
		LOAD_RUNS(pk);
		PACKED_BLOCK(acc, q, d[b], c[b]);
	}
	if (bias != NULL)
		acc = _mm512_add_ps(acc, _mm512_loadu_ps(bias));
	_mm512_storeu_ps(out, acc);
}

/*
 * q8_packed_vnni for four input rows at once, their blocks interleaved
 * (interleave4): block b of row r at q + 128 b + 32 r, its scale and
 * correction at d [4 b + r] and c [4 b + r]; out's rows ldo apart.  Each
 * block's weights are read once for the four; the same bits as four
 * calls of q8_packed_vnni.
 */
T_VNNI static void
q8_packed4_vnni(float *out, size_t ldo, const unsigned char *pk,
                const int8_t *q, const float *d, const int32_t *c,
                const float *bias, int nb)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;

	for (int b = 0; b < nb;
	     b++, pk += 16 * Q8_BYTES, q += 4 * QK, d += 4, c += 4) {
		PREFETCH_BLOCK(pk, PACK4_AHEAD);
		LOAD_RUNS(pk);
		PACKED_BLOCK(a0, q, d[0], c[0]);
		PACKED_BLOCK(a1, q + QK, d[1], c[1]);
		PACKED_BLOCK(a2, q + 2 * QK, d[2], c[2]);
		PACKED_BLOCK(a3, q + 3 * QK, d[3], c[3]);
	}
	if (bias != NULL) {
		__m512 bv = _mm512_loadu_ps(bias);
		a0 = _mm512_add_ps(a0, bv);
		a1 = _mm512_add_ps(a1, bv);
		a2 = _mm512_add_ps(a2, bv);
		a3 = _mm512_add_ps(a3, bv);
	}
	_mm512_storeu_ps(out, a0);
	_mm512_storeu_ps(out + ldo, a1);
	_mm512_storeu_ps(out + 2 * ldo, a2);
	_mm512_storeu_ps(out + 3 * ldo, a3);
}
#endif /* CG_QX86 */

#ifdef CG_QNEON
/* --------------------------------------------------------------- NEON */

/* sum_j w[j] q[j] over 16 int8 pairs, added to acc: products of at most
 * 128 * 127 in int16, pairwise into int32. */
static inline int32x4_t
dot16_neon(int32x4_t acc, int8x16_t w, int8x16_t x)
{
	acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
	return vpadalq_s16(acc, vmull_high_s8(w, x));
}

static float
q8_neon(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	float acc = 0;

	for (int b = 0; b < nb; b++, w += Q8_BYTES, q += QK) {
		int32x4_t s = vdupq_n_s32(0);
		s = dot16_neon(s, vld1q_s8((const int8_t *)w + 2), vld1q_s8(q));
		s = dot16_neon(s, vld1q_s8((const int8_t *)w + 18),
		               vld1q_s8(q + 16));
		acc += scale_of(w) * d[b] * (float)vaddvq_s32(s);
	}
	return acc;
}

static float
q4_neon(const unsigned char *w, const int8_t *q, const float *d, int nb)
{
	const uint8x16_t m = vdupq_n_u8(15);
	const int8x16_t eight = vdupq_n_s8(8);
	float acc = 0;

	for (int b = 0; b < nb; b++, w += Q4_BYTES, q += QK) {
		uint8x16_t v = vld1q_u8(w + 2);
		int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m)), eight);
		int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
		int32x4_t s = vdupq_n_s32(0);
		s = dot16_neon(s, lo, vld1q_s8(q));
		s = dot16_neon(s, hi, vld1q_s8(q + 16));
		acc += scale_of(w) * d[b] * (float)vaddvq_s32(s);
	}
	return acc;
}

/* Halves widened by the CPU (exact), four lanes of fused products. */
static float
f16_neon(const unsigned char *w, const float *x, int K)
{
	float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
	int k = 0;
	float acc;

	for (; k + 8 <= K; k += 8) {
		uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)(w + 2 * k));
		float16x8_t f = vreinterpretq_f16_u16(h);
		a0 = vfmaq_f32(a0, vcvt_f32_f16(vget_low_f16(f)), vld1q_f32(x + k));
		a1 = vfmaq_f32(a1, vcvt_high_f32_f16(f), vld1q_f32(x + k + 4));
	}
	acc = vaddvq_f32(vaddq_f32(a0, a1));
	for (; k < K; k++)
		acc += scale_of(w + 2 * k) * x[k];
	return acc;
}

static const struct qkernels k_neon = {{q8_neon, q4_neon}, f16_neon};
#endif /* CG_QNEON */

/* ----------------------------------------------------------- dispatch */

#ifdef CG_QX86
/* F16C from CPUID leaf 1 itself: clang before 15 has no "f16c" for
 * __builtin_cpu_supports. */
static int
has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

static const char *const path_names[CG_QPATH_N] = {"portable", "avx2",
                                                   "avx512vnni", "neon"};
static int chosen = -1; /* cg_qpath_init's choice, once made */

int
cg_qpath_supported(enum cg_qpath p)
{
	switch (p) {
	case CG_QPATH_PORTABLE:
		return 1;
#ifdef CG_QX86
	case CG_QPATH_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") &&
		       __builtin_cpu_supports("fma") &&
		       has_f16c();
	case CG_QPATH_VNNI:
		__builtin_cpu_init();
		return cg_qpath_supported(CG_QPATH_AVX2) &&
		       __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512dq") &&
		       __builtin_cpu_supports("avx512vl") &&
		       __builtin_cpu_supports("avx512vnni");
#endif
#ifdef CG_QNEON
	case CG_QPATH_NEON:
		return 1;
#endif
	default:
		return 0;
	}
}

const char *
cg_qpath_name(enum cg_qpath p)
{
	return p >= 0 && p < CG_QPATH_N ? path_names[p] : "?";
}

static enum cg_qpath
best_path(void)
{
	for (int p = CG_QPATH_N - 1; p > 0; p--)
		if (cg_qpath_supported((enum cg_qpath)p))
			return (enum cg_qpath)p;
	return CG_QPATH_PORTABLE;
}

int
cg_qpath_init(void)
{
	const char *e = getenv("CG_QKERNEL");
	int p;

	if (chosen >= 0)
		return 0;
	if (e == NULL || *e == '\0') {
		chosen = best_path();
		return 0;
	}
	if ((p = cg_name_index(path_names, 0, CG_QPATH_N - 1, e)) < 0)
		return cg_seterr("CG_QKERNEL=%.32s: not portable, avx2, "
		                 "avx512vnni or neon",
		                 e);
	if (!cg_qpath_supported((enum cg_qpath)p))
		return cg_seterr("CG_QKERNEL=%s: this CPU lacks it", e);
	chosen = p;
	return 0;
}

enum cg_qpath
cg_qpath_current(void)
{
	/* the vector paths' sums and FMAs are the CPU's: gemm.h */
	if (cg_deterministic())
		return CG_QPATH_PORTABLE;
	return chosen >= 0 ? (enum cg_qpath)chosen : best_path();
}

static const struct qkernels *
kernels(enum cg_qpath p)
{
#ifdef CG_QX86
	if (p == CG_QPATH_VNNI)
		return &k_vnni;
	if (p == CG_QPATH_AVX2)
		return &k_avx2;
#endif
#ifdef CG_QNEON
	if (p == CG_QPATH_NEON)
		return &k_neon;
#endif
	(void)p;
	return &k_portable;
}

/* ------------------------------------------------------------ products */

/*
 * The dtypes a matrix is multiplied in as stored, one row each: a block
 * type's bytes per block of QK weights and its product in each path's
 * kernels; f32 and f16 run on floats (bytes 0).  A new stored type is a
 * row here and its product in each kernel set; the archs that keep
 * weights as stored (cg_qlinear_keeps) then keep it.
 */
static const struct qrow {
	enum cg_dtype dt;
	size_t bytes; /* per block; 0: not a block type */
	int blk;      /* its product: an index into struct qkernels blk[] */
} qrows[] = {
    {CG_F32, 0, -1},
    {CG_F16, 0, -1},
    {CG_Q8_0, Q8_BYTES, BLK_Q8},
    {CG_Q4_0, Q4_BYTES, BLK_Q4},
};

static const struct qrow *
qrow(enum cg_dtype dt)
{
	for (size_t i = 0; i < sizeof(qrows) / sizeof(qrows[0]); i++)
		if (qrows[i].dt == dt)
			return &qrows[i];
	return NULL;
}

int
cg_wmat_ok(enum cg_dtype dt, uint64_t K)
{
	const struct qrow *r = qrow(dt);

	return r != NULL && (r->bytes == 0 || K % QK == 0);
}

int
cg_qlinear_keeps(enum cg_dtype dt)
{
	return dt != CG_F32 && qrow(dt) != NULL;
}

size_t
cg_qlinear_scratch(int B, int K)
{
	size_t nb = (size_t)B * (size_t)(K / QK);

	/* the int8 values, then the scales 64-byte aligned, then the
	 * blocks' sums for a packed product, and all three again with the
	 * rows' blocks interleaved four by four (interleave4) */
	return 2 * (((nb * QK + 63) & ~(size_t)63) + nb * sizeof(float) +
	            nb * sizeof(int32_t) + 64);
}

void
cg_qlinear_quantize(int8_t *q, float *d, const float *inp, int B, int K)
{
	cg_qlinear_quantize_path(cg_qpath_current(), q, d, inp, B, K);
}

void
cg_qlinear_quantize_path(enum cg_qpath p, int8_t *q, float *d, const float *inp,
                         int B, int K)
{
	size_t nb = (size_t)B * (size_t)(K / QK);

#ifdef CG_QX86
	if (p == CG_QPATH_VNNI) {
		quantize_vnni(q, d, NULL, inp, nb);
		return;
	}
#endif
	(void)p;

	for (size_t b = 0; b < nb; b++) {
		const float *x = inp + b * QK;
		float m = 0;
		int finite = 1;

		for (int j = 0; j < QK; j++) {
			float a = fabsf(x[j]);
			finite &= a <= 3.4028235e38f; /* false for nan, inf */
			m = a > m ? a : m;
		}
		if (!finite || m == 0) {
			d[b] = finite ? 0 : NAN;
			memset(q + b * QK, 0, QK);
			continue;
		}
		float s = m / 127;
		d[b] = s;
		for (int j = 0; j < QK; j++)
			q[b * QK + j] = (int8_t)lrintf(x[j] / s);
	}
}

#ifdef CG_QX86
/* Rows [0, B4) of q [B4, nb * 32], d and c [B4, nb] (B4 % 4 == 0)
 * interleaved four by four, for q8_packed4_vnni: block b of row i at qi
 * + ((i / 4 * nb + b) * 4 + i % 4) * 32, its scale and correction at
 * that index / 32 of di and ci. */
static void
interleave4(int8_t *qi, float *di, int32_t *ci, const int8_t *q, const float *d,
            const int32_t *c, int B4, int nb)
{
	for (int i = 0; i < B4; i++)
		for (int b = 0; b < nb; b++) {
			size_t at = ((size_t)(i / 4) * nb + b) * 4 + i % 4;
			size_t from = (size_t)i * nb + b;
			memcpy(qi + at * QK, q + from * QK, QK);
			di[at] = d[from];
			ci[at] = c[from];
		}
}
#endif

void
cg_qlinear_forward_path(enum cg_qpath p, float *out, const float *inp,
                        const struct cg_wmat *w, const float *bias, int B,
                        int K, int N, void *scratch)
{
	const struct qkernels *k = kernels(p);
	const unsigned char *wd = w->data;
	size_t work = (size_t)B * K * N;

	(void)work; /* read only by OpenMP's if clause */
	if (w->dtype == CG_F32) {
		cg_linear_forward(out, inp, w->data, bias, B, K, N);
		return;
	}
	if (w->dtype == CG_F16) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (work >= QPAR_MIN)
#endif
		for (int n = 0; n < N; n++)
			for (int i = 0; i < B; i++)
				out[(size_t)i * N + n] =
				    k->f16(wd + (size_t)n * 2 * K,
				           inp + (size_t)i * K, K) +
				    (bias ? bias[n] : 0.0f);
		return;
	}
	const int nb = K / QK;
	const struct qrow *r = qrow(w->dtype); /* a block type: cg_wmat_ok */
	const size_t rowbytes = (size_t)nb * r->bytes;
	float (*dot)(const unsigned char *, const int8_t *, const float *,
	             int) = k->blk[r->blk];
	int8_t *q = scratch;
	float *d = (float *)((char *)scratch +
	                     (((size_t)B * nb * QK + 63) & ~(size_t)63));

	int n0 = 0; /* the rows the packed groups leave */

#ifdef CG_QX86
	if (p == CG_QPATH_VNNI && w->pack != NULL && w->dtype == CG_Q8_0) {
		const unsigned char *pk = w->pack;
		int32_t *c = (int32_t *)(d + (size_t)B * nb);
		const int G = N / 16;

		const int B4 = B / 4 * 4; /* the rows four at a time */
		int8_t *qi = (int8_t *)(c + (size_t)B * nb);
		qi = (int8_t *)(((uintptr_t)qi + 63) & ~(uintptr_t)63);
		float *di = (float *)(qi + (size_t)B4 * K);
		int32_t *ci = (int32_t *)(di + (size_t)B4 * nb);

		quantize_vnni(q, d, c, inp, (size_t)B * nb);
		interleave4(qi, di, ci, q, d, c, B4, nb);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (work >= QPAR_MIN)
#endif
		for (int g = 0; g < G; g++) {
			int i = 0;
			for (; i < B4; i += 4)
				q8_packed4_vnni(
				    out + (size_t)i * N + 16 * g, (size_t)N,
				    pk + (size_t)g * nb * 16 * Q8_BYTES,
				    qi + (size_t)i * K, di + (size_t)i * nb,
				    ci + (size_t)i * nb,
				    bias ? bias + 16 * g : NULL, nb);
			for (; i < B; i++)
				q8_packed_vnni(
				    out + (size_t)i * N + 16 * g,
				    pk + (size_t)g * nb * 16 * Q8_BYTES,
				    q + (size_t)i * K, d + (size_t)i * nb,
				    c + (size_t)i * nb,
				    bias ? bias + 16 * g : NULL, nb);
		}
		n0 = 16 * G;
	} else
#endif
		cg_qlinear_quantize_path(p, q, d, inp, B, K);
	/* the rows left: none, or a few, after packed groups (no team of
	 * threads started for no rows) */
	work = (size_t)B * K * (N - n0);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (work >= QPAR_MIN)
#endif
	for (int n = n0; n < N; n++)
		for (int i = 0; i < B; i++)
			out[(size_t)i * N + n] =
			    dot(wd + (size_t)n * rowbytes,
			        q + (size_t)i * K, d + (size_t)i * nb, nb) +
			    (bias ? bias[n] : 0.0f);
}

void
cg_qlinear_forward(float *out, const float *inp, const struct cg_wmat *w,
                   const float *bias, int B, int K, int N, void *scratch)
{
	cg_qlinear_forward_path(cg_qpath_current(), out, inp, w, bias, B, K, N,
	                        scratch);
}

/* ------------------------------------------------------------ packing */

size_t
cg_wmat_pack_bytes(const struct cg_wmat *w, int N, int K)
{
	if (w->dtype != CG_Q8_0 || N < 16 || K <= 0 || K % QK != 0 ||
	    cg_qpath_current() != CG_QPATH_VNNI)
		return 0;
	return (size_t)(N / 16) * 16 * (size_t)(K / QK) * Q8_BYTES;
}

void
cg_wmat_pack(struct cg_wmat *w, int N, int K, void *dst)
{
	const unsigned char *src = w->data;
	unsigned char *pk = dst;
	const size_t nb = (size_t)(K / QK);

	w->pack = NULL;
	if (cg_wmat_pack_bytes(w, N, K) == 0)
		return;
		/* 4 bytes at a time, each byte's sign bit flipped; the pages
		 * first touched here, by every thread */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * K >= QPAR_MIN)
#endif
	for (int g = 0; g < N / 16; g++)
		for (size_t b = 0; b < nb; b++) {
			unsigned char *o =
			    pk + ((size_t)g * nb + b) * 16 * Q8_BYTES;
#ifdef CG_QX86
			if (nb * Q8_BYTES * 15 < ((size_t)1 << 31)) {
				pack_vnni(o,
				          src + (16 * (size_t)g * nb + b) *
				                    Q8_BYTES,
				          nb * Q8_BYTES);
				continue;
			}
#endif
			for (size_t r = 0; r < 16; r++) {
				const unsigned char *blk =
				    src +
				    ((16 * (size_t)g + r) * nb + b) * Q8_BYTES;
				memcpy(o + 2 * r, blk, 2);
				for (int j = 0; j < QK / 4; j++) {
					uint32_t v;
					memcpy(&v, blk + 2 + 4 * j, 4);
					v ^= 0x80808080u;
					memcpy(o + 32 + 64 * j + 4 * r, &v, 4);
				}
			}
		}
	w->pack = pk;
}

/* --------------------------------------------------------- weight sets */

void
cg_wset_free(struct cg_wset *s)
{
	if (s == NULL)
		return;
	free(s->off);
	free(s->len);
	free(s->cols);
	free(s->w);
	free(s->qscratch);
	free(s->dec);
	memset(s, 0, sizeof(*s));
}

/* Whether s multiplies entry i as stored (else decodes it). */
static int
multiplies(const struct cg_wset *s, int i)
{
	return s->cols[i] > 0 && cg_wmat_ok(s->w[i].dtype, s->cols[i]);
}

/* Whether entry i's products of any number of rows are the stored
 * ones: packed weights on the VNNI path (faster than decoding and the
 * f32 product at every batch: bench/RESULTS.md, "int8 products"). */
static int
packed_rows(const struct cg_wset *s, int i)
{
	return s->w[i].pack != NULL && cg_qpath_current() == CG_QPATH_VNNI;
}

int
cg_wset_make(struct cg_wset *s, const struct cg_view *v,
             const struct cg_wmat *mats, int nv, int rows)
{
	uint64_t widest = 0;
	int n = 0, packed = 0;

	memset(s, 0, sizeof(*s));
	for (int i = 0; mats != NULL && i < nv; i++)
		n += mats[i].dtype != CG_F32;
	if (n == 0)
		return 0;
	if ((s->off = calloc((size_t)n, sizeof(*s->off))) == NULL ||
	    (s->len = calloc((size_t)n, sizeof(*s->len))) == NULL ||
	    (s->cols = calloc((size_t)n, sizeof(*s->cols))) == NULL ||
	    (s->w = calloc((size_t)n, sizeof(*s->w))) == NULL)
		goto oom;
	for (int i = 0; i < nv; i++) {
		const struct cg_codec *c;
		int j = s->n;

		if (mats[i].dtype == CG_F32)
			continue;
		c = cg_codec(mats[i].dtype);
		if (c == NULL || c->kind != CG_KIND_FLOAT ||
		    c->decode == NULL || v[i].n % c->block != 0) {
			cg_wset_free(s);
			return cg_seterr(
			    "tensor %s: %s cannot be run as stored", v[i].name,
			    cg_dtype_name(mats[i].dtype));
		}
		s->off[j] = v[i].off;
		s->len[j] = v[i].n;
		s->cols[j] = v[i].ndim == 2 ? v[i].shape[1] : 0;
		s->w[j] = mats[i];
		s->n++;
		/* a product of CG_WSET_GEMM_ROWS rows or more decodes too */
		if (multiplies(s, j) && s->cols[j] > widest)
			widest = s->cols[j];
		packed |= multiplies(s, j) && packed_rows(s, j);
		if (v[i].n > s->ndec)
			s->ndec = v[i].n;
	}
	if (widest > 0) {
		/* the products of more rows decode, but packed ones */
		if (rows > CG_WSET_GEMM_ROWS - 1 && !packed)
			rows = CG_WSET_GEMM_ROWS - 1;
		s->qbytes = cg_qlinear_scratch(rows, (int)widest);
		s->qrows = rows;
		if ((s->qscratch = cg_alloc(s->qbytes)) == NULL)
			goto oom;
	}
	if (s->ndec > 0 && (s->dec = cg_alloc(s->ndec * sizeof(float))) == NULL)
		goto oom;
	return 0;
oom:
	cg_wset_free(s);
	return cg_seterr("out of memory");
}

/* The index of the entry at off, or -1. */
static int
entry(const struct cg_wset *s, size_t off)
{
	for (int i = 0; i < s->n; i++)
		if (s->off[i] == off)
			return i;
	return -1;
}

const struct cg_wmat *
cg_wset_at(const struct cg_wset *s, size_t off)
{
	int i = entry(s, off);

	return i < 0 ? NULL : &s->w[i];
}

const float *
cg_wset_floats(const struct cg_wset *s, const float *params, size_t off,
               size_t n)
{
	int i = entry(s, off);

	if (i < 0)
		return params + off;
	/* n is the view's length (cg_wset_make recorded it) */
	(void)n;
	cg_codec(s->w[i].dtype)->decode(s->dec, s->w[i].data, s->len[i]);
	return s->dec;
}

void
cg_wset_linear_add_relu(const struct cg_wset *s, float *out, const float *inp,
                        const float *params, size_t off, const float *bias,
                        const float *add, int B, int K, int N)
{
	if (entry(s, off) < 0) {
		cg_linear_add_relu_forward(out, inp, params + off, bias, add, B,
		                           K, N);
		return;
	}
	cg_wset_linear(s, out, inp, params, off, bias, B, K, N, 0);
	for (size_t j = 0; j < (size_t)B * N; j++) {
		float v = out[j] + add[j];
		out[j] = v > 0 ? v : 0;
	}
}

void
cg_wset_linear(const struct cg_wset *s, float *out, const float *inp,
               const float *params, size_t off, const float *bias, int B, int K,
               int N, int relu)
{
	int i = entry(s, off);
	size_t n = (size_t)B * N;

	if (i < 0) {
		if (relu)
			cg_linear_relu_forward(out, inp, params + off, bias, B,
			                       K, N);
		else
			cg_linear_forward(out, inp, params + off, bias, B, K,
			                  N);
		return;
	}
	if (multiplies(s, i) && B <= s->qrows &&
	    (B < CG_WSET_GEMM_ROWS || packed_rows(s, i)))
		cg_qlinear_forward(out, inp, &s->w[i], bias, B, K, N,
		                   s->qscratch);
	else
		cg_linear_forward(out, inp,
		                  cg_wset_floats(s, params, off, (size_t)N * K),
		                  bias, B, K, N);
	for (size_t j = 0; relu && j < n; j++)
		out[j] = out[j] > 0 ? out[j] : 0;
}

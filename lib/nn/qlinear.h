/*
 * nn/qlinear.h - Linear layers over weights kept in the bytes a file stores
 * them in: f32, f16, q8_0 and q4_0 matrices multiplied without a decoded
 * copy.
 *
 * A weight matrix is [N, K] as nn.Linear's (row n holds output n's K
 * input weights), in its dtype's layout (codec.c): f16 as K halves a
 * row, q8_0 and q4_0 as K / 32 blocks a row, so K must be a multiple of
 * 32 for them.  For block weights each input row is first quantized to
 * q8_0 form (cg_qlinear_quantize: 32 int8 and one f32 scale a block) and
 * each output is the sum over blocks of d_w * d_x * (the block's int8 dot
 * product), in f32; f16 weights are widened to f32 on the fly.  f32
 * weights go through cg_linear_forward (cg_sgemm), as training's do.
 *
 * Kernels: a portable C path, AVX2 (maddubs/madd, F16C and FMA for f16)
 * and AVX-512 VNNI (vpdpbusd), chosen at run time from the CPU's features,
 * whatever the build's -march, and on arm64 NEON (every AArch64 CPU has
 * it); the environment variable CG_QKERNEL (portable, avx2, avx512vnni
 * or neon) forces one, and naming a path the CPU lacks is an error.  Every path computes the same int8 dot products
 * exactly; they differ only in the order the f32 block terms are summed.
 *
 * Error of a block product against the exact product of the stored
 * weights with the unquantized input (derived in qlinear.c and checked by
 * tests/unit/test_qlinear): with d_b the f32 scale of input block b and
 * u = 2^-24, y = sum_k w_k x_k + bias is computed within
 *   sum_b d_b (1/2 + 2^-17) sum_{k in b} |w_k|
 *     + gamma(K/32 + 10) (sum_b |d_w d_b| a_b + |bias|)
 * where a_b = sum_{k in b} |q_w,k q_x,k| and gamma(n) = n u / (1 - n u);
 * the first term is the input's rounding to q8_0 (at most d_b / 2 per
 * element), the second the f32 arithmetic.  f16 weights: within
 * gamma(K + 10) (sum_k |w_k x_k| + |bias|).
 */
#ifndef CG_QLINEAR_H
#define CG_QLINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A weight matrix [N, K] as stored (borrowed bytes). */
struct cg_wmat {
	enum cg_dtype dtype; /* CG_F32, CG_F16, CG_Q8_0 or CG_Q4_0 */
	const void *data;
};

/* Elements of an input block. */
#define CG_QBLOCK 32

/* The kernel paths; CG_QPATH_BEST asks for the one chosen at run time. */
enum cg_qpath {
	CG_QPATH_PORTABLE,
	CG_QPATH_AVX2,
	CG_QPATH_VNNI,
	CG_QPATH_NEON,
	CG_QPATH_N,
	CG_QPATH_BEST = -1
};

/* Whether the CPU runs path p (the portable one always). */
int cg_qpath_supported(enum cg_qpath p);
/* Its name: "portable", "avx2", "avx512vnni", "neon". */
const char *cg_qpath_name(enum cg_qpath p);
/*
 * Choose the path (once; later calls return the choice): CG_QKERNEL's if
 * set, else the best the CPU has.  Returns 0, or -1 with a message when
 * CG_QKERNEL names no path or one the CPU lacks.
 */
int cg_qpath_init(void);
/* The path in use (cg_qpath_init's choice; the best before it ran). */
enum cg_qpath cg_qpath_current(void);

/* Whether a [N, K] matrix of dtype dt can be multiplied as stored: f32
 * and f16 always, q8_0 and q4_0 when K % 32 == 0. */
int cg_wmat_ok(enum cg_dtype dt, uint64_t K);
/* Whether weights of dtype dt are worth keeping as stored to multiply:
 * every dtype but f32 that cg_wmat_ok takes (f16, q8_0, q4_0). */
int cg_qlinear_keeps(enum cg_dtype dt);

/*
 * Bytes of scratch cg_qlinear_forward needs for B rows of K inputs
 * (the q8_0 form of the input): B * (K / 32) * (32 + 4), rounded up.
 */
size_t cg_qlinear_scratch(int B, int K);

/*
 * Quantize inp [B, K] (K % 32 == 0) to q [B, K] int8 and d [B, K / 32]
 * f32 scales: per block of 32, d = max|x| / 127 and q = round(x / d), so
 * that |x - d q| <= d (1/2 + 2^-17) and |q| <= 127; a block of zeros has
 * d = 0, a block holding a NaN or infinity d = NaN (its products are NaN).
 */
void cg_qlinear_quantize(int8_t *q, float *d, const float *inp, int B, int K);

/*
 * out [B, N] = inp [B, K] @ w^T + bias [N] (bias may be NULL), w [N, K]
 * as stored (cg_wmat_ok(w->dtype, K) must hold).  scratch holds
 * cg_qlinear_scratch(B, K) bytes (unused for f32 and f16 weights; may
 * then be NULL).  out must not overlap inp.  Rows of the output are
 * shared among OpenMP's threads for a large product.  Never fails.
 */
void cg_qlinear_forward(float *out, const float *inp, const struct cg_wmat *w,
                        const float *bias, int B, int K, int N,
                        void *scratch);
/* The same on path p (which must be supported), for tests. */
void cg_qlinear_forward_path(enum cg_qpath p, float *out, const float *inp,
                             const struct cg_wmat *w, const float *bias,
                             int B, int K, int N, void *scratch);

#ifdef __cplusplus
}
#endif
#endif

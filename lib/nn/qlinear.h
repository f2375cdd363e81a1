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
#include "nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A weight matrix [N, K] as stored (borrowed bytes), and optionally the
 * same weights packed for the VNNI path (cg_wmat_pack). */
struct cg_wmat {
	enum cg_dtype dtype; /* CG_F32, CG_F16, CG_Q8_0 or CG_Q4_0 */
	const void *data;
	void *pack; /* owned by whoever packed it; NULL: none */
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
 * (the q8_0 form of the input and its blocks' sums): B * (K / 32) *
 * (32 + 8), rounded up.
 */
size_t cg_qlinear_scratch(int B, int K);

/*
 * Quantize inp [B, K] (K % 32 == 0) to q [B, K] int8 and d [B, K / 32]
 * f32 scales: per block of 32, d = max|x| / 127 and q = round(x / d), so
 * that |x - d q| <= d (1/2 + 2^-17) and |q| <= 127; a block of zeros has
 * d = 0, a block holding a NaN or infinity d = NaN (its products are NaN).
 */
void cg_qlinear_quantize(int8_t *q, float *d, const float *inp, int B, int K);
/* The same on path p (which must be supported; the same bits on every
 * path), for tests. */
void cg_qlinear_quantize_path(enum cg_qpath p, int8_t *q, float *d,
                              const float *inp, int B, int K);

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
/*
 * q8_0 weights [N, K] (K % 32 == 0) packed for the AVX-512 VNNI path,
 * which then multiplies 16 rows at a time: rows in groups of 16, each
 * group block by block, a block's 16 f16 scales and then its 512 weights
 * as 8 runs of 16 rows x 4 consecutive columns, every weight plus 128
 * (its sign bit flipped) so that it is the product's unsigned operand;
 * the same 34 bytes a block, so that the integer sums are those of the
 * stored bytes and the sums of rows N - N % 16 on are the row kernel's.
 * cg_wmat_pack_bytes is the bytes of w's pack, or 0 where none is made:
 * unless the VNNI path is the one in use (cg_qpath_current), the dtype
 * q8_0, N >= 16 and K whole blocks.  cg_wmat_pack writes rows [0, N - N
 * % 16) packed to dst (that many bytes, the caller's: it must outlive
 * w's use) and points w->pack at it; where the size is 0, it sets
 * w->pack to NULL.
 */
size_t cg_wmat_pack_bytes(const struct cg_wmat *w, int N, int K);
void cg_wmat_pack(struct cg_wmat *w, int N, int K, void *dst);

/* The same on path p (which must be supported), for tests; a packed w's
 * pack is used on the VNNI path only. */
void cg_qlinear_forward_path(enum cg_qpath p, float *out, const float *inp,
                             const struct cg_wmat *w, const float *bias,
                             int B, int K, int N, void *scratch);

/* ------------------------------------------------------------ weight sets */

/*
 * The weights of a model read to run it (model.h's stored), by where
 * each lies in the parameter buffer, for an architecture's passes: a
 * view kept in a dtype other than f32 is either multiplied as stored
 * (cg_qlinear_forward, a matrix [N, K] with cg_wmat_ok(dtype, K)) or,
 * where no product takes it (a convolution's weights, a matrix whose
 * rows are not whole blocks, bf16, q4_1), decoded whole into the set's
 * one scratch just before it is used, so that no more than one layer's
 * f32 copy exists at a time.  A product of CG_WSET_GEMM_ROWS rows or
 * more decodes its layer too, whatever its type: the f32 product of
 * many rows is faster than the stored one's dot products
 * (bench/RESULTS.md, "The image models on stored weights"); but a
 * packed q8_0 matrix on the VNNI path (cg_wmat_pack) is multiplied as
 * stored at any number of rows up to those the set was made for, its
 * 16-row int8 products being the faster ("int8 products 16 rows at
 * once").  A decoded
 * layer is the codec's decode of the stored bytes, as reading the model
 * whole makes it: the same floats, the same arithmetic after.  An
 * empty set (n 0) leaves every weight to the parameter buffer.
 */
struct cg_wset {
	int n;
	size_t *off;       /* [n] each kept view's offset in the buffer */
	size_t *len;       /* [n] its elements */
	uint64_t *cols;    /* [n] its columns (K) as a matrix, or 0 */
	struct cg_wmat *w; /* [n] its bytes as stored (borrowed) */
	void *qscratch;    /* for the products: qbytes */
	size_t qbytes;
	int qrows;  /* the rows of input qscratch holds */
	float *dec; /* [ndec]: the layer decoded last */
	size_t ndec;
};

/* The rows of input from which a weight set decodes a layer it could
 * multiply as stored. */
#define CG_WSET_GEMM_ROWS 16

/*
 * Make s from views v [nv] and the weights as stored mats [nv] (a
 * model's views and stored, in the same order; mats NULL: the empty
 * set): each view not CG_F32 goes in, a 2-D one multiplied as stored
 * where cg_wmat_ok(its dtype, its columns), every other one decoded
 * before use, which its dtype's codec must allow (a float type with a
 * decoder).  The products' scratch is sized for rows rows of input at
 * once (the most any one product of the arch multiplies).  The bytes
 * are borrowed and must outlive s.  Returns 0, or -1 with a message (a
 * dtype that cannot be decoded, out of memory); s is then empty.
 */
int cg_wset_make(struct cg_wset *s, const struct cg_view *v,
                 const struct cg_wmat *mats, int nv, int rows);
/* Release s's arrays; s is left empty.  An empty s: nothing. */
void cg_wset_free(struct cg_wset *s);
/* The kept weight at offset off in the buffer, or NULL where the
 * buffer's own floats are the weight (f32, or s empty). */
const struct cg_wmat *cg_wset_at(const struct cg_wset *s, size_t off);
/*
 * The n floats of the weight at params + off: params' own where s does
 * not keep it, else s's bytes decoded into its scratch (valid until the
 * next use of s; n must be the view's length).
 */
const float *cg_wset_floats(const struct cg_wset *s, const float *params,
                            size_t off, size_t n);
/*
 * out [B, N] = act(inp [B, K] @ W^T + bias [N]) (bias may be NULL; act a
 * ReLU with relu, else none), W [N, K] the weight at params + off:
 * cg_linear_forward (cg_linear_relu_forward) on params' floats where s
 * does not keep it, bit for bit the pass without a set; else, for B
 * under CG_WSET_GEMM_ROWS (any B up to the rows s was made for where
 * the matrix is packed for the path in use), cg_qlinear_forward on the
 * stored bytes where they are multiplied so, within
 * qlinear's bounds above; else the decoded floats through
 * cg_linear_forward, bit for bit the decoded model's (the ReLU after the
 * product changes no bit).
 */
void cg_wset_linear(const struct cg_wset *s, float *out, const float *inp,
                    const float *params, size_t off, const float *bias, int B,
                    int K, int N, int relu);
/* The same without relu's choice and with add [B, N] added before the
 * ReLU: out = max((inp @ W^T + bias) + add, 0) (where s does not keep W,
 * cg_linear_add_relu_forward: the addition and the ReLU in the product's
 * pass, the bits of doing them after it). */
void cg_wset_linear_add_relu(const struct cg_wset *s, float *out,
                             const float *inp, const float *params,
                             size_t off, const float *bias, const float *add,
                             int B, int K, int N);

#ifdef __cplusplus
}
#endif
#endif

/*
 * nn/gemm.h - single-precision matrix product, row-major.
 *
 * cg_sgemm is the one entry point the kernels use; it calls cblas_sgemm
 * when libcg is built with -DCG_HAVE_CBLAS (OpenBLAS on the calling
 * thread, the product's rows or columns shared out among OpenMP's threads
 * when called outside a parallel region) and a portable blocked kernel
 * otherwise; in bf16 precision (below) oneDNN where the CPU has a bf16
 * matrix engine.  The built-in kernel and a naive reference are always compiled
 * so that tests can compare every path.
 */
#ifndef CG_GEMM_H
#define CG_GEMM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * C = alpha * op(A) * op(B) + beta * C, all row-major.
 * op(A) is [M, K]: A is [M, lda] (lda >= K), or [K, lda] (lda >= M) when
 * transA.  op(B) is [K, N]: B is [K, ldb] (ldb >= N), or [N, ldb] (ldb >= K)
 * when transB.  C is [M, ldc], ldc >= N.  As in BLAS, C is not read when
 * beta == 0.  C must not overlap A or B.  Never fails.
 */
void cg_sgemm(int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc);

/*
 * A product shared out by the caller's own threads, so that work before
 * and after it (a bias, an activation) runs in the same parallel region:
 * cg_sgemm_threads is how many threads cg_sgemm would use for an M x N x K
 * product (1 inside a parallel region or for a small one);
 * cg_sgemm_block is the part-th of parts blocks of C, rows [i0, i0+m) and
 * columns [j0, j0+n) (m or n is 0 for a part left without work); and
 * cg_sgemm_part computes that block of cg_sgemm's product (same arguments
 * but M and N) on the calling thread.  The parts together give the same
 * bits as cg_sgemm.
 */
struct cg_block {
	int i0, m, j0, n;
};
int cg_sgemm_threads(int M, int N, int K);
/* The part-th of parts shares of [0, len) in blocks of 16 (so that threads
 * never write one cache line of a row): offset and count, the count 0 for
 * a part left without work.  cg_sgemm_block splits rows or columns so. */
void cg_split(int len, int part, int parts, int *off, int *n);
struct cg_block cg_sgemm_block(int part, int parts, int M, int N);
void cg_sgemm_part(const struct cg_block *b, int transA, int transB, int K,
                   float alpha, const float *A, int lda, const float *B,
                   int ldb, float beta, float *C, int ldc);

/*
 * Products whose operands are rounded once and read by more than one
 * product or thread (a Linear's weight by every thread's block, its
 * output gradient by both products of the backward pass, attention's
 * keys by every block of queries).  cg_rounded_size is the bytes of an
 * element of an M x N x K product's rounded operands: 0 in f32 precision
 * (nothing to round: take cg_sgemm), 2 where the product goes to oneDNN
 * in bf16 (bf16's bits), 4 otherwise (f32 holding the rounded value: bf16
 * or f16).  cg_round_rows rounds rows x cols at src (rows ld apart) to
 * such elements at dst, packed (rows cols apart; dst may be src when es
 * is 4), on the calling thread, as cg_sgemm rounds its operands.
 * cg_sgemm_rounded and cg_sgemm_rounded_part are cg_sgemm's product on
 * the calling thread, and cg_sgemm_part's, on operands so rounded (lda
 * and ldb in elements): the same bits as cg_sgemm's in deterministic
 * mode.  cg_round_buffer is the calling thread's which-th buffer (of
 * CG_ROUND_BUFFERS) of at least bytes, kept and reused by the next call
 * with the same which; NULL where memory runs out (then take cg_sgemm).
 */
#define CG_ROUND_BUFFERS 4
int cg_rounded_size(int M, int N, int K);
void *cg_round_buffer(int which, size_t bytes);
void cg_round_rows(void *dst, int es, const float *src, int rows, int cols,
                   int ld);
void cg_sgemm_rounded(int es, int transA, int transB, int M, int N, int K,
                      float alpha, const void *A, int lda, const void *B,
                      int ldb, float beta, float *C, int ldc);
void cg_sgemm_rounded_part(const struct cg_block *b, int es, int transA,
                           int transB, int K, float alpha, const void *A,
                           int lda, const void *B, int ldb, float beta,
                           float *C, int ldc);

/* The portable blocked kernel (OpenMP over tiles of C when _OPENMP). */
void cg_sgemm_builtin(int transA, int transB, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc);

/* The naive triple loop, accumulating in double: the reference for tests. */
void cg_sgemm_ref(int transA, int transB, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);

/*
 * Deterministic mode on (on != 0) or off, for the whole process: cg_sgemm
 * and cg_sgemm_part then take the built-in kernel in every build, and the
 * quantized products (qlinear.h) their portable path, so that a
 * computation gives the same bits at any thread count on any x86-64.
 * Set it before any product runs; cg_deterministic says which is on.
 */
void cg_set_deterministic(int on);
int cg_deterministic(void);

/*
 * The engines a product can run on: the BLAS (OpenBLAS), the built-in
 * kernel, oneDNN (nn/dnnl.h), or auto, the default: for f32 the BLAS
 * where built (else the built-in kernel), for bf16 oneDNN where this CPU
 * runs bf16 in hardware (else bf16 emulated on the f32 engine).
 * cg_set_engine forces one for the whole process (tests, CG_GEMM_ENGINE):
 * 0, or -1 when it is not built in.  Deterministic mode overrides it.
 */
enum cg_engine { CG_ENGINE_AUTO, CG_ENGINE_BLAS, CG_ENGINE_BUILTIN,
                 CG_ENGINE_DNNL };
int cg_set_engine(enum cg_engine e);
enum cg_engine cg_get_engine(void);
/* "auto", "blas", "builtin", "dnnl"; parse: 0, or -1 for another name. */
const char *cg_engine_name(enum cg_engine e);
int cg_engine_parse(const char *s, enum cg_engine *e);
/* Whether the engine is built into this libcg (auto and builtin: 1). */
int cg_engine_built(enum cg_engine e);

/*
 * The precision of every product's operands, for the whole process:
 * f32, or bf16 (operands rounded to bf16 to nearest even, sums and C in
 * f32; mixed-precision training keeps everything else in f32).  bf16 runs
 * on oneDNN where the CPU has AMX and the engine is auto or dnnl, or
 * has avx512_bf16's dot product and the engine is dnnl, or auto where
 * that dot product is measured fast enough (cg_bf16_dot_ratio), and is
 * emulated otherwise: the operands
 * rounded in f32 and multiplied by the f32 engine, which gives the same
 * products (a product of two bf16 values is exact in f32) in another
 * order of sums, and no speed.  In deterministic mode it is always
 * emulated on the built-in kernel: the same bits everywhere.  Set it
 * before any product runs.
 */
enum cg_precision { CG_PREC_F32, CG_PREC_BF16, CG_PREC_F16 };
void cg_set_precision(enum cg_precision p);
enum cg_precision cg_get_precision(void);

/*
 * f16 (CG_PREC_F16): operands rounded to IEEE half to nearest even (past
 * 65504 inf, below 2^-14 subnormal), sums and C in f32; always emulated
 * on the f32 engine as bf16 is where it has no hardware (gemm.c says
 * why), the same products in another order of sums.  Half's range is
 * narrow, so training in f16 scales its loss (below).
 */

/*
 * The loss scale (dynamic loss scaling of f16 training; 1 unless a
 * trainer sets it): every arch multiplies the gradient that seeds its
 * backward pass (d(loss)/d(its outputs), and every term added to it) by
 * it, so that gradients below half's range are lifted into it in the
 * products; the parameters' gradients come out times the scale, and the
 * trainer divides it out (train/train.c).  A power of two, so that in
 * f32 the scaled gradient is the unscaled one times it, bit for bit.
 * cg_loss_scale_apply: n floats at d times it (nothing when it is 1).
 */
void cg_set_loss_scale(float s);
float cg_loss_scale(void);
void cg_loss_scale_apply(float *d, size_t n);
/* 1 where bf16 products run on the CPU's bf16 instructions (oneDNN),
 * 0 where they are emulated or the precision is f32. */
int cg_bf16_native(void);
/* The bf16 hardware oneDNN finds: 2 AMX, 1 avx512_bf16's dot product
 * alone, 0 none (or no oneDNN built in). */
int cg_bf16_hardware(void);
/* avx512_bf16's dot product's multiply-adds a second over the f32 FMA's
 * on one core, measured once (about 1 ms); 0 where the CPU has no
 * avx512_bf16 or cg has no oneDNN.  Auto takes the dot product for bf16
 * products where it is 1.5 or more (CG_BF16_DOT=fast or slow decides
 * instead). */
double cg_bf16_dot_ratio(void);
/* oneDNN's implementation of bf16 products ("brg:avx512_core_amx_bf16"),
 * or "emulated". */
const char *cg_bf16_impl(void);

/* "cblas", "builtin" or "dnnl": which engine takes an f32 product. */
const char *cg_sgemm_backend(void);

#ifdef __cplusplus
}
#endif
#endif

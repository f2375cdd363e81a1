/*
 * nn/dnnl.h - matrix products and convolutions through oneDNN (libdnnl),
 * the second engine.
 *
 * Built only with -DCG_HAVE_DNNL (configure --with-dnnl, on where
 * Debian's libdnnl-dev is found).  nn/gemm.c is its one caller: it
 * chooses between this engine, the BLAS and the built-in kernel per
 * precision and shape.  A matmul primitive is made once per shape,
 * transposition, leading dimensions, alpha and beta, and kept for the
 * life of the process (a table of CG_DNNL_CACHE; past that, products of
 * new shapes are made and dropped per call).  Safe to call from many
 * threads at once: each thread executes on a stream of its own, and
 * inside a parallel region oneDNN runs the product on the calling thread.
 */
#ifndef CG_DNNL_H
#define CG_DNNL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CG_DNNL_CACHE 256

/*
 * C = alpha * op(A) * op(B) + beta * C, row-major, as cg_sgemm (gemm.h),
 * with A and B of f32 (bf16 == 0) or of bf16's bits (bf16 != 0, uint16_t
 * elements), C of f32 and the sums in f32.  As in BLAS, C is not read
 * when beta == 0.  0, or -1 when oneDNN cannot make or run the product
 * (no bf16 on this CPU, out of memory): the caller takes another engine;
 * C is then unchanged.
 */
int cg_dnnl_gemm(int bf16, int transA, int transB, int M, int N, int K,
                 float alpha, const void *A, int lda, const void *B, int ldb,
                 float beta, float *C, int ldc);

/*
 * 2-D convolutions (nn/conv.h's shapes, channels-last maps, weights
 * [OC, C, KH, KW]) through oneDNN's convolution primitives, for B
 * examples: operands of f32, or rounded to bf16 (bf16 != 0; sums and
 * results in f32).  nn/conv.c is their one caller.  A primitive, with the
 * reorders of its weights, is made once per direction, precision, shape
 * and batch and kept (a table of CG_DNNL_CACHE, as for products).  Each
 * returns 0, or -1 when oneDNN cannot make or run it: the caller takes
 * another path, nothing having been written.
 *
 * cg_dnnl_conv_forward: out = conv(inp, w) + b (b NULL: none).
 * cg_dnnl_conv_backward_data: dinp += the gradient of the input.
 * cg_dnnl_conv_backward_weights: dw += the gradient of the weight (the
 * bias's is the caller's).
 */
struct cg_conv;
int cg_dnnl_conv_forward(int bf16, const struct cg_conv *c, int B, float *out,
                         const float *inp, const float *w, const float *b);
int cg_dnnl_conv_backward_data(int bf16, const struct cg_conv *c, int B,
                               float *dinp, const float *dout,
                               const float *w);
int cg_dnnl_conv_backward_weights(int bf16, const struct cg_conv *c, int B,
                                  float *dw, const float *dout,
                                  const float *inp);

/*
 * Whether this CPU runs bf16 products in hardware as oneDNN sees it
 * (within DNNL_MAX_CPU_ISA when that is set) and a bf16 primitive can be
 * made: 2 on AMX's tiles, 1 on avx512_bf16's dot product alone, 0 not.
 */
int cg_dnnl_bf16(void);

/* The implementation oneDNN picks for a 256^3 product of bf16 operands
 * ("brg:avx512_core_amx_bf16"), or "none" where it makes none. */
const char *cg_dnnl_bf16_impl(void);

#ifdef __cplusplus
}
#endif
#endif

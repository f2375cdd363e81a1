/*
 * nn/gemm.c - single-precision matrix product, row-major, BLAS or built in.
 *
 * The built-in kernel follows the Goto/BLIS scheme at a small scale: C is
 * cut into tiles that threads share out; for each slice of K a thread packs
 * its block of op(A) into MR-row micro-panels (L2), then one NR-column
 * micro-panel of op(B) at a time (L1), and a register-blocked micro-kernel
 * computes each MR x NR block of C.  Packing makes all four transpose cases
 * one code path and pads edges with zeros.  GCC/Clang vector extensions keep
 * the accumulators in registers; other compilers get a scalar micro-kernel.
 * Packing buffers live on the stack (about 130 KiB per thread).  It is meant
 * to be within a small factor of a tuned BLAS, not to replace one.
 */
#include <stddef.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef CG_HAVE_CBLAS
#include <cblas.h>
#endif

#include "nn/gemm.h"

/* ------------------------------------------------------ blocking sizes */

#if defined(__GNUC__) && defined(__AVX512F__)
#define VLEN 16 /* 32 zmm registers: 12 accumulators */
#define MR 6
#elif defined(__GNUC__) && defined(__AVX__)
#define VLEN 8 /* 16 ymm registers: 12 accumulators */
#define MR 6
#elif defined(__GNUC__)
#define VLEN 4 /* SSE or NEON: 8 accumulators */
#define MR 4
#else
#define VLEN 4
#define MR 4
#define CG_GEMM_SCALAR
#endif
#define NR (2 * VLEN)
#define MC (16 * MR) /* rows of C per tile, at most */
#define NC 256       /* columns of C per tile, at most */
#define KC 256       /* slice of K packed at a time */

/* Work (M*N*K) under which threads cost more than they save. */
#define PAR_MIN_WORK (64 * 64 * 64)

/* ------------------------------------------------------------ reference */

void
cg_sgemm_ref(int transA, int transB, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb, float beta,
             float *C, int ldc)
{
	for (int i = 0; i < M; i++) {
		for (int j = 0; j < N; j++) {
			double s = 0;
			for (int k = 0; k < K; k++) {
				float a = transA ? A[(size_t)k * lda + i]
				                 : A[(size_t)i * lda + k];
				float b = transB ? B[(size_t)j * ldb + k]
				                 : B[(size_t)k * ldb + j];
				s += (double)a * b;
			}
			float *c = &C[(size_t)i * ldc + j];
			*c = (float)(alpha * s + (beta == 0 ? 0 : beta * *c));
		}
	}
}

/* -------------------------------------------------------------- packing */

/*
 * ap: [ceil(mc/MR)][kc][MR], rows i0.. of op(A), columns k0.., zero-padded
 * past mc.
 */
static void
pack_a(float *restrict ap, const float *A, int lda, int transA, int i0, int k0,
       int mc, int kc)
{
	for (int p = 0; p < mc; p += MR) {
		int mr = mc - p < MR ? mc - p : MR;
		float *dst = ap + (size_t)p * kc;

		for (int r = 0; r < MR; r++) {
			if (r >= mr) {
				for (int k = 0; k < kc; k++)
					dst[k * MR + r] = 0;
				continue;
			}
			size_t i = (size_t)i0 + p + r;
			if (transA) {
				const float *src = A + (size_t)k0 * lda + i;
				for (int k = 0; k < kc; k++)
					dst[k * MR + r] = src[(size_t)k * lda];
			} else {
				const float *src = A + i * lda + k0;
				for (int k = 0; k < kc; k++)
					dst[k * MR + r] = src[k];
			}
		}
	}
}

/* bp: [kc][NR], columns j0..j0+nr of op(B), rows k0.., zero-padded. */
static void
pack_b(float *restrict bp, const float *B, int ldb, int transB, int k0, int j0,
       int kc, int nr)
{
	for (int k = 0; k < kc; k++) {
		float *dst = bp + (size_t)k * NR;
		size_t kk = (size_t)k0 + k;

		if (transB) {
			const float *src = B + (size_t)j0 * ldb + kk;
			for (int j = 0; j < nr; j++)
				dst[j] = src[(size_t)j * ldb];
		} else {
			const float *src = B + kk * ldb + j0;
			for (int j = 0; j < nr; j++)
				dst[j] = src[j];
		}
		for (int j = nr; j < NR; j++)
			dst[j] = 0;
	}
}

/* --------------------------------------------------------- micro-kernel */

/* acc[MR][NR] = a[kc][MR]^T-ish * b[kc][NR]: sum over k of outer products. */
#ifndef CG_GEMM_SCALAR
typedef float vf __attribute__((vector_size(VLEN * sizeof(float))));

static void
kernel(int kc, const float *restrict a, const float *restrict b,
       float *restrict acc)
{
	vf c0a = {0}, c0b = {0}, c1a = {0}, c1b = {0};
	vf c2a = {0}, c2b = {0}, c3a = {0}, c3b = {0};
#if MR > 4
	vf c4a = {0}, c4b = {0}, c5a = {0}, c5b = {0};
#endif

	for (int k = 0; k < kc; k++) {
		vf b0, b1;

		memcpy(&b0, b, sizeof(vf));
		memcpy(&b1, b + VLEN, sizeof(vf));
		c0a += a[0] * b0;
		c0b += a[0] * b1;
		c1a += a[1] * b0;
		c1b += a[1] * b1;
		c2a += a[2] * b0;
		c2b += a[2] * b1;
		c3a += a[3] * b0;
		c3b += a[3] * b1;
#if MR > 4
		c4a += a[4] * b0;
		c4b += a[4] * b1;
		c5a += a[5] * b0;
		c5b += a[5] * b1;
#endif
		a += MR;
		b += NR;
	}
	memcpy(acc + 0 * NR, &c0a, sizeof(vf));
	memcpy(acc + 0 * NR + VLEN, &c0b, sizeof(vf));
	memcpy(acc + 1 * NR, &c1a, sizeof(vf));
	memcpy(acc + 1 * NR + VLEN, &c1b, sizeof(vf));
	memcpy(acc + 2 * NR, &c2a, sizeof(vf));
	memcpy(acc + 2 * NR + VLEN, &c2b, sizeof(vf));
	memcpy(acc + 3 * NR, &c3a, sizeof(vf));
	memcpy(acc + 3 * NR + VLEN, &c3b, sizeof(vf));
#if MR > 4
	memcpy(acc + 4 * NR, &c4a, sizeof(vf));
	memcpy(acc + 4 * NR + VLEN, &c4b, sizeof(vf));
	memcpy(acc + 5 * NR, &c5a, sizeof(vf));
	memcpy(acc + 5 * NR + VLEN, &c5b, sizeof(vf));
#endif
}
#else
static void
kernel(int kc, const float *restrict a, const float *restrict b,
       float *restrict acc)
{
	float c[MR][NR] = {{0}};

	for (int k = 0; k < kc; k++, a += MR, b += NR)
		for (int r = 0; r < MR; r++)
			for (int j = 0; j < NR; j++)
				c[r][j] += a[r] * b[j];
	memcpy(acc, c, sizeof(c));
}
#endif

/* ----------------------------------------------------------------- tile */

/* C[i0:i0+mc, j0:j0+nc] = alpha * op(A) op(B) + beta * C, one thread. */
static void
tile(int transA, int transB, int K, float alpha, const float *A, int lda,
     const float *B, int ldb, float beta, float *C, int ldc, int i0, int j0,
     int mc, int nc)
{
	_Alignas(64) float ap[MC * KC];
	_Alignas(64) float bp[KC * NR];
	_Alignas(64) float acc[MR * NR];

	for (int i = 0; i < mc; i++) {
		float *c = C + (size_t)(i0 + i) * ldc + j0;
		if (beta == 0)
			memset(c, 0, (size_t)nc * sizeof(float));
		else if (beta != 1)
			for (int j = 0; j < nc; j++)
				c[j] *= beta;
	}
	for (int k0 = 0; k0 < K; k0 += KC) {
		int kc = K - k0 < KC ? K - k0 : KC;

		pack_a(ap, A, lda, transA, i0, k0, mc, kc);
		for (int jr = 0; jr < nc; jr += NR) {
			int nr = nc - jr < NR ? nc - jr : NR;

			pack_b(bp, B, ldb, transB, k0, j0 + jr, kc, nr);
			for (int ir = 0; ir < mc; ir += MR) {
				int mr = mc - ir < MR ? mc - ir : MR;

				kernel(kc, ap + (size_t)ir * kc, bp, acc);
				for (int r = 0; r < mr; r++) {
					float *c = C +
					           (size_t)(i0 + ir + r) * ldc +
					           j0 + jr;
					const float *s = acc + r * NR;
					for (int j = 0; j < nr; j++)
						c[j] += alpha * s[j];
				}
			}
		}
	}
}

void
cg_sgemm_builtin(int transA, int transB, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc)
{
	int mc = MC, nc = NC, nthreads = 1;
	double work = (double)M * N * K;

	if (M <= 0 || N <= 0)
		return;
	if (K <= 0 || alpha == 0) {
		for (int i = 0; i < M; i++) {
			float *c = C + (size_t)i * ldc;
			for (int j = 0; j < N; j++)
				c[j] = beta == 0 ? 0 : beta * c[j];
		}
		return;
	}
#ifdef _OPENMP
	if (work >= PAR_MIN_WORK)
		nthreads = omp_get_max_threads();
#endif
	/* Smaller tiles until every thread has one, if the matrix allows. */
	while ((long)((M + mc - 1) / mc) * ((N + nc - 1) / nc) < nthreads) {
		if (nc > 2 * NR && nc >= mc)
			nc /= 2;
		else if (mc >= 2 * MR)
			mc = MR * (mc / MR / 2);
		else
			break;
	}
	int mt = (M + mc - 1) / mc, nt = (N + nc - 1) / nc;

#ifdef _OPENMP
#pragma omp parallel for collapse(2) schedule(static) if (nthreads > 1)
#endif
	for (int ti = 0; ti < mt; ti++) {
		for (int tj = 0; tj < nt; tj++) {
			int i0 = ti * mc, j0 = tj * nc;

			tile(transA, transB, K, alpha, A, lda, B, ldb, beta, C,
			     ldc, i0, j0, M - i0 < mc ? M - i0 : mc,
			     N - j0 < nc ? N - j0 : nc);
		}
	}
	(void)work;
}

/* ---------------------------------------------------------------- entry */

/*
 * Deterministic mode: the built-in kernel whatever the build.  Its sums
 * over K run in one order (slices of KC, each from k = 0 up, one lane per
 * column of C) however the tiles are shared among threads and whatever
 * the vector width, and no product is contracted into an FMA (-std=c11
 * and -ffp-contract=off, configure.ac), so its bits are the same at any
 * thread count on any x86-64; a BLAS picks its kernel and its order of
 * sums by CPU and by where the threads cut.
 */
static int deterministic;

void
cg_set_deterministic(int on)
{
	deterministic = on != 0;
}

int
cg_deterministic(void)
{
	return deterministic;
}

#ifdef CG_HAVE_CBLAS
/*
 * One thread pool for everything: OpenBLAS runs every product on the
 * calling thread, and cg_sgemm shares a product out among OpenMP's
 * threads itself.  OpenBLAS's own threads spin (sched_yield) between
 * products, taking the cores from the element-wise kernels that run
 * between them: a third of a cvae step went to that.
 */
__attribute__((constructor)) static void
blas_on_calling_thread(void)
{
	openblas_set_num_threads(1);
}

static void
blas(int transA, int transB, int M, int N, int K, float alpha, const float *A,
     int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	/* BLAS wants lda >= 1 even when a dimension is empty. */
	cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
	            transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
	            lda > 0 ? lda : 1, B, ldb > 0 ? ldb : 1, beta, C, ldc);
}
#endif

int
cg_sgemm_threads(int M, int N, int K)
{
#ifdef _OPENMP
	if ((double)M * N * K >= PAR_MIN_WORK && !omp_in_parallel())
		return omp_get_max_threads();
#endif
	(void)M, (void)N, (void)K;
	return 1;
}

void
cg_split(int len, int part, int parts, int *off, int *n)
{
	int step = ((len + parts - 1) / parts + 15) & ~15;

	*off = part * step < len ? part * step : len;
	*n = len - *off < step ? len - *off : step;
}

/*
 * Rows of C in blocks of 16 (or columns, when there are more of those),
 * one share per part; every element is still one product over the whole
 * of K, so the result does not depend on the share.
 */
struct cg_block
cg_sgemm_block(int part, int parts, int M, int N)
{
	struct cg_block b = {0, M, 0, N};

	if (M >= N)
		cg_split(M, part, parts, &b.i0, &b.m);
	else
		cg_split(N, part, parts, &b.j0, &b.n);
	return b;
}

void
cg_sgemm_part(const struct cg_block *b, int transA, int transB, int K,
              float alpha, const float *A, int lda, const float *B, int ldb,
              float beta, float *C, int ldc)
{
	const float *a = transA ? A + b->i0 : A + (size_t)b->i0 * lda;
	const float *bb = transB ? B + (size_t)b->j0 * ldb : B + b->j0;
	float *c = C + (size_t)b->i0 * ldc + b->j0;

	if (b->m <= 0 || b->n <= 0)
		return;
#ifdef CG_HAVE_CBLAS
	if (!deterministic) {
		blas(transA, transB, b->m, b->n, K, alpha, a, lda, bb, ldb,
		     beta, c, ldc);
		return;
	}
#endif
	cg_sgemm_builtin(transA, transB, b->m, b->n, K, alpha, a, lda, bb, ldb,
	                 beta, c, ldc);
}

void
cg_sgemm(int transA, int transB, int M, int N, int K, float alpha,
         const float *A, int lda, const float *B, int ldb, float beta, float *C,
         int ldc)
{
#ifdef CG_HAVE_CBLAS
	int nt = cg_sgemm_threads(M, N, K);

	if (deterministic) {
		cg_sgemm_builtin(transA, transB, M, N, K, alpha, A, lda, B, ldb,
		                 beta, C, ldc);
		return;
	}
	if (M <= 0 || N <= 0)
		return;
	if (nt <= 1) {
		blas(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
		     ldc);
		return;
	}
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
	for (int i = 0; i < nt; i++) {
		struct cg_block b = cg_sgemm_block(i, nt, M, N);
		cg_sgemm_part(&b, transA, transB, K, alpha, A, lda, B, ldb,
		              beta, C, ldc);
	}
#else
	cg_sgemm_builtin(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
	                 C, ldc);
#endif
}

const char *
cg_sgemm_backend(void)
{
#ifdef CG_HAVE_CBLAS
	return deterministic ? "builtin" : "cblas";
#else
	return "builtin";
#endif
}

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
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CG_BF16_CVT 1 /* the CPU may round to bf16 itself (round_rows) */
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef CG_HAVE_CBLAS
#include <cblas.h>
#endif

#include "core/half.h"
#include "core/par.h"
#include "nn/gemm.h"
#ifdef CG_HAVE_DNNL
#include "nn/dnnl.h"
#endif

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
static enum cg_precision precision = CG_PREC_F32;
static enum cg_engine engine = CG_ENGINE_AUTO;
static int bf16_native; /* bf16 products go to oneDNN (cg_set_precision) */
#ifdef CG_BF16_CVT
static int bf16_cvt; /* the CPU rounds bf16 operands (round_rows) */
#endif

void
cg_set_deterministic(int on)
{
	deterministic = on != 0;
	cg_set_precision(precision);
}

int
cg_deterministic(void)
{
	return deterministic;
}

int
cg_set_engine(enum cg_engine e)
{
	if (!cg_engine_built(e))
		return -1;
	engine = e;
	cg_set_precision(precision);
	return 0;
}

enum cg_engine
cg_get_engine(void)
{
	return engine;
}

/*
 * avx512_bf16's dot product (vdpbf16ps) does 32 multiply-adds an
 * instruction against an f32 FMA's 16, and how often a core issues it
 * differs by CPU: an Intel Xeon of family 6 model 207 (avx512_bf16, AMX
 * not exposed) ran it at a quarter of the FMA's rate, 86 GFLOP/s a core
 * against 176 (bench/bf16-peak.c; a 20-step cgpt call 1.5 times as long
 * as in f32: bench/RESULTS.md, "bf16 on avx512_bf16 without AMX"), an
 * AMD EPYC of family 26 at the FMA's rate, 517 against 258 (a cgpt step
 * 0.75-0.85 of f32's: "bf16 on an AMD EPYC with avx512_bf16").  So
 * it is measured, once a process, where auto would take it: twelve
 * chains of each instruction timed in turn, the best of five.  The
 * two kinds of CPU lie a factor of four apart (0.49 and 2.0), far from
 * the threshold (1.5) and from what a busy machine's noise moves.
 * CG_BF16_DOT=fast or slow stands for the measurement (tests, and a
 * user who wants the same choice on every run).
 */
static double dot_ratio = -1;

#if defined(__x86_64__) && defined(__GNUC__) && defined(CG_HAVE_DNNL)
#define DOT_ROUNDS 2048

static double
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Twelve independent chains of one instruction (OP of a register),
 * DOT_ROUNDS deep, each in a register of its own: the instruction's
 * rate, not its latency. */
#define CHAINS(OP)                                                            \
	for (int r = 0; r < DOT_ROUNDS; r++) {                                \
		c0 = OP(c0), c1 = OP(c1), c2 = OP(c2), c3 = OP(c3);           \
		c4 = OP(c4), c5 = OP(c5), c6 = OP(c6), c7 = OP(c7);           \
		c8 = OP(c8), c9 = OP(c9), c10 = OP(c10), c11 = OP(c11);       \
		__asm__ volatile(""                                           \
		                 : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3),    \
		                   "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7),    \
		                   "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11)); \
	}
#define DOT(x) _mm512_dpbf16_ps(x, h, h)
#define FMA(x) _mm512_fmadd_ps(x, a, a)

/* The nanoseconds of the chains of vdpbf16ps (dot) or vfmadd231ps. */
__attribute__((target("avx512f,avx512bf16"))) static double
chains_ns(int dot, float *sink)
{
	const __m512 a = _mm512_set1_ps(1.0f);
	const __m512bh h = (__m512bh)_mm512_set1_epi16(0x3f80);
	__m512 c0 = _mm512_set1_ps(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0,
	       c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0,
	       c11 = c0;
	double t0 = now_ns();

	if (dot)
		CHAINS(DOT)
	else
		CHAINS(FMA)
	t0 = now_ns() - t0;
	c0 = _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3));
	c4 = _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7));
	c8 = _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11));
	*sink += _mm512_reduce_add_ps(
	    _mm512_add_ps(c0, _mm512_add_ps(c4, c8)));
	return t0;
}
#endif

double
cg_bf16_dot_ratio(void)
{
	if (dot_ratio >= 0)
		return dot_ratio;
	dot_ratio = 0;
#if defined(__x86_64__) && defined(__GNUC__) && defined(CG_HAVE_DNNL)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512bf16")) {
		double d = 1e30, f = 1e30;
		float sink = 0;

		for (int i = 0; i < 5; i++) {
			double t = chains_ns(1, &sink);
			d = t < d ? t : d;
			t = chains_ns(0, &sink);
			f = t < f ? t : f;
		}
		/* multiply-adds a second: 32 an instruction against 16
		 * (sink keeps the chains' results alive) */
		dot_ratio = d > 0 && sink != 0 ? 2 * f / d : 0;
	}
#endif
	return dot_ratio;
}

#ifdef CG_HAVE_DNNL
/* Whether auto takes avx512_bf16's dot product (oneDNN has it, AMX not). */
static int
dot_fast(void)
{
	const char *v = getenv("CG_BF16_DOT");

	if (v != NULL && strcmp(v, "fast") == 0)
		return 1;
	if (v != NULL && strcmp(v, "slow") == 0)
		return 0;
	return cg_bf16_dot_ratio() >= 1.5;
}
#endif

void
cg_set_precision(enum cg_precision p)
{
	precision = p;
	bf16_native = 0;
#ifdef CG_HAVE_DNNL
	if (p == CG_PREC_BF16 && !deterministic &&
	    (engine == CG_ENGINE_AUTO || engine == CG_ENGINE_DNNL)) {
		int hw = cg_dnnl_bf16();

		bf16_native = hw == 2 || (hw == 1 && (engine == CG_ENGINE_DNNL ||
		                                      dot_fast()));
	}
#endif
#ifdef CG_BF16_CVT
	bf16_cvt = 0;
	if (p == CG_PREC_BF16 && !deterministic) {
		__builtin_cpu_init();
		bf16_cvt = __builtin_cpu_supports("avx512bf16") != 0;
	}
#endif
}

int
cg_bf16_hardware(void)
{
#ifdef CG_HAVE_DNNL
	return cg_dnnl_bf16();
#else
	return 0;
#endif
}

enum cg_precision
cg_get_precision(void)
{
	return precision;
}

static float loss_scale = 1.0f;

void
cg_set_loss_scale(float s)
{
	loss_scale = s;
}

float
cg_loss_scale(void)
{
	return loss_scale;
}

void
cg_loss_scale_apply(float *d, size_t n)
{
	const float s = loss_scale;

	if (s != 1.0f)
		for (size_t i = 0; i < n; i++)
			d[i] *= s;
}

int
cg_bf16_native(void)
{
	return precision == CG_PREC_BF16 && bf16_native;
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

/*
 * Which engine takes an f32 product: the built-in kernel in deterministic
 * mode or where no other is built; oneDNN only when asked for; else the
 * BLAS.  Measured (bench/engines.sh, RESULTS "Mixed precision"), oneDNN's
 * f32 is within 15% of OpenBLAS's on most of the models' shapes but runs
 * a product with op(A) transposed (every weight gradient) at under half
 * its rate: one engine for every f32 shape, and not oneDNN.
 */
enum path { P_BUILTIN, P_BLAS, P_DNNL };

static enum path
f32_path(void)
{
	if (deterministic || engine == CG_ENGINE_BUILTIN)
		return P_BUILTIN;
#ifdef CG_HAVE_DNNL
	if (engine == CG_ENGINE_DNNL)
		return P_DNNL;
#endif
#ifdef CG_HAVE_CBLAS
	return P_BLAS;
#else
	return P_BUILTIN;
#endif
}

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

/* An f32 product on the calling thread (oneDNN's threads outside a
 * parallel region). */
static void
f32_one(int transA, int transB, int M, int N, int K, float alpha,
        const float *A, int lda, const float *B, int ldb, float beta, float *C,
        int ldc)
{
	switch (f32_path()) {
#ifdef CG_HAVE_DNNL
	case P_DNNL:
		if (cg_dnnl_gemm(0, transA, transB, M, N, K, alpha, A, lda, B,
		                 ldb, beta, C, ldc) == 0)
			return;
		break;
#endif
#ifdef CG_HAVE_CBLAS
	case P_BLAS:
		blas(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
		     ldc);
		return;
#endif
	default:
		break;
	}
	cg_sgemm_builtin(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
	                 C, ldc);
}

static void
f32_part(const struct cg_block *b, int transA, int transB, int K, float alpha,
         const float *A, int lda, const float *B, int ldb, float beta,
         float *C, int ldc)
{
	const float *a = transA ? A + b->i0 : A + (size_t)b->i0 * lda;
	const float *bb = transB ? B + (size_t)b->j0 * ldb : B + b->j0;
	float *c = C + (size_t)b->i0 * ldc + b->j0;

	if (b->m <= 0 || b->n <= 0)
		return;
	f32_one(transA, transB, b->m, b->n, K, alpha, a, lda, bb, ldb, beta, c,
	        ldc);
}

static void
f32_sgemm(int transA, int transB, int M, int N, int K, float alpha,
          const float *A, int lda, const float *B, int ldb, float beta,
          float *C, int ldc)
{
	int nt = cg_sgemm_threads(M, N, K);

	if (M <= 0 || N <= 0)
		return;
	/* The built-in kernel shares out its own tiles; oneDNN, its own. */
	if (f32_path() != P_BLAS || nt <= 1 || K <= 0) {
		f32_one(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
		        ldc);
		return;
	}
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
	for (int i = 0; i < nt; i++) {
		struct cg_block b = cg_sgemm_block(i, nt, M, N);
		f32_part(&b, transA, transB, K, alpha, A, lda, B, ldb, beta, C,
		         ldc);
	}
}

/* ----------------------------------------------------------------- bf16 */

/*
 * bf16 products: the operands rounded to bf16 (to nearest even, as
 * cg_f32_to_bf16), the sums in f32.  Where oneDNN runs bf16 in hardware
 * the rounded operands go to it as bf16; elsewhere they stay f32 with
 * their low 16 bits cleared and take the f32 path: a product of two bf16
 * values is exact in f32, so only the order of the sums differs from the
 * hardware's (and AMX's flushing of subnormal inputs to zero).  Products
 * of fewer than BF16_MIN_WORK multiply-adds are not worth oneDNN's call
 * (its memory objects and stream) and take the f32 path as well.
 */
#define BF16_MIN_WORK (64 * 64 * 64)

/*
 * f16 products (CG_PREC_F16): the operands rounded to IEEE half to
 * nearest even (core/half.h: beyond 65504 they become inf, below 2^-14
 * subnormal, below 2^-25 zero), the sums in f32.  A product of two halves
 * is exact in f32 (11 + 11 significant bits, and no product of halves
 * leaves f32's normal range), so emulation on the f32 engine gives the
 * products f16 hardware gives, in another order of sums.  Always
 * emulated, on every CPU: Debian's oneDNN 2.6 makes no f16 matmul, on a
 * Xeon with avx512_fp16 either (dnnl_unimplemented, for f32 or f16
 * results), and there f16 arithmetic is faster than f32's only where it
 * sums in half precision (vfmadd231ph: 2.15 times vfmadd231ps's rate,
 * bench/bf16-peak.c); summed in f32, as here, the operands are widened
 * once and multiplied at f32's rate (PyTorch's oneDNN 3 runs its f16
 * matmul there as fast as its f32, no faster; bench/RESULTS.md, "f16
 * products on avx512_fp16").
 */
static inline uint32_t
f16_bits(float f)
{
	return as_bits(half_to_float(float_to_half(f)));
}

static inline uint32_t
bf16_bits(float f)
{
	uint32_t x, r, q;

	memcpy(&x, &f, 4);
	r = x + 0x7fff + ((x >> 16) & 1);
	q = x | 0x00400000; /* a NaN stays a (quiet) NaN */
	return ((x & 0x7fffffff) > 0x7f800000 ? q : r) >> 16;
}

/* Per-thread buffers for the rounded operands, grown as needed and kept
 * (two for bf16_product's slices, CG_ROUND_BUFFERS for callers' whole
 * operands); each thread's set hangs on a list so that it stays
 * reachable. */
struct scratch {
	void *p[2 + CG_ROUND_BUFFERS];
	size_t n[2 + CG_ROUND_BUFFERS];
	struct scratch *next;
};
static _Thread_local struct scratch *mine;
static struct scratch *all;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;

static void *
scratch(int which, size_t bytes)
{
	if (mine == NULL) {
		if ((mine = calloc(1, sizeof(*mine))) == NULL)
			return NULL;
		pthread_mutex_lock(&all_lock);
		mine->next = all;
		all = mine;
		pthread_mutex_unlock(&all_lock);
	}
	if (mine->n[which] < bytes) {
		void *p = malloc(bytes);
		if (p == NULL)
			return NULL;
		free(mine->p[which]);
		mine->p[which] = p;
		mine->n[which] = bytes;
	}
	return mine->p[which];
}

#ifdef CG_BF16_CVT
/*
 * A row rounded to bf16 by the CPU (vcvtneps2bf16, 16 at a time): to
 * nearest even as bf16_bits, but a subnormal input rounds to zero (the
 * instruction assumes DAZ), as the dot product and AMX's tiles take
 * subnormal inputs anyway.  Not in deterministic mode, whose bits are
 * the same on every CPU.  Rounding was a tenth of a cgpt step in bf16
 * on a CPU with avx512_bf16, and this made the step 16% shorter there.
 * bf16_row_cpu writes bf16's bits, bf16_row_cpu32 f32 with them (the
 * emulated products, and the attention's blocks too small for oneDNN).
 */
__attribute__((target("avx512f,avx512bf16"))) static void
bf16_row_cpu(uint16_t *d, const float *s, int n)
{
	int c = 0;

	for (; c + 16 <= n; c += 16) {
		__m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + c));
		_mm256_storeu_si256((__m256i *)(void *)(d + c), (__m256i)h);
	}
	for (; c < n; c++)
		d[c] = (uint16_t)bf16_bits(s[c]);
}

__attribute__((target("avx512f,avx512bf16"))) static void
bf16_row_cpu32(uint32_t *d, const float *s, int n)
{
	int c = 0;

	for (; c + 16 <= n; c += 16) {
		__m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + c));
		__m512i w = _mm512_cvtepu16_epi32((__m256i)h);
		_mm512_storeu_si512((void *)(d + c), _mm512_slli_epi32(w, 16));
	}
	for (; c < n; c++)
		d[c] = bf16_bits(s[c]) << 16;
}
#endif

/* Row r of the rows x cols matrix at src (rows ld apart) rounded to bf16,
 * packed (rows cols apart) at dst: bf16's bits (half) or f32 with them;
 * in f16 precision rounded to f16, always as f32 (half is then 0). */
static void
round_row(void *dst, int half, const float *src, int r, int cols, int ld)
{
	const float *s = src + (size_t)r * ld;

	if (precision == CG_PREC_F16) {
		uint32_t *d = (uint32_t *)dst + (size_t)r * cols;
		for (int c = 0; c < cols; c++)
			d[c] = f16_bits(s[c]);
	} else if (half) {
		uint16_t *d = (uint16_t *)dst + (size_t)r * cols;
#ifdef CG_BF16_CVT
		if (bf16_cvt) { /* set only for bf16 */
			bf16_row_cpu(d, s, cols);
			return;
		}
#endif
		for (int c = 0; c < cols; c++)
			d[c] = (uint16_t)bf16_bits(s[c]);
	} else {
		uint32_t *d = (uint32_t *)dst + (size_t)r * cols;
#ifdef CG_BF16_CVT
		if (bf16_cvt) {
			bf16_row_cpu32(d, s, cols);
			return;
		}
#endif
		for (int c = 0; c < cols; c++)
			d[c] = bf16_bits(s[c]) << 16;
	}
}

/* The whole matrix so; shared among threads only when it is big and no
 * parallel region is running (a region of one thread still costs its
 * fork: attention rounds a row at a time). */
static void
round_rows(void *dst, int half, const float *src, int rows, int cols, int ld)
{
#ifdef _OPENMP
	if ((size_t)rows * cols >= (1 << 18) && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
		for (int r = 0; r < rows; r++)
			round_row(dst, half, src, r, cols, ld);
		return;
	}
#endif
	for (int r = 0; r < rows; r++)
		round_row(dst, half, src, r, cols, ld);
}

/*
 * Slices of K rounded at a time: the buffers hold op(A)'s columns and
 * op(B)'s rows of one slice, 1 KiB per row of C and per column (f32 of
 * 256, or bf16 of 512), not whole operands.  Emulated, the slices are
 * those of the built-in kernel (KC): each adds its sum to C as the kernel
 * adds each of its own, so deterministic mode's bits are the same sliced
 * or not, and whatever share of C a thread computes.
 */
#define BF16_KC_EMULATED KC
#define BF16_KC_NATIVE 512

/* Slice [k0, k0 + n) of op(X) (rows x cols, transposed or not, rows ld
 * apart) rounded into dst: as its own matrix with the same transposition,
 * packed. */
static void
round_slice(void *dst, int half, const float *X, int ld, int trans,
            int other, int k0, int n, int kdim_is_col)
{
	/* op(X) is [other, K] when kdim_is_col (A) and [K, other] when not
	 * (B); stored transposed, the roles of rows and columns swap. */
	if (kdim_is_col != trans)
		round_rows(dst, half, X + k0, other, n, ld);
	else
		round_rows(dst, half, X + (size_t)k0 * ld, n, other, ld);
}

/*
 * One bf16 (or f16) product, slice by slice of K: the slice's operands rounded
 * into this thread's buffers, then oneDNN or the f32 path (whole: shared
 * out among threads as cg_sgemm shares an f32 product), each slice after
 * the first adding to C.  Where no buffer can be had the operands stay
 * f32: the product is still made, with more precision than asked for.
 */
static void
bf16_product(int whole, int transA, int transB, int M, int N, int K,
             float alpha, const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc)
{
	void (*f32)(int, int, int, int, int, float, const float *, int,
	            const float *, int, float, float *, int) =
	    whole ? f32_sgemm : f32_one;
	int native = bf16_native && (double)M * N * K >= BF16_MIN_WORK;
	int kc = native ? BF16_KC_NATIVE : BF16_KC_EMULATED;
	size_t es = native ? 2 : 4;
	void *a, *b;

	if (M <= 0 || N <= 0)
		return;
	if (K <= 0 ||
	    (a = scratch(0, (size_t)M * (K < kc ? K : kc) * es)) == NULL ||
	    (b = scratch(1, (size_t)N * (K < kc ? K : kc) * es)) == NULL) {
		f32(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
		    ldc);
		return;
	}
	for (int k0 = 0; k0 < K; k0 += kc) {
		int n = K - k0 < kc ? K - k0 : kc;
		/* the packed slice's leading dimensions */
		int la = transA ? M : n, lb = transB ? n : N;
		float bt = k0 == 0 ? beta : 1;

		round_slice(a, native, A, lda, transA, M, k0, n, 1);
		round_slice(b, native, B, ldb, transB, N, k0, n, 0);
#ifdef CG_HAVE_DNNL
		if (native && cg_dnnl_gemm(1, transA, transB, M, N, n, alpha,
		                           a, la, b, lb, bt, C, ldc) == 0)
			continue;
		if (native) { /* oneDNN failed: this slice in f32 */
			f32(transA, transB, M, N, n, alpha,
			    transA ? A + (size_t)k0 * lda : A + k0, lda,
			    transB ? B + k0 : B + (size_t)k0 * ldb, ldb, bt, C,
			    ldc);
			continue;
		}
#endif
		f32(transA, transB, M, N, n, alpha, a, la, b, lb, bt, C, ldc);
	}
}

/* ------------------------------------------------ operands rounded once */

int
cg_rounded_size(int M, int N, int K)
{
	if (precision == CG_PREC_F32)
		return 0;
	return bf16_native && (double)M * N * K >= BF16_MIN_WORK ? 2 : 4;
}

void *
cg_round_buffer(int which, size_t bytes)
{
	if (which < 0 || which >= CG_ROUND_BUFFERS)
		return NULL;
	return scratch(2 + which, bytes ? bytes : 1);
}

void
cg_round_rows(void *dst, int es, const float *src, int rows, int cols, int ld)
{
	if (rows > 0 && cols > 0)
		round_rows(dst, es == 2, src, rows, cols, ld);
}

/* The stored rows x cols of bf16 bits (ld apart) as f32, packed. */
static void
widen(float *d, const uint16_t *s, int rows, int cols, int ld)
{
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++) {
			uint32_t x = (uint32_t)s[(size_t)r * ld + c] << 16;
			memcpy(&d[(size_t)r * cols + c], &x, 4);
		}
}

static float
bf16_at(const uint16_t *p, size_t i)
{
	uint32_t x = (uint32_t)p[i] << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

void
cg_sgemm_rounded(int es, int transA, int transB, int M, int N, int K,
                 float alpha, const void *A, int lda, const void *B, int ldb,
                 float beta, float *C, int ldc)
{
	const uint16_t *a = A, *b = B;
	int ar = transA ? K : M, ac = transA ? M : K;
	int br = transB ? N : K, bc = transB ? K : N;
	float *wa, *wb;

	if (M <= 0 || N <= 0)
		return;
	if (es != 2 || K <= 0) {
		f32_one(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
		        ldc);
		return;
	}
#ifdef CG_HAVE_DNNL
	if (cg_dnnl_gemm(1, transA, transB, M, N, K, alpha, A, lda, B, ldb,
	                 beta, C, ldc) == 0)
		return;
#endif
	/* oneDNN failed: the bf16 operands widened to f32, or read one by
	 * one where no buffer can be had; the product is the same */
	wa = scratch(0, (size_t)ar * ac * sizeof(float));
	wb = wa ? scratch(1, (size_t)br * bc * sizeof(float)) : NULL;
	if (wb != NULL) {
		widen(wa, a, ar, ac, lda);
		widen(wb, b, br, bc, ldb);
		f32_one(transA, transB, M, N, K, alpha, wa, ac, wb, bc, beta,
		        C, ldc);
		return;
	}
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float s = 0, *c = C + (size_t)i * ldc + j;

			for (int k = 0; k < K; k++)
				s += bf16_at(a, transA ? (size_t)k * lda + i
				                       : (size_t)i * lda + k) *
				     bf16_at(b, transB ? (size_t)j * ldb + k
				                       : (size_t)k * ldb + j);
			*c = alpha * s + (beta == 0 ? 0 : beta * *c);
		}
}

void
cg_sgemm_rounded_part(const struct cg_block *b, int es, int transA,
                      int transB, int K, float alpha, const void *A, int lda,
                      const void *B, int ldb, float beta, float *C, int ldc)
{
	const char *a = A, *bb = B;

	if (b->m <= 0 || b->n <= 0)
		return;
	a += (transA ? (size_t)b->i0 : (size_t)b->i0 * lda) * es;
	bb += (transB ? (size_t)b->j0 * ldb : (size_t)b->j0) * es;
	cg_sgemm_rounded(es, transA, transB, b->m, b->n, K, alpha, a, lda, bb,
	                 ldb, beta, C + (size_t)b->i0 * ldc + b->j0, ldc);
}

/* ---------------------------------------------------------- interface */

void
cg_sgemm_part(const struct cg_block *b, int transA, int transB, int K,
              float alpha, const float *A, int lda, const float *B, int ldb,
              float beta, float *C, int ldc)
{
	if (precision == CG_PREC_F32) {
		f32_part(b, transA, transB, K, alpha, A, lda, B, ldb, beta, C,
		         ldc);
		return;
	}
	if (b->m <= 0 || b->n <= 0)
		return;
	bf16_product(0, transA, transB, b->m, b->n, K, alpha,
	             transA ? A + b->i0 : A + (size_t)b->i0 * lda, lda,
	             transB ? B + (size_t)b->j0 * ldb : B + b->j0, ldb, beta,
	             C + (size_t)b->i0 * ldc + b->j0, ldc);
}

void
cg_sgemm(int transA, int transB, int M, int N, int K, float alpha,
         const float *A, int lda, const float *B, int ldb, float beta, float *C,
         int ldc)
{
	if (precision != CG_PREC_F32)
		bf16_product(1, transA, transB, M, N, K, alpha, A, lda, B, ldb,
		             beta, C, ldc);
	else
		f32_sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
		          C, ldc);
}

const char *
cg_sgemm_backend(void)
{
	switch (f32_path()) {
	case P_BLAS:
		return "cblas";
	case P_DNNL:
		return "dnnl";
	default:
		return "builtin";
	}
}

const char *
cg_engine_name(enum cg_engine e)
{
	static const char *const names[] = {"auto", "blas", "builtin", "dnnl"};

	return (unsigned)e < 4 ? names[e] : "?";
}

int
cg_engine_parse(const char *s, enum cg_engine *e)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, cg_engine_name((enum cg_engine)i)) == 0) {
			*e = (enum cg_engine)i;
			return 0;
		}
	return -1;
}

int
cg_engine_built(enum cg_engine e)
{
	switch (e) {
#ifndef CG_HAVE_CBLAS
	case CG_ENGINE_BLAS:
		return 0;
#endif
#ifndef CG_HAVE_DNNL
	case CG_ENGINE_DNNL:
		return 0;
#endif
	default:
		return 1;
	}
}

const char *
cg_bf16_impl(void)
{
#ifdef CG_HAVE_DNNL
	if (cg_bf16_native())
		return cg_dnnl_bf16_impl();
#endif
	return "emulated";
}

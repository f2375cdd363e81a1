/*
 * test_nn.c - gemm paths against the reference, nn kernels against finite
 * differences.
 *
 * Every backward kernel is checked on a scalar loss (a random weighting of
 * its outputs, summed in double) by central differences; forward kernels
 * against naive double formulas; the built-in and BLAS gemm against the
 * naive triple loop for all transposes, odd sizes, padded strides and the
 * BLAS beta rules.  A deliberately wrong gradient must be caught, so the
 * checker itself is tested.  Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cg.h"
#include "cli/cli.h"
#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/vmath.h"

#define TEST_NAME "test_nn"
#include "check.h"

#include "fd.h"
#include "lowp.h"

static struct cg_rng rng;

static void
fill(float *p, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * cg_rng_uniform(&rng);
}

/* Fill with values of magnitude in [lo, hi], random sign: keeps finite
 * differences away from a kink at 0. */
static void
fill_away(float *p, size_t n, float lo, float hi)
{
	fill(p, n, lo, hi);
	for (size_t i = 0; i < n; i++)
		if (cg_rng_uniform(&rng) < 0.5f)
			p[i] = -p[i];
}

/* ----------------------------------------------------------------- gemm */

typedef void (*gemmfn)(int, int, int, int, int, float, const float *, int,
                       const float *, int, float, float *, int);

/* The unit roundoff of float, 2^-24. */
#define U 0x1p-24

/*
 * gamma(n) = n u / (1 - n u): a float sum of n products, in any order and
 * with or without fused multiply-adds, is within gamma(n) times the sum
 * of the magnitudes of its terms of the exact sum (Higham, Accuracy and
 * Stability of Numerical Algorithms, 2nd ed., 3.1 and 3.5).
 */
static double
gamma_n(double n)
{
	return n * U / (1 - n * U);
}

/* absv [n] = |v|, for the magnitudes a bound needs. */
static float *
abs_copy(const float *v, size_t n)
{
	float *a = falloc(n);

	for (size_t i = 0; i < n; i++)
		a[i] = fabsf(v[i]);
	return a;
}

/*
 * Largest error of fn against the reference, scaled by the tolerance.
 * The bound: every term of an element of C passes through at most 2K + 2
 * roundings (its product, K - 1 additions within a slice of K, one
 * addition per slice of K that a blocked kernel adds to C, the scaling by
 * alpha and that of beta C), so |C - exact| <= gamma(2K + 2) S with S =
 * |alpha| |op(A)| |op(B)| + |beta| |C0| (absolute values, element-wise),
 * computed by the reference in double; the reference itself is the exact
 * value rounded to float once (u |R|, and the double sum's own K 2^-53).
 */
/* v [n] rounded to bf16 (to nearest even), in place. */
static void
round_bf16(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = cg_bf16_to_f32(cg_f32_to_bf16(v[i]));
}

/* v [n] rounded to f16 (to nearest even), in place. */
static void
round_f16(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = cg_f16_to_f32(cg_f32_to_f16(v[i]));
}

/*
 * With bf16 (prec CG_PREC_BF16) or f16 set, the reference is made from A
 * and B rounded to it: a product of bf16 or f16 values is exact in float,
 * so such a product with float sums is held to the same bound.
 */
static double
gemm_case_in(gemmfn fn, int prec, int ta, int tb, int M, int N, int K,
             float alpha, float beta, int pad)
{
	int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
	size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb;
	size_t nc = (size_t)M * ldc;
	float *A = falloc(na), *B = falloc(nb), *C = falloc(nc),
	      *R = falloc(nc), *S;
	double worst = 0;

	fill(A, na, -1, 1);
	fill(B, nb, -1, 1);
	fill(C, nc, -1, 1);
	if (beta == 0) /* BLAS: C is not read when beta is 0 */
		for (size_t i = 0; i < nc; i++)
			C[i] = NAN;
	memcpy(R, C, nc * sizeof(float));
	S = abs_copy(C, nc);
	fn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	if (prec == CG_PREC_BF16) {
		round_bf16(A, na);
		round_bf16(B, nb);
	} else if (prec == CG_PREC_F16) {
		round_f16(A, na);
		round_f16(B, nb);
	}
	cg_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
	{
		float *aa = abs_copy(A, na), *ab = abs_copy(B, nb);
		cg_sgemm_ref(ta, tb, M, N, K, fabsf(alpha), aa, lda, ab, ldb,
		             fabsf(beta), S, ldc);
		free(aa);
		free(ab);
	}
	for (int i = 0; i < M; i++) {
		for (int j = 0; j < ldc; j++) {
			float c = C[(size_t)i * ldc + j],
			      r = R[(size_t)i * ldc + j];
			double tol = gamma_n(2.0 * K + 2) * (1 + U) *
			                 S[(size_t)i * ldc + j] +
			             U * fabs(r) + 1e-30;
			double e;

			if (j >= N) /* padding must be left alone */
				e = memcmp(&c, &r, sizeof(c)) ? INFINITY : 0;
			else
				e = fabs(c - r) / tol;
			if (!(e <= worst))
				worst = e;
		}
	}
	free(A);
	free(B);
	free(C);
	free(R);
	free(S);
	return worst;
}

static double
gemm_case(gemmfn fn, int ta, int tb, int M, int N, int K, float alpha,
          float beta, int pad)
{
	return gemm_case_in(fn, (int)cg_get_precision(), ta, tb, M, N, K,
	                    alpha, beta, pad);
}

/* cg_sgemm as three callers' threads would share it: cg_sgemm_part. */
static void
gemm_parts(int ta, int tb, int M, int N, int K, float alpha, const float *A,
           int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	for (int p = 0; p < 3; p++) {
		struct cg_block b = cg_sgemm_block(p, 3, M, N);
		cg_sgemm_part(&b, ta, tb, K, alpha, A, lda, B, ldb, beta, C,
		              ldc);
	}
}

static void
test_gemm_paths(const char *label, int builtin_too);

/* cg_sgemm_rounded (whole, rounded_parts 0, or in 3 parts) on operands
 * rounded by cg_round_rows to elements of rounded_es bytes. */
static int rounded_es, rounded_parts;

static void
gemm_rounded(int ta, int tb, int M, int N, int K, float alpha, const float *A,
             int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
	size_t es = (size_t)rounded_es;
	char *ra = malloc((size_t)ar * ac * es + 1);
	char *rb = malloc((size_t)br * bc * es + 1);

	if (ra == NULL || rb == NULL)
		abort();
	cg_round_rows(ra, rounded_es, A, ar, ac, lda);
	cg_round_rows(rb, rounded_es, B, br, bc, ldb);
	if (!rounded_parts)
		cg_sgemm_rounded(rounded_es, ta, tb, M, N, K, alpha, ra, ac,
		                 rb, bc, beta, C, ldc);
	for (int p = 0; rounded_parts && p < 3; p++) {
		struct cg_block b = cg_sgemm_block(p, 3, M, N);
		cg_sgemm_rounded_part(&b, rounded_es, ta, tb, K, alpha, ra,
		                      ac, rb, bc, beta, C, ldc);
	}
	free(ra);
	free(rb);
}


/* Whether the CPU has avx512_bf16. */
static int
cpu_bf16(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512bf16") != 0;
#else
	return 0;
#endif
}
static void
test_f16_range(void);

/*
 * Every engine built in, in f32, bf16 and f16, whole and in parts; in bf16
 * the result must also be measurably off the unrounded product (the
 * operands really are rounded), by more than float's bound (f16's
 * rounding, 8 times finer, is shown exactly in test_f16_range).
 */
static void
test_gemm(void)
{
	static const enum cg_engine engines[] = {
	    CG_ENGINE_BUILTIN, CG_ENGINE_BLAS, CG_ENGINE_DNNL, CG_ENGINE_AUTO};
	char label[160];

	for (size_t e = 0; e < sizeof(engines) / sizeof(engines[0]); e++) {
		if (cg_set_engine(engines[e]) != 0) {
			printf("info engine %s: not built in\n",
			       cg_engine_name(engines[e]));
			continue;
		}
		for (int prec = 0; prec < 3; prec++) {
			cg_set_precision((enum cg_precision)prec);
			snprintf(label, sizeof(label), "engine %s, %s%s",
			         cg_engine_name(engines[e]),
			         prec == 2   ? "f16"
			         : prec == 1 ? "bf16 "
			                     : "f32",
			         prec == 1 ? cg_bf16_impl() : "");
			test_gemm_paths(label, e == 0 && prec == 0);
			if (prec == 1) {
				double e1 = gemm_case_in(cg_sgemm, 0, 0, 1, 64,
				                         64, 512, 1, 0, 0);
				snprintf(label + strlen(label),
				         sizeof(label) - strlen(label),
				         ": off the f32 product by %.3g x "
				         "float's bound",
				         e1);
				expect(e1 > 4, label);
			}
		}
	}
	/* auto and avx512_bf16's dot product: measured against the f32
	 * FMA, or as CG_BF16_DOT says */
	{
		double r = cg_bf16_dot_ratio();

		printf("info bf16 dot product / f32 FMA: %.3f\n", r);
		expect(cpu_bf16() && cg_engine_built(CG_ENGINE_DNNL)
		           ? r > 0 && r < 1e6
		           : r == 0,
		       "the dot product's rate is measured where it exists");
		if (cg_bf16_hardware() == 1) {
			cg_set_engine(CG_ENGINE_AUTO);
			setenv("CG_BF16_DOT", "slow", 1);
			cg_set_precision(CG_PREC_BF16);
			expect(!cg_bf16_native(), "CG_BF16_DOT=slow: emulated");
			setenv("CG_BF16_DOT", "fast", 1);
			cg_set_precision(CG_PREC_BF16);
			expect(cg_bf16_native(), "CG_BF16_DOT=fast: native");
			test_gemm_paths("auto, bf16 on the dot product", 0);
			unsetenv("CG_BF16_DOT");
			cg_set_precision(CG_PREC_BF16);
			expect(cg_bf16_native() == (r >= 1.5),
			       "auto takes the dot product where measured fast");
		}
	}
	cg_set_deterministic(1);
	cg_set_precision(CG_PREC_BF16);
	test_gemm_paths("deterministic bf16", 0);
	cg_set_precision(CG_PREC_F16);
	test_gemm_paths("deterministic f16", 0);
	cg_set_deterministic(0);
	/* operands rounded once by the caller: f32 holding bf16 or f16
	 * (4), bf16's bits (2: oneDNN, or widened where it is not built) */
	{
		static const struct {
			int prec, es;
		} r[] = {{CG_PREC_BF16, 4}, {CG_PREC_BF16, 2}, {CG_PREC_F16, 4}};

		for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
			for (int parts = 0; parts <= 1; parts++) {
				char what[256];
				double worst = 0;

				cg_set_precision((enum cg_precision)r[i].prec);
				rounded_es = r[i].es, rounded_parts = parts;
				for (int t = 0; t < 4; t++) {
					worst = fmax(worst, gemm_case(gemm_rounded, t & 1,
					                              t >> 1, 97, 130,
					                              257, 1.5f,
					                              -0.5f, 1));
					worst = fmax(worst, gemm_case(gemm_rounded, t & 1,
					                              t >> 1, 13, 31,
					                              29, 1, 0, 2));
					worst = fmax(worst, gemm_case(gemm_rounded, t & 1,
					                              t >> 1, 4, 5, 0,
					                              1, 0.5f, 1));
				}
				snprintf(what, sizeof(what),
				         "cg_sgemm_rounded%s, %s, %d-byte "
				         "operands: vs reference, 4 transposes "
				         "x 3 sizes, worst error/tol %.3g",
				         parts ? "_part" : "",
				         r[i].prec == CG_PREC_F16 ? "f16" : "bf16",
				         r[i].es, worst);
				expect(worst <= 1, what);
			}
	}
	test_f16_range();
	cg_set_precision(CG_PREC_F32);
	cg_set_engine(CG_ENGINE_AUTO);
}

/*
 * f16's narrow range, on every engine: an operand past 65504 makes an
 * infinite product, one below half's least subnormal (2^-24) a zero, one
 * of 2^-20 a subnormal kept exactly; scaled by 2^16, the small one is
 * kept (what loss scaling is for).
 */
static void
test_f16_range(void)
{
	static const enum cg_engine engines[] = {
	    CG_ENGINE_BUILTIN, CG_ENGINE_BLAS, CG_ENGINE_DNNL, CG_ENGINE_AUTO};
	const float a[5] = {70000, 1e-8f, 0x1p-20f, 1e-8f * 65536,
	                    1 + 0x1p-12f};
	float b[1] = {1}, c[5];

	for (size_t e = 0; e < sizeof(engines) / sizeof(engines[0]); e++) {
		char what[160];

		if (cg_set_engine(engines[e]) != 0)
			continue;
		cg_set_precision(CG_PREC_F16);
		/* [5, 1] x [1, 1] */
		cg_sgemm(0, 0, 5, 1, 1, 1, a, 1, b, 1, 0, c, 1);
		snprintf(what, sizeof(what),
		         "engine %s, f16: 7e4 -> %g, 1e-8 -> %g, 2^-20 -> "
		         "%a, 1 + 2^-12 -> %a, 1e-8 x 2^16 -> %g (f16's %g)",
		         cg_engine_name(engines[e]), c[0], c[1], c[2], c[4],
		         c[3], cg_f16_to_f32(cg_f32_to_f16(1e-8f * 65536)));
		expect(isinf(c[0]) && c[0] > 0 && c[1] == 0 &&
		           c[2] == 0x1p-20f && c[4] == 1 &&
		           c[3] == cg_f16_to_f32(cg_f32_to_f16(1e-8f * 65536)) &&
		           c[3] > 0,
		       what);
		cg_set_precision(CG_PREC_F32);
		cg_sgemm(0, 0, 5, 1, 1, 1, a, 1, b, 1, 0, c, 1);
		expect(c[0] == 70000 && c[1] == 1e-8f && c[4] == a[4],
		       "f32 after f16: the operands as they are");
	}
	cg_set_engine(CG_ENGINE_AUTO);
}

/* The kernels against the reference; the built-in one (which no engine
 * or precision changes) only when builtin_too. */
static void
test_gemm_paths(const char *label, int builtin_too)
{
	static const int sz[][3] = {
	    {1, 1, 1},      {1, 7, 3},       {5, 1, 9},      {3, 5, 7},
	    {7, 17, 1},     {13, 31, 29},    {17, 33, 65},   {64, 64, 64},
	    {97, 130, 257}, {100, 300, 300}, {200, 37, 513},
	};
	static const float ab[][2] = {
	    {1, 0}, {1, 1}, {1.5f, -0.5f}, {-2, 0}, {0, 0.5f}};
	struct {
		const char *name;
		gemmfn fn;
	} paths[] = {{"builtin", cg_sgemm_builtin},
	             {"cg_sgemm", cg_sgemm},
	             {"cg_sgemm_part", gemm_parts}};
	int prec = (int)cg_get_precision();

	for (size_t p = !builtin_too; p < sizeof(paths) / sizeof(paths[0]);
	     p++) {
		double worst = 0;
		char what[256];

		for (size_t s = 0; s < sizeof(sz) / sizeof(sz[0]); s++)
			for (int t = 0; t < 4; t++)
				for (size_t a = 0; a < 5; a++) {
					double e = gemm_case_in(
					    paths[p].fn, p > 0 ? prec : 0, t & 1,
					                     t >> 1, sz[s][0],
					                     sz[s][1], sz[s][2],
					                     ab[a][0], ab[a][1],
					                     (int)(s + a) % 3);
					if (!(e <= worst))
						worst = e;
				}
		/* Empty products: C = beta * C, and nothing for M or N = 0. */
		worst = fmax(worst,
		             gemm_case(paths[p].fn, 0, 0, 4, 5, 0, 1, 0.5f, 1));
		worst = fmax(worst,
		             gemm_case(paths[p].fn, 1, 1, 0, 5, 3, 1, 0.5f, 1));
		snprintf(what, sizeof(what),
		         "%s: gemm %s (%s) vs reference: 4 transposes x %zu "
		         "sizes x 5 alpha/beta, worst error/tol %.3g",
		         label, paths[p].name,
		         p == 0 ? "built-in" : cg_sgemm_backend(),
		         sizeof(sz) / sizeof(sz[0]), worst);
		expect(worst <= 1, what);
	}
}

/* Not a pass/fail check: how fast each path is on a CVAE-sized product. */
static void
bench_gemm(void)
{
	int M = 128, N = 512, K = 784, reps = 20;
	float *A = falloc((size_t)M * K), *B = falloc((size_t)N * K),
	      *C = falloc((size_t)M * N);
	gemmfn fn[2] = {cg_sgemm_builtin, cg_sgemm};
	const char *name[2] = {"builtin", cg_sgemm_backend()};

	fill(A, (size_t)M * K, -1, 1);
	fill(B, (size_t)N * K, -1, 1);
	for (int p = 0; p < 2; p++) {
		struct timespec t0, t1;

		fn[p](0, 1, M, N, K, 1, A, K, B, K, 0, C, N);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int r = 0; r < reps; r++)
			fn[p](0, 1, M, N, K, 1, A, K, B, K, 0, C, N);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s =
		    (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
		printf("info gemm %-8s %dx%dx%d: %.1f GFLOP/s\n", name[p], M, N,
		       K, 2.0 * M * N * K * reps / s * 1e-9);
	}
	free(A);
	free(B);
	free(C);
}

/* --------------------------------------------------------------- linear */

struct lin_ctx {
	int B, C, OC;
	float *inp, *w, *b, *out, *r;
};

static double
lin_loss(void *p)
{
	struct lin_ctx *c = p;

	cg_linear_forward(c->out, c->inp, c->w, c->b, c->B, c->C, c->OC);
	return dot(c->out, c->r, (size_t)c->B * c->OC);
}

static void
test_linear(void)
{
	struct lin_ctx c = {.B = 3, .C = 5, .OC = 4};
	size_t ni = (size_t)c.B * c.C, nw = (size_t)c.OC * c.C,
	       no = (size_t)c.B * c.OC;
	float *dinp = falloc(ni), *dw = falloc(nw), *db = falloc(c.OC);
	double worst = 0;

	c.inp = falloc(ni);
	c.w = falloc(nw);
	c.b = falloc(c.OC);
	c.out = falloc(no);
	c.r = falloc(no);
	fill(c.inp, ni, -1, 1);
	fill(c.w, nw, -1, 1);
	fill(c.b, c.OC, -1, 1);
	fill(c.r, no, -1, 1);

	/* Forward against the definition. */
	lin_loss(&c);
	for (int i = 0; i < c.B; i++)
		for (int o = 0; o < c.OC; o++) {
			double s = c.b[o];
			for (int k = 0; k < c.C; k++)
				s += (double)c.inp[i * c.C + k] *
				     c.w[o * c.C + k];
			worst = fmax(worst, fabs(s - c.out[i * c.OC + o]));
		}
	expect(worst < 1e-5, "linear forward vs definition");

	/* Backward accumulates: start from 1 and subtract it after. */
	for (size_t i = 0; i < ni; i++)
		dinp[i] = 1;
	for (size_t i = 0; i < nw; i++)
		dw[i] = 1;
	for (int i = 0; i < c.OC; i++)
		db[i] = 1;
	cg_linear_backward(dinp, dw, db, c.r, c.inp, c.w, c.B, c.C, c.OC);
	for (size_t i = 0; i < ni; i++)
		dinp[i] -= 1;
	for (size_t i = 0; i < nw; i++)
		dw[i] -= 1;
	for (int i = 0; i < c.OC; i++)
		db[i] -= 1;
	fdcheck(&FD_NN, "linear dinp", c.inp, dinp, ni, lin_loss, &c, 0);
	fdcheck(&FD_NN, "linear dw", c.w, dw, nw, lin_loss, &c, 0);
	fdcheck(&FD_NN, "linear db", c.b, db, c.OC, lin_loss, &c, 0);

	/* No bias: out = inp @ w^T exactly, whatever out held. */
	for (size_t i = 0; i < no; i++)
		c.out[i] = NAN;
	cg_linear_forward(c.out, c.inp, c.w, NULL, c.B, c.C, c.OC);
	worst = 0;
	for (int i = 0; i < c.B; i++)
		for (int o = 0; o < c.OC; o++) {
			double s = 0;
			for (int k = 0; k < c.C; k++)
				s += (double)c.inp[i * c.C + k] *
				     c.w[o * c.C + k];
			double e = fabs(s - c.out[i * c.OC + o]);
			if (!(e <= worst))
				worst = e;
		}
	expect(worst < 1e-5, "linear forward without bias");

	/* The checker must catch a wrong gradient. */
	dw[3] += 0.05f;
	expect(fdcheck(&FD_NN, "", c.w, dw, nw, lin_loss, &c, 1) > FD_NN.tol,
	       "checker rejects a gradient off by 0.05 in one element");

	free(c.inp);
	free(c.w);
	free(c.b);
	free(c.out);
	free(c.r);
	free(dinp);
	free(dw);
	free(db);
}

/* ----------------------------------------------------- relu, sigmoid */

struct ew_ctx {
	size_t n;
	int B, N;
	float *a, *b, *c, *out, *r;
	float scale;
};

static double
relu_loss(void *p)
{
	struct ew_ctx *c = p;

	cg_relu_forward(c->out, c->a, c->n);
	return dot(c->out, c->r, c->n);
}

/*
 * Largest |x - r| / (2 gamma(n) S + tiny) over [len]: x and r are two
 * float evaluations of the same sums of at most n terms whose magnitudes
 * sum to S (element-wise), so each is within gamma(n) S of the exact
 * value and they differ by at most twice that.  <= 1 passes.
 */
static double
worst_over_bound(const float *x, const float *r, const float *S, size_t len,
                 int n)
{
	double worst = 0;

	for (size_t i = 0; i < len; i++) {
		double e = fabs((double)x[i] - r[i]) /
		           (2 * gamma_n(n) * (1 + U) * S[i] + 1e-30);
		if (!(e <= worst))
			worst = e;
	}
	return worst;
}

static int
same_bits(const float *x, const float *r, size_t len)
{
	int same = 1;

	for (size_t i = 0; i < len; i++)
		same &= x[i] == r[i];
	return same;
}

/*
 * Linear+ReLU in one pass against Linear, then ReLU, in turn, on sizes
 * that are shared among threads (B and OC not multiples of 16) and at 1,
 * 2 and 3 threads (dinp written, dw and db accumulated; also where dinp
 * is dout).
 *
 * At one thread count the fused and the plain kernels share the product
 * out in the same blocks and make the same matrix calls on them, so they
 * agree bit for bit whatever the kernel.  Across thread counts the
 * blocks change: the built-in kernel still sums every element in one
 * fixed order (each element's K products in one accumulator, in order,
 * slice after slice of K, whatever the tile), so it gives the same bits;
 * a BLAS need not (OpenBLAS's edge kernels, which depend on where a block
 * ends, sum in another order: its Haswell kernels do, here), so there
 * the results at 2 and 3 threads are held to the rounding bound of the
 * sums against one thread's: out (C + 1 terms: the bias and C products,
 * the ReLU does not widen a difference), dinp (OC products), dw (B
 * products plus the value it held), db (B terms plus the value held).
 * The backward at every thread count is given one thread's forward
 * output, so that its ReLU mask is the same.
 */
static void
test_linear_relu(void)
{
	const int B = 70, C = 96, OC = 96;
	size_t ni = (size_t)B * C, nw = (size_t)OC * C, no = (size_t)B * OC;
	float *inp = falloc(ni), *w = falloc(nw), *b = falloc(OC);
	float *out = falloc(no), *ref = falloc(no), *dout = falloc(no);
	float *tmp = falloc(no), *dinp = falloc(ni), *dw = falloc(nw);
	float *db = falloc(OC), *rdinp = falloc(ni), *rdw = falloc(nw);
	float *rdb = falloc(OC), *dw0 = falloc(nw), *db0 = falloc(OC);
	float *one = falloc(no), *pdinp = falloc(ni), *pdw = falloc(nw);
	float *pdb = falloc(OC);
	float *sout = falloc(no), *sdinp = falloc(ni), *sdw = falloc(nw);
	float *sdb = falloc(OC);
	int builtin = strcmp(cg_sgemm_backend(), "builtin") == 0;
	char what[160];

	fill(inp, ni, -1, 1);
	fill(w, nw, -0.2f, 0.2f);
	fill(b, OC, -0.5f, 0.5f);
	fill(dout, no, -1, 1);
	fill(dw0, nw, -1, 1);
	fill(db0, OC, -1, 1);
#ifdef _OPENMP
	omp_set_num_threads(1);
#endif
	cg_linear_forward(one, inp, w, b, B, C, OC);
	cg_relu_forward(one, one, no);
	memset(tmp, 0, no * sizeof(float));
	cg_relu_backward(tmp, dout, one, no);
	memcpy(rdw, dw0, nw * sizeof(float));
	memcpy(rdb, db0, OC * sizeof(float));
	cg_linear_backward(rdinp, rdw, rdb, tmp, inp, w, B, C, OC);

	/* The magnitudes of the sums, in double: sout = |b| + |inp| |w|^T,
	 * sdinp = |d| |w|, sdw = |dw0| + |d|^T |inp|, sdb = |db0| + sum |d|
	 * (d: the gradient at the pre-activation, tmp). */
	{
		float *ai = abs_copy(inp, ni), *aw = abs_copy(w, nw);
		float *ad = abs_copy(tmp, no), *ones = falloc(B);
		for (int i = 0; i < B; i++) {
			ones[i] = 1;
			for (int o = 0; o < OC; o++)
				sout[(size_t)i * OC + o] = fabsf(b[o]);
		}
		for (size_t i = 0; i < nw; i++)
			sdw[i] = fabsf(dw0[i]);
		for (int o = 0; o < OC; o++)
			sdb[o] = fabsf(db0[o]);
		cg_sgemm_ref(0, 1, B, OC, C, 1, ai, C, aw, C, 1, sout, OC);
		cg_sgemm_ref(0, 0, B, C, OC, 1, ad, OC, aw, C, 0, sdinp, C);
		cg_sgemm_ref(1, 0, OC, C, B, 1, ad, OC, ai, C, 1, sdw, C);
		cg_sgemm_ref(0, 0, 1, OC, B, 1, ones, B, ad, OC, 1, sdb, OC);
		free(ai);
		free(aw);
		free(ad);
		free(ones);
	}

	for (int nt = 1; nt <= 3; nt++) {
		int zeros = 0;
		double wf, wb = 0;
#ifdef _OPENMP
		omp_set_num_threads(nt);
#endif
		cg_linear_forward(ref, inp, w, b, B, C, OC);
		cg_relu_forward(ref, ref, no);
		cg_linear_relu_forward(out, inp, w, b, B, C, OC);
		for (size_t i = 0; i < no; i++)
			zeros += out[i] == 0;
		snprintf(what, sizeof(what),
		         "linear+relu forward, %d thread(s): linear then relu "
		         "bit for bit (%d of %zu zero)",
		         nt, zeros, no);
		expect(same_bits(out, ref, no) && zeros > 0 && zeros < (int)no,
		       what);
		/* With a term added before the ReLU: linear, the addition,
		 * then the ReLU, in turn, bit for bit. */
		{
			float *add = falloc(no), *aref = falloc(no);
			int az = 0;
			fill(add, no, -0.5f, 0.5f);
			cg_linear_forward(aref, inp, w, b, B, C, OC);
			for (size_t i = 0; i < no; i++) {
				float v = aref[i] + add[i];
				aref[i] = v > 0 ? v : 0;
				az += aref[i] == 0;
			}
			fill(out, no, 5, 6); /* written, not added to */
			cg_linear_add_relu_forward(out, inp, w, b, add, B, C,
			                           OC);
			snprintf(what, sizeof(what),
			         "linear+add+relu forward, %d thread(s): "
			         "linear, the addition, then relu bit for bit "
			         "(%d of %zu zero)",
			         nt, az, no);
			expect(same_bits(out, aref, no) && az > 0 &&
			           az < (int)no,
			       what);
			free(add);
			free(aref);
			cg_linear_relu_forward(out, inp, w, b, B, C, OC);
		}
		wf = worst_over_bound(out, one, sout, no, C + 1);
		snprintf(what, sizeof(what),
		         "linear+relu forward, %d thread(s), %s: one thread's "
		         "%s (error/bound %.3g)",
		         nt, cg_sgemm_backend(),
		         builtin ? "bits" : "values to rounding", wf);
		expect(builtin ? same_bits(out, one, no) : wf <= 1, what);

		/* Relu then the plain backward, at this thread count. */
		memset(tmp, 0, no * sizeof(float));
		cg_relu_backward(tmp, dout, one, no);
		memset(pdinp, 0, ni * sizeof(float));
		memcpy(pdw, dw0, nw * sizeof(float));
		memcpy(pdb, db0, OC * sizeof(float));
		cg_linear_backward(pdinp, pdw, pdb, tmp, inp, w, B, C, OC);
		for (int alias = 0; alias <= 1; alias++) {
			float *din = dinp;
			int same;
			memcpy(dw, dw0, nw * sizeof(float));
			memcpy(db, db0, OC * sizeof(float));
			if (alias) {
				din = falloc(no);
				memcpy(din, dout, no * sizeof(float));
			} else
				fill(dinp, ni, 5, 6); /* written, not added */
			cg_linear_relu_backward(din, dw, db, tmp,
			                        alias ? din : dout, one, inp, w,
			                        B, C, OC);
			same = same_bits(din, pdinp, ni) &&
			       same_bits(dw, pdw, nw) && same_bits(db, pdb, OC);
			snprintf(what, sizeof(what),
			         "linear+relu backward, %d thread(s)%s: relu "
			         "then linear backward bit for bit",
			         nt, alias ? ", dinp is dout" : "");
			expect(same, what);
			if (alias)
				free(din);
		}
		wb = fmax(wb, worst_over_bound(pdinp, rdinp, sdinp, ni, OC));
		wb = fmax(wb, worst_over_bound(pdw, rdw, sdw, nw, B + 1));
		wb = fmax(wb, worst_over_bound(pdb, rdb, sdb, OC, B + 1));
		snprintf(what, sizeof(what),
		         "linear backward, %d thread(s), %s: one thread's %s "
		         "(error/bound %.3g)",
		         nt, cg_sgemm_backend(),
		         builtin ? "bits" : "values to rounding", wb);
		expect(builtin ? same_bits(pdinp, rdinp, ni) &&
		                     same_bits(pdw, rdw, nw) &&
		                     same_bits(pdb, rdb, OC)
		               : wb <= 1,
		       what);
	}
	/* The writing Linear backward: what accumulating into zeros gives
	 * (here at 3 threads, both). */
	memset(rdinp, 0, ni * sizeof(float));
	cg_linear_backward(rdinp, rdw, rdb, dout, inp, w, B, C, OC);
	fill(dinp, ni, 5, 6);
	cg_linear_backward_set(dinp, dw, db, dout, inp, w, B, C, OC);
	expect(same_bits(dinp, rdinp, ni),
	       "linear_backward_set writes what linear_backward adds "
	       "to zeros");
	float *bufs[] = {inp,   w,   b,     out,  ref,   dout, tmp, dinp,
	                 dw,    db,  rdinp, rdw,  rdb,   dw0,  db0, one,
	                 pdinp, pdw, pdb,   sout, sdinp, sdw,  sdb};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(bufs[i]);
}

/*
 * The Linear kernels in bf16 and f16: each operand rounded once (shared
 * among the threads) and the products of the rounded values summed in
 * float.  Against a double reference from the same rounded operands (the
 * order of float sums is all that differs) and far from the unrounded
 * one; deterministic mode's bits the same at 1, 2 and 3 threads.  One
 * size small enough that its products stay emulated on one thread, two
 * large enough for oneDNN's bf16 where the CPU runs it and shared among
 * threads (by rows of the output, by columns); with and without the ReLU,
 * the bias gradient from the unrounded output gradient.
 *
 * linear_low_ref: out = act(inp w^T + b) (ro); dinp, dw, db from dout
 * (rounded operands where prec, else exact).
 */
static void
linear_low_ref(int prec, int relu, const float *inp, const float *w,
               const float *b, const float *out, const float *dout, int B,
               int C, int OC, double *ro, double *rdi, double *rdw,
               double *rdb)
{
#define R(x) (prec ? lowp_round(prec, x) : (double)(x))
	for (int i = 0; i < B; i++)
		for (int o = 0; o < OC; o++) {
			double s = b[o];
			for (int k = 0; k < C; k++)
				s += R(inp[(size_t)i * C + k]) *
				     R(w[(size_t)o * C + k]);
			ro[(size_t)i * OC + o] = relu && s < 0 ? 0 : s;
		}
	memset(rdi, 0, (size_t)B * C * sizeof(double));
	memset(rdw, 0, (size_t)OC * C * sizeof(double));
	memset(rdb, 0, (size_t)OC * sizeof(double));
	for (int i = 0; i < B; i++)
		for (int o = 0; o < OC; o++) {
			float d = dout[(size_t)i * OC + o];
			if (relu && !(out[(size_t)i * OC + o] > 0))
				d = 0;
			rdb[o] += d;
			for (int k = 0; k < C; k++) {
				rdi[(size_t)i * C + k] +=
				    R(d) * R(w[(size_t)o * C + k]);
				rdw[(size_t)o * C + k] +=
				    R(d) * R(inp[(size_t)i * C + k]);
			}
		}
#undef R
}

static void
test_linear_low(void)
{
	static const int sz[][3] = {{37, 45, 70}, {100, 96, 66}, {40, 64, 200}};
	const struct lowp_mode *modes = lowp_modes;
#ifdef _OPENMP
	int threads = omp_get_max_threads();
#endif

	for (size_t z = 0; z < 3; z++)
		for (int relu = 0; relu <= 1; relu++) {
			int B = sz[z][0], C = sz[z][1], OC = sz[z][2];
			size_t ni = (size_t)B * C, nw = (size_t)OC * C,
			       no = (size_t)B * OC;
			float *inp = falloc(ni), *w = falloc(nw),
			      *b = falloc(OC), *dout = falloc(no),
			      *out = falloc(no), *dpre = falloc(no),
			      *dinp = falloc(ni), *dw = falloc(nw),
			      *db = falloc(OC), *first = falloc(no + ni + nw);
			double *ro = calloc(no, 8), *rdi = calloc(ni, 8),
			       *rdw = calloc(nw, 8), *rdb = calloc(OC, 8);
			double *xo = calloc(no, 8), *xdi = calloc(ni, 8),
			       *xdw = calloc(nw, 8), *xdb = calloc(OC, 8);

			fill(inp, ni, -1, 1);
			fill(w, nw, -1, 1);
			fill(b, OC, -1, 1);
			fill(dout, no, -1, 1);
			for (size_t m = 0; m < LOWP_MODES; m++)
				for (int nt = 1; nt <= 3; nt++) {
					char what[320];
					double e[4], x[4];
					int same = 1;

#ifdef _OPENMP
					omp_set_num_threads(nt);
#endif
					cg_set_deterministic(modes[m].det);
					cg_set_precision(
					    (enum cg_precision)modes[m].prec);
					if (relu)
						cg_linear_relu_forward(
						    out, inp, w, b, B, C, OC);
					else
						cg_linear_forward(out, inp, w,
						                  b, B, C, OC);
					fill(dinp, ni, 5, 6); /* written */
					memset(dw, 0, nw * sizeof(float));
					memset(db, 0, OC * sizeof(float));
					if (relu)
						cg_linear_relu_backward(
						    dinp, dw, db, dpre, dout,
						    out, inp, w, B, C, OC);
					else
						cg_linear_backward_set(
						    dinp, dw, db, dout, inp, w,
						    B, C, OC);
					linear_low_ref(modes[m].prec, relu,
					               inp, w, b, out, dout, B,
					               C, OC, ro, rdi, rdw, rdb);
					linear_low_ref(0, relu, inp, w, b, out,
					               dout, B, C, OC, xo, xdi,
					               xdw, xdb);
					e[0] = lowp_rel2(out, ro, no);
					e[1] = lowp_rel2(dinp, rdi, ni);
					e[2] = lowp_rel2(dw, rdw, nw);
					e[3] = lowp_rel2(db, rdb, OC);
					x[0] = lowp_rel2(out, xo, no);
					x[1] = lowp_rel2(dinp, xdi, ni);
					x[2] = lowp_rel2(dw, xdw, nw);
					x[3] = lowp_rel2(db, xdb, OC);
					if (modes[m].det && nt == 1) {
						memcpy(first, out, no * 4);
						memcpy(first + no, dinp, ni * 4);
						memcpy(first + no + ni, dw, nw * 4);
					} else if (modes[m].det)
						same = same_bits(first, out,
						                 no) &&
						       same_bits(first + no,
						                 dinp, ni) &&
						       same_bits(first + no + ni,
						                 dw, nw);
					snprintf(
					    what, sizeof(what),
					    "linear%s %dx%dx%d in %s (%s), %d "
					    "thread(s): out, dinp, dw, db off "
					    "the rounded operands' reference "
					    "by %.2g %.2g %.2g %.2g, off the "
					    "unrounded one by %.2g %.2g %.2g%s",
					    relu ? "+relu" : "", B, C, OC,
					    modes[m].name,
					    cg_rounded_size(B, OC, C) == 2
					        ? cg_bf16_impl()
					        : "emulated",
					    nt, e[0], e[1], e[2], e[3], x[0],
					    x[1], x[2],
					    modes[m].det && nt > 1
					        ? "; one thread's bits"
					        : "");
					expect(e[0] < 1e-6 && e[1] < 1e-6 &&
					           e[2] < 1e-6 && e[3] < 1e-6 &&
					           x[0] > 1e-4 && x[1] > 1e-4 &&
					           x[2] > 1e-4 && same,
					       what);
				}
			cg_set_deterministic(0);
			cg_set_precision(CG_PREC_F32);
			free(inp);
			free(w);
			free(b);
			free(dout);
			free(out);
			free(dpre);
			free(dinp);
			free(dw);
			free(db);
			free(first);
			free(ro);
			free(rdi);
			free(rdw);
			free(rdb);
			free(xo);
			free(xdi);
			free(xdw);
			free(xdb);
		}
#ifdef _OPENMP
	omp_set_num_threads(threads);
#endif
}

static void
test_relu_sigmoid(void)
{
	struct ew_ctx c = {.n = 40};
	float *d = falloc(c.n), *s = falloc(8);
	double worst = 0;

	c.a = falloc(c.n);
	c.out = falloc(c.n);
	c.r = falloc(c.n);
	fill_away(c.a, c.n, 0.05f, 2);
	fill(c.r, c.n, -1, 1);
	relu_loss(&c);
	cg_relu_backward(d, c.r, c.out, c.n);
	fdcheck(&FD_NN, "relu dinp", c.a, d, c.n, relu_loss, &c, 0);
	/* In place. */
	memcpy(c.out, c.a, c.n * sizeof(float));
	cg_relu_forward(c.out, c.out, c.n);
	for (size_t i = 0; i < c.n; i++)
		worst = fmax(worst, fabs(c.out[i] - fmax(c.a[i], 0)));
	expect(worst == 0, "relu forward in place");

	float x[8] = {-100, -20, -1, -1e-3f, 0, 0.5f, 20, 100};
	worst = 0;
	cg_sigmoid_forward(s, x, 8);
	for (int i = 0; i < 8; i++) {
		double ref = 1 / (1 + exp(-(double)x[i]));
		double e = fabs(s[i] - ref) / fmax(ref, 1e-30);
		if (!(e <= worst))
			worst = e;
	}
	printf("     sigmoid worst rel err %.3g\n", worst);
	expect(worst < 1e-5, "sigmoid forward, -100..100, no overflow");

	free(c.a);
	free(c.out);
	free(c.r);
	free(d);
	free(s);
}

/* --------------------------------------------------------------- BCE */

static double
bce_loss(void *p)
{
	struct ew_ctx *c = p;
	double loss[16], s = 0;

	cg_bce_logits_forward(loss, c->a, c->b, c->B, c->N);
	for (int i = 0; i < c->B; i++)
		s += loss[i];
	return c->scale * s;
}

static void
test_bce(void)
{
	struct ew_ctx c = {.B = 3, .N = 7, .scale = 0.25f};
	size_t n = (size_t)c.B * c.N;
	float *d = falloc(n), *d2 = falloc(n);
	double loss[3], loss2[3], worst = 0;

	c.a = falloc(n);
	c.b = falloc(n);
	fill(c.a, n, -4, 4);
	fill(c.b, n, 0, 1);
	c.b[0] = 0;
	c.b[1] = 1;

	/* Forward against the naive formula, in double. */
	cg_bce_logits_forward(loss, c.a, c.b, c.B, c.N);
	for (int i = 0; i < c.B; i++) {
		double s = 0;
		for (int j = 0; j < c.N; j++) {
			double l = c.a[i * c.N + j], t = c.b[i * c.N + j];
			double p = 1 / (1 + exp(-l));
			s -= t * log(p) + (1 - t) * log(1 - p);
		}
		worst = fmax(worst, fabs(s - loss[i]) / s);
	}
	expect(worst < 1e-5, "bce forward vs -t log p - (1-t) log(1-p)");

	cg_bce_logits_backward(d, c.a, c.b, c.scale, c.B, c.N);
	fdcheck(&FD_NN, "bce dlogits", c.a, d, n, bce_loss, &c, 0);

	/* The fused kernel gives the same loss and gradient. */
	cg_bce_logits_forward_backward(loss2, d2, c.a, c.b, c.scale, c.B, c.N);
	worst = 0;
	for (int i = 0; i < c.B; i++)
		worst = fmax(worst, fabs(loss[i] - loss2[i]));
	for (size_t i = 0; i < n; i++)
		worst = fmax(worst, fabs(d[i] - d2[i]));
	expect(worst < 1e-6, "bce fused forward+backward = forward, backward");

	/* Extreme logits stay finite and exact. */
	float l[4] = {-200, 200, -200, 200}, t[4] = {0, 1, 1, 0};
	cg_bce_logits_forward(loss, l, t, 1, 2);
	cg_bce_logits_forward(loss + 1, l + 2, t + 2, 1, 2);
	expect(loss[0] < 1e-30 && fabs(loss[1] - 400) < 1e-3,
	       "bce at logits +-200 (no overflow)");

	free(c.a);
	free(c.b);
	free(d);
	free(d2);
}

/* ----------------------------------------------------- KL, reparam */

static double
kl_loss(void *p)
{
	struct ew_ctx *c = p;
	double kl[16], s = 0;

	cg_gauss_kl_forward(kl, c->a, c->b, c->B, c->N);
	for (int i = 0; i < c->B; i++)
		s += kl[i];
	return c->scale * s;
}

static double
rep_loss(void *p)
{
	struct ew_ctx *c = p;

	cg_reparam_forward(c->out, c->a, c->b, c->c, c->n);
	return dot(c->out, c->r, c->n);
}

static void
test_kl_reparam(void)
{
	struct ew_ctx c = {.B = 3, .N = 4, .scale = 0.5f};
	size_t n = (size_t)c.B * c.N;
	float *dmu = falloc(n), *dlv = falloc(n);
	double kl[3], worst = 0;

	c.n = n;
	c.a = falloc(n);
	c.b = falloc(n);
	c.c = falloc(n);
	c.out = falloc(n);
	c.r = falloc(n);
	fill(c.a, n, -2, 2);
	fill(c.b, n, -2, 1);
	for (size_t i = 0; i < n; i++)
		c.c[i] = cg_rng_normal(&rng);
	fill(c.r, n, -1, 1);

	/* KL of N(mu, s^2) to N(0, 1) is log(1/s) + (s^2 + mu^2)/2 - 1/2. */
	cg_gauss_kl_forward(kl, c.a, c.b, c.B, c.N);
	for (int i = 0; i < c.B; i++) {
		double s = 0;
		for (int j = 0; j < c.N; j++) {
			double mu = c.a[i * c.N + j], lv = c.b[i * c.N + j];
			s += -0.5 * lv + 0.5 * (exp(lv) + mu * mu) - 0.5;
		}
		worst = fmax(worst, fabs(s - kl[i]));
	}
	expect(worst < 1e-6, "kl forward vs closed form");
	cg_gauss_kl_backward(dmu, dlv, c.a, c.b, c.scale, c.B, c.N);
	fdcheck(&FD_NN, "kl dmu", c.a, dmu, n, kl_loss, &c, 0);
	fdcheck(&FD_NN, "kl dlogvar", c.b, dlv, n, kl_loss, &c, 0);

	memset(dmu, 0, n * sizeof(float));
	memset(dlv, 0, n * sizeof(float));
	rep_loss(&c);
	cg_reparam_backward(dmu, dlv, c.r, c.b, c.c, n);
	fdcheck(&FD_NN, "reparam dmu", c.a, dmu, n, rep_loss, &c, 0);
	fdcheck(&FD_NN, "reparam dlogvar", c.b, dlv, n, rep_loss, &c, 0);

	free(c.a);
	free(c.b);
	free(c.c);
	free(c.out);
	free(c.r);
	free(dmu);
	free(dlv);
}

/* ------------------------------------------------------------- concat */

struct cat_ctx {
	int B, D, K;
	int *cond;
	float *inp, *out, *r;
};

static double
cat_loss(void *p)
{
	struct cat_ctx *c = p;

	cg_concat_onehot_forward(c->out, c->inp, c->cond, c->B, c->D, c->K);
	return dot(c->out, c->r, (size_t)c->B * (c->D + c->K));
}

static void
test_concat(void)
{
	int cond[3] = {2, 0, 1};
	struct cat_ctx c = {.B = 3, .D = 4, .K = 3, .cond = cond};
	size_t ni = (size_t)c.B * c.D, no = (size_t)c.B * (c.D + c.K);
	float *d = falloc(ni);
	int ok = 1;

	c.inp = falloc(ni);
	c.out = falloc(no);
	c.r = falloc(no);
	fill(c.inp, ni, -1, 1);
	fill(c.r, no, -1, 1);
	for (size_t i = 0; i < no; i++)
		c.out[i] = NAN;
	cat_loss(&c);
	for (int b = 0; b < c.B; b++)
		for (int j = 0; j < c.D + c.K; j++) {
			float v = c.out[b * (c.D + c.K) + j];
			float want =
			    j < c.D ? c.inp[b * c.D + j] : (j - c.D == cond[b]);
			ok &= v == want;
		}
	expect(ok, "concat one-hot forward layout");
	cg_concat_onehot_backward(d, c.r, c.B, c.D, c.K);
	fdcheck(&FD_NN, "concat dinp", c.inp, d, ni, cat_loss, &c, 0);
	free(c.inp);
	free(c.out);
	free(c.r);
	free(d);
}

/* Distance of a from ref in units of the float spacing at ref. */
static double
ulps(float a, double ref)
{
	float r = (float)ref;
	double u = (double)nextafterf(r, INFINITY) - r;

	return fabs(a - ref) / u;
}

/*
 * vmath.h against libm in double: every 97th float of e^x's range of use
 * [-87, 0] and of log1p's [0, 1], and log1p above 1; within 2 ulp.
 */
static void
test_vmath(void)
{
	double we = 0, wl = 0;
	char what[128];

	for (uint32_t b = 0x80000000u; b <= 0xc2ae0000u; b += 97) {
		float x;
		memcpy(&x, &b, sizeof(x));
		double e = ulps(cg_exp_approx(x), exp((double)x));
		we = e > we ? e : we;
	}
	for (uint32_t b = 0; b <= 0x3f800000u; b += 97) {
		float x;
		memcpy(&x, &b, sizeof(x));
		double e = ulps(cg_log1p_approx(x), log1p((double)x));
		wl = e > wl ? e : wl;
	}
	for (float x = 1; x < 1e7f; x *= 1.001f) {
		double e = ulps(cg_log1p_approx(x), log1p((double)x));
		wl = e > wl ? e : wl;
	}
	snprintf(what, sizeof(what), "cg_exp_approx on [-87, 0]: %.2f ulp", we);
	expect(we <= 2, what);
	snprintf(what, sizeof(what), "cg_log1p_approx on [0, 1e7]: %.2f ulp",
		 wl);
	expect(wl <= 2, what);
	expect(cg_exp_approx(0) == 1 && cg_log1p_approx(0) == 0,
	       "e^0 is 1 and log1p(0) is 0 exactly");
}

int
main(void)
{
	/* The BLAS as the programs run it (see lib/cli/runtime.c). */
	cg_set_threads(0);
	cg_rng_seed(&rng, 1234);
#ifdef _OPENMP
	printf("info OpenMP, %d threads\n", omp_get_max_threads());
#endif
	test_gemm();
	test_linear();
	test_vmath();
	test_relu_sigmoid();
	test_linear_relu();
	test_linear_low();
	test_bce();
	test_kl_reparam();
	test_concat();
	bench_gemm();
	if (failures) {
		printf("test_nn: %d check(s) FAILED\n", failures);
		return 1;
	}
	printf("test_nn: all checks passed\n");
	return 0;
}

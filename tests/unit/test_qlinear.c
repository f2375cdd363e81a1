/*
 * test_qlinear.c - the products of weights as stored (lib/nn/qlinear.c),
 * every path the CPU has, against the exact product in double.
 *
 * For f16, q8_0 and q4_0 weights made by the codec table from random
 * values (and q8_0 blocks holding -128, which no encoder writes but a
 * file may), each path's output must lie within the bound qlinear.h
 * states of the exact product of the decoded weights with the input, and
 * within the f32 rounding term alone of the exact value of what it
 * computes (sum_b d_w d_b s_b from the same quantized input), which no
 * wrong integer can meet; the paths must agree with each other within
 * twice that.  The input's quantization is checked element by element
 * against its bound, and shown not to be loose (some element's error
 * comes within 1% of d / 2).  Prints the largest error relative to its
 * bound.  Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

#define TEST_NAME "test_qlinear"
#include "check.h"

#define U 0x1p-24

static double
gamma_n(double n)
{
	return n * U / (1 - n * U);
}

/* A uniform in [-1, 1) from r. */
static float
unif(struct cg_rng *r)
{
	return 2 * cg_rng_uniform(r) - 1;
}

/* The worst ratio of error to bound seen, for the report. */
static double worst_full, worst_arith;
static int packed_cases; /* products run on packed weights */

/*
 * Check out [B, N] of path p against the exact products of the decoded
 * weights wf [N, K] with inp [B, K], for weights of dtype dt (bias [N]
 * or NULL).  ref_p: the portable path's output, or NULL.
 */
static void
check_product(enum cg_qpath p, enum cg_dtype dt, const float *out,
              const float *ref_p, const float *wf, const float *inp,
              const float *bias, int B, int K, int N, const char *what)
{
	int nb = K / 32;
	int8_t *q = xcalloc((size_t)B * K, 1);
	float *d = xcalloc((size_t)B * nb + 1, sizeof(float));
	double max_full = 0, max_arith = 0;

	if (dt != CG_F16)
		cg_qlinear_quantize(q, d, inp, B, K);
	for (int i = 0; i < B; i++)
		for (int n = 0; n < N; n++) {
			const float *w = wf + (size_t)n * K;
			const float *x = inp + (size_t)i * K;
			double y = out[(size_t)i * N + n];
			double bb = bias ? bias[n] : 0;
			double exact = bb, model = bb, quant = 0, arith;

			if (dt == CG_F16) {
				double absum = 0;
				for (int k = 0; k < K; k++) {
					exact += (double)w[k] * x[k];
					absum += fabs((double)w[k] * x[k]);
				}
				arith = gamma_n(K + 10) * (absum + fabs(bb));
				model = exact;
			} else {
				double a = 0;
				for (int b = 0; b < nb; b++) {
					/* w = d_w q_w exactly; d_w from any
					 * nonzero element, or 0 */
					const float *wb = w + 32 * b;
					const int8_t *qb = q + (size_t)i * K +
					                   32 * b;
					double db = d[(size_t)i * nb + b];
					double sw = 0, s = 0, ab = 0;
					for (int k = 0; k < 32; k++) {
						exact += (double)wb[k] *
						         x[32 * b + k];
						sw += fabs(wb[k]);
						s += (double)wb[k] * qb[k];
						ab += fabs((double)wb[k] * qb[k]);
					}
					/* s and ab carry d_w already */
					model += db * s;
					a += db * ab;
					quant += db * (0.5 + 0x1p-17) * sw;
				}
				arith = gamma_n(nb + 10) * (a + fabs(bb));
			}
			double e_full = fabs(y - exact);
			double e_arith = fabs(y - model);
			double b_full = quant + arith;
			CHECK(e_full <= b_full,
			      "%s %s row %d out %d: %.9g vs exact %.9g: "
			      "error %.3g over the bound %.3g",
			      what, cg_qpath_name(p), i, n, y, exact, e_full,
			      b_full);
			CHECK(e_arith <= arith,
			      "%s %s row %d out %d: %.9g vs its own "
			      "arithmetic %.9g: error %.3g over %.3g",
			      what, cg_qpath_name(p), i, n, y, model, e_arith,
			      arith);
			if (ref_p) {
				double e = fabs(y - ref_p[(size_t)i * N + n]);
				CHECK(e <= 2 * arith,
				      "%s %s row %d out %d: %.9g, portable "
				      "%.9g: apart by %.3g over %.3g",
				      what, cg_qpath_name(p), i, n, y,
				      ref_p[(size_t)i * N + n], e, 2 * arith);
			}
			if (b_full > 0 && e_full / b_full > max_full)
				max_full = e_full / b_full;
			if (arith > 0 && e_arith / arith > max_arith)
				max_arith = e_arith / arith;
		}
	if (max_full > worst_full)
		worst_full = max_full;
	if (max_arith > worst_arith)
		worst_arith = max_arith;
	free(q);
	free(d);
}

/*
 * Weights [N, K] of dtype dt from values of scale amp, encoded by the
 * codec table (raw: the bytes given instead), checked on every path
 * against inputs inp [B, K].
 */
static void
run_case(enum cg_dtype dt, const void *raw, int B, int K, int N, float amp,
         const float *inp, int with_bias, struct cg_rng *r, const char *what)
{
	const struct cg_codec *c = cg_codec(dt);
	size_t n = (size_t)N * K, bytes = n / c->block * c->bytes;
	float *wf = xcalloc(n, sizeof(float));
	float *bias = xcalloc((size_t)N, sizeof(float));
	unsigned char *wq = xcalloc(bytes, 1);
	float *outp = xcalloc((size_t)B * N, sizeof(float));
	float *out = xcalloc((size_t)B * N, sizeof(float));
	void *scratch = xcalloc(cg_qlinear_scratch(B, K), 1);
	struct cg_wmat w = {dt, wq, NULL};

	if (raw)
		memcpy(wq, raw, bytes);
	else {
		for (size_t i = 0; i < n; i++)
			wf[i] = amp * unif(r);
		if (c->encode(wq, wf, n) != 0)
			die("encode");
	}
	c->decode(wf, wq, n);
	for (int i = 0; i < N; i++)
		bias[i] = with_bias ? unif(r) : 0;
	cg_qlinear_forward_path(CG_QPATH_PORTABLE, outp, inp, &w,
	                        with_bias ? bias : NULL, B, K, N, scratch);
	check_product(CG_QPATH_PORTABLE, dt, outp, NULL, wf, inp,
	              with_bias ? bias : NULL, B, K, N, what);
	for (int p = 1; p < CG_QPATH_N; p++) {
		if (!cg_qpath_supported((enum cg_qpath)p))
			continue;
		memset(out, 0, (size_t)B * N * sizeof(float));
		cg_qlinear_forward_path((enum cg_qpath)p, out, inp, &w,
		                        with_bias ? bias : NULL, B, K, N,
		                        scratch);
		check_product((enum cg_qpath)p, dt, out, outp, wf, inp,
		              with_bias ? bias : NULL, B, K, N, what);
	}
	/* q8_0 packed in groups of 16 rows for the VNNI path, where it
	 * runs: the same bounds, every row (the groups' and the rest) */
	if (cg_qpath_current() == CG_QPATH_VNNI) {
		char pw[96];
		size_t pb = cg_wmat_pack_bytes(&w, N, K);
		cg_wmat_pack(&w, N, K, pb ? xcalloc(pb, 1) : NULL);
		CHECK((w.pack != NULL) == (dt == CG_Q8_0 && N >= 16),
		      "%s: packed %s", what, w.pack ? "yes" : "no");
		if (w.pack != NULL) {
			snprintf(pw, sizeof(pw), "%s packed", what);
			for (size_t i = 0; i < (size_t)B * N; i++)
				out[i] = NAN;
			cg_qlinear_forward_path(CG_QPATH_VNNI, out, inp, &w,
			                        with_bias ? bias : NULL, B, K,
			                        N, scratch);
			check_product(CG_QPATH_VNNI, dt, out, outp, wf, inp,
			              with_bias ? bias : NULL, B, K, N, pw);
			packed_cases++;
		}
		free(w.pack);
		w.pack = NULL;
	}
	free(wf);
	free(bias);
	free(wq);
	free(outp);
	free(out);
	free(scratch);
}

/* Inputs [B, K]: random rows of varied scale, one of zeros, one with a
 * wide range inside each block. */
static float *
inputs(int B, int K, struct cg_rng *r)
{
	float *x = xcalloc((size_t)B * K, sizeof(float));

	for (int i = 0; i < B; i++)
		for (int k = 0; k < K; k++) {
			float s = i == 1 ? 0 : i == 2 ? ldexpf(1, k % 40 - 20)
			                              : (float)(i + 1);
			x[(size_t)i * K + k] = s * unif(r);
		}
	return x;
}

/* The input's rounding: |x - d q| <= d (1/2 + 2^-17), |q| <= 127, and
 * an element close to d / 2 (the bound is reached, not loose). */
static void
check_quantize(struct cg_rng *r)
{
	const int B = 8, K = 256, nb = K / 32;
	float *x = inputs(B, K, r);
	int8_t q[8 * 256];
	float d[8 * 8];
	double worst = 0;
	int bad = 0;

	cg_qlinear_quantize(q, d, x, B, K);
	for (int i = 0; i < B * K; i++) {
		double db = d[i / 32];
		double e = fabs((double)x[i] - db * q[i]);
		if (e > db * (0.5 + 0x1p-17) || q[i] == -128)
			bad++;
		if (db > 0 && e / db > worst)
			worst = e / db;
	}
	CHECK(bad == 0, "%d elements outside the rounding bound", bad);
	CHECK(worst > 0.495, "largest rounding only %.4f d", worst);
	for (int b = 0; b < nb; b++)
		CHECK(d[nb + b] == 0, "a block of zeros has scale %g",
		      d[nb + b]);
	printf("     input rounding: at most %.6f d (bound 0.5 + 2^-17)\n",
	       worst);
	expect(bad == 0 && worst > 0.495, "input quantized within d / 2");

	/* every path quantizes to the same bits: these inputs, halves
	 * (ties) where the scale is 1, a NaN, an infinity of each sign */
	for (int k = 0; k < 32; k++)
		x[3 * K + k] = k == 0 ? 127.0f : (float)(k % 9) - 4.5f;
	x[4 * K + 7] = NAN;
	x[4 * K + 40] = INFINITY;
	x[4 * K + 77] = -INFINITY;
	for (int p = 1; p < CG_QPATH_N; p++) {
		int8_t qp[8 * 256], q0[8 * 256];
		float dp[8 * 8], d0[8 * 8];
		if (!cg_qpath_supported((enum cg_qpath)p))
			continue;
		cg_qlinear_quantize_path(CG_QPATH_PORTABLE, q0, d0, x, B, K);
		cg_qlinear_quantize_path((enum cg_qpath)p, qp, dp, x, B, K);
		char what[64];
		snprintf(what, sizeof(what),
		         "%s quantizes to the portable bits",
		         cg_qpath_name((enum cg_qpath)p));
		expect(memcmp(q0, qp, sizeof(q0)) == 0 &&
		           memcmp(d0, dp, sizeof(d0)) == 0,
		       what);
	}

	/* a NaN or an infinity makes the block's scale NaN */
	x[5] = NAN;
	x[40] = INFINITY;
	cg_qlinear_quantize(q, d, x, 1, 64);
	expect(isnan(d[0]) && isnan(d[1]) && q[5] == 0 && q[40] == 0,
	       "a block with nan or inf gets a nan scale");
	free(x);
}

int
main(void)
{
	struct cg_rng r;
	static const int shapes[][3] = {
	    /* B, K, N */
	    {1, 32, 7},  {3, 64, 5},  {4, 96, 9},    {1, 512, 33}, {5, 2048, 4},
	    {1, 64, 16}, {3, 96, 40}, {2, 2048, 48}, {5, 64, 32},  {9, 512, 17},
	};

	/* the VNNI path runs where the CPU has it and nothing forces
	 * another (CG_QKERNEL, deterministic mode) */
	int vnni_runs = cg_qpath_current() == CG_QPATH_VNNI;

	cg_rng_seed(&r, 20260512);
	for (int p = 0; p < CG_QPATH_N; p++)
		printf("     path %s: %s\n", cg_qpath_name((enum cg_qpath)p),
		       cg_qpath_supported((enum cg_qpath)p) ? "runs here"
		                                             : "not on this CPU");
	check_quantize(&r);

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int B = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
		float *x = inputs(B, K, &r);
		char what[64];
		static const enum cg_dtype dts[] = {CG_Q8_0, CG_Q4_0, CG_F16};
		for (int t = 0; t < 3; t++) {
			snprintf(what, sizeof(what), "%s [%d, %d] x %d",
			         cg_dtype_name(dts[t]), N, K, B);
			run_case(dts[t], NULL, B, K, N, 0.05f, x, (int)s & 1,
			         &r, what);
		}
		free(x);
	}
	expect(failures == 0, "every path within the bound of the exact "
	                      "product, and of its own arithmetic");

	/* f16 rows of lengths no vector divides: the tails. */
	{
		int K = 37, N = 3, B = 2;
		float *x = inputs(B, K, &r);
		int before = failures;
		run_case(CG_F16, NULL, B, K, N, 3.0f, x, 1, &r, "f16 [3, 37]");
		expect(failures == before, "f16 rows of 37: the tails");
		free(x);
	}

	/* q8_0 blocks of -128 and 127, the extremes a file may hold, with
	 * inputs of both signs: the sign change on the input must not
	 * overflow. */
	{
		int K = 96, N = 18, B = 3, before = failures;
		unsigned char raw[18 * 3 * 34];
		float *x = inputs(B, K, &r);
		for (int b = 0; b < N * K / 32; b++) {
			uint16_t h = cg_f32_to_f16(b % 2 ? 0.01f : 0.002f);
			raw[34 * b] = (unsigned char)(h & 0xff);
			raw[34 * b + 1] = (unsigned char)(h >> 8);
			for (int j = 0; j < 32; j++)
				raw[34 * b + 2 + j] =
				    (unsigned char)(j % 3 == 0   ? 0x80
				                    : j % 3 == 1 ? 0x7f
				                                 : 0x81);
		}
		run_case(CG_Q8_0, raw, B, K, N, 0, x, 0, &r, "q8_0 of -128");
		expect(failures == before, "q8_0 weights of -128 and 127");
		free(x);
	}

	/* f32 weights: cg_linear_forward's bits. */
	{
		int B = 3, K = 40, N = 6;
		float *x = inputs(B, K, &r), w[6 * 40], a[18], b[18];
		for (int i = 0; i < N * K; i++)
			w[i] = unif(&r);
		struct cg_wmat m = {CG_F32, w, NULL};
		cg_qlinear_forward(a, x, &m, NULL, B, K, N, NULL);
		cg_linear_forward(b, x, w, NULL, B, K, N);
		expect(memcmp(a, b, sizeof(a)) == 0,
		       "f32 weights: cg_linear_forward's bits");
		free(x);
	}

	/* A NaN input reaches the outputs of its row only. */
	{
		int B = 2, K = 64, N = 3;
		float *x = inputs(B, K, &r), out[6];
		float *wf = xcalloc((size_t)N * K, sizeof(float));
		unsigned char wq[3 * 2 * 34];
		void *scratch = xcalloc(cg_qlinear_scratch(B, K), 1);
		int before = failures;
		for (int i = 0; i < N * K; i++)
			wf[i] = unif(&r);
		if (cg_codec(CG_Q8_0)->encode(wq, wf, (size_t)N * K) != 0)
			die("encode");
		x[K + 3] = NAN;
		struct cg_wmat m = {CG_Q8_0, wq, NULL};
		for (int p = 0; p < CG_QPATH_N; p++) {
			if (!cg_qpath_supported((enum cg_qpath)p))
				continue;
			cg_qlinear_forward_path((enum cg_qpath)p, out, x, &m,
			                        NULL, B, K, N, scratch);
			int ok = 1;
			for (int n = 0; n < N; n++)
				ok &= isfinite(out[n]) && isnan(out[N + n]);
			CHECK(ok, "%s: a nan input row", cg_qpath_name(p));
		}
		expect(failures == before,
		       "a nan input reaches its row's outputs only");
		free(x);
		free(wf);
		free(scratch);
	}

	expect(cg_wmat_ok(CG_Q8_0, 64) && !cg_wmat_ok(CG_Q8_0, 48) &&
	           !cg_wmat_ok(CG_Q4_0, 16) && cg_wmat_ok(CG_F16, 3) &&
	           !cg_wmat_ok(CG_BF16, 64),
	       "which matrices can be multiplied as stored");

	/* CG_QKERNEL: a name of no path is refused; a path is taken. */
	setenv("CG_QKERNEL", "sse9", 1);
	expect(cg_qpath_init() == -1 &&
	           strstr(cg_errmsg(), "CG_QKERNEL=sse9") != NULL,
	       "CG_QKERNEL naming no path is refused");
	setenv("CG_QKERNEL", "portable", 1);
	expect(cg_qpath_init() == 0 &&
	           cg_qpath_current() == CG_QPATH_PORTABLE,
	       "CG_QKERNEL=portable is taken");

	if (vnni_runs)
		expect(packed_cases >= 5, "q8_0 packed for the VNNI path");
	printf("     packed q8_0 products checked: %d\n", packed_cases);
	printf("     worst error / bound: %.3g of the full bound, %.3g of "
	       "the arithmetic term\n",
	       worst_full, worst_arith);
	return failures ? 1 : 0;
}

/*
 * test_conv.c - the convolutional kernels (nn/conv.h) against naive double
 * formulas and finite differences.
 *
 * The convolution is compared with the direct sum over its window, in
 * double, for every case of stride, padding and kernel size the models
 * use (the 1x1 case, which is the linear layer, included), with scratch
 * for all examples at once and for one at a time; its backward, and that
 * of every other kernel, is checked by central differences of a random
 * weighting of the outputs with respect to every input, gradient buffers
 * starting non-zero so that accumulation (+=) is checked too.  In
 * deterministic mode every kernel must give the same bits on one thread
 * and on several.  The convolutions run on every matrix engine built in.
 * A deliberately wrong gradient must be caught.
 * Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cg.h"
#include "nn/conv.h"
#include "nn/gemm.h"

#define TEST_NAME "test_conv"
#include "check.h"

#include "fd.h"
/* Forward kernels against double: |got - ref| <= FWD_ATOL + FWD_RTOL |ref|. */
#define FWD_ATOL 1e-5
#define FWD_RTOL 1e-5
#include "kernel.h"

/* --------------------------------------------------------- convolution */

struct cv {
	struct cg_conv c;
	int B;
	float *inp, *w, *b, *out, *r, *col;
	size_t ncol, nin, nout;
};

static double
conv_loss(void *ctx)
{
	struct cv *v = ctx;

	cg_conv_forward(&v->c, v->out, v->inp, v->w, v->b, v->B, v->col,
	                v->ncol);
	return dot(v->out, v->r, v->nout);
}

/* out by the direct sum over each window, in double. */
static void
conv_ref(const struct cv *v, double *ref)
{
	const struct cg_conv *c = &v->c;

	for (int b = 0; b < v->B; b++)
		for (int oh = 0; oh < c->OH; oh++)
			for (int ow = 0; ow < c->OW; ow++)
				for (int o = 0; o < c->OC; o++) {
					double s = v->b[o];

					for (int ci = 0; ci < c->C; ci++)
						for (int kh = 0; kh < c->KH; kh++)
							for (int kw = 0; kw < c->KW; kw++) {
								int ih = oh * c->stride - c->pad + kh;
								int iw = ow * c->stride - c->pad + kw;

								if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
									continue;
								s += (double)v->w[((o * c->C + ci) * c->KH + kh) * c->KW + kw] *
								     v->inp[((b * c->H + ih) * c->W + iw) * c->C + ci];
							}
					ref[((b * c->OH + oh) * c->OW + ow) * c->OC + o] = s;
				}
}

static void
test_conv_case(int B, int C, int H, int W, int OC, int K, int stride, int pad)
{
	struct cv v = {.B = B};
	char what[160];
	size_t nw;
	float *g0i, *g0w, *g0b, *dinp, *dw, *db;
	double *ref;

	if (cg_conv_shape(&v.c, C, H, W, OC, K, stride, pad) != 0) {
		expect(0, "cg_conv_shape takes a good shape");
		return;
	}
	nw = cg_conv_wsize(&v.c);
	v.nin = (size_t)B * H * W * C;
	v.nout = (size_t)B * v.c.OH * v.c.OW * OC;
	v.inp = falloc(v.nin), v.w = falloc(nw), v.b = falloc(OC);
	v.out = falloc(v.nout), v.r = falloc(v.nout);
	ref = xcalloc(v.nout, sizeof(double));
	fill(v.inp, v.nin, -1, 1);
	fill(v.w, nw, -0.5f, 0.5f);
	fill(v.b, OC, -0.5f, 0.5f);
	fill(v.r, v.nout, -1, 1);
	conv_ref(&v, ref);
	/* Scratch for every example, then for one at a time. */
	for (int pass = 0; pass < 2; pass++) {
		v.ncol = cg_conv_scratch(&v.c, B, pass ? 0 : (size_t)1 << 30);
		v.col = v.ncol ? falloc(v.ncol) : NULL;
		conv_loss(&v);
		snprintf(what, sizeof(what),
		         "conv_forward %dx%dx%d -> %d, k%d s%d p%d, %s: "
		         "the direct sum",
		         C, H, W, OC, K, stride, pad,
		         pass ? "one example a piece" : "whole batch");
		expect(fwdcheck(v.out, ref, v.nout) <= 1, what);
		if (pass == 0) {
			free(v.col);
			continue;
		}
		dinp = gstart(v.nin, &g0i);
		dw = gstart(nw, &g0w);
		db = gstart(OC, &g0b);
		cg_conv_backward(&v.c, dinp, dw, db, v.r, v.inp, v.w, B, v.col,
		                 v.ncol);
		gdelta(dinp, g0i, v.nin);
		gdelta(dw, g0w, nw);
		gdelta(db, g0b, OC);
		snprintf(what, sizeof(what), "conv k%d s%d p%d dinp", K, stride,
		         pad);
		fdcheck(&FD_TRANSFORMER, what, v.inp, dinp, v.nin, conv_loss, &v, 0);
		snprintf(what, sizeof(what), "conv k%d s%d p%d dw", K, stride,
		         pad);
		fdcheck(&FD_TRANSFORMER, what, v.w, dw, nw, conv_loss, &v, 0);
		snprintf(what, sizeof(what), "conv k%d s%d p%d db", K, stride,
		         pad);
		fdcheck(&FD_TRANSFORMER, what, v.b, db, OC, conv_loss, &v, 0);
		/* Without dinp and db, dw alone is the same. */
		float *dw2 = falloc(nw);
		cg_conv_backward(&v.c, NULL, dw2, NULL, v.r, v.inp, v.w, B,
		                 v.col, v.ncol);
		double m = 0;
		for (size_t i = 0; i < nw; i++)
			m = fmax(m, fabs(dw2[i] - dw[i]));
		snprintf(what, sizeof(what),
		         "conv k%d s%d p%d: dw alone is dw (max diff %.2g)", K,
		         stride, pad, m);
		expect(m <= 1e-5, what);
		/* Without dw and db, dinp alone is the same. */
		float *dx2 = falloc(v.nin);
		cg_conv_backward(&v.c, dx2, NULL, NULL, v.r, v.inp, v.w, B,
		                 v.col, v.ncol);
		m = 0;
		for (size_t i = 0; i < v.nin; i++)
			m = fmax(m, fabs(dx2[i] - dinp[i]));
		snprintf(what, sizeof(what),
		         "conv k%d s%d p%d: dinp alone is dinp (max diff %.2g)",
		         K, stride, pad, m);
		expect(m <= 1e-5, what);
		free(dx2);
		free(dw2);
		free(dinp), free(dw), free(db), free(g0i), free(g0w), free(g0b);
		free(v.col);
	}
	free(v.inp), free(v.w), free(v.b), free(v.out), free(v.r);
	free(ref);
}

static void
test_conv(void)
{
	struct cg_conv c;

	test_conv_case(2, 3, 6, 5, 4, 3, 1, 1);
	test_conv_case(2, 3, 7, 6, 4, 3, 2, 1);
	test_conv_case(2, 2, 6, 6, 3, 4, 2, 1);
	test_conv_case(3, 4, 5, 5, 2, 1, 1, 0);
	test_conv_case(1, 2, 5, 4, 3, 3, 2, 0);
	test_conv_case(2, 1, 4, 4, 5, 3, 1, 2);
	expect(cg_conv_shape(&c, 1, 2, 2, 1, 5, 1, 1) == -1 &&
	           cg_conv_shape(&c, 1, 8, 8, 1, 3, 1, 3) == -1 &&
	           cg_conv_shape(&c, 0, 8, 8, 1, 3, 1, 1) == -1 &&
	           cg_conv_shape(&c, 1, 8, 8, 1, 3, 0, 1) == -1 &&
	           cg_conv_shape(&c, 1 << 16, 1 << 16, 1, 1, 1, 1, 0) == -1,
	       "cg_conv_shape refuses a kernel past the input, padding of "
	       "the kernel's size, zero sizes and sizes past INT_MAX");
	expect(cg_conv_shape(&c, 8, 28, 28, 16, 3, 2, 1) == 0 && c.OH == 14 &&
	           c.OW == 14 &&
	           cg_conv_scratch(&c, 10, 0) == 2 * 16 * 72 + 14 * 14 * 72 &&
	           cg_conv_scratch(&c, 10, 1 << 30) ==
	               2 * 16 * 72 + 10 * 14 * 14 * 72,
	       "a 3x3 stride-2 convolution halves 28 to 14; its scratch is "
	       "two weights and one example's unfolding at the least, the "
	       "batch's at most");
}

/*
 * The convolution on the engine in force against the built-in kernel's
 * im2col, on shapes whose channel counts fall on and off oneDNN's blocks
 * of 8: the output, and the gradients of the input and the weight added
 * to non-zero buffers, each within 1e-4 of the largest magnitude.
 * Returns how many cases ran.
 */
static int
test_conv_vs_builtin(void)
{
	static const int cases[][8] = {
	    /* B, C, H, W, OC, K, stride, pad */
	    {3, 16, 13, 11, 24, 3, 1, 1}, {2, 8, 14, 14, 16, 3, 2, 1},
	    {2, 5, 9, 12, 7, 5, 1, 2},    {3, 12, 15, 10, 9, 4, 2, 1},
	    {2, 3, 11, 9, 8, 1, 2, 0},    {1, 32, 7, 7, 64, 3, 1, 1},
	    {4, 1, 28, 28, 32, 3, 1, 1},  {2, 17, 10, 13, 3, 5, 2, 0},
	};
	const enum cg_engine e = cg_get_engine();
	const int n = (int)(sizeof(cases) / sizeof(cases[0]));

	for (int i = 0; i < n; i++) {
		const int *k = cases[i];
		struct cg_conv c;
		float *x, *w, *b, *g, *col, *out[2], *dx[2], *dw[2], *db[2];
		size_t nin, nout, nw, ncol;
		double m[4] = {0}, big[4] = {0};
		char what[200];

		if (cg_conv_shape(&c, k[1], k[2], k[3], k[4], k[5], k[6],
		                  k[7]) != 0) {
			expect(0, "cg_conv_shape takes a good shape");
			continue;
		}
		nin = (size_t)k[0] * c.H * c.W * c.C;
		nout = (size_t)k[0] * c.OH * c.OW * c.OC;
		nw = cg_conv_wsize(&c);
		ncol = cg_conv_scratch(&c, k[0], (size_t)1 << 24);
		x = falloc(nin), w = falloc(nw), b = falloc(c.OC);
		g = falloc(nout), col = falloc(ncol ? ncol : 1);
		fill(x, nin, -1, 1);
		fill(w, nw, -0.3f, 0.3f);
		fill(b, c.OC, -0.5f, 0.5f);
		fill(g, nout, -1, 1);
		for (int j = 0; j < 2; j++) {
			out[j] = falloc(nout), dx[j] = falloc(nin);
			dw[j] = falloc(nw), db[j] = falloc(c.OC);
			for (size_t t = 0; t < nin; t++)
				dx[j][t] = 0.25f;
			for (size_t t = 0; t < nw; t++)
				dw[j][t] = -0.5f;
			for (int t = 0; t < c.OC; t++)
				db[j][t] = 1;
			cg_set_engine(j ? CG_ENGINE_BUILTIN : e);
			cg_conv_forward(&c, out[j], x, w, b, k[0], col, ncol);
			cg_conv_backward(&c, dx[j], dw[j], db[j], g, x, w, k[0],
			                 col, ncol);
		}
		cg_set_engine(e);
		for (size_t t = 0; t < nout; t++) {
			m[0] = fmax(m[0], fabs(out[0][t] - out[1][t]));
			big[0] = fmax(big[0], fabs(out[1][t]));
		}
		for (size_t t = 0; t < nin; t++) {
			m[1] = fmax(m[1], fabs(dx[0][t] - dx[1][t]));
			big[1] = fmax(big[1], fabs(dx[1][t]));
		}
		for (size_t t = 0; t < nw; t++) {
			m[2] = fmax(m[2], fabs(dw[0][t] - dw[1][t]));
			big[2] = fmax(big[2], fabs(dw[1][t]));
		}
		for (int t = 0; t < c.OC; t++) {
			m[3] = fmax(m[3], fabs(db[0][t] - db[1][t]));
			big[3] = fmax(big[3], fabs(db[1][t]));
		}
		snprintf(what, sizeof(what),
		         "conv %s %dx%dx%dx%d -> %d, k%d s%d p%d against the "
		         "built-in im2col: out, dinp, dw, db within 1e-4 of "
		         "their largest (%.2g %.2g %.2g %.2g)",
		         cg_engine_name(e), k[0], k[1], k[2], k[3], k[4], k[5],
		         k[6], k[7], m[0], m[1], m[2], m[3]);
		expect(m[0] <= 1e-4 * big[0] && m[1] <= 1e-4 * big[1] &&
		           m[2] <= 1e-4 * big[2] && m[3] <= 1e-4 * big[3],
		       what);
		for (int j = 0; j < 2; j++)
			free(out[j]), free(dx[j]), free(dw[j]), free(db[j]);
		free(x), free(w), free(b), free(g), free(col);
	}
	return n;
}

/* ---------------------------------------------------------- up-sampling */

enum { UB = 2, UH = 3, UW = 4, UC = 3 };

struct up {
	float inp[UB * UH * UW * UC], out[UB * 4 * UH * UW * UC],
	    r[UB * 4 * UH * UW * UC];
};

static double
up_loss(void *ctx)
{
	struct up *u = ctx;

	cg_upsample2_forward(u->out, u->inp, UB, UH, UW, UC);
	return dot(u->out, u->r, sizeof(u->out) / sizeof(float));
}

static void
test_upsample(void)
{
	struct up u;
	float *g0, *d = gstart(sizeof(u.inp) / sizeof(float), &g0);
	int ok = 1;

	fill(u.inp, sizeof(u.inp) / sizeof(float), -1, 1);
	fill(u.r, sizeof(u.r) / sizeof(float), -1, 1);
	up_loss(&u);
	for (int b = 0; b < UB; b++)
		for (int y = 0; y < 2 * UH; y++)
			for (int x = 0; x < 2 * UW; x++)
				for (int c = 0; c < UC; c++)
					ok &= u.out[((b * 2 * UH + y) * 2 * UW + x) * UC + c] ==
					      u.inp[((b * UH + y / 2) * UW + x / 2) * UC + c];
	expect(ok, "upsample2_forward repeats each pixel over 2x2");
	cg_upsample2_backward(d, u.r, UB, UH, UW, UC);
	gdelta(d, g0, sizeof(u.inp) / sizeof(float));
	fdcheck(&FD_NN, "upsample2_backward dinp", u.inp, d,
	        sizeof(u.inp) / sizeof(float), up_loss, &u, 0);
	free(d), free(g0);
}

/* ---------------------------------------------------- group normalisation */

enum { GB = 2, GHW = 5, GC = 6, GG = 3 };

struct gn {
	float inp[GB * GHW * GC], gamma[GC], beta[GC], out[GB * GHW * GC],
	    r[GB * GHW * GC], mean[GB * GG], rstd[GB * GG];
};

static double
gn_loss(void *ctx)
{
	struct gn *g = ctx;

	cg_groupnorm_forward(g->out, g->mean, g->rstd, g->inp, g->gamma,
	                     g->beta, GB, GHW, GC, GG);
	return dot(g->out, g->r, GB * GHW * GC);
}

static void
test_groupnorm(void)
{
	struct gn g;
	double ref[GB * GHW * GC];
	const int CG = GC / GG;
	float *g0i, *g0g, *g0b, *di = gstart(GB * GHW * GC, &g0i);
	float *dg = gstart(GC, &g0g), *db = gstart(GC, &g0b);

	fill(g.inp, GB * GHW * GC, -2, 3);
	fill(g.gamma, GC, 0.5f, 1.5f);
	fill(g.beta, GC, -0.5f, 0.5f);
	fill(g.r, GB * GHW * GC, -1, 1);
	gn_loss(&g);
	for (int b = 0; b < GB; b++)
		for (int k = 0; k < GG; k++) {
			double m = 0, v = 0;

			for (int p = 0; p < GHW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++)
					m += g.inp[(b * GHW + p) * GC + c];
			m /= GHW * CG;
			for (int p = 0; p < GHW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++) {
					double d = g.inp[(b * GHW + p) * GC + c] - m;
					v += d * d;
				}
			v /= GHW * CG;
			for (int p = 0; p < GHW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++) {
					int i = (b * GHW + p) * GC + c;
					ref[i] = (g.inp[i] - m) / sqrt(v + 1e-5) *
					             g.gamma[c] + g.beta[c];
				}
		}
	expect(fwdcheck(g.out, ref, GB * GHW * GC) <= 1,
	       "groupnorm_forward matches the double formula");
	cg_groupnorm_backward(di, dg, db, g.r, g.inp, g.gamma, g.mean, g.rstd,
	                      GB, GHW, GC, GG);
	gdelta(di, g0i, GB * GHW * GC);
	gdelta(dg, g0g, GC);
	gdelta(db, g0b, GC);
	fdcheck(&FD_TRANSFORMER, "groupnorm_backward dinp", g.inp, di,
	        GB * GHW * GC, gn_loss, &g, 0);
	fdcheck(&FD_TRANSFORMER, "groupnorm_backward dgamma", g.gamma, dg, GC,
	        gn_loss, &g, 0);
	fdcheck(&FD_TRANSFORMER, "groupnorm_backward dbeta", g.beta, db, GC,
	        gn_loss, &g, 0);
	free(di), free(dg), free(db), free(g0i), free(g0g), free(g0b);
}

/* ------------------------------------------------------------------ SiLU */

enum { SN = 64 };

struct si {
	float inp[SN], out[SN], r[SN];
};

static double
silu_loss(void *ctx)
{
	struct si *s = ctx;

	cg_silu_forward(s->out, s->inp, SN);
	return dot(s->out, s->r, SN);
}

static void
test_silu(void)
{
	struct si s;
	double ref[SN];
	float *g0, *d = gstart(SN, &g0);

	fill(s.inp, SN, -8, 8);
	s.inp[0] = 0, s.inp[1] = -90, s.inp[2] = 90;
	fill(s.r, SN, -1, 1);
	silu_loss(&s);
	for (int i = 0; i < SN; i++)
		ref[i] = s.inp[i] / (1 + exp(-(double)s.inp[i]));
	expect(fwdcheck(s.out, ref, SN) <= 1,
	       "silu_forward is x sigmoid(x), also at 0 and +-90");
	cg_silu_backward(d, s.r, s.inp, SN);
	gdelta(d, g0, SN);
	fdcheck(&FD_TRANSFORMER, "silu_backward dinp", s.inp, d, SN, silu_loss,
	        &s, 0);
	free(d), free(g0);
}

/*
 * SiLU over a dense sweep of [-80, 80] (every 2^-10) against the double
 * formula: within 8 float ulp of x sigmoid(x); below -87, where
 * sigmoid's exponential stops, 0 (-100 and -1e30).  +inf stays +inf, NaN
 * stays NaN.  The backward's derivative against the double one at the
 * same points, within 16 ulp of the larger of it and 1.
 */
static void
test_silu_sweep(void)
{
	enum { SW = 163841 + 4 };
	float *x = falloc(SW), *y = falloc(SW), *d = falloc(SW),
	      *one = falloc(SW);
	double rel = 0, drel = 0, tail = 0;

	for (int i = 0; i < SW - 4; i++)
		x[i] = -80.0f + (float)i / 1024;
	x[SW - 4] = -100, x[SW - 3] = -1e30f, x[SW - 2] = INFINITY;
	x[SW - 1] = NAN;
	for (int i = 0; i < SW; i++)
		one[i] = 1, d[i] = 0;
	cg_silu_forward(y, x, SW);
	cg_silu_backward(d, one, x, SW);
	for (int i = 0; i < SW - 4; i++) {
		const double s = 1 / (1 + exp(-(double)x[i]));
		const double f = x[i] * s, df = s * (1 + x[i] * (1 - s));
		const double e = fabs(y[i] - f) / (fabs(f) * 0x1p-23 + 1e-45);
		/* 1 + x (1 - s) cancels near x = -1.28: relative to 1 there. */
		const double de =
		    fabs(d[i] - df) / (fmax(fabs(df), 1) * 0x1p-23);

		rel = e > rel ? e : rel;
		drel = de > drel ? de : drel;
	}
	for (int i = SW - 4; i < SW - 2; i++)
		tail = fabs(y[i]) > tail ? fabs(y[i]) : tail;
	printf("     silu: %.2f ulp forward, %.2f backward\n", rel, drel);
	expect(rel <= 8, "silu_forward is within 8 ulp over [-80, 80]");
	expect(drel <= 16, "silu_backward's derivative is within 16 ulp "
	                   "over [-80, 80]");
	expect(tail == 0, "silu_forward is 0 below -87");
	expect(y[SW - 2] == INFINITY && isnan(y[SW - 1]) && isnan(d[SW - 1]),
	       "silu is +inf at +inf and NaN at NaN");
	free(x), free(y), free(d), free(one);
}

/*
 * Group norms wider than the kernels' blocks of channels: groups that
 * straddle two blocks (C 96, 24 to a group) and groups wider than a block
 * (C 160, 80 to a group), forward and backward against the formulas in
 * double.
 */
static void
gn_wide(int B, int HW, int C, int G, const char *what)
{
	const int CG = C / G;
	const size_t n = (size_t)B * HW * C;
	float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n);
	float *ga = falloc(C), *be = falloc(C), *dg = falloc(C),
	      *db = falloc(C);
	float *m = falloc(B * G), *r = falloc(B * G);
	double *ref = malloc(n * sizeof(double)),
	       *rdx = malloc(n * sizeof(double));
	double *rdg = calloc(C, sizeof(double)),
	       *rdb = calloc(C, sizeof(double));
	double bmax = 0, bwant = 0, pmax = 0, pwant = 0;
	char msg[160];

	fill(x, n, 1, 4); /* a mean well off 0 */
	fill(ga, C, 0.5f, 1.5f);
	fill(be, C, -0.5f, 0.5f);
	fill(dy, n, -1, 1);
	for (size_t i = 0; i < n; i++)
		dx[i] = 0;
	for (int c = 0; c < C; c++)
		dg[c] = db[c] = 0;
	cg_groupnorm_forward(y, m, r, x, ga, be, B, HW, C, G);
	cg_groupnorm_backward(dx, dg, db, dy, x, ga, m, r, B, HW, C, G);
	for (int b = 0; b < B; b++)
		for (int k = 0; k < G; k++) {
			const double N = (double)HW * CG;
			double mu = 0, v = 0, a = 0, q = 0, rs;

			for (int p = 0; p < HW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++)
					mu += x[((size_t)b * HW + p) * C + c];
			mu /= N;
			for (int p = 0; p < HW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++) {
					double t =
					    x[((size_t)b * HW + p) * C + c] -
					    mu;
					v += t * t;
				}
			rs = 1 / sqrt(v / N + 1e-5);
			for (int p = 0; p < HW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++) {
					size_t i = ((size_t)b * HW + p) * C + c;
					double xh = (x[i] - mu) * rs,
					       g = (double)dy[i] * ga[c];

					ref[i] = xh * ga[c] + be[c];
					a += g, q += g * xh;
					rdg[c] += (double)dy[i] * xh;
					rdb[c] += dy[i];
				}
			a /= N, q /= N;
			for (int p = 0; p < HW; p++)
				for (int c = k * CG; c < (k + 1) * CG; c++) {
					size_t i = ((size_t)b * HW + p) * C + c;
					double xh = (x[i] - mu) * rs;

					rdx[i] = rs * ((double)dy[i] * ga[c] -
					               a - xh * q);
				}
		}
	for (size_t i = 0; i < n; i++) {
		bmax = fmax(bmax, fabs(dx[i] - rdx[i]));
		bwant = fmax(bwant, fabs(rdx[i]));
	}
	for (int c = 0; c < C; c++) {
		pmax = fmax(pmax,
		            fmax(fabs(dg[c] - rdg[c]), fabs(db[c] - rdb[c])));
		pwant = fmax(pwant, fmax(fabs(rdg[c]), fabs(rdb[c])));
	}
	snprintf(msg, sizeof(msg),
	         "groupnorm_forward matches the double "
	         "formula (%s)",
	         what);
	expect(fwdcheck(y, ref, n) <= 1, msg);
	snprintf(msg, sizeof(msg),
	         "groupnorm_backward matches the double "
	         "formula (%s)",
	         what);
	expect(bmax <= 1e-5 * bwant && pmax <= 1e-5 * pwant, msg);
	free(x), free(y), free(dy), free(dx), free(ga), free(be), free(dg);
	free(db), free(m), free(r), free(ref), free(rdx), free(rdg), free(rdb);
}

static void
test_groupnorm_wide(void)
{
	gn_wide(3, 10, 96, 4, "groups across blocks");
	gn_wide(2, 7, 160, 2, "groups wider than a block");
}

/* ------------------------------------------------ pooling, add, concat */

enum { PB = 2, PHW = 6, PC = 5, PC2 = 3 };

struct pl {
	float inp[PB * PHW * PC], out[PB * PC], r[PB * PC];
	float x[PB * PHW * PC], e[PB * PC], y[PB * PHW * PC],
	    ry[PB * PHW * PC];
	float a[PB * PHW * PC], b[PB * PHW * PC2],
	    cat[PB * PHW * (PC + PC2)], rc[PB * PHW * (PC + PC2)];
	float fe[PB * 2 * PC];
};

static double
pool_loss(void *ctx)
{
	struct pl *p = ctx;

	cg_avgpool_forward(p->out, p->inp, PB, PHW, PC);
	return dot(p->out, p->r, PB * PC);
}

static double
add_loss(void *ctx)
{
	struct pl *p = ctx;

	memcpy(p->y, p->x, sizeof(p->y));
	cg_add_channel_forward(p->y, p->e, PB, PHW, PC);
	return dot(p->y, p->ry, PB * PHW * PC);
}

static double
film_loss(void *ctx)
{
	struct pl *p = ctx;

	cg_film_forward(p->y, p->x, p->fe, PB, PHW, PC);
	return dot(p->y, p->ry, PB * PHW * PC);
}

static double
cat_loss(void *ctx)
{
	struct pl *p = ctx;

	cg_concat_forward(p->cat, p->a, p->b, PB * PHW, PC, PC2);
	return dot(p->cat, p->rc, PB * PHW * (PC + PC2));
}

static void
test_pool_add_concat(void)
{
	struct pl p;
	double ref[PB * PC];
	float *g0, *d = gstart(PB * PHW * PC, &g0), *g0e,
	           *de = gstart(PB * PC, &g0e);
	float *g0a, *da = gstart(PB * PHW * PC, &g0a), *g0b,
	            *db = gstart(PB * PHW * PC2, &g0b);
	int ok = 1;

	fill(p.inp, PB * PHW * PC, -1, 1);
	fill(p.r, PB * PC, -1, 1);
	fill(p.x, PB * PHW * PC, -1, 1);
	fill(p.e, PB * PC, -1, 1);
	fill(p.ry, PB * PHW * PC, -1, 1);
	fill(p.a, PB * PHW * PC, -1, 1);
	fill(p.b, PB * PHW * PC2, -1, 1);
	fill(p.rc, PB * PHW * (PC + PC2), -1, 1);
	fill(p.fe, PB * 2 * PC, -1, 1);
	pool_loss(&p);
	for (int b = 0; b < PB; b++)
		for (int c = 0; c < PC; c++) {
			double s = 0;
			for (int q = 0; q < PHW; q++)
				s += p.inp[(b * PHW + q) * PC + c];
			ref[b * PC + c] = s / PHW;
		}
	expect(fwdcheck(p.out, ref, PB * PC) <= 1,
	       "avgpool_forward is the mean over positions");
	cg_avgpool_backward(d, p.r, PB, PHW, PC);
	gdelta(d, g0, PB * PHW * PC);
	fdcheck(&FD_NN, "avgpool_backward dinp", p.inp, d, PB * PHW * PC,
	        pool_loss, &p, 0);

	add_loss(&p);
	for (int b = 0; b < PB; b++)
		for (int q = 0; q < PHW; q++)
			for (int c = 0; c < PC; c++) {
				int i = (b * PHW + q) * PC + c;
				ok &= p.y[i] == p.x[i] + p.e[b * PC + c];
			}
	expect(ok, "add_channel_forward adds the example's vector everywhere");
	cg_add_channel_backward(de, p.ry, PB, PHW, PC);
	gdelta(de, g0e, PB * PC);
	fdcheck(&FD_NN, "add_channel_backward de", p.e, de, PB * PC, add_loss,
	        &p, 0);

	film_loss(&p);
	ok = 1;
	for (int b = 0; b < PB; b++)
		for (int q = 0; q < PHW; q++)
			for (int c = 0; c < PC; c++) {
				int i = (b * PHW + q) * PC + c;
				double r = (double)p.x[i] *
				               (1 + (double)p.fe[b * 2 * PC + c]) +
				           p.fe[b * 2 * PC + PC + c];
				ok &= fabs(p.y[i] - r) <= 1e-6 * (1 + fabs(r));
			}
	expect(ok, "film_forward scales by 1 + e[:C] and shifts by e[C:]");
	{
		float *g0x, *dx = gstart(PB * PHW * PC, &g0x), *g0f,
		           *df = gstart(PB * 2 * PC, &g0f);

		cg_film_backward(dx, df, p.ry, p.x, p.fe, PB, PHW, PC);
		gdelta(dx, g0x, PB * PHW * PC);
		gdelta(df, g0f, PB * 2 * PC);
		fdcheck(&FD_NN, "film_backward dx", p.x, dx, PB * PHW * PC,
		        film_loss, &p, 0);
		fdcheck(&FD_NN, "film_backward de", p.fe, df, PB * 2 * PC,
		        film_loss, &p, 0);
		memcpy(df, g0f, PB * 2 * PC * sizeof(float));
		cg_film_backward(NULL, df, p.ry, p.x, p.fe, PB, PHW, PC);
		gdelta(df, g0f, PB * 2 * PC);
		fdcheck(&FD_NN, "film_backward de (dx NULL)", p.fe, df,
		        PB * 2 * PC, film_loss, &p, 0);
		free(dx), free(g0x), free(df), free(g0f);
	}

	cat_loss(&p);
	ok = 1;
	for (int r = 0; r < PB * PHW; r++) {
		ok &= memcmp(p.cat + r * (PC + PC2), p.a + r * PC,
		             PC * sizeof(float)) == 0;
		ok &= memcmp(p.cat + r * (PC + PC2) + PC, p.b + r * PC2,
		             PC2 * sizeof(float)) == 0;
	}
	expect(ok, "concat_forward puts a's channels, then b's, in each row");
	cg_concat_backward(da, db, p.rc, PB * PHW, PC, PC2);
	gdelta(da, g0a, PB * PHW * PC);
	gdelta(db, g0b, PB * PHW * PC2);
	fdcheck(&FD_NN, "concat_backward da", p.a, da, PB * PHW * PC, cat_loss,
	        &p, 0);
	fdcheck(&FD_NN, "concat_backward db", p.b, db, PB * PHW * PC2,
	        cat_loss, &p, 0);
	free(d), free(g0), free(de), free(g0e);
	free(da), free(g0a), free(db), free(g0b);
}

/* A wrong gradient (3% off in its largest element) must fail the check. */
static void
test_checker(void)
{
	struct si s;
	float d[SN] = {0};

	fill(s.inp, SN, -3, 3);
	fill(s.r, SN, -1, 1);
	int k = 0;

	cg_silu_backward(d, s.r, s.inp, SN);
	for (int i = 1; i < SN; i++)
		if (fabsf(d[i]) > fabsf(d[k]))
			k = i;
	d[k] *= 1.03f;
	expect(fdcheck(&FD_TRANSFORMER, "", s.inp, d, SN, silu_loss, &s, 1) >
	           FD_TRANSFORMER.tol,
	       "a silu gradient 3% off in one element is caught");
}

#ifdef _OPENMP
/*
 * Every kernel, forward and backward, on a map big enough for threads:
 * the outputs appended to out.  Returns the count.
 */
static size_t
run_all(float *out, int threads)
{
	enum { B = 4, H = 32, W = 32, C = 16, OC = 24, G = 4 };
	struct cg_rng r0 = rng;
	struct cg_conv c;
	size_t n = 0, nin = (size_t)B * H * W * C;
	float *x = falloc(nin), *w, *col, *o, *big = falloc(4 * nin);
	float mean[B * G], rstd[B * G], gam[C], bet[C];
	size_t ncol;

	omp_set_num_threads(threads);
	cg_conv_shape(&c, C, H, W, OC, 3, 2, 1);
	w = falloc(cg_conv_wsize(&c));
	ncol = cg_conv_scratch(&c, B, (size_t)1 << 22);
	col = falloc(ncol);
	fill(x, nin, -1, 1);
	fill(w, cg_conv_wsize(&c), -0.2f, 0.2f);
	fill(gam, C, 0.5f, 1.5f);
	fill(bet, C, -0.5f, 0.5f);
	o = out;
	cg_conv_forward(&c, o, x, w, NULL, B, col, ncol);
	n += (size_t)B * c.OH * c.OW * OC;
	memset(out + n, 0, (nin + cg_conv_wsize(&c) + OC) * sizeof(float));
	cg_conv_backward(&c, out + n, out + n + nin,
	                 out + n + nin + cg_conv_wsize(&c), o, x, w, B, col,
	                 ncol);
	n += nin + cg_conv_wsize(&c) + OC;
	cg_groupnorm_forward(out + n, mean, rstd, x, gam, bet, B, H * W, C, G);
	memset(out + n + nin, 0, (nin + 2 * C) * sizeof(float));
	cg_groupnorm_backward(out + n + nin, out + 2 * nin + n,
	                      out + 2 * nin + n + C, out + n, x, gam, mean,
	                      rstd, B, H * W, C, G);
	n += 2 * nin + 2 * C;
	cg_silu_forward(out + n, x, nin);
	memset(out + n + nin, 0, nin * sizeof(float));
	cg_silu_backward(out + n + nin, out + n, x, nin);
	n += 2 * nin;
	cg_upsample2_forward(big, x, B, H, W, C);
	memset(out + n, 0, nin * sizeof(float));
	cg_upsample2_backward(out + n, big, B, H, W, C);
	n += nin;
	cg_avgpool_forward(out + n, x, B, H * W, C);
	memset(out + n + B * C, 0, nin * sizeof(float));
	cg_avgpool_backward(out + n + B * C, out + n, B, H * W, C);
	n += B * C + nin;
	cg_add_channel_backward(out + n, x, B, H * W / 4, 4 * C);
	n += 4 * B * C;
	/* film with the first 2C of each example's input as its vector */
	cg_film_forward(out + n, x, x, B, H * W / 2, 2 * C);
	memset(out + n + nin, 0, (nin + 4 * B * C) * sizeof(float));
	cg_film_backward(out + n + nin, out + 2 * nin + n, out + n, x, x, B,
	                 H * W / 2, 2 * C);
	n += 2 * nin + 4 * B * C;
	free(x), free(w), free(col), free(big);
	rng = r0;
	return n;
}

static void
test_threads(void)
{
	size_t cap = 8u << 20;
	float *one = falloc(cap), *many = falloc(cap);
	int max = omp_get_max_threads();
	size_t n;

	cg_set_deterministic(1);
	n = run_all(one, 1);
	run_all(many, max < 4 ? 4 : max);
	cg_set_deterministic(0);
	omp_set_num_threads(max);
	expect(memcmp(one, many, n * sizeof(float)) == 0,
	       "every kernel gives the same bits on 1 thread and on many "
	       "(deterministic mode)");
	free(one);
	free(many);
}
#endif

int
main(void)
{
	static const enum cg_engine engines[] = {
	    CG_ENGINE_BUILTIN, CG_ENGINE_BLAS, CG_ENGINE_DNNL, CG_ENGINE_AUTO};

	cg_rng_seed(&rng, 20261205);
	/* The convolutions' products on every engine built in: the same
	 * direct sums and differences on each. */
	for (size_t e = 0; e < sizeof(engines) / sizeof(engines[0]); e++) {
		if (cg_set_engine(engines[e]) != 0) {
			printf("info engine %s: not built in\n",
			       cg_engine_name(engines[e]));
			continue;
		}
		printf("info engine %s\n", cg_engine_name(engines[e]));
		unsigned long r0 = cg_conv_dnnl_runs();
		test_conv();
		if (engines[e] != CG_ENGINE_BUILTIN)
			test_conv_vs_builtin();
		unsigned long runs = cg_conv_dnnl_runs() - r0;
		/* oneDNN takes the convolutions (but the linear 1x1) where
		 * it is the engine, or auto with it built in; none else. */
		int want = engines[e] == CG_ENGINE_DNNL ||
		           (engines[e] == CG_ENGINE_AUTO &&
		            cg_engine_built(CG_ENGINE_DNNL));
		char what[160];
		snprintf(what, sizeof(what),
		         "engine %s: %lu convolution passes ran on oneDNN "
		         "(%s)",
		         cg_engine_name(engines[e]), runs,
		         want ? "all but the 1x1's" : "none");
		expect(want ? runs >= 100 : runs == 0, what);
	}
	cg_set_engine(CG_ENGINE_AUTO);
	test_upsample();
	test_groupnorm();
	test_groupnorm_wide();
	test_silu();
	test_silu_sweep();
	test_pool_add_concat();
	test_checker();
#ifdef _OPENMP
	test_threads();
#endif
	if (failures) {
		printf("test_conv: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_conv: all passed\n");
	return 0;
}

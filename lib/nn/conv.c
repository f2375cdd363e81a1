/*
 * nn/conv.c - convolution, up-sampling, group norm, SiLU, pooling, the
 * per-channel add and the channel concatenation, channels-last.
 *
 * A convolution is a linear layer over the unfolded input: each output
 * position's row of KH*KW*C inputs (zeros where the kernel hangs over the
 * padding), so that the product runs on cg_sgemm (the BLAS, the built-in
 * kernel, or bf16 where that is the precision).  The row is in (kh, kw,
 * c) order, so that unfolding copies runs of C channels as they lie in
 * the map; the weight, stored in PyTorch's (c, kh, kw) order, is permuted
 * to match in the scratch first (OC*C*KH*KW floats, small beside the
 * unfolding), and its gradient permuted back.  The unfolding goes in the
 * caller's scratch, a few examples at a time; the backward unfolds again
 * rather than keep it, and folds the input's gradient back by gathering
 * (each input position sums the rows that read it), so that threads
 * never write one element together and the sums run in one order.
 *
 * Where libcg has oneDNN, a convolution goes to its convolution
 * primitives instead (nn/dnnl.h: no unfolding, kernels of its own) when
 * the products' engine is auto or dnnl, in f32, or in bf16 where the
 * products run bf16 on oneDNN (cg_bf16_native); the unfolding remains
 * for the other engines, for bf16 emulated, for deterministic mode
 * (oneDNN picks its kernels and its order of sums by CPU and splits the
 * weight's gradient over threads), for the 1x1 case (the linear layer,
 * which follows the products' rules), and where oneDNN makes no
 * primitive.
 */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/par.h"
#include "nn/conv.h"
#ifdef CG_HAVE_DNNL
#include "nn/dnnl.h"
#endif
#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/vmath.h"

/* -------------------------------------------------------- convolution */

int
cg_conv_shape(struct cg_conv *c, int C, int H, int W, int OC, int K,
              int stride, int pad)
{
	memset(c, 0, sizeof(*c));
	if (C < 1 || H < 1 || W < 1 || OC < 1 || K < 1 || stride < 1 ||
	    pad < 0 || pad >= K || H + 2 * (long)pad < K ||
	    W + 2 * (long)pad < K)
		return -1;
	c->C = C, c->H = H, c->W = W, c->OC = OC;
	c->KH = c->KW = K, c->stride = stride, c->pad = pad;
	c->OH = (H + 2 * pad - K) / stride + 1;
	c->OW = (W + 2 * pad - K) / stride + 1;
	/* The products the kernels index with ints: one example's map in or
	 * out, and a row of the unfolded input. */
	if ((long long)C * K * K > INT_MAX ||
	    (long long)H * W * C > INT_MAX ||
	    (long long)c->OH * c->OW * OC > INT_MAX ||
	    (long long)c->OH * c->OW * C * K * K > INT_MAX)
		return -1;
	return 0;
}

size_t
cg_conv_wsize(const struct cg_conv *c)
{
	return (size_t)c->OC * c->C * c->KH * c->KW;
}

void
cg_view_conv(struct cg_view v[2], const char *layer, size_t w_off,
             size_t b_off, const struct cg_conv *c)
{
	char name[sizeof(v->name)];

	snprintf(name, sizeof(name), "%s.w", layer);
	cg_view_set(&v[0], name, w_off, (size_t)c->OC,
	            cg_conv_wsize(c) / c->OC, 1);
	v[0].ndim = 4;
	v[0].shape[1] = (uint64_t)c->C;
	v[0].shape[2] = (uint64_t)c->KH;
	v[0].shape[3] = (uint64_t)c->KW;
	snprintf(name, sizeof(name), "%s.b", layer);
	cg_view_set(&v[1], name, b_off, (size_t)c->OC, 0, 0);
}

/* A 1x1 kernel at stride 1 without padding: the linear layer itself. */
static int
pointwise(const struct cg_conv *c)
{
	return c->KH == 1 && c->KW == 1 && c->stride == 1 && c->pad == 0;
}

/* Floats of one example's unfolded input. */
static size_t
col_per_example(const struct cg_conv *c)
{
	return (size_t)c->OH * c->OW * c->C * c->KH * c->KW;
}

size_t
cg_conv_scratch(const struct cg_conv *c, int B, size_t budget)
{
	size_t per = col_per_example(c), w2 = 2 * cg_conv_wsize(c), n;

	if (pointwise(c))
		return 0;
	n = budget > w2 ? (budget - w2) / per : 0;
	if (n < 1)
		n = 1;
	if (n > (size_t)B)
		n = (size_t)B;
	return w2 + n * per;
}

/* wp [OC, KH, KW, C] = w [OC, C, KH, KW]. */
static void
permute_w(const struct cg_conv *c, float *wp, const float *w)
{
	const int KK = c->KH * c->KW;

	for (int o = 0; o < c->OC; o++)
		for (int ci = 0; ci < c->C; ci++)
			for (int k = 0; k < KK; k++)
				wp[((size_t)o * KK + k) * c->C + ci] =
				    w[((size_t)o * c->C + ci) * KK + k];
}

/* dw [OC, C, KH, KW] += dwp [OC, KH, KW, C]. */
static void
unpermute_add(const struct cg_conv *c, float *dw, const float *dwp)
{
	const int KK = c->KH * c->KW;

	for (int o = 0; o < c->OC; o++)
		for (int ci = 0; ci < c->C; ci++)
			for (int k = 0; k < KK; k++)
				dw[((size_t)o * c->C + ci) * KK + k] +=
				    dwp[((size_t)o * KK + k) * c->C + ci];
}

/* col [n OH OW, KH KW C] = the unfolded input of examples [b0, b0+n). */
static void
im2col(const struct cg_conv *c, float *col, const float *inp, int b0, int n)
{
	const int C = c->C, CKK = C * c->KH * c->KW;
	const long rows = (long)n * c->OH * c->OW;

	PAR_FOR((size_t)rows * CKK)
	for (long r = 0; r < rows; r++) {
		const int ow = (int)(r % c->OW), oh = (int)(r / c->OW % c->OH);
		const long b = b0 + r / ((long)c->OW * c->OH);
		float *o = col + (size_t)r * CKK;

		for (int kh = 0; kh < c->KH; kh++) {
			const int ih = oh * c->stride - c->pad + kh;

			for (int kw = 0; kw < c->KW; kw++, o += C) {
				const int iw = ow * c->stride - c->pad + kw;

				if (ih < 0 || ih >= c->H || iw < 0 ||
				    iw >= c->W)
					memset(o, 0, (size_t)C * sizeof(*o));
				else
					memcpy(o,
					       inp + (((size_t)b * c->H + ih) *
					                  c->W +
					              iw) * C,
					       (size_t)C * sizeof(*o));
			}
		}
	}
}

/*
 * dinp of examples [b0, b0+n) += the gradient dcol [n OH OW, KH KW C]
 * folded back: each input position gathers, in the order kh, kw, the rows
 * whose kernel covers it.
 */
static void
col2im(const struct cg_conv *c, float *dinp, const float *dcol, int b0, int n)
{
	const int C = c->C, CKK = C * c->KH * c->KW, s = c->stride;
	const long lines = (long)n * c->H;

	PAR_FOR((size_t)lines * c->W * CKK)
	for (long l = 0; l < lines; l++) {
		const int ih = (int)(l % c->H);
		const long bl = l / c->H; /* the example within the chunk */
		float *drow = dinp + ((size_t)(b0 + bl) * c->H + ih) * c->W *
		                         (size_t)c->C;

		for (int kh = 0; kh < c->KH; kh++) {
			const int t = ih + c->pad - kh;

			if (t < 0 || t % s != 0 || t / s >= c->OH)
				continue;
			const int oh = t / s;
			for (int iw = 0; iw < c->W; iw++) {
				float *d = drow + (size_t)iw * c->C;

				for (int kw = 0; kw < c->KW; kw++) {
					const int u = iw + c->pad - kw;

					if (u < 0 || u % s != 0 ||
					    u / s >= c->OW)
						continue;
					const size_t r =
					    ((size_t)bl * c->OH + oh) * c->OW +
					    u / s;
					const float *g =
					    dcol + r * CKK +
					    (size_t)(kh * c->KW + kw) * C;
					SIMD()
					for (int ci = 0; ci < C; ci++)
						d[ci] += g[ci];
				}
			}
		}
	}
}

/* Examples per piece for scratch of ncol floats (at least 1), after the
 * two permuted weights. */
static int
chunk(const struct cg_conv *c, int B, size_t ncol)
{
	size_t w2 = 2 * cg_conv_wsize(c);
	size_t n = ncol > w2 ? (ncol - w2) / col_per_example(c) : 0;

	if (n < 1)
		n = 1;
	return n > (size_t)B ? B : (int)n;
}

static atomic_ulong dnnl_runs;

unsigned long
cg_conv_dnnl_runs(void)
{
	return atomic_load(&dnnl_runs);
}

#ifdef CG_HAVE_DNNL
/* Whether a convolution goes to oneDNN: -1 no, else its bf16 flag. */
static int
on_dnnl(const struct cg_conv *c)
{
	const enum cg_engine e = cg_get_engine();

	if (pointwise(c) || cg_deterministic() ||
	    (e != CG_ENGINE_AUTO && e != CG_ENGINE_DNNL))
		return -1;
	if (cg_get_precision() == CG_PREC_BF16)
		return cg_bf16_native() ? 1 : -1;
	return 0;
}
#endif

void
cg_conv_forward(const struct cg_conv *c, float *out, const float *inp,
                const float *w, const float *b, int B, float *col,
                size_t ncol)
{
	const int CKK = c->C * c->KH * c->KW, P = c->OH * c->OW;
	int step;

	if (pointwise(c)) {
		cg_linear_forward(out, inp, w, b, B * P, c->C, c->OC);
		return;
	}
#ifdef CG_HAVE_DNNL
	{
		const int bf16 = on_dnnl(c);

		if (bf16 >= 0 &&
		    cg_dnnl_conv_forward(bf16, c, B, out, inp, w, b) == 0) {
			atomic_fetch_add(&dnnl_runs, 1);
			return;
		}
	}
#endif
	float *wp = col;

	col += 2 * cg_conv_wsize(c);
	permute_w(c, wp, w);
	step = chunk(c, B, ncol);
	for (int b0 = 0; b0 < B; b0 += step) {
		const int n = B - b0 < step ? B - b0 : step;

		im2col(c, col, inp, b0, n);
		cg_linear_forward(out + (size_t)b0 * P * c->OC, col, wp, b,
		                  n * P, CKK, c->OC);
	}
}

/*
 * db [OC] += the sum of dout [rows, OC] over its rows, in double: blocks
 * of channels over threads, each block's sums over rows read row by row.
 */
static void
bias_grad(float *db, const float *dout, size_t rows, int OC)
{
	enum { BLK = 64 };
	const int nblk = (OC + BLK - 1) / BLK;

	PAR_FOR(rows * OC)
	for (int k = 0; k < nblk; k++) {
		const int o0 = k * BLK, m = OC - o0 < BLK ? OC - o0 : BLK;
		double s[BLK] = {0};

		for (size_t r = 0; r < rows; r++) {
			const float *g = dout + r * OC + o0;

			for (int j = 0; j < m; j++)
				s[j] += g[j];
		}
		for (int j = 0; j < m; j++)
			db[o0 + j] += (float)s[j];
	}
}

void
cg_conv_backward(const struct cg_conv *c, float *dinp, float *dw, float *db,
                 const float *dout, const float *inp, const float *w, int B,
                 float *col, size_t ncol)
{
	const int CKK = c->C * c->KH * c->KW, P = c->OH * c->OW;
	int step;

#ifdef CG_HAVE_DNNL
	{
		const int bf16 = on_dnnl(c);

		/* What oneDNN could not do is left to the unfolding. */
		if (bf16 >= 0 && dw &&
		    cg_dnnl_conv_backward_weights(bf16, c, B, dw, dout, inp) ==
		        0) {
			atomic_fetch_add(&dnnl_runs, 1);
			dw = NULL;
		}
		if (bf16 >= 0 && dinp &&
		    cg_dnnl_conv_backward_data(bf16, c, B, dinp, dout, w) ==
		        0) {
			atomic_fetch_add(&dnnl_runs, 1);
			dinp = NULL;
		}
		if (bf16 >= 0 && dw == NULL && dinp == NULL) {
			if (db)
				bias_grad(db, dout, (size_t)B * P, c->OC);
			return;
		}
	}
#endif
	if (pointwise(c)) {
		if (dw)
			cg_linear_backward(dinp, dw, db, dout, inp, w, B * P,
			                   c->C, c->OC);
		else if (dinp)
			cg_sgemm(0, 0, B * P, c->C, c->OC, 1, dout, c->OC, w,
			         c->C, 1, dinp, c->C);
		if (dw || db == NULL)
			return;
	}
	float *wp = col, *dwp = NULL;

	if (!pointwise(c)) {
		dwp = col + cg_conv_wsize(c);
		col += 2 * cg_conv_wsize(c);
		permute_w(c, wp, w);
		if (dw)
			memset(dwp, 0, cg_conv_wsize(c) * sizeof(*dwp));
	}
	step = pointwise(c) ? B : chunk(c, B, ncol);
	for (int b0 = 0; b0 < B && !pointwise(c); b0 += step) {
		const int n = B - b0 < step ? B - b0 : step, M = n * P;
		const float *d = dout + (size_t)b0 * P * c->OC;

		if (dw) {
			im2col(c, col, inp, b0, n);
			/* dwp [OC, CKK] += d^T [OC, M] col [M, CKK] */
			cg_sgemm(1, 0, c->OC, CKK, M, 1, d, c->OC, col, CKK, 1,
			         dwp, CKK);
		}
		if (dinp == NULL)
			continue;
		/* The unfolded input is spent: its gradient takes its place,
		 * dcol [M, CKK] = d [M, OC] wp [OC, CKK]. */
		cg_sgemm(0, 0, M, CKK, c->OC, 1, d, c->OC, wp, CKK, 0, col,
		         CKK);
		col2im(c, dinp, col, b0, n);
	}
	if (dw && !pointwise(c))
		unpermute_add(c, dw, dwp);
	if (db)
		bias_grad(db, dout, (size_t)B * P, c->OC);
}

/* ------------------------------------------------------ up-sampling */

void
cg_upsample2_forward(float *out, const float *inp, int B, int H, int W, int C)
{
	const long lines = (long)B * H;

	PAR_FOR((size_t)lines * W * C * 4)
	for (long l = 0; l < lines; l++) {
		const float *x = inp + (size_t)l * W * C;
		float *o = out + (size_t)l * 2 * (2 * (size_t)W * C);

		for (int w = 0; w < W; w++)
			for (int j = 0; j < 2; j++)
				memcpy(o + (2 * (size_t)w + j) * C,
				       x + (size_t)w * C, (size_t)C * sizeof(*o));
		memcpy(o + 2 * (size_t)W * C, o, 2 * (size_t)W * C * sizeof(*o));
	}
}

void
cg_upsample2_backward(float *dinp, const float *dout, int B, int H, int W,
                      int C)
{
	const long lines = (long)B * H;
	const size_t ow = 2 * (size_t)W * C; /* floats of one output line */

	PAR_FOR((size_t)lines * W * C * 4)
	for (long l = 0; l < lines; l++) {
		float *d = dinp + (size_t)l * W * C;
		const float *g = dout + (size_t)l * 2 * ow;

		for (int w = 0; w < W; w++) {
			const float *g0 = g + 2 * (size_t)w * C;

			SIMD()
			for (int c = 0; c < C; c++)
				d[(size_t)w * C + c] +=
				    (g0[c] + g0[C + c]) +
				    (g0[ow + c] + g0[ow + C + c]);
		}
	}
}

/* --------------------------------------------- group normalisation */

/*
 * Channels are innermost, so the kernels go over an example's map in
 * blocks of up to GN_BLOCK consecutive channels: each channel keeps its
 * own double sum down the positions (the lanes of the vectors are
 * channels, and each channel's sum runs in position order whatever their
 * width), and a group's sum is then its channels' sums in channel order.
 * A group may straddle two blocks; its sum runs on across them.  Threads
 * take whole examples, so that the bits do not depend on their number.
 */
enum { GN_BLOCK = 64 };

void
cg_groupnorm_forward(float *out, float *mean, float *rstd, const float *inp,
                     const float *gamma, const float *beta, int B, int HW,
                     int C, int G)
{
	const int CG = C / G;
	const double N = (double)HW * CG;

	PAR_FOR((size_t)B * HW * C)
	for (long b = 0; b < B; b++) {
		const float *x = inp + (size_t)b * HW * C;
		float *o = out + (size_t)b * HW * C;
		float *m = mean + (size_t)b * G, *r = rstd + (size_t)b * G;
		double s1[GN_BLOCK], s2[GN_BLOCK], g1 = 0, g2 = 0;
		float fm[GN_BLOCK], fr[GN_BLOCK];

		/* The mean: each channel's sum, then its group's. */
		for (int c0 = 0; c0 < C; c0 += GN_BLOCK) {
			const int n = C - c0 < GN_BLOCK ? C - c0 : GN_BLOCK;

			for (int c = 0; c < n; c++)
				s1[c] = 0;
			for (int p = 0; p < HW; p++) {
				const float *xp = x + (size_t)p * C + c0;

				SIMD()
				for (int c = 0; c < n; c++)
					s1[c] += xp[c];
			}
			for (int c = 0; c < n; c++) {
				g1 += s1[c];
				if ((c0 + c + 1) % CG == 0) {
					m[(c0 + c) / CG] = (float)(g1 / N);
					g1 = 0;
				}
			}
		}
		/* The variance about the rounded mean fm, with the shift put
		 * back: mean((x - fm)^2) - (mean(x) - fm)^2. */
		for (int c0 = 0; c0 < C; c0 += GN_BLOCK) {
			const int n = C - c0 < GN_BLOCK ? C - c0 : GN_BLOCK;

			for (int c = 0; c < n; c++) {
				s1[c] = s2[c] = 0;
				fm[c] = m[(c0 + c) / CG];
			}
			for (int p = 0; p < HW; p++) {
				const float *xp = x + (size_t)p * C + c0;

				SIMD()
				for (int c = 0; c < n; c++) {
					const double d = (double)xp[c] - fm[c];

					s1[c] += d;
					s2[c] += d * d;
				}
			}
			for (int c = 0; c < n; c++) {
				g1 += s1[c];
				g2 += s2[c];
				if ((c0 + c + 1) % CG == 0) {
					const double sh = g1 / N;
					double v = g2 / N - sh * sh;

					v = v > 0 ? v : 0;
					r[(c0 + c) / CG] =
					    (float)(1 / sqrt(v + 1e-5));
					g1 = g2 = 0;
				}
			}
		}
		/* out = (x - mean) rstd gamma + beta. */
		for (int c0 = 0; c0 < C; c0 += GN_BLOCK) {
			const int n = C - c0 < GN_BLOCK ? C - c0 : GN_BLOCK;
			const float *ga = gamma + c0, *be = beta + c0;

			for (int c = 0; c < n; c++) {
				fm[c] = m[(c0 + c) / CG];
				fr[c] = r[(c0 + c) / CG];
			}
			for (int p = 0; p < HW; p++) {
				const size_t i = (size_t)p * C + c0;

				SIMD()
				for (int c = 0; c < n; c++)
					o[i + c] =
					    (x[i + c] - fm[c]) * fr[c] * ga[c] +
					    be[c];
			}
		}
	}
}

void
cg_groupnorm_backward(float *dinp, float *dgamma, float *dbeta,
                      const float *dout, const float *inp, const float *gamma,
                      const float *mean, const float *rstd, int B, int HW,
                      int C, int G)
{
	const int CG = C / G;
	const double N = (double)HW * CG;

	/* The input's gradient, an example at a time: with xhat the
	 * normalised input and dxhat = dout gamma, rstd (dxhat - mean(dxhat)
	 * - xhat mean(dxhat xhat)).  Per channel, the sums over positions of
	 * dout and of dout xhat; gamma scales them into the group's. */
	PAR_FOR((size_t)B * HW * C)
	for (long b = 0; b < B; b++) {
		const size_t base = (size_t)b * HW * C;
		const float *x = inp + base, *dy = dout + base;
		float *dx = dinp + base;
		const float *m = mean + (size_t)b * G,
		            *r = rstd + (size_t)b * G;
		double s1[GN_BLOCK], s2[GN_BLOCK], g1 = 0, g2 = 0;
		float fm[GN_BLOCK], fr[GN_BLOCK], fa[GN_BLOCK], fk[GN_BLOCK];
		float ga[GN_BLOCK], gk[GN_BLOCK];

		/* A run of whole groups at a time, of up to GN_BLOCK channels
		 * (or one group, where a group is wider): their sums, then
		 * their gradient. */
		for (int g0 = 0, g1n; g0 < G; g0 = g1n) {
			const int ng = CG >= GN_BLOCK           ? 1
			               : G - g0 < GN_BLOCK / CG ? G - g0
			                                        : GN_BLOCK / CG;
			const int cs = g0 * CG, ce = (g0 + ng) * CG;

			g1n = g0 + ng;
			for (int c0 = cs; c0 < ce; c0 += GN_BLOCK) {
				const int n =
				    ce - c0 < GN_BLOCK ? ce - c0 : GN_BLOCK;

				for (int c = 0; c < n; c++) {
					s1[c] = s2[c] = 0;
					fm[c] = m[(c0 + c) / CG];
					fr[c] = r[(c0 + c) / CG];
				}
				for (int p = 0; p < HW; p++) {
					const size_t i = (size_t)p * C + c0;

					SIMD()
					for (int c = 0; c < n; c++) {
						const double d = dy[i + c];

						s1[c] += d;
						s2[c] +=
						    d * ((x[i + c] - fm[c]) *
						         fr[c]);
					}
				}
				for (int c = 0; c < n; c++) {
					const double gc = gamma[c0 + c];

					g1 += gc * s1[c];
					g2 += gc * s2[c];
					if ((c0 + c + 1) % CG == 0) {
						const int k =
						    (c0 + c) / CG - g0;

						ga[k] = (float)(g1 / N);
						gk[k] = (float)(g2 / N);
						g1 = g2 = 0;
					}
				}
			}
			for (int c0 = cs; c0 < ce; c0 += GN_BLOCK) {
				const int n =
				    ce - c0 < GN_BLOCK ? ce - c0 : GN_BLOCK;
				const float *gm = gamma + c0;

				for (int c = 0; c < n; c++) {
					const int k = (c0 + c) / CG;

					fm[c] = m[k], fr[c] = r[k];
					fa[c] = ga[k - g0], fk[c] = gk[k - g0];
				}
				for (int p = 0; p < HW; p++) {
					const size_t i = (size_t)p * C + c0;

					SIMD()
					for (int c = 0; c < n; c++) {
						const float xh =
						    (x[i + c] - fm[c]) * fr[c];

						dx[i + c] +=
						    fr[c] *
						    (dy[i + c] * gm[c] - fa[c] -
						     xh * fk[c]);
					}
				}
			}
		}
	}
	/* The scale's and shift's, 8 channels at a time over every example in
	 * order: blocks that small, so that narrow maps still split. */
	PAR_FOR((size_t)B * HW * C)
	for (int c0 = 0; c0 < C; c0 += 8) {
		const int n = C - c0 < 8 ? C - c0 : 8;
		double sg[8] = {0}, sb[8] = {0};
		float fm[8], fr[8];

		for (int b = 0; b < B; b++) {
			const size_t base = (size_t)b * HW * C + c0;

			for (int c = 0; c < n; c++) {
				fm[c] = mean[(size_t)b * G + (c0 + c) / CG];
				fr[c] = rstd[(size_t)b * G + (c0 + c) / CG];
			}
			for (int p = 0; p < HW; p++) {
				const size_t i = base + (size_t)p * C;

				SIMD()
				for (int c = 0; c < n; c++) {
					sg[c] += (double)dout[i + c] *
					         ((inp[i + c] - fm[c]) * fr[c]);
					sb[c] += dout[i + c];
				}
			}
		}
		for (int c = 0; c < n; c++) {
			dgamma[c0 + c] += (float)sg[c];
			dbeta[c0 + c] += (float)sb[c];
		}
	}
}

/* ------------------------------------------------------------- SiLU */

/*
 * sigmoid(x) from the exponential of a non-positive number: 1 / (1 + e)
 * for x >= 0, e / (1 + e) below.  The numerator is chosen on the sign
 * bit, with integer operations: a float comparison may trap, so GCC will
 * not if-convert it and the loops around would stay scalar.  -0 takes e
 * = 1 either way, a NaN's SiLU is NaN whichever it takes, and -inf's is
 * NaN (-inf times 0), as x / (1 + e^-x) makes it.
 */
static inline float
sigm(float x)
{
	const float e = cg_exp_approx(-fabsf(x));
	union {
		float f;
		uint32_t u;
	} xb = {.f = x}, eb = {.f = e}, one = {.f = 1.0f}, num;
	const uint32_t neg = 0u - (xb.u >> 31);
	/* Below -87, where the exponential stops, 0: else x e^-87 would
	 * grow with |x|. */
	const uint32_t live = 0u - (uint32_t)(xb.u <= 0xc2ae0000u || !neg);

	num.u = ((eb.u & neg) | (one.u & ~neg)) & live;
	return num.f / (1 + e);
}

void
cg_silu_forward(float *out, const float *inp, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++)
		out[i] = inp[i] * sigm(inp[i]);
}

void
cg_silu_backward(float *dinp, const float *dout, const float *inp, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++) {
		const float s = sigm(inp[i]);

		dinp[i] += dout[i] * s * (1 + inp[i] * (1 - s));
	}
}

/* ------------------------------------------------ pooling, add, concat */

void
cg_avgpool_forward(float *out, const float *inp, int B, int HW, int C)
{
	PAR_FOR((size_t)B * HW * C)
	for (int b = 0; b < B; b++) {
		float *o = out + (size_t)b * C;

		memset(o, 0, (size_t)C * sizeof(*o));
		for (int p = 0; p < HW; p++) {
			const float *x = inp + ((size_t)b * HW + p) * C;

			SIMD()
			for (int c = 0; c < C; c++)
				o[c] += x[c];
		}
		SIMD()
		for (int c = 0; c < C; c++)
			o[c] /= (float)HW;
	}
}

void
cg_avgpool_backward(float *dinp, const float *dout, int B, int HW, int C)
{
	const size_t rows = (size_t)B * HW;

	PAR_FOR(rows * C)
	for (size_t r = 0; r < rows; r++) {
		const float *g = dout + r / HW * C;
		float *d = dinp + r * C;

		SIMD()
		for (int c = 0; c < C; c++)
			d[c] += g[c] / (float)HW;
	}
}

void
cg_add_channel_forward(float *x, const float *e, int B, int HW, int C)
{
	const size_t rows = (size_t)B * HW;

	PAR_FOR(rows * C)
	for (size_t r = 0; r < rows; r++) {
		const float *a = e + r / HW * C;
		float *d = x + r * C;

		SIMD()
		for (int c = 0; c < C; c++)
			d[c] += a[c];
	}
}

void
cg_add_channel_backward(float *de, const float *dx, int B, int HW, int C)
{
	PAR_FOR((size_t)B * HW * C)
	for (int b = 0; b < B; b++) {
		float *d = de + (size_t)b * C;

		for (int p = 0; p < HW; p++) {
			const float *g = dx + ((size_t)b * HW + p) * C;

			SIMD()
			for (int c = 0; c < C; c++)
				d[c] += g[c];
		}
	}
}

void
cg_film_forward(float *y, const float *x, const float *e, int B, int HW, int C)
{
	const size_t rows = (size_t)B * HW;

	PAR_FOR(rows * C)
	for (size_t r = 0; r < rows; r++) {
		const float *s = e + r / HW * 2 * C, *t = s + C;
		const float *a = x + r * C;
		float *d = y + r * C;

		SIMD()
		for (int c = 0; c < C; c++)
			d[c] = a[c] * (1 + s[c]) + t[c];
	}
}

void
cg_film_backward(float *dx, float *de, const float *dy, const float *x,
                 const float *e, int B, int HW, int C)
{
	/* Each example's sums in position order, on one thread. */
	PAR_FOR((size_t)B * HW * C)
	for (int b = 0; b < B; b++) {
		const float *s = e + (size_t)b * 2 * C;
		float *ds = de + (size_t)b * 2 * C, *dt = ds + C;

		for (int p = 0; p < HW; p++) {
			const size_t o = ((size_t)b * HW + p) * C;
			const float *g = dy + o, *a = x + o;

			SIMD()
			for (int c = 0; c < C; c++) {
				ds[c] += g[c] * a[c];
				dt[c] += g[c];
			}
			if (dx == NULL)
				continue;
			float *d = dx + o;
			SIMD()
			for (int c = 0; c < C; c++)
				d[c] += g[c] * (1 + s[c]);
		}
	}
}

void
cg_concat_forward(float *out, const float *a, const float *b, int R, int C1,
                  int C2)
{
	const size_t C = (size_t)C1 + C2;

	PAR_FOR((size_t)R * C)
	for (int r = 0; r < R; r++) {
		memcpy(out + r * C, a + (size_t)r * C1, (size_t)C1 * sizeof(*a));
		memcpy(out + r * C + C1, b + (size_t)r * C2,
		       (size_t)C2 * sizeof(*b));
	}
}

void
cg_concat_backward(float *da, float *db, const float *dout, int R, int C1,
                   int C2)
{
	const size_t C = (size_t)C1 + C2;

	PAR_FOR((size_t)R * C)
	for (int r = 0; r < R; r++) {
		const float *g = dout + r * C;

		if (da) {
			float *d = da + (size_t)r * C1;

			SIMD()
			for (int c = 0; c < C1; c++)
				d[c] += g[c];
		}
		if (db) {
			float *d = db + (size_t)r * C2;

			SIMD()
			for (int c = 0; c < C2; c++)
				d[c] += g[C1 + c];
		}
	}
}

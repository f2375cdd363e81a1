/*
 * nn/transformer.c - decoder kernels: embedding, layernorm, GELU, causal
 * attention, residual, masked softmax cross-entropy.
 *
 * The kernels of transformer.h, after llm.c's train_gpt2.c, with OpenMP on
 * the outer loops.  Each parallel loop writes disjoint outputs, so results
 * do not depend on the thread count: reductions across rows (layernorm's
 * dw and db, the embedding tables' gradients) are split by column, not by
 * row.  Attention works on one (sequence, head) per task: its products
 * (scores, weighted values and their gradients) are cg_sgemm calls on
 * the head's strided slices of qkv, by blocks of ATT_BLOCK rows or
 * columns that skip the blocks above the diagonal, and the softmax rows
 * between them are plain loops.  The blocks are small enough (32 x 128
 * x 64 for cgpt's defaults) that OpenBLAS runs each on the calling
 * thread, so they nest in OpenMP's loop without threads of their own;
 * the built-in kernel does the same inside a parallel region.  This does
 * a little more than the causal work, at matrix-kernel speed, where dot
 * products of hs floats one key at a time ran at a fraction of it.
 * Inner loops carry "omp simd", and sums run in LANES lanes (par.h) so
 * that they vectorize with the same bits on any x86-64; the
 * exponentials of GELU's tanh and of the softmaxes use cg_exp_approx
 * (vmath.h, within 2 ulp), which the compiler vectorizes where libm's expf
 * and tanhf stay scalar calls: they were a third of a training step.
 * Losses are summed in double per row.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/par.h"
#include "nn/gemm.h"
#include "nn/transformer.h"

/* Columns per task where a reduction over rows is split by column. */
#define COLS 16

static inline float
dotf(const float *a, const float *b, int n)
{
	float acc[LANES] = {0}, s;
	int i = 0;

	for (; i + LANES <= n; i += LANES)
		for (int l = 0; l < LANES; l++)
			acc[l] += a[i + l] * b[i + l];
	s = cg_fold_f(acc);
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* tanh(u) = sign(u) (1 - e) / (1 + e), e = e^-2|u|: no overflow, and the
 * absolute error (what GELU's 1 + tanh needs) stays within a few ulp. */
static inline float
tanh_approx(float u)
{
	float e = cg_exp_approx(-2.0f * fabsf(u));
	return copysignf((1.0f - e) / (1.0f + e), u);
}

/* y += a * x */
static inline void
axpy(float *y, float a, const float *x, int n)
{
	SIMD()
	for (int i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* ------------------------------------------------------------ embedding */

void
cg_embed_forward(float *out, const int *tokens, const float *wte,
                 const float *wpe, int B, int T, int C)
{
	size_t rows = (size_t)B * T;

	PAR_FOR(rows * C)
	for (size_t r = 0; r < rows; r++) {
		float *o = out + r * C;
		const float *e = wte + (size_t)tokens[r] * C;
		const float *p = wpe + (r % T) * C;

		SIMD()
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

void
cg_embed_backward(float *dwte, float *dwpe, const float *dout,
                  const int *tokens, int B, int T, int C)
{
	/* dwpe: one position per task. */
	PAR_FOR((size_t)B * T * C)
	for (int t = 0; t < T; t++) {
		float *dp = dwpe + (size_t)t * C;
		for (int b = 0; b < B; b++)
			axpy(dp, 1.0f, dout + ((size_t)b * T + t) * C, C);
	}
	/* dwte: rows may repeat a token, so split by column instead. */
	PAR_FOR((size_t)B * T * C)
	for (int c0 = 0; c0 < C; c0 += COLS) {
		int w = C - c0 < COLS ? C - c0 : COLS;
		for (size_t r = 0; r < (size_t)B * T; r++)
			axpy(dwte + (size_t)tokens[r] * C + c0, 1.0f,
			     dout + r * C + c0, w);
	}
}

/* ------------------------------------------------------------ layernorm */

void
cg_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                     const float *w, const float *b, int B, int T, int C)
{
	size_t rows = (size_t)B * T;

	PAR_FOR(rows * C)
	for (size_t r = 0; r < rows; r++) {
		const float *x = inp + r * C;
		float *o = out + r * C;
		float acc[LANES] = {0}, m, v;
		int i;

		for (i = 0; i + LANES <= C; i += LANES)
			for (int l = 0; l < LANES; l++)
				acc[l] += x[i + l];
		for (m = cg_fold_f(acc); i < C; i++)
			m += x[i];
		m /= C;
		for (int l = 0; l < LANES; l++)
			acc[l] = 0;
		for (i = 0; i + LANES <= C; i += LANES)
			for (int l = 0; l < LANES; l++) {
				float d = x[i + l] - m;
				acc[l] += d * d;
			}
		for (v = cg_fold_f(acc); i < C; i++) {
			float d = x[i] - m;
			v += d * d;
		}
		v /= C;
		float s = 1.0f / sqrtf(v + CG_LN_EPS);
		SIMD()
		for (int c = 0; c < C; c++)
			o[c] = (x[c] - m) * s * w[c] + b[c];
		mean[r] = m;
		rstd[r] = s;
	}
}

void
cg_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                      const float *inp, const float *w, const float *mean,
                      const float *rstd, int B, int T, int C)
{
	size_t rows = (size_t)B * T;

	/* dinp, row by row. */
	PAR_FOR(rows * C)
	for (size_t r = 0; r < rows; r++) {
		const float *x = inp + r * C, *d = dout + r * C;
		float *dx = dinp + r * C;
		float m = mean[r], s = rstd[r];
		/* sums of dnorm and dnorm * norm */
		float an[LANES] = {0}, ann[LANES] = {0}, dn, dnn;
		int i;

		for (i = 0; i + LANES <= C; i += LANES)
			for (int l = 0; l < LANES; l++) {
				float g = d[i + l] * w[i + l];
				an[l] += g;
				ann[l] += g * (x[i + l] - m) * s;
			}
		for (dn = cg_fold_f(an), dnn = cg_fold_f(ann); i < C; i++) {
			float g = d[i] * w[i];
			dn += g;
			dnn += g * (x[i] - m) * s;
		}
		dn /= C;
		dnn /= C;
		SIMD()
		for (int c = 0; c < C; c++) {
			float norm = (x[c] - m) * s;
			dx[c] += s * (d[c] * w[c] - dn - norm * dnn);
		}
	}
	/* dw and db sum over rows: split by column. */
	PAR_FOR(rows * C)
	for (int c0 = 0; c0 < C; c0 += COLS) {
		int n = C - c0 < COLS ? C - c0 : COLS;
		float sw[COLS] = {0}, sb[COLS] = {0};

		for (size_t r = 0; r < rows; r++) {
			const float *x = inp + r * C + c0;
			const float *d = dout + r * C + c0;
			float m = mean[r], s = rstd[r];
			SIMD()
			for (int c = 0; c < n; c++) {
				sw[c] += d[c] * (x[c] - m) * s;
				sb[c] += d[c];
			}
		}
		for (int c = 0; c < n; c++) {
			dw[c0 + c] += sw[c];
			db[c0 + c] += sb[c];
		}
	}
}

/* ----------------------------------------------------------------- gelu */

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

static inline float
gelu_at(float x)
{
	float th = tanh_approx(GELU_K * (x + GELU_A * x * x * x));

	return 0.5f * x * (1.0f + th);
}

static inline float
gelu_grad_at(float x)
{
	float th = tanh_approx(GELU_K * (x + GELU_A * x * x * x));
	float sech2 = 1.0f - th * th;

	return 0.5f * (1.0f + th) +
	       0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}

void
cg_gelu_forward(float *out, const float *inp, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++)
		out[i] = gelu_at(inp[i]);
}

static void
gelu_backward(float *dinp, const float *dout, const float *inp, size_t N,
              int set)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++) {
		float g = gelu_grad_at(inp[i]);
		/* set: + 0.0f gives what adding to a cleared array gives,
		 * a -0 included. */
		dinp[i] = (set ? 0.0f : dinp[i]) + g * dout[i];
	}
}

/*
 * The output also rounded for the next product, a span at a time while
 * it is in cache (the product would otherwise read it all back to round
 * it: a tenth of a bf16 cgpt step went to such passes).
 */
#define GELU_SPAN 1024

/* GELU (dy NULL) or its gradient written (dy, the output's) into y, and
 * y rounded into r, a span at a time. */
static void
gelu_rounded(float *y, void *r, int es, const float *x, const float *dy,
             size_t N)
{
	size_t ns = (N + GELU_SPAN - 1) / GELU_SPAN;

	PAR_FOR(N)
	for (size_t s = 0; s < ns; s++) {
		size_t i0 = s * GELU_SPAN;
		int n = (int)(N - i0 < GELU_SPAN ? N - i0 : GELU_SPAN);
		float *o = y + i0;
		const float *xi = x + i0;

		if (dy == NULL) {
			SIMD()
			for (int i = 0; i < n; i++)
				o[i] = gelu_at(xi[i]);
		} else {
			const float *g = dy + i0;
			SIMD()
			for (int i = 0; i < n; i++)
				o[i] = 0.0f + gelu_grad_at(xi[i]) * g[i];
		}
		cg_round_rows((char *)r + i0 * es, es, o, 1, n, n);
	}
}

void
cg_gelu_forward_r(float *out, void *rout, int es, const float *inp, size_t N)
{
	if (rout == NULL || es == 0)
		cg_gelu_forward(out, inp, N);
	else
		gelu_rounded(out, rout, es, inp, NULL, N);
}

void
cg_gelu_backward_set_r(float *dinp, void *rdinp, int es, const float *dout,
                       const float *inp, size_t N)
{
	if (rdinp == NULL || es == 0)
		gelu_backward(dinp, dout, inp, N, 1);
	else
		gelu_rounded(dinp, rdinp, es, inp, dout, N);
}

void
cg_gelu_backward(float *dinp, const float *dout, const float *inp, size_t N)
{
	gelu_backward(dinp, dout, inp, N, 0);
}

void
cg_gelu_backward_set(float *dinp, const float *dout, const float *inp,
                     size_t N)
{
	gelu_backward(dinp, dout, inp, N, 1);
}

/* ----------------------------------------------------- causal attention */

/*
 * Softmax of scores row t over j <= t, in place; zero beyond: the
 * training kernels' and cg_attention_row's, so a cached row and the full
 * forward take the same exponentials.
 */
static inline void
causal_softmax_row(float *a, int t, int T)
{
	float mx = -INFINITY, acc[LANES] = {0}, sum;
	int j;

	for (j = 0; j <= t; j++)
		mx = a[j] > mx ? a[j] : mx;
	for (j = 0; j + LANES <= t + 1; j += LANES)
		for (int l = 0; l < LANES; l++) {
			a[j + l] = cg_exp_approx(a[j + l] - mx);
			acc[l] += a[j + l];
		}
	for (sum = cg_fold_f(acc); j <= t; j++) {
		a[j] = cg_exp_approx(a[j] - mx);
		sum += a[j];
	}
	float inv = 1.0f / sum;
	SIMD()
	for (int i = 0; i <= t; i++)
		a[i] *= inv;
	for (j = t + 1; j < T; j++)
		a[j] = 0;
}

/* dotf of q with the four rows k, k + ld, k + 2 ld, k + 3 ld, into s:
 * dotf's bits for each, its chains of additions side by side. */
static inline void
dotf4(float s[4], const float *q, const float *k, size_t ld, int n)
{
	const float *k0 = k, *k1 = k + ld, *k2 = k1 + ld, *k3 = k2 + ld;
	float a0[LANES] = {0}, a1[LANES] = {0}, a2[LANES] = {0},
	      a3[LANES] = {0};
	int i = 0;

	for (; i + LANES <= n; i += LANES)
		for (int l = 0; l < LANES; l++) {
			a0[l] += q[i + l] * k0[i + l];
			a1[l] += q[i + l] * k1[i + l];
			a2[l] += q[i + l] * k2[i + l];
			a3[l] += q[i + l] * k3[i + l];
		}
	s[0] = cg_fold_f(a0);
	s[1] = cg_fold_f(a1);
	s[2] = cg_fold_f(a2);
	s[3] = cg_fold_f(a3);
	for (; i < n; i++) {
		s[0] += q[i] * k0[i];
		s[1] += q[i] * k1[i];
		s[2] += q[i] * k2[i];
		s[3] += q[i] * k3[i];
	}
}

/* Ask for the cache lines of x [n] ahead of their use. */
static inline void
prefetch_row(const float *x, int n)
{
	for (int i = 0; i < n; i += 16)
		__builtin_prefetch(x + i, 0, 2);
}

void
cg_attention_row(float *o, float *a, const float *q, const float *k,
                 const float *v, size_t ld, int t, int hs)
{
	const float scale = 1.0f / sqrtf((float)hs);
	int j = 0;

	/* The cache's rows come from memory (a token's weights pass through
	 * the caches between two uses of a layer's keys): the values are
	 * asked for now, to be there after the scores, and the keys eight
	 * rows ahead of the products (one thread, the 25.6M cgpt: 3-5% more
	 * tokens a second). */
	for (int r = 0; r <= t; r++)
		prefetch_row(v + (size_t)r * ld, hs);
	/* four keys at a time: four chains of additions, not one */
	for (; j + 4 <= t + 1; j += 4) {
		float s[4];
		for (int r = j + 8; r < j + 12 && r <= t; r++)
			prefetch_row(k + (size_t)r * ld, hs);
		dotf4(s, q, k + j * ld, ld, hs);
		for (int r = 0; r < 4; r++)
			a[j + r] = scale * s[r];
	}
	for (; j <= t; j++)
		a[j] = scale * dotf(q, k + j * ld, hs);
	causal_softmax_row(a, t, t + 1);
	memset(o, 0, (size_t)hs * sizeof(float));
	/* four values a pass over o, which then is read and written a
	 * quarter as often */
	for (j = 0; j + 4 <= t + 1; j += 4) {
		const float *v0 = v + j * ld, *v1 = v0 + ld, *v2 = v1 + ld,
		            *v3 = v2 + ld;
		const float a0 = a[j], a1 = a[j + 1], a2 = a[j + 2],
		            a3 = a[j + 3];
		SIMD()
		for (int i = 0; i < hs; i++)
			o[i] += (a0 * v0[i] + a1 * v1[i]) +
			        (a2 * v2[i] + a3 * v3[i]);
	}
	for (; j <= t; j++)
		axpy(o, a[j], v + j * ld, hs);
}

/*
 * Rows per block of the causal products: queries of block r see keys of
 * blocks 0..r only, so the products skip the blocks above the diagonal
 * (with 4 blocks, 10 of 16 are computed).
 */
#define ATT_BLOCK 32

/*
 * bf16 (or f16) products: each (sequence, head)'s q, k, v (and in the
 * backward pass dout) rounded once into the thread's buffer, as f32
 * holding the rounded values, and every block's products made on them
 * (cg_sgemm_rounded), instead of each product rounding its operands
 * again: the keys and values were rounded once per block of queries.
 * The blocks are too small for oneDNN (BF16_MIN_WORK), so the products
 * stay on the f32 engine, as cg_sgemm would run them.  The scores' and
 * the softmax gradient's blocks are rounded where they are made.  NULL
 * in f32 precision, or where no buffer can be had (then cg_sgemm).
 */
static float *
att_rounded(int T, int hs)
{
	if (cg_get_precision() == CG_PREC_F32)
		return NULL;
	return cg_round_buffer(3, ((size_t)4 * T * hs + (size_t)T * T) *
	                              sizeof(float));
}

/* rows x hs of a head, rows ld apart, rounded to dst (hs apart) */
static void
att_round(float *dst, const float *src, int rows, int hs, int ld)
{
	cg_round_rows(dst, 4, src, rows, hs, ld);
}

void
cg_attention_forward(float *out, float *att, const float *qkv, int B, int T,
                     int C, int NH)
{
	const int hs = C / NH, C3 = 3 * C, BH = B * NH;
	const float scale = 1.0f / sqrtf((float)hs);

	PAR_FOR_DYN((size_t)BH * T * T * hs)
	for (int bh = 0; bh < BH; bh++) {
		const int b = bh / NH, h = bh % NH;
		/* Head h of sequence b: q, k, v rows 3C apart. */
		const float *q = qkv + (size_t)b * T * C3 + h * hs;
		float *a = att + (size_t)bh * T * T;
		float *o = out + (size_t)b * T * C + h * hs;
		/* rounded: q, k, v [T, hs] each, a block of scores */
		float *r = att_rounded(T, hs);

		if (r != NULL) {
			float *rq = r, *rk = rq + (size_t)T * hs;
			float *rv = rk + (size_t)T * hs, *ra = rv + (size_t)T * hs;

			att_round(rq, q, T, hs, C3);
			att_round(rk, q + C, T, hs, C3);
			att_round(rv, q + 2 * C, T, hs, C3);
			for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
				int m = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
				int n = r0 + m;
				float *ar = a + (size_t)r0 * T;
				cg_sgemm_rounded(4, 0, 1, m, n, hs, scale,
				                 rq + (size_t)r0 * hs, hs, rk, hs,
				                 0, ar, T);
				for (int t = r0; t < r0 + m; t++)
					causal_softmax_row(a + (size_t)t * T, t,
					                   T);
				cg_round_rows(ra, 4, ar, m, n, T);
				cg_sgemm_rounded(4, 0, 0, m, hs, n, 1, ra, n, rv,
				                 hs, 0, o + (size_t)r0 * C, C);
			}
			continue;
		}
		for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
			int m = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
			int n = r0 + m; /* keys 0..n-1 */
			float *ar = a + (size_t)r0 * T;
			/* scores = q k^T / sqrt(hs), then row softmaxes */
			cg_sgemm(0, 1, m, n, hs, scale,
			                 q + (size_t)r0 * C3, C3, q + C, C3, 0,
			                 ar, T);
			for (int t = r0; t < r0 + m; t++)
				causal_softmax_row(a + (size_t)t * T, t, T);
			/* out = att v over the keys it sees */
			cg_sgemm(0, 0, m, hs, n, 1, ar, T, q + 2 * C,
			                 C3, 0, o + (size_t)r0 * C, C);
		}
	}
}

void
cg_attention_backward(float *dqkv, float *scratch, const float *dout,
                      const float *qkv, const float *att, int B, int T, int C,
                      int NH)
{
	const int hs = C / NH, C3 = 3 * C, BH = B * NH;
	const float scale = 1.0f / sqrtf((float)hs);

	/* Each (sequence, head) writes its own channels of dqkv. */
	PAR_FOR_DYN((size_t)BH * T * T * hs)
	for (int bh = 0; bh < BH; bh++) {
		const int b = bh / NH, h = bh % NH;
		const size_t at = (size_t)b * T * C3 + h * hs;
		const float *q = qkv + at, *k = q + C, *v = q + 2 * C;
		float *dq = dqkv + at, *dk = dq + C, *dv = dq + 2 * C;
		const float *go = dout + (size_t)b * T * C + h * hs;
		const float *a = att + (size_t)bh * T * T;
		float *d = scratch + (size_t)bh * T * T;
		/* rounded: q, k, v, dout [T, hs] each, att [T, T] */
		float *r = att_rounded(T, hs);
		float *rq = r, *rk = NULL, *rv = NULL, *rg = NULL, *ra = NULL;

		if (r != NULL) {
			rk = rq + (size_t)T * hs, rv = rk + (size_t)T * hs;
			rg = rv + (size_t)T * hs, ra = rg + (size_t)T * hs;
			att_round(rq, q, T, hs, C3);
			att_round(rk, k, T, hs, C3);
			att_round(rv, v, T, hs, C3);
			att_round(rg, go, T, hs, C);
			/* each row up to the end of its block: the column
			 * blocks read no further (zeros past the diagonal) */
			for (int t = 0; t < T; t++) {
				int e = (t / ATT_BLOCK + 1) * ATT_BLOCK;
				cg_round_rows(ra + (size_t)t * T, 4,
				              a + (size_t)t * T, 1, e < T ? e : T,
				              T);
			}
		}
		/* Row blocks: d = dout v^T, then through the softmax,
		 * d = att * (d - sum_j att d) / sqrt(hs), then dq += d k. */
		for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
			int m = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
			int n = r0 + m;
			float *dr0 = d + (size_t)r0 * T;
			if (r != NULL)
				cg_sgemm_rounded(4, 0, 1, m, n, hs, 1,
				                 rg + (size_t)r0 * hs, hs, rv, hs,
				                 0, dr0, T);
			else
				cg_sgemm(0, 1, m, n, hs, 1, go + (size_t)r0 * C,
				         C, v, C3, 0, dr0, T);
			for (int t = r0; t < r0 + m; t++) {
				const float *ar = a + (size_t)t * T;
				float *dr = d + (size_t)t * T;
				float s = dotf(ar, dr, t + 1);
				SIMD()
				for (int j = 0; j <= t; j++)
					dr[j] = ar[j] * (dr[j] - s) * scale;
				for (int j = t + 1; j < n; j++)
					dr[j] = 0;
			}
			/* d is read by products only: rounded in place */
			if (r != NULL) {
				for (int t = r0; t < r0 + m; t++)
					cg_round_rows(d + (size_t)t * T, 4,
					              d + (size_t)t * T, 1, n, T);
				cg_sgemm_rounded(4, 0, 0, m, hs, n, 1, dr0, T, rk,
				                 hs, 1, dq + (size_t)r0 * C3, C3);
			} else
				cg_sgemm(0, 0, m, hs, n, 1, dr0, T, k, C3, 1,
				         dq + (size_t)r0 * C3, C3);
		}
		/* Column blocks: keys and values of block c are seen by the
		 * queries from c0 on: dv += att^T dout, dk += d^T q. */
		for (int c0 = 0; c0 < T; c0 += ATT_BLOCK) {
			int m = T - c0 < ATT_BLOCK ? T - c0 : ATT_BLOCK;
			int n = T - c0; /* queries c0..T-1 */
			const float *ac = a + (size_t)c0 * T + c0;
			const float *dc = d + (size_t)c0 * T + c0;
			if (r != NULL) {
				cg_sgemm_rounded(4, 1, 0, m, hs, n, 1,
				                 ra + (size_t)c0 * T + c0, T,
				                 rg + (size_t)c0 * hs, hs, 1,
				                 dv + (size_t)c0 * C3, C3);
				cg_sgemm_rounded(4, 1, 0, m, hs, n, 1, dc, T,
				                 rq + (size_t)c0 * hs, hs, 1,
				                 dk + (size_t)c0 * C3, C3);
				continue;
			}
			cg_sgemm(1, 0, m, hs, n, 1, ac, T,
			                 go + (size_t)c0 * C, C, 1,
			                 dv + (size_t)c0 * C3, C3);
			cg_sgemm(1, 0, m, hs, n, 1, dc, T,
			                 q + (size_t)c0 * C3, C3, 1,
			                 dk + (size_t)c0 * C3, C3);
		}
	}
}

/* ------------------------------------------------------------- residual */

void
cg_residual_forward(float *out, const float *inp1, const float *inp2, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++)
		out[i] = inp1[i] + inp2[i];
}

void
cg_residual_backward(float *dinp1, float *dinp2, const float *dout, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++) {
		dinp1[i] += dout[i];
		dinp2[i] += dout[i];
	}
}

/* ------------------------------------ softmax cross-entropy with a mask */

/*
 * One row: the loss, and with d != NULL, d += wt * (softmax - onehot).
 * The row's maximum keeps exp() in range; the sum is in double.
 */
static double
xent_row(float *d, const float *l, int target, float wt, int V)
{
	float mx = l[0];
	double acc[LANES] = {0}, sum;
	int v;

	SIMD_MAX(mx)
	for (int u = 1; u < V; u++)
		mx = l[u] > mx ? l[u] : mx;
	for (v = 0; v + LANES <= V; v += LANES)
		for (int k = 0; k < LANES; k++)
			acc[k] += cg_exp_approx(l[v + k] - mx);
	for (sum = cg_fold_d(acc); v < V; v++)
		sum += cg_exp_approx(l[v] - mx);
	if (d != NULL) {
		float scale = (float)(wt / sum);
		SIMD()
		for (int u = 0; u < V; u++)
			d[u] += scale * cg_exp_approx(l[u] - mx);
		d[target] -= wt;
	}
	return log(sum) + mx - l[target];
}

void
cg_xent_forward(double *loss, const float *logits, const int *targets,
                const float *weight, int B, int T, int V)
{
	size_t rows = (size_t)B * T;

	PAR_FOR(rows * V)
	for (size_t r = 0; r < rows; r++)
		loss[r] = weight[r] == 0 ? 0
		                         : xent_row(NULL, logits + r * V,
		                                    targets[r], 0, V);
}

void
cg_xent_backward(float *dlogits, const float *logits, const int *targets,
                 const float *weight, int B, int T, int V)
{
	size_t rows = (size_t)B * T;

	PAR_FOR(rows * V)
	for (size_t r = 0; r < rows; r++)
		if (weight[r] != 0)
			(void)xent_row(dlogits + r * V, logits + r * V,
			               targets[r], weight[r], V);
}

void
cg_xent_forward_backward(double *loss, float *dlogits, const float *logits,
                         const int *targets, const float *weight, int B, int T,
                         int V)
{
	size_t rows = (size_t)B * T;

	PAR_FOR(rows * V)
	for (size_t r = 0; r < rows; r++)
		loss[r] = weight[r] == 0
		              ? 0
		              : xent_row(dlogits + r * V, logits + r * V,
		                         targets[r], weight[r], V);
}

/* ------------------------------------ distillation from a teacher */

void
cg_log_softmax_forward(float *out, const float *logits, float tau, size_t rows,
                       int V)
{
	const float inv = 1.0f / tau;

	PAR_FOR(rows * V)
	for (size_t r = 0; r < rows; r++) {
		const float *l = logits + r * V;
		float *o = out + r * V;
		float mx = l[0] * inv;
		double sum = 0;

		for (int v = 1; v < V; v++)
			mx = l[v] * inv > mx ? l[v] * inv : mx;
		for (int v = 0; v < V; v++)
			sum += exp((double)(l[v] * inv - mx));
		float lse = (float)(log(sum) + mx);
		for (int v = 0; v < V; v++)
			o[v] = l[v] * inv - lse;
	}
}

/*
 * One row's KL(p || q) with q = softmax(l / tau), and with d != NULL,
 * d += g (q - p).  In double: the terms of a KL near 0 cancel.
 */
static double
kl_row(float *d, const float *l, const float *lp, float tau, float g, int V)
{
	const double inv = 1.0 / tau;
	double mx = l[0] * inv, sum = 0, kl = 0;

	for (int v = 1; v < V; v++)
		mx = l[v] * inv > mx ? l[v] * inv : mx;
	for (int v = 0; v < V; v++)
		sum += exp(l[v] * inv - mx);
	const double lse = log(sum) + mx;
	for (int v = 0; v < V; v++) {
		double p = exp((double)lp[v]);
		double lq = l[v] * inv - lse;
		kl += p * ((double)lp[v] - lq);
		if (d != NULL)
			d[v] += g * (float)(exp(lq) - p);
	}
	return kl;
}

void
cg_distill_kl_forward_backward(double *kl, float *dlogits, const float *logits,
                               const float *tlogp, float scale, float tau,
                               size_t rows, int V)
{
	PAR_FOR(rows * V)
	for (size_t r = 0; r < rows; r++)
		kl[r] = kl_row(dlogits ? dlogits + r * V : NULL, logits + r * V,
		               tlogp + r * V, tau, scale, V);
}

void
cg_distill_xent_forward_backward(double *ce, double *kl, float *dlogits,
                                 const float *logits, const float *tlogp,
                                 const int *targets, const float *weight,
                                 float alpha, float tau, int B, int T, int V)
{
	size_t rows = (size_t)B * T;

	PAR_FOR(rows * V)
	for (size_t r = 0; r < rows; r++) {
		float *d = dlogits ? dlogits + r * V : NULL;
		/* (1 - 0) w is w: alpha 0 is plain training to the bit. */
		float wd = (1.0f - alpha) * weight[r];

		if (weight[r] == 0) {
			ce[r] = kl[r] = 0;
			continue;
		}
		ce[r] = xent_row(wd != 0 ? d : NULL, logits + r * V, targets[r],
		                 wd, V);
		kl[r] = kl_row(alpha != 0 ? d : NULL, logits + r * V,
		               tlogp + r * V, tau, alpha * tau * weight[r], V);
	}
}

/*
 * transformer.c - decoder kernels: embedding, layernorm, GELU, causal
 * attention, residual, masked softmax cross-entropy.
 *
 * The kernels of transformer.h, after llm.c's train_gpt2.c, with OpenMP on
 * the outer loops.  Each parallel loop writes disjoint outputs, so results
 * do not depend on the thread count: reductions across rows (layernorm's
 * dw and db, the embedding tables' gradients) are split by column, not by
 * row.  Attention works on one (sequence, head) at a time with contiguous
 * inner loops over the head's hs channels and touches only j <= t; its
 * cost is O(B NH T^2 hs), small beside the Linear layers' O(B T C^2) for
 * the sizes cgpt uses, so it is plain C rather than cg_sgemm calls (which
 * would also nest BLAS threads inside OpenMP's).  Inner loops carry
 * "omp simd" so that reductions vectorize too, and the exponentials of
 * GELU's tanh and of the softmaxes use cg_exp_approx (transformer.h, 2
 * ulp), which the compiler vectorizes where libm's expf and tanhf stay
 * scalar calls: they were a third of a training step.  Losses are summed
 * in double per row.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "transformer.h"

/* Element counts under which OpenMP costs more than it saves. */
#define PAR_MIN 32768

#ifdef _OPENMP
#define PRAGMA(x) _Pragma(#x)
#define PAR_FOR(n) PRAGMA(omp parallel for schedule(static) if ((n) >= PAR_MIN))
#define PAR_FOR_DYN(n)                                                         \
	PRAGMA(omp parallel for schedule(dynamic, 1) if ((n) >= PAR_MIN))
/* Threads over the loop and SIMD lanes within each thread's part. */
#define PAR_FOR_SIMD(n)                                                        \
	PRAGMA(omp parallel for simd schedule(static) if ((n) >= PAR_MIN))
#else
#define PAR_FOR(n)
#define PAR_FOR_DYN(n)
#define PAR_FOR_SIMD(n)
#endif

/* Columns per task where a reduction over rows is split by column. */
#define COLS 16

/* Vectorize the next loop; a reduction may then be summed in lanes. */
#if defined(_OPENMP) && _OPENMP >= 201307
#define SIMD() PRAGMA(omp simd)
#define SIMD_SUM(v) PRAGMA(omp simd reduction(+ : v))
#define SIMD_SUM2(v, w) PRAGMA(omp simd reduction(+ : v, w))
#define SIMD_MAX(v) PRAGMA(omp simd reduction(max : v))
#else
#define SIMD()
#define SIMD_SUM(v)
#define SIMD_SUM2(v, w)
#define SIMD_MAX(v)
#endif

static inline float
dotf(const float *a, const float *b, int n)
{
	float s = 0;

	SIMD_SUM(s)
	for (int i = 0; i < n; i++)
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
		float m = 0, v = 0;

		SIMD_SUM(m)
		for (int c = 0; c < C; c++)
			m += x[c];
		m /= C;
		SIMD_SUM(v)
		for (int c = 0; c < C; c++) {
			float d = x[c] - m;
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
		float dn = 0, dnn = 0; /* sums of dnorm and dnorm * norm */

		SIMD_SUM2(dn, dnn)
		for (int c = 0; c < C; c++) {
			float g = d[c] * w[c];
			dn += g;
			dnn += g * (x[c] - m) * s;
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

void
cg_gelu_forward(float *out, const float *inp, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++) {
		float x = inp[i];
		float th = tanh_approx(GELU_K * (x + GELU_A * x * x * x));
		out[i] = 0.5f * x * (1.0f + th);
	}
}

void
cg_gelu_backward(float *dinp, const float *dout, const float *inp, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++) {
		float x = inp[i];
		float th = tanh_approx(GELU_K * (x + GELU_A * x * x * x));
		float sech2 = 1.0f - th * th;
		float g =
		    0.5f * (1.0f + th) +
		    0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
		dinp[i] += g * dout[i];
	}
}

/* ----------------------------------------------------- causal attention */

/*
 * One row of attention (see transformer.h): keys and values ld floats
 * apart.  Inline here so that the training kernel's loop keeps it in
 * place; cg_attention_row is the same code for other callers.
 */
static inline void
attention_row(float *o, float *a, const float *q, const float *k,
              const float *v, size_t ld, int t, int hs)
{
	const float scale = 1.0f / sqrtf((float)hs);
	float mx = -INFINITY, sum = 0;

	for (int j = 0; j <= t; j++) {
		a[j] = scale * dotf(q, k + j * ld, hs);
		mx = a[j] > mx ? a[j] : mx;
	}
	SIMD_SUM(sum)
	for (int j = 0; j <= t; j++) {
		a[j] = cg_exp_approx(a[j] - mx);
		sum += a[j];
	}
	float inv = 1.0f / sum;
	SIMD()
	for (int j = 0; j <= t; j++)
		a[j] *= inv;
	memset(o, 0, (size_t)hs * sizeof(float));
	for (int j = 0; j <= t; j++)
		axpy(o, a[j], v + j * ld, hs);
}

void
cg_attention_row(float *o, float *a, const float *q, const float *k,
                 const float *v, size_t ld, int t, int hs)
{
	attention_row(o, a, q, k, v, ld, t, hs);
}

void
cg_attention_forward(float *out, float *att, const float *qkv, int B, int T,
                     int C, int NH)
{
	const int hs = C / NH;
	const size_t C3 = 3 * (size_t)C;
	/* Row t costs t + 1 dot products: hand out rows dynamically. */
	const size_t work = (size_t)B * NH * T * T / 2 * hs;

#ifdef _OPENMP
#pragma omp parallel for collapse(3) schedule(dynamic, 8) if (work >= PAR_MIN)
#endif
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int h = 0; h < NH; h++) {
				/* The sequence's qkv [T, 3C] at head h. */
				const float *seq =
				    qkv + (size_t)b * T * C3 + h * hs;
				float *a =
				    att + (((size_t)b * NH + h) * T + t) * T;
				attention_row(out + ((size_t)b * T + t) * C +
				                  h * hs,
				              a, seq + t * C3, seq + C,
				              seq + 2 * C, C3, t, hs);
				for (int j = t + 1; j < T; j++)
					a[j] = 0;
			}
	(void)work;
}

void
cg_attention_backward(float *dqkv, float *scratch, const float *dout,
                      const float *qkv, const float *att, int B, int T, int C,
                      int NH)
{
	const int hs = C / NH;
	const size_t C3 = 3 * (size_t)C;
	const float scale = 1.0f / sqrtf((float)hs);
	const int BH = B * NH;

	/*
	 * Every position's dk and dv collect from all later rows, so one task
	 * is a whole (sequence, head): tasks write disjoint channels.
	 */
	PAR_FOR_DYN((size_t)BH * T * T / 2 * hs)
	for (int bh = 0; bh < BH; bh++) {
		const int b = bh / NH, h = bh % NH;
		const float *seq = qkv + (size_t)b * T * C3;
		float *dseq = dqkv + (size_t)b * T * C3;
		float *d = scratch + (size_t)bh * T; /* d(loss)/d(att row) */

		for (int t = 0; t < T; t++) {
			const float *a = att + ((size_t)bh * T + t) * T;
			const float *go =
			    dout + ((size_t)b * T + t) * C + h * hs;
			const float *q = seq + t * C3 + h * hs;
			float *dq = dseq + t * C3 + h * hs;
			float s = 0;

			/* Through out = att @ v. */
			for (int j = 0; j <= t; j++) {
				size_t vo = j * C3 + 2 * C + h * hs;
				d[j] = dotf(go, seq + vo, hs);
				axpy(dseq + vo, a[j], go, hs);
				s += a[j] * d[j];
			}
			/* Through the softmax and the scaled q . k. */
			for (int j = 0; j <= t; j++) {
				size_t ko = j * C3 + C + h * hs;
				float g = a[j] * (d[j] - s) * scale;
				axpy(dq, g, seq + ko, hs);
				axpy(dseq + ko, g, q, hs);
			}
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
	double sum = 0;

	SIMD_MAX(mx)
	for (int v = 1; v < V; v++)
		mx = l[v] > mx ? l[v] : mx;
	SIMD_SUM(sum)
	for (int v = 0; v < V; v++)
		sum += cg_exp_approx(l[v] - mx);
	if (d != NULL) {
		float scale = (float)(wt / sum);
		SIMD()
		for (int v = 0; v < V; v++)
			d[v] += scale * cg_exp_approx(l[v] - mx);
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

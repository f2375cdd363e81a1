/*
 * nn.c - neural-network kernels: linear, relu, sigmoid, BCE, KL, reparam.
 *
 * The kernels the MLP models are built from.  Matrix products go through
 * cg_sgemm (BLAS or the built-in kernel); element-wise loops are plain C
 * that the compiler vectorizes, with OpenMP over large sizes.  Exponentials
 * and logarithms are vmath.h's, so the sigmoid and cross-entropy loops
 * vectorize too.  Losses are summed in double per example (in SIMD lanes,
 * then across them) so that finite-difference checks and long evaluations
 * keep their precision; everything else is float.
 */
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "nn.h"
#include "vmath.h"

/* Element counts under which OpenMP costs more than it saves. */
#define PAR_MIN 32768

/* Split the next for loop over threads when n is large enough. */
#ifdef _OPENMP
#define PRAGMA(x) _Pragma(#x)
#define PAR_FOR(n) PRAGMA(omp parallel for schedule(static) if ((n) >= PAR_MIN))
/* Threads over the loop and SIMD lanes within each thread's part. */
#define PAR_FOR_SIMD(n)                                                        \
	PRAGMA(omp parallel for simd schedule(static) if (parallel : (n) >= PAR_MIN))
#else
#define PAR_FOR(n)
#define PAR_FOR_SIMD(n)
#endif

/* Vectorize the next loop, its sum in lanes. */
#if defined(_OPENMP) && _OPENMP >= 201307
#define SIMD_SUM(v) PRAGMA(omp simd reduction(+ : v))
#else
#define SIMD_SUM(v)
#endif

/* ---------------------------------------------------------------- linear */

void
cg_linear_forward(float *out, const float *inp, const float *w, const float *b,
                  int B, int C, int OC)
{
	if (b != NULL) {
		for (int i = 0; i < B; i++)
			memcpy(out + (size_t)i * OC, b,
			       (size_t)OC * sizeof(float));
	}
	/* out[B, OC] (+)= inp[B, C] @ w[OC, C]^T */
	cg_sgemm(0, 1, B, OC, C, 1.0f, inp, C, w, C, b != NULL ? 1.0f : 0.0f,
	         out, OC);
}

void
cg_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                   const float *inp, const float *w, int B, int C, int OC)
{
	/* dinp[B, C] += dout[B, OC] @ w[OC, C] */
	if (dinp != NULL)
		cg_sgemm(0, 0, B, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
	/* dw[OC, C] += dout[B, OC]^T @ inp[B, C] */
	cg_sgemm(1, 0, OC, C, B, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
	if (db == NULL)
		return;
	/* Column sums in blocks of 64 outputs: rows stream, sums stay hot. */
	PAR_FOR((size_t)B * OC)
	for (int o0 = 0; o0 < OC; o0 += 64) {
		int n = OC - o0 < 64 ? OC - o0 : 64;
		float s[64] = {0};

		for (int i = 0; i < B; i++) {
			const float *d = dout + (size_t)i * OC + o0;
			for (int o = 0; o < n; o++)
				s[o] += d[o];
		}
		for (int o = 0; o < n; o++)
			db[o0 + o] += s[o];
	}
}

/* ------------------------------------------------------------------ relu */

void
cg_relu_forward(float *out, const float *inp, size_t N)
{
	PAR_FOR(N)
	for (size_t i = 0; i < N; i++)
		out[i] = inp[i] > 0 ? inp[i] : 0;
}

void
cg_relu_backward(float *dinp, const float *dout, const float *out, size_t N)
{
	PAR_FOR(N)
	for (size_t i = 0; i < N; i++)
		dinp[i] += out[i] > 0 ? dout[i] : 0;
}

/* --------------------------------------------------------------- sigmoid */

void
cg_sigmoid_forward(float *out, const float *inp, size_t N)
{
	PAR_FOR_SIMD(N)
	for (size_t i = 0; i < N; i++) {
		/* exp of a non-positive number: no overflow either side. */
		float e = cg_exp_approx(-fabsf(inp[i]));
		out[i] = inp[i] >= 0 ? 1 / (1 + e) : e / (1 + e);
	}
}

/* ----------------------------------------------- binary cross-entropy */

void
cg_bce_logits_forward(double *loss, const float *logits, const float *targets,
                      int B, int N)
{
	PAR_FOR((size_t)B * N)
	for (int b = 0; b < B; b++) {
		const float *l = logits + (size_t)b * N;
		const float *t = targets + (size_t)b * N;
		double s = 0;

		SIMD_SUM(s)
		for (int i = 0; i < N; i++) {
			float m = l[i] > 0 ? l[i] : 0;
			float e = cg_exp_approx(-fabsf(l[i]));
			s += m - l[i] * t[i] + cg_log1p_approx(e);
		}
		loss[b] = s;
	}
}

void
cg_bce_logits_backward(float *dlogits, const float *logits,
                       const float *targets, float scale, int B, int N)
{
	size_t n = (size_t)B * N;

	PAR_FOR_SIMD(n)
	for (size_t i = 0; i < n; i++) {
		float e = cg_exp_approx(-fabsf(logits[i]));
		float p = logits[i] >= 0 ? 1 / (1 + e) : e / (1 + e);
		dlogits[i] += scale * (p - targets[i]);
	}
}

void
cg_bce_logits_forward_backward(double *loss, float *dlogits,
                               const float *logits, const float *targets,
                               float scale, int B, int N)
{
	PAR_FOR((size_t)B * N)
	for (int b = 0; b < B; b++) {
		const float *l = logits + (size_t)b * N;
		const float *t = targets + (size_t)b * N;
		float *d = dlogits + (size_t)b * N;
		double s = 0;

		SIMD_SUM(s)
		for (int i = 0; i < N; i++) {
			float e = cg_exp_approx(-fabsf(l[i]));
			float m = l[i] > 0 ? l[i] : 0;
			float p = l[i] >= 0 ? 1 / (1 + e) : e / (1 + e);

			s += m - l[i] * t[i] + cg_log1p_approx(e);
			d[i] += scale * (p - t[i]);
		}
		loss[b] = s;
	}
}

/* --------------------------------------------------- Gaussian KL to N(0,I) */

void
cg_gauss_kl_forward(double *kl, const float *mu, const float *logvar, int B,
                    int L)
{
	for (int b = 0; b < B; b++) {
		const float *m = mu + (size_t)b * L;
		const float *lv = logvar + (size_t)b * L;
		double s = 0;

		for (int i = 0; i < L; i++)
			s += 1.0 + lv[i] - (double)m[i] * m[i] - exp(lv[i]);
		kl[b] = -0.5 * s;
	}
}

void
cg_gauss_kl_backward(float *dmu, float *dlogvar, const float *mu,
                     const float *logvar, float scale, int B, int L)
{
	size_t n = (size_t)B * L;

	for (size_t i = 0; i < n; i++) {
		dmu[i] += scale * mu[i];
		dlogvar[i] += scale * 0.5f * (expf(logvar[i]) - 1);
	}
}

/* -------------------------------------------------- reparameterisation */

void
cg_reparam_forward(float *z, const float *mu, const float *logvar,
                   const float *eps, size_t N)
{
	for (size_t i = 0; i < N; i++)
		z[i] = mu[i] + expf(0.5f * logvar[i]) * eps[i];
}

void
cg_reparam_backward(float *dmu, float *dlogvar, const float *dz,
                    const float *logvar, const float *eps, size_t N)
{
	for (size_t i = 0; i < N; i++) {
		dmu[i] += dz[i];
		dlogvar[i] += dz[i] * eps[i] * 0.5f * expf(0.5f * logvar[i]);
	}
}

/* ------------------------------------------------ concat with one-hot */

void
cg_concat_onehot_forward(float *out, const float *inp, const int *cond, int B,
                         int D, int K)
{
	for (int b = 0; b < B; b++) {
		float *o = out + (size_t)b * (D + K);

		memcpy(o, inp + (size_t)b * D, (size_t)D * sizeof(float));
		memset(o + D, 0, (size_t)K * sizeof(float));
		if (cond[b] >= 0 && cond[b] < K)
			o[D + cond[b]] = 1;
	}
}

void
cg_concat_onehot_backward(float *dinp, const float *dout, int B, int D, int K)
{
	for (int b = 0; b < B; b++) {
		float *di = dinp + (size_t)b * D;
		const float *d = dout + (size_t)b * (D + K);

		for (int i = 0; i < D; i++)
			di[i] += d[i];
	}
}

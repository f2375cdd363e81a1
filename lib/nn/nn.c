/*
 * nn/nn.c - neural-network kernels: linear, relu, sigmoid, BCE, KL, reparam.
 *
 * The kernels the MLP models are built from.  Matrix products go through
 * cg_sgemm (BLAS or the built-in kernel); element-wise loops are plain C
 * that the compiler vectorizes, with OpenMP over large sizes.  Exponentials
 * and logarithms are vmath.h's, so the sigmoid and cross-entropy loops
 * vectorize too.  Losses are summed in double per example (in par.h's
 * LANES lanes, then across them in a fixed order) so that finite-difference
 * checks and long evaluations keep their precision; everything else is
 * float.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cg.h"
#include "core/par.h"
#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/vmath.h"


void
cg_view_set(struct cg_view *v, const char *name, size_t off, size_t rows,
            size_t cols, int decay)
{
	memset(v, 0, sizeof(*v));
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->off = off;
	v->n = cols ? rows * cols : rows;
	v->ndim = cols ? 2 : 1;
	v->shape[0] = (uint64_t)rows;
	v->shape[1] = (uint64_t)cols;
	v->decay = decay;
}

void
cg_view_linear(struct cg_view v[2], const char *layer, size_t w_off,
               size_t b_off, int out, int in)
{
	char name[sizeof(v->name)];

	snprintf(name, sizeof(name), "%s.w", layer);
	cg_view_set(&v[0], name, w_off, (size_t)out, (size_t)in, 1);
	snprintf(name, sizeof(name), "%s.b", layer);
	cg_view_set(&v[1], name, b_off, (size_t)out, 0, 0);
}

void
cg_init_uniform(float *p, size_t n, size_t fan_in, struct cg_rng *r)
{
	const float bound = 1.0f / sqrtf((float)fan_in);

	for (size_t j = 0; j < n; j++)
		p[j] = (2.0f * cg_rng_uniform(r) - 1.0f) * bound;
}

/* ---------------------------------------------------------------- linear */

/*
 * The Linear kernels run as one parallel region each: every thread takes
 * its block of the product as cg_sgemm would share it (cg_sgemm_block)
 * and does the element-wise work of that block (the bias before, the
 * ReLU after) while it is in cache, so a layer costs one fork and join
 * instead of one per pass.  Below cg_sgemm's threshold, or inside a
 * parallel region, the same code runs on one thread.
 */
#ifdef _OPENMP
#include <omp.h>
#define PART_ID() omp_get_thread_num()
#define PART_COUNT() omp_get_num_threads()
#else
#define PART_ID() 0
#define PART_COUNT() 1
#endif

static void
linear_forward(float *out, const float *inp, const void *rinp, int res,
               const float *w, const float *b, const float *add, int B,
               int C, int OC, int relu)
{
	int nt = cg_sgemm_threads(B, OC, C);
	int es = cg_rounded_size(B, OC, C);
	char *ri = NULL, *rw = NULL;
	const int given = es && rinp != NULL && res == es;

	(void)nt;
	/* bf16 (or f16): both operands rounded once, each thread a share of
	 * their rows, instead of every thread rounding the whole weight;
	 * the input not at all where its producer rounded it (given) */
	if (es && ((ri = given ? (char *)rinp
	                       : cg_round_buffer(0, (size_t)B * C * es)) ==
	               NULL ||
	           (rw = cg_round_buffer(1, (size_t)OC * C * es)) == NULL))
		es = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
	{
		struct cg_block k =
		    cg_sgemm_block(PART_ID(), PART_COUNT(), B, OC);

		if (b != NULL && k.m > 0 && k.n > 0)
			for (int i = k.i0; i < k.i0 + k.m; i++)
				memcpy(out + (size_t)i * OC + k.j0, b + k.j0,
				       (size_t)k.n * sizeof(float));
		/* out[B, OC] (+)= inp[B, C] @ w[OC, C]^T */
		if (es) {
			int o, cnt;

			cg_split(B, PART_ID(), PART_COUNT(), &o, &cnt);
			if (!given)
				cg_round_rows(ri + (size_t)o * C * es, es,
				              inp + (size_t)o * C, cnt, C, C);
			cg_split(OC, PART_ID(), PART_COUNT(), &o, &cnt);
			cg_round_rows(rw + (size_t)o * C * es, es,
			              w + (size_t)o * C, cnt, C, C);
#ifdef _OPENMP
#pragma omp barrier
#endif
			cg_sgemm_rounded_part(&k, es, 0, 1, C, 1.0f, ri, C, rw,
			                      C, b != NULL ? 1.0f : 0.0f, out,
			                      OC);
		} else
			cg_sgemm_part(&k, 0, 1, C, 1.0f, inp, C, w, C,
			              b != NULL ? 1.0f : 0.0f, out, OC);
		if (add != NULL && k.n > 0)
			for (int i = k.i0; i < k.i0 + k.m; i++) {
				float *o = out + (size_t)i * OC + k.j0;
				const float *a = add + (size_t)i * OC + k.j0;
				for (int j = 0; j < k.n; j++)
					o[j] += a[j];
			}
		if (relu && k.n > 0)
			for (int i = k.i0; i < k.i0 + k.m; i++) {
				float *o = out + (size_t)i * OC + k.j0;
				for (int j = 0; j < k.n; j++)
					o[j] = o[j] > 0 ? o[j] : 0;
			}
	}
}

void
cg_linear_forward(float *out, const float *inp, const float *w, const float *b,
                  int B, int C, int OC)
{
	linear_forward(out, inp, NULL, 0, w, b, NULL, B, C, OC, 0);
}

void
cg_linear_forward_r(float *out, const float *inp, const void *rinp, int es,
                    const float *w, const float *b, int B, int C, int OC)
{
	linear_forward(out, inp, rinp, es, w, b, NULL, B, C, OC, 0);
}

void
cg_linear_relu_forward(float *out, const float *inp, const float *w,
                       const float *b, int B, int C, int OC)
{
	linear_forward(out, inp, NULL, 0, w, b, NULL, B, C, OC, 1);
}

void
cg_linear_add_relu_forward(float *out, const float *inp, const float *w,
                           const float *b, const float *add, int B, int C,
                           int OC)
{
	linear_forward(out, inp, NULL, 0, w, b, add, B, C, OC, 1);
}

/*
 * Backward of out = act(inp @ w^T + b) given dout = d(loss)/d(out): with
 * relu, dpre [B, OC] first gets d(loss)/d(pre-activation) (each thread a
 * share of rows; then a barrier); without, dout is used as it is.  Then,
 * with no barrier (they only read dpre): dinp's blocks, dw's and db's
 * rows, shared among the threads.  With set, dinp is written, not added
 * to; with relu too, it may be dout: dout is not read after the barrier.
 */
static void
linear_backward(float *dinp, float *dw, float *db, float *dpre,
                const float *dout, const void *rdout, const float *out,
                const float *inp, const void *rinp, int res, const float *w,
                int B, int C, int OC, int relu, int set)
{
	/* Both products are B x C x OC multiply-adds. */
	int nt = cg_sgemm_threads(B, C, OC);
	const float *d = relu ? dpre : dout;
	int es = cg_rounded_size(B, C, OC);
	char *rd = NULL, *rw = NULL, *ri = NULL;
	/* rounded by their producers: d (not with relu) and inp */
	const int gd = es && res == es && rdout != NULL && !relu;
	const int gi = es && res == es && rinp != NULL;

	/* bf16 (or f16): d, w and inp rounded once, each by a share of the
	 * threads, instead of d once for each product */
	if (es && ((rd = gd ? (char *)rdout
	                    : cg_round_buffer(0, (size_t)B * OC * es)) ==
	               NULL ||
	           (dinp != NULL &&
	            (rw = cg_round_buffer(1, (size_t)OC * C * es)) == NULL) ||
	           (dw != NULL &&
	            (ri = gi ? (char *)rinp
	                     : cg_round_buffer(2, (size_t)B * C * es)) ==
	                NULL)))
		es = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
	{
		const int id = PART_ID(), n = PART_COUNT();
		int o, cnt;

		if (relu) {
			cg_split(B, id, n, &o, &cnt);
			const size_t a = (size_t)o * OC;
			const size_t e = a + (size_t)cnt * OC;
			/* + 0.0f: a -0 gradient enters as +0, as it would
			 * added to a cleared buffer. */
			for (size_t i = a; i < e; i++)
				dpre[i] = out[i] > 0 ? dout[i] + 0.0f : 0.0f;
		}
		if (es) {
			cg_split(B, id, n, &o, &cnt);
			if (!gd)
				cg_round_rows(rd + (size_t)o * OC * es, es,
				              d + (size_t)o * OC, cnt, OC, OC);
			if (rw != NULL) {
				cg_split(OC, id, n, &o, &cnt);
				cg_round_rows(rw + (size_t)o * C * es, es,
				              w + (size_t)o * C, cnt, C, C);
			}
			if (ri != NULL && !gi) {
				cg_split(B, id, n, &o, &cnt);
				cg_round_rows(ri + (size_t)o * C * es, es,
				              inp + (size_t)o * C, cnt, C, C);
			}
		}
#ifdef _OPENMP
		if (relu || es) {
#pragma omp barrier
		}
#endif
		/*
		 * The two products are independent and of the same size:
		 * with two threads or more, half of them (the first) make
		 * dinp and the others dw and db, each product shared among
		 * fewer threads in bigger blocks (a whole product a thread,
		 * with two), which the BLAS runs faster than two halves.
		 */
		int split = dinp != NULL && dw != NULL && n >= 2, half = n / 2;
		int wid = split ? id - half : id, wn = split ? n - half : n;
		/* dinp[B, C] += d[B, OC] @ w[OC, C]; with set, = */
		if (dinp != NULL && (!split || id < half)) {
			struct cg_block k =
			    cg_sgemm_block(id, split ? half : n, B, C);
			if (es)
				cg_sgemm_rounded_part(&k, es, 0, 0, OC, 1.0f,
				                      rd, OC, rw, C,
				                      set ? 0.0f : 1.0f, dinp,
				                      C);
			else
				cg_sgemm_part(&k, 0, 0, OC, 1.0f, d, OC, w, C,
				              set ? 0.0f : 1.0f, dinp, C);
		}
		if (dw != NULL && (!split || id >= half)) {
			/* dw[OC, C] += d[B, OC]^T @ inp[B, C] */
			struct cg_block k = cg_sgemm_block(wid, wn, OC, C);
			if (es)
				cg_sgemm_rounded_part(&k, es, 1, 0, B, 1.0f,
				                      rd, OC, ri, C, 1.0f, dw,
				                      C);
			else
				cg_sgemm_part(&k, 1, 0, B, 1.0f, d, OC, inp, C,
				              1.0f, dw, C);
			/* db: column sums of d, by blocks of 64 of this part's
			 * columns: rows stream, sums stay hot. */
			if (db != NULL) {
				cg_split(OC, wid, wn, &o, &cnt);
				for (int o0 = o; o0 < o + cnt; o0 += 64) {
					int e = o + cnt;
					int m = e - o0 < 64 ? e - o0 : 64;
					float s[64] = {0};

					for (int i = 0; i < B; i++) {
						const float *r =
						    d + (size_t)i * OC + o0;
						for (int j = 0; j < m; j++)
							s[j] += r[j];
					}
					for (int j = 0; j < m; j++)
						db[o0 + j] += s[j];
				}
			}
		}
	}
}

void
cg_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                   const float *inp, const float *w, int B, int C, int OC)
{
	linear_backward(dinp, dw, db, NULL, dout, NULL, NULL, inp, NULL, 0, w, B,
	                C, OC, 0, 0);
}

void
cg_linear_backward_set(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, int B, int C, int OC)
{
	linear_backward(dinp, dw, db, NULL, dout, NULL, NULL, inp, NULL, 0, w, B,
	                C, OC, 0, 1);
}

void
cg_linear_backward_set_r(float *dinp, float *dw, float *db, const float *dout,
                         const void *rdout, const float *inp,
                         const void *rinp, int es, const float *w, int B,
                         int C, int OC)
{
	linear_backward(dinp, dw, db, NULL, dout, rdout, NULL, inp, rinp, es, w,
	                B, C, OC, 0, 1);
}

void
cg_linear_relu_backward(float *dinp, float *dw, float *db, float *dpre,
                        const float *dout, const float *out, const float *inp,
                        const float *w, int B, int C, int OC)
{
	linear_backward(dinp, dw, db, dpre, dout, NULL, out, inp, NULL, 0, w, B,
	                C, OC, 1, 1);
}

void
cg_linear_ghost_sq(double *sq, const float *dout, const float *inp, int B,
                   int C, int OC, int bias)
{
	PAR_FOR(B)
	for (int b = 0; b < B; b++) {
		const float *g = dout + (size_t)b * OC;
		double gg = 0, aa = bias ? 1 : 0;

		for (int o = 0; o < OC; o++)
			gg += (double)g[o] * g[o];
		for (int i = 0; inp && i < C; i++)
			aa += (double)inp[(size_t)b * C + i] *
			      inp[(size_t)b * C + i];
		sq[b] += gg * aa;
	}
}

void
cg_scale_rows(float *x, const float *s, int B, size_t N)
{
	PAR_FOR((size_t)B * N)
	for (int b = 0; b < B; b++)
		for (size_t i = 0; i < N; i++)
			x[(size_t)b * N + i] *= s[b];
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
		double acc[LANES] = {0}, s;
		int i;

		for (i = 0; i + LANES <= N; i += LANES)
			for (int k = 0; k < LANES; k++) {
				float x = l[i + k];
				float m = x > 0 ? x : 0;
				float e = cg_exp_approx(-fabsf(x));
				acc[k] += m - x * t[i + k] + cg_log1p_approx(e);
			}
		for (s = cg_fold_d(acc); i < N; i++) {
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
		double acc[LANES] = {0}, s;
		int i;

		for (i = 0; i + LANES <= N; i += LANES)
			for (int k = 0; k < LANES; k++) {
				float x = l[i + k];
				float e = cg_exp_approx(-fabsf(x));
				float m = x > 0 ? x : 0;
				float p = x >= 0 ? 1 / (1 + e) : e / (1 + e);

				acc[k] += m - x * t[i + k] + cg_log1p_approx(e);
				d[i + k] += scale * (p - t[i + k]);
			}
		for (s = cg_fold_d(acc); i < N; i++) {
			float e = cg_exp_approx(-fabsf(l[i]));
			float m = l[i] > 0 ? l[i] : 0;
			float p = l[i] >= 0 ? 1 / (1 + e) : e / (1 + e);

			s += m - l[i] * t[i] + cg_log1p_approx(e);
			d[i] += scale * (p - t[i]);
		}
		loss[b] = s;
	}
}

/* ------------------------------------- Bernoulli KL for distillation */

/* log(1 + e^x) in double, without overflow. */
static double
softplus(double x)
{
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

void
cg_bern_kl_forward_backward(double *kl, float *dlogits, const float *logits,
                            const float *tlogits, float tau, float scale, int B,
                            int N)
{
	const double inv = 1.0 / tau;

	PAR_FOR((size_t)B * N)
	for (int b = 0; b < B; b++) {
		const float *l = logits + (size_t)b * N;
		const float *t = tlogits + (size_t)b * N;
		float *d = dlogits ? dlogits + (size_t)b * N : NULL;
		double sum = 0;

		for (int i = 0; i < N; i++) {
			double sv = l[i] * inv, tv = t[i];
			double pt = 1 / (1 + exp(-tv));
			sum += softplus(sv) - softplus(tv) - pt * (sv - tv);
			if (d != NULL)
				d[i] += scale * tau *
				        (float)(1 / (1 + exp(-sv)) - pt);
		}
		kl[b] = sum;
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

/* ----------------------------------------------------------- leaky relu */

void
cg_lrelu_forward(float *out, const float *inp, float slope, size_t N)
{
	PAR_FOR(N)
	for (size_t i = 0; i < N; i++)
		out[i] = inp[i] > 0 ? inp[i] : slope * inp[i];
}

void
cg_lrelu_backward(float *dinp, const float *dout, const float *out, float slope,
                  size_t N)
{
	PAR_FOR(N)
	for (size_t i = 0; i < N; i++)
		dinp[i] += out[i] > 0 ? dout[i] : slope * dout[i];
}

/* -------------------------------------------------- spectral norm */

/*
 * Serial loops in double: the cost is two matrix-vector products per
 * iteration, small beside a batch's products, and the result must not
 * depend on how many threads summed it (a deterministic run audits it).
 */

/* Seed of the fixed start vector: "SPECTRAL". */
#define SPECTRAL_SEED 0x5350454354524c41ULL

double
cg_spectral_power(float *u, float *v, const float *w, int OC, int C, int iters)
{
	struct cg_rng r;
	double nv = 0, nu = 0, sigma = 0;

	cg_rng_seed(&r, SPECTRAL_SEED);
	for (int j = 0; j < C; j++) {
		v[j] = cg_rng_normal(&r);
		nv += (double)v[j] * v[j];
	}
	nv = sqrt(nv);
	for (int j = 0; j < C; j++)
		v[j] = (float)(v[j] / nv);
	for (int it = 0; it < iters; it++) {
		nu = 0;
		for (int i = 0; i < OC; i++) {
			const float *row = w + (size_t)i * C;
			double s = 0;

			for (int j = 0; j < C; j++)
				s += (double)row[j] * v[j];
			u[i] = (float)s;
			nu += s * s;
		}
		nu = sqrt(nu);
		if (!(nu > 0))
			goto zero;
		for (int i = 0; i < OC; i++)
			u[i] = (float)(u[i] / nu);
		/* v = w^T u, row by row so that w is read in order (the
		 * sums in float: v is normalised next, and only its
		 * direction matters). */
		for (int j = 0; j < C; j++)
			v[j] = 0;
		for (int i = 0; i < OC; i++) {
			const float *row = w + (size_t)i * C;
			const float ui = u[i];

			for (int j = 0; j < C; j++)
				v[j] += ui * row[j];
		}
		nv = 0;
		for (int j = 0; j < C; j++)
			nv += (double)v[j] * v[j];
		nv = sqrt(nv);
		if (!(nv > 0))
			goto zero;
		for (int j = 0; j < C; j++)
			v[j] = (float)(v[j] / nv);
	}
	for (int i = 0; i < OC; i++) {
		const float *row = w + (size_t)i * C;
		double s = 0;

		for (int j = 0; j < C; j++)
			s += (double)row[j] * v[j];
		sigma += (double)u[i] * s;
	}
	return sigma;
zero:
	memset(u, 0, (size_t)OC * sizeof(float));
	memset(v, 0, (size_t)C * sizeof(float));
	return 0;
}

double
cg_spectral_norm_forward(float *wsn, const float *w, const float *u,
                         const float *v, int OC, int C)
{
	double sigma = 0;

	for (int i = 0; i < OC; i++) {
		const float *row = w + (size_t)i * C;
		double s = 0;

		for (int j = 0; j < C; j++)
			s += (double)row[j] * v[j];
		sigma += (double)u[i] * s;
	}
	if (!(sigma > 0)) {
		memcpy(wsn, w, (size_t)OC * C * sizeof(float));
		return 1;
	}
	const float inv = (float)(1 / sigma);
	PAR_FOR((size_t)OC * C)
	for (size_t i = 0; i < (size_t)OC * C; i++)
		wsn[i] = w[i] * inv;
	return sigma;
}

void
cg_spectral_norm_backward(float *dw, const float *dwsn, const float *wsn,
                          const float *u, const float *v, double sigma, int OC,
                          int C)
{
	double dot = 0;

	for (size_t i = 0; i < (size_t)OC * C; i++)
		dot += (double)dwsn[i] * wsn[i];
	const float inv = (float)(1 / sigma), c = (float)(dot / sigma);
	for (int i = 0; i < OC; i++) {
		float *d = dw + (size_t)i * C;
		const float *g = dwsn + (size_t)i * C;
		const float cu = c * u[i];

		for (int j = 0; j < C; j++)
			d[j] += g[j] * inv - cu * v[j];
	}
}

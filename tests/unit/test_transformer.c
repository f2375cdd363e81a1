/*
 * test_transformer.c - the decoder kernels against naive double formulas
 * and finite differences.
 *
 * Every backward kernel (embedding, layernorm, GELU, attention, residual,
 * masked softmax cross-entropy) is checked on a scalar loss, a random
 * weighting of its outputs summed in double, by central differences with
 * respect to every input; the gradient buffers start non-zero, so that
 * accumulation (+=) is checked too.  Forward kernels are compared with
 * naive double implementations (attention as the full masked T x T
 * matrix), the fused cross-entropy with the separate passes, and every
 * kernel run on one thread with the same kernel on several: the results
 * must agree bit for bit, whatever the matrix kernel, because each output
 * is made by one task whose work does not depend on the thread count
 * (attention's products are one matrix call per block of one (sequence,
 * head) on the calling thread, below the size at which cg_sgemm would
 * share a product out).  A deliberately wrong gradient must be caught.
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
#include "nn/gemm.h"
#include "nn/transformer.h"

#define TEST_NAME "test_transformer"
#include "check.h"

#include "fd.h"
/* Forward kernels against double: |got - ref| <= FWD_ATOL + FWD_RTOL |ref|. */
#define FWD_ATOL 1e-6
#define FWD_RTOL 1e-5
#include "kernel.h"
#include "lowp.h"

/* ------------------------------------------------------------ embedding */

enum { EB = 2, ET = 5, EC = 7, EV = 4 };

struct emb {
	float wte[EV * EC], wpe[ET * EC], out[EB * ET * EC], r[EB * ET * EC];
	int tok[EB * ET];
};

static double
emb_loss(void *ctx)
{
	struct emb *e = ctx;

	cg_embed_forward(e->out, e->tok, e->wte, e->wpe, EB, ET, EC);
	return dot(e->out, e->r, EB * ET * EC);
}

static void
test_embedding(void)
{
	struct emb e;
	float *g0w, *g0p;
	float *dwte = gstart(EV * EC, &g0w), *dwpe = gstart(ET * EC, &g0p);
	double ref[EB * ET * EC];

	fill(e.wte, EV * EC, -1, 1);
	fill(e.wpe, ET * EC, -1, 1);
	fill(e.r, EB * ET * EC, -1, 1);
	/* Fewer tokens than positions: rows repeat, gradients add up. */
	for (int i = 0; i < EB * ET; i++)
		e.tok[i] = (int)cg_rng_below(&rng, EV);
	emb_loss(&e);
	for (int i = 0; i < EB * ET; i++)
		for (int c = 0; c < EC; c++)
			ref[i * EC + c] = (double)e.wte[e.tok[i] * EC + c] +
			                  e.wpe[(i % ET) * EC + c];
	expect(fwdcheck(e.out, ref, EB * ET * EC) <= 1,
	       "embed_forward matches wte[token] + wpe[t]");
	cg_embed_backward(dwte, dwpe, e.r, e.tok, EB, ET, EC);
	gdelta(dwte, g0w, EV * EC);
	gdelta(dwpe, g0p, ET * EC);
	fdcheck(&FD_TRANSFORMER, "embed_backward dwte", e.wte, dwte, EV * EC,
	        emb_loss, &e, 0);
	fdcheck(&FD_TRANSFORMER, "embed_backward dwpe", e.wpe, dwpe, ET * EC,
	        emb_loss, &e, 0);
	free(dwte);
	free(dwpe);
	free(g0w);
	free(g0p);
}

/* ------------------------------------------------------------ layernorm */

enum { LB = 2, LT = 3, LC = 9 };

struct ln {
	float inp[LB * LT * LC], w[LC], b[LC], out[LB * LT * LC];
	float mean[LB * LT], rstd[LB * LT], r[LB * LT * LC];
};

static double
ln_loss(void *ctx)
{
	struct ln *l = ctx;

	cg_layernorm_forward(l->out, l->mean, l->rstd, l->inp, l->w, l->b, LB,
	                     LT, LC);
	return dot(l->out, l->r, LB * LT * LC);
}

static void
test_layernorm(void)
{
	struct ln l;
	float *g0i, *g0w, *g0b;
	float *dinp = gstart(LB * LT * LC, &g0i), *dw = gstart(LC, &g0w);
	float *db = gstart(LC, &g0b);
	double ref[LB * LT * LC];

	fill(l.inp, LB * LT * LC, -2, 3);
	fill(l.w, LC, 0.5f, 1.5f);
	fill(l.b, LC, -0.5f, 0.5f);
	fill(l.r, LB * LT * LC, -1, 1);
	ln_loss(&l);
	for (int i = 0; i < LB * LT; i++) {
		const float *x = l.inp + i * LC;
		double m = 0, v = 0;
		for (int c = 0; c < LC; c++)
			m += x[c];
		m /= LC;
		for (int c = 0; c < LC; c++)
			v += (x[c] - m) * (x[c] - m);
		v /= LC;
		for (int c = 0; c < LC; c++)
			ref[i * LC + c] =
			    (x[c] - m) / sqrt(v + CG_LN_EPS) * l.w[c] + l.b[c];
	}
	expect(fwdcheck(l.out, ref, LB * LT * LC) <= 1,
	       "layernorm_forward matches the double formula");
	cg_layernorm_backward(dinp, dw, db, l.r, l.inp, l.w, l.mean, l.rstd, LB,
	                      LT, LC);
	gdelta(dinp, g0i, LB * LT * LC);
	gdelta(dw, g0w, LC);
	gdelta(db, g0b, LC);
	fdcheck(&FD_TRANSFORMER, "layernorm_backward dinp", l.inp, dinp,
	        LB * LT * LC, ln_loss, &l, 0);
	fdcheck(&FD_TRANSFORMER, "layernorm_backward dw", l.w, dw, LC, ln_loss, &l, 0);
	fdcheck(&FD_TRANSFORMER, "layernorm_backward db", l.b, db, LC, ln_loss, &l, 0);
	free(dinp);
	free(dw);
	free(db);
	free(g0i);
	free(g0w);
	free(g0b);
}

/* ----------------------------------------------------------------- gelu */

enum { GN = 64 };

struct gelu {
	float inp[GN], out[GN], r[GN];
};

static double
gelu_loss(void *ctx)
{
	struct gelu *g = ctx;

	cg_gelu_forward(g->out, g->inp, GN);
	return dot(g->out, g->r, GN);
}

/*
 * cg_gelu_forward_r and cg_gelu_backward_set_r: the plain kernels' bits,
 * and beside them their outputs rounded as cg_round_rows rounds them,
 * over spans of the threads' share that end mid-array (N = 2500), in
 * bf16 (4- and 2-byte elements) and f16.
 */
static void
test_gelu_rounded(void)
{
	enum { N = 2500 };
	static const int prec[] = {CG_PREC_BF16, CG_PREC_BF16, CG_PREC_F16};
	static const int esz[] = {4, 2, 4};
	float *x = falloc(N), *dy = falloc(N), *a = falloc(N), *b = falloc(N);
	char *ra = malloc(4 * N), *rb = malloc(4 * N);

	fill(x, N, -4, 4);
	fill(dy, N, -1, 1);
	for (int m = 0; m < 3; m++) {
		char what[160];
		int es = esz[m], ok;

		cg_set_precision((enum cg_precision)prec[m]);
		cg_gelu_forward(a, x, N);
		cg_gelu_forward_r(b, rb, es, x, N);
		cg_round_rows(ra, es, a, 1, N, N);
		ok = memcmp(a, b, N * sizeof(float)) == 0 &&
		     memcmp(ra, rb, (size_t)N * es) == 0;
		cg_gelu_backward_set(a, dy, x, N);
		cg_gelu_backward_set_r(b, rb, es, dy, x, N);
		cg_round_rows(ra, es, a, 1, N, N);
		ok &= memcmp(a, b, N * sizeof(float)) == 0 &&
		      memcmp(ra, rb, (size_t)N * es) == 0;
		snprintf(what, sizeof(what),
		         "gelu forward and backward, %s, %d-byte rounded "
		         "copies: the plain bits, the copies rounded from them",
		         prec[m] == CG_PREC_F16 ? "f16" : "bf16", es);
		expect(ok, what);
	}
	cg_set_precision(CG_PREC_F32);
	free(x);
	free(dy);
	free(a);
	free(b);
	free(ra);
	free(rb);
}

static void
test_gelu(void)
{
	struct gelu g;
	float *g0, *dinp = gstart(GN, &g0);
	double ref[GN];

	fill(g.inp, GN, -4, 4);
	fill(g.r, GN, -1, 1);
	gelu_loss(&g);
	for (int i = 0; i < GN; i++) {
		double x = g.inp[i];
		ref[i] =
		    0.5 * x *
		    (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	}
	/* Where 1 + tanh cancels (x near -4) only the absolute part holds. */
	expect(fwdcheck(g.out, ref, GN) <= 1,
	       "gelu_forward matches the tanh formula");
	cg_gelu_backward(dinp, g.r, g.inp, GN);
	gdelta(dinp, g0, GN);
	fdcheck(&FD_TRANSFORMER, "gelu_backward dinp", g.inp, dinp, GN,
	        gelu_loss, &g, 0);
	/* The writing variant: what accumulating into zeros gives. */
	float set[GN], acc[GN] = {0};
	for (int i = 0; i < GN; i++)
		set[i] = NAN;
	cg_gelu_backward(acc, g.r, g.inp, GN);
	cg_gelu_backward_set(set, g.r, g.inp, GN);
	expect(memcmp(set, acc, sizeof(set)) == 0,
	       "gelu_backward_set writes what gelu_backward adds to zeros");
	free(dinp);
	free(g0);
	test_gelu_rounded();
}

/* ------------------------------------------------------------ attention */

enum { AB = 2, AT = 5, AC = 8, ANH = 2 };

struct attn {
	float qkv[AB * AT * 3 * AC], out[AB * AT * AC], r[AB * AT * AC];
	float att[AB * ANH * AT * AT];
};

static double
attn_loss(void *ctx)
{
	struct attn *a = ctx;

	cg_attention_forward(a->out, a->att, a->qkv, AB, AT, AC, ANH);
	return dot(a->out, a->r, AB * AT * AC);
}

/* Naive double attention: full T x T scores, mask, softmax, sum. */
static void
ref_attention(double *out, double *att, const float *qkv, int B, int T, int C,
              int NH)
{
	int hs = C / NH;
	double *s = malloc((size_t)T * sizeof(double));

	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				double mx = -INFINITY, sum = 0;
				const float *q =
				    qkv + ((size_t)b * T + t) * 3 * C + h * hs;
				for (int j = 0; j < T; j++) {
					const float *k =
					    qkv + ((size_t)b * T + j) * 3 * C +
					    C + h * hs;
					double d = 0;
					for (int i = 0; i < hs; i++)
						d += (double)q[i] * k[i];
					s[j] =
					    j <= t ? d / sqrt(hs) : -INFINITY;
					if (s[j] > mx)
						mx = s[j];
				}
				for (int j = 0; j < T; j++)
					sum += s[j] = exp(s[j] - mx);
				double *a =
				    att + (((size_t)b * NH + h) * T + t) * T;
				for (int j = 0; j < T; j++)
					a[j] = s[j] / sum;
				for (int i = 0; i < hs; i++) {
					double o = 0;
					for (int j = 0; j < T; j++)
						o += a[j] *
						     qkv[((size_t)b * T + j) *
						             3 * C +
						         2 * C + h * hs + i];
					out[((size_t)b * T + t) * C + h * hs +
					    i] = o;
				}
			}
	free(s);
}

static void
test_attention(void)
{
	struct attn a;
	float *g0, *dqkv = gstart(AB * AT * 3 * AC, &g0);
	float scratch[AB * ANH * AT * AT];
	double rout[AB * AT * AC], ratt[AB * ANH * AT * AT];
	int causal = 1;

	/* Spread of q . k / sqrt(hs) about 1: softmax neither flat nor hard. */
	fill(a.qkv, AB * AT * 3 * AC, -1, 1);
	fill(a.r, AB * AT * AC, -1, 1);
	attn_loss(&a);
	ref_attention(rout, ratt, a.qkv, AB, AT, AC, ANH);
	expect(fwdcheck(a.out, rout, AB * AT * AC) <= 1,
	       "attention_forward output matches the naive double version");
	expect(fwdcheck(a.att, ratt, AB * ANH * AT * AT) <= 1,
	       "attention_forward weights match (zero above the diagonal)");
	cg_attention_backward(dqkv, scratch, a.r, a.qkv, a.att, AB, AT, AC,
	                      ANH);
	gdelta(dqkv, g0, AB * AT * 3 * AC);
	fdcheck(&FD_TRANSFORMER, "attention_backward dqkv", a.qkv, dqkv,
	        AB * AT * 3 * AC, attn_loss, &a, 0);
	/* Causality: an output never depends on a later position's q, k, v. */
	for (int b = 0; b < AB; b++) {
		float keep[AB * AT * AC];
		memcpy(keep, a.out, sizeof(keep));
		for (int i = 0; i < 3 * AC; i++)
			a.qkv[((size_t)b * AT + AT - 1) * 3 * AC + i] += 1;
		attn_loss(&a);
		for (int t = 0; t < AT - 1; t++)
			for (int c = 0; c < AC; c++) {
				size_t o = ((size_t)b * AT + t) * AC + c;
				causal &= a.out[o] == keep[o];
			}
		for (int i = 0; i < 3 * AC; i++)
			a.qkv[((size_t)b * AT + AT - 1) * 3 * AC + i] -= 1;
	}
	expect(causal, "attention: earlier outputs ignore the last position");
	free(dqkv);
	free(g0);
}

/*
 * Long sequences go by blocks of rows and columns (lib/nn/transformer.c):
 * T = 70 is three blocks, the last one short.  Finite differences of a
 * float loss over so many terms are too coarse to judge, so forward and
 * backward are checked against the naive double versions.
 */
static void
ref_attention_backward(double *dqkv, const double *att, const float *dout,
                       const float *qkv, int B, int T, int C, int NH)
{
	int hs = C / NH;
	double *d = malloc((size_t)T * sizeof(double));

	memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(double));
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const double *a =
				    att + (((size_t)b * NH + h) * T + t) * T;
				const float *go = dout + ((size_t)b * T + t) * C +
				                  h * hs;
				size_t qo = ((size_t)b * T + t) * 3 * C + h * hs;
				double s = 0;
				for (int j = 0; j <= t; j++) {
					size_t jo = ((size_t)b * T + j) * 3 * C +
					            h * hs;
					d[j] = 0;
					for (int i = 0; i < hs; i++) {
						d[j] += (double)go[i] *
						        qkv[jo + 2 * C + i];
						dqkv[jo + 2 * C + i] +=
						    a[j] * go[i];
					}
					s += a[j] * d[j];
				}
				for (int j = 0; j <= t; j++) {
					size_t jo = ((size_t)b * T + j) * 3 * C +
					            h * hs;
					double g = a[j] * (d[j] - s) / sqrt(hs);
					for (int i = 0; i < hs; i++) {
						dqkv[qo + i] +=
						    g * qkv[jo + C + i];
						dqkv[jo + C + i] += g * qkv[qo + i];
					}
				}
			}
	free(d);
}

static void
test_attention_blocks(void)
{
	enum { B = 2, T = 70, C = 16, NH = 2 };
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
	size_t na = (size_t)B * NH * T * T;
	float *qkv = falloc(nq), *out = falloc(no), *dout = falloc(no);
	float *att = falloc(na), *scratch = falloc(na), *dqkv = falloc(nq);
	double *rout = calloc(no, sizeof(double));
	double *ratt = calloc(na, sizeof(double));
	double *rdqkv = calloc(nq, sizeof(double));

	fill(qkv, nq, -1, 1);
	fill(dout, no, -1, 1);
	cg_attention_forward(out, att, qkv, B, T, C, NH);
	ref_attention(rout, ratt, qkv, B, T, C, NH);
	expect(fwdcheck(out, rout, no) <= 1 && fwdcheck(att, ratt, na) <= 1,
	       "attention_forward, 3 blocks: the naive double version");
	memset(dqkv, 0, nq * sizeof(float));
	cg_attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
	ref_attention_backward(rdqkv, ratt, dout, qkv, B, T, C, NH);
	expect(fwdcheck(dqkv, rdqkv, nq) <= 1,
	       "attention_backward, 3 blocks: the naive double version");
	free(qkv);
	free(out);
	free(dout);
	free(att);
	free(scratch);
	free(dqkv);
	free(rout);
	free(ratt);
	free(rdqkv);
}

/*
 * bf16 and f16 products (cg_set_precision): attention rounds q, k, v and
 * dout once a (sequence, head), the weights and the softmax's gradient
 * a block at a time, and sums the products of the rounded values in
 * float.  The reference does the same in double, from the kernel's own
 * weights (its softmax is checked against the scores of rounded q and k
 * first): what differs is the order of float sums and, rarely, a
 * gradient rounded the other way from a tie.  The kernel must be near
 * that reference, and far from the unrounded one (the rounding is
 * there), on 3 blocks of rows with the last one partial.
 */
static void
ref_attention_low(int prec, double *out, double *att, double *dqkv,
                  const float *qkv, const float *katt, const float *dout,
                  int B, int T, int C, int NH)
{
	int hs = C / NH;
	double *d = malloc((size_t)T * sizeof(double));
	const double sc = 1 / sqrt(hs);
#define QKV(b, t, part, i)                                                     \
	lowp_round(prec, qkv[((size_t)(b) * T + (t)) * 3 * C + (part) * C +    \
	                     h * hs + (i)])

	memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(double));
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				size_t ro = (((size_t)b * NH + h) * T + t) * T;
				const float *ka = katt + ro;
				double *a = att + ro, mx = -INFINITY, sum = 0;
				const float *go = dout + ((size_t)b * T + t) * C +
				                  h * hs;
				size_t qo = ((size_t)b * T + t) * 3 * C + h * hs;
				double s = 0;

				for (int j = 0; j < T; j++) {
					double x = 0;
					for (int i = 0; i < hs && j <= t; i++)
						x += QKV(b, t, 0, i) *
						     QKV(b, j, 1, i);
					a[j] = j <= t ? x * sc : -INFINITY;
					mx = a[j] > mx ? a[j] : mx;
				}
				for (int j = 0; j < T; j++)
					sum += a[j] = exp(a[j] - mx);
				for (int j = 0; j < T; j++)
					a[j] /= sum;
				/* from here on, the kernel's weights */
				for (int i = 0; i < hs; i++) {
					double o = 0;
					for (int j = 0; j <= t; j++)
						o += lowp_round(prec, ka[j]) *
						     QKV(b, j, 2, i);
					out[((size_t)b * T + t) * C + h * hs +
					    i] = o;
				}
				for (int j = 0; j <= t; j++) {
					size_t jo = ((size_t)b * T + j) * 3 * C +
					            h * hs;
					d[j] = 0;
					for (int i = 0; i < hs; i++) {
						d[j] += lowp_round(prec, go[i]) *
						        QKV(b, j, 2, i);
						dqkv[jo + 2 * C + i] +=
						    lowp_round(prec, ka[j]) *
						    lowp_round(prec, go[i]);
					}
					s += ka[j] * d[j];
				}
				for (int j = 0; j <= t; j++) {
					size_t jo = ((size_t)b * T + j) * 3 * C +
					            h * hs;
					double g = lowp_round(
					    prec, ka[j] * (d[j] - s) * sc);
					for (int i = 0; i < hs; i++) {
						dqkv[qo + i] += g * QKV(b, j, 1, i);
						dqkv[jo + C + i] +=
						    g * QKV(b, t, 0, i);
					}
				}
			}
#undef QKV
	free(d);
}

static void
test_attention_low(void)
{
	enum { B = 2, T = 70, C = 32, NH = 2 };
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
	size_t na = (size_t)B * NH * T * T;
	float *qkv = falloc(nq), *out = falloc(no), *dout = falloc(no);
	float *att = falloc(na), *scratch = falloc(na), *dqkv = falloc(nq);
	double *rout = calloc(no, sizeof(double)), *ratt = calloc(na, 8);
	double *rdqkv = calloc(nq, sizeof(double));
	double *xout = calloc(no, sizeof(double)), *xatt = calloc(na, 8);
	double *xdqkv = calloc(nq, sizeof(double));
	const struct lowp_mode *modes = lowp_modes;

	fill(qkv, nq, -1, 1);
	fill(dout, no, -1, 1);
	/* unrounded: the double reference */
	ref_attention(xout, xatt, qkv, B, T, C, NH);
	ref_attention_backward(xdqkv, xatt, dout, qkv, B, T, C, NH);
	for (size_t m = 0; m < LOWP_MODES; m++) {
		char what[256];
		double eo, ed, xo, xd;

		cg_set_deterministic(modes[m].det);
		cg_set_precision((enum cg_precision)modes[m].prec);
		cg_attention_forward(out, att, qkv, B, T, C, NH);
		memset(dqkv, 0, nq * sizeof(float));
		cg_attention_backward(dqkv, scratch, dout, qkv, att, B, T, C,
		                      NH);
		ref_attention_low(modes[m].prec, rout, ratt, rdqkv, qkv, att,
		                  dout, B, T, C, NH);
		eo = lowp_rel2(out, rout, no), ed = lowp_rel2(dqkv, rdqkv, nq);
		xo = lowp_rel2(out, xout, no), xd = lowp_rel2(dqkv, xdqkv, nq);
		snprintf(what, sizeof(what),
		         "attention in %s: weights from rounded q, k; output "
		         "and gradient off the rounded products' reference by "
		         "%.2g, %.2g, off the unrounded one by %.2g, %.2g",
		         modes[m].name, eo, ed, xo, xd);
		expect(fwdcheck(att, ratt, na) <= 1 && eo < 1e-6 &&
		           ed < 2e-5 && xo > 1e-4 && xd > 1e-4,
		       what);
	}
	cg_set_deterministic(0);
	cg_set_precision(CG_PREC_F32);
	free(qkv);
	free(out);
	free(dout);
	free(att);
	free(scratch);
	free(dqkv);
	free(rout);
	free(ratt);
	free(rdqkv);
	free(xout);
	free(xatt);
	free(xdqkv);
}

/* ------------------------------------------------------------- residual */

enum { RN = 23 };

struct resid {
	float a[RN], b[RN], out[RN], r[RN];
};

static double
resid_loss(void *ctx)
{
	struct resid *x = ctx;

	cg_residual_forward(x->out, x->a, x->b, RN);
	return dot(x->out, x->r, RN);
}

static void
test_residual(void)
{
	struct resid x;
	float *g0a, *g0b, *da = gstart(RN, &g0a), *db = gstart(RN, &g0b);
	int same = 1;

	fill(x.a, RN, -1, 1);
	fill(x.b, RN, -1, 1);
	fill(x.r, RN, -1, 1);
	resid_loss(&x);
	for (int i = 0; i < RN; i++)
		same &= x.out[i] == x.a[i] + x.b[i];
	expect(same, "residual_forward is inp1 + inp2");
	cg_residual_backward(da, db, x.r, RN);
	gdelta(da, g0a, RN);
	gdelta(db, g0b, RN);
	fdcheck(&FD_TRANSFORMER, "residual_backward dinp1", x.a, da, RN,
	        resid_loss, &x, 0);
	fdcheck(&FD_TRANSFORMER, "residual_backward dinp2", x.b, db, RN,
	        resid_loss, &x, 0);
	free(da);
	free(db);
	free(g0a);
	free(g0b);
}

/* ------------------------------------------------ softmax cross-entropy */

enum { XB = 2, XT = 4, XV = 11 };

struct xent {
	float logits[XB * XT * XV], weight[XB * XT];
	int targets[XB * XT];
	double loss[XB * XT];
};

static double
xent_loss(void *ctx)
{
	struct xent *x = ctx;
	double s = 0;

	cg_xent_forward(x->loss, x->logits, x->targets, x->weight, XB, XT, XV);
	for (int i = 0; i < XB * XT; i++)
		s += x->weight[i] * x->loss[i];
	return s;
}

static void
test_xent(void)
{
	struct xent x;
	float *g0, *dl = gstart(XB * XT * XV, &g0);
	float *dl2 = falloc(XB * XT * XV);
	double ref[XB * XT], loss2[XB * XT];
	int masked_zero = 1, same = 1;

	fill(x.logits, XB * XT * XV, -3, 3);
	/* One big logit: the max-subtraction must keep exp() finite. */
	x.logits[5] = 80;
	for (int i = 0; i < XB * XT; i++) {
		x.targets[i] = (int)cg_rng_below(&rng, XV);
		x.weight[i] = i % 3 == 1 ? 0 : 0.25f + cg_rng_uniform(&rng);
	}
	/* Padding may carry any target: it must not be read. */
	x.targets[1] = -7;
	xent_loss(&x);
	for (int i = 0; i < XB * XT; i++) {
		const float *l = x.logits + i * XV;
		double mx = l[0], s = 0;
		for (int v = 1; v < XV; v++)
			mx = l[v] > mx ? l[v] : mx;
		for (int v = 0; v < XV; v++)
			s += exp(l[v] - mx);
		ref[i] = x.weight[i] == 0 ? 0 : log(s) + mx - l[x.targets[i]];
		if (x.weight[i] == 0)
			masked_zero &= x.loss[i] == 0;
	}
	double m = 0;
	for (int i = 0; i < XB * XT; i++) {
		double d = fabs(x.loss[i] - ref[i]) / (1e-9 + fabs(ref[i]));
		m = d > m ? d : m;
	}
	expect(m < 1e-6, "xent_forward matches log-sum-exp in double");
	expect(masked_zero, "xent_forward: weight-0 positions give 0");
	cg_xent_backward(dl, x.logits, x.targets, x.weight, XB, XT, XV);
	gdelta(dl, g0, XB * XT * XV);
	fdcheck(&FD_TRANSFORMER, "xent_backward dlogits", x.logits, dl,
	        XB * XT * XV, xent_loss, &x, 0);
	/* The fused pass gives the same numbers as the two separate ones. */
	cg_xent_forward_backward(loss2, dl2, x.logits, x.targets, x.weight, XB,
	                         XT, XV);
	for (int i = 0; i < XB * XT; i++)
		same &= loss2[i] == x.loss[i];
	for (int i = 0; i < XB * XT * XV; i++)
		same &= fabsf(dl2[i] - dl[i]) <= 1e-6f;
	expect(same, "xent_forward_backward equals forward + backward");
	free(dl);
	free(dl2);
	free(g0);
}

/* ----------------------------------------------- the checker catches */

static void
test_checker(void)
{
	struct ln l;
	float dinp[LB * LT * LC] = {0}, dw[LC] = {0}, db[LC] = {0};

	fill(l.inp, LB * LT * LC, -2, 3);
	fill(l.w, LC, 0.5f, 1.5f);
	fill(l.b, LC, -0.5f, 0.5f);
	fill(l.r, LB * LT * LC, -1, 1);
	ln_loss(&l);
	cg_layernorm_backward(dinp, dw, db, l.r, l.inp, l.w, l.mean, l.rstd, LB,
	                      LT, LC);
	dinp[4] *= 1.05f;
	expect(fdcheck(&FD_TRANSFORMER, "", l.inp, dinp, LB * LT * LC, ln_loss,
	               &l, 1) > FD_TRANSFORMER.tol,
	       "a 5% error in one gradient entry is caught");
}

/* ------------------------------------------- threads change nothing */

#ifdef _OPENMP
/* Run every kernel at a size that goes parallel; out [n] gets the
 * concatenated results. */
static size_t
run_all(float *out, int threads)
{
	enum { B = 4, T = 64, C = 64, NH = 4, V = 300 };
	static float *qkv, *x, *w, *b, *wte, *wpe, *logits, *wt;
	static int *tok;
	size_t n = 0, R = (size_t)B * T;

	if (qkv == NULL) {
		qkv = falloc(R * 3 * C);
		x = falloc(R * C);
		w = falloc(C);
		b = falloc(C);
		wte = falloc((size_t)V * C);
		wpe = falloc((size_t)T * C);
		logits = falloc(R * V);
		wt = falloc(R);
		tok = calloc(R, sizeof(int));
		fill(qkv, R * 3 * C, -1, 1);
		fill(x, R * C, -2, 2);
		fill(w, C, 0.5f, 1.5f);
		fill(b, C, -1, 1);
		fill(wte, (size_t)V * C, -1, 1);
		fill(wpe, (size_t)T * C, -1, 1);
		fill(logits, R * V, -3, 3);
		fill(wt, R, 0, 1);
		for (size_t i = 0; i < R; i++)
			tok[i] = (int)cg_rng_below(&rng, V);
	}
	omp_set_num_threads(threads);
	float *att = falloc(R * NH * T), *scratch = falloc(R * NH * T);
	double *loss = calloc(R, sizeof(double));

	/* Outputs land in out[] one after another. */
	cg_attention_forward(out + n, att, qkv, B, T, C, NH);
	n += R * C;
	memset(out + n, 0, R * 3 * C * sizeof(float));
	cg_attention_backward(out + n, scratch, x, qkv, att, B, T, C, NH);
	n += R * 3 * C;
	float *mean = out + n + R * C, *rstd = mean + R;
	cg_layernorm_forward(out + n, mean, rstd, x, w, b, B, T, C);
	n += R * C + 2 * R;
	memset(out + n, 0, (R * C + 2 * C) * sizeof(float));
	cg_layernorm_backward(out + n, out + n + R * C, out + n + R * C + C,
	                      qkv, x, w, mean, rstd, B, T, C);
	n += R * C + 2 * C;
	cg_gelu_forward(out + n, x, R * C);
	n += R * C;
	memset(out + n, 0, R * C * sizeof(float));
	cg_gelu_backward(out + n, qkv, x, R * C);
	n += R * C;
	cg_embed_forward(out + n, tok, wte, wpe, B, T, C);
	n += R * C;
	memset(out + n, 0, ((size_t)V * C + (size_t)T * C) * sizeof(float));
	cg_embed_backward(out + n, out + n + (size_t)V * C, x, tok, B, T, C);
	n += (size_t)V * C + (size_t)T * C;
	memset(out + n, 0, R * V * sizeof(float));
	cg_xent_forward_backward(loss, out + n, logits, tok, wt, B, T, V);
	n += R * V;
	for (size_t i = 0; i < R; i++)
		out[n++] = (float)loss[i];
	free(att);
	free(scratch);
	free(loss);
	return n;
}

static void
test_threads(void)
{
	size_t cap = 4u << 20;
	float *one = falloc(cap), *many = falloc(cap);
	int max = omp_get_max_threads();
	size_t n = run_all(one, 1);

	run_all(many, max < 4 ? 4 : max);
	omp_set_num_threads(max);
	expect(memcmp(one, many, n * sizeof(float)) == 0,
	       "every kernel gives the same bits on 1 thread and on many");
	free(one);
	free(many);
}
#endif

int
main(void)
{
	cg_rng_seed(&rng, 20240607);
	test_embedding();
	test_layernorm();
	test_gelu();
	test_attention();
	test_attention_blocks();
	test_attention_low();
	test_residual();
	test_xent();
	test_checker();
#ifdef _OPENMP
	test_threads();
#endif
	if (failures) {
		printf("test_transformer: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_transformer: all passed\n");
	return 0;
}

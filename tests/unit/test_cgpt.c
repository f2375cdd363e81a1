/*
 * test_cgpt.c - the conditional GPT: layout, init, gradients against
 * finite differences, and the arch's sequences from text shards.
 *
 * Checks the config limits, the view table (names, shapes, order,
 * contiguity, weight decay), GPT-2's init, that a fresh model's loss is
 * about ln V, every parameter gradient of a tiny model (tied and untied)
 * against central differences, reported per view, plus a directional
 * derivative; that a corrupted gradient is caught; that a batch equals the
 * sum of its halves, the distilled loss (its terms computed directly,
 * its gradients against central differences, teacher weight 0 giving
 * plain training's bits), that a prefix of a sequence gets the same logits as
 * the whole (causality), and the error returns.  Through struct cg_arch:
 * text shards with and without prompts become the sequences arch_cgpt.c
 * documents (rebuilt here independently, start marks and windows
 * included, start windows about one in four), counted and scored as
 * documented, the same wherever an example lands.
 * Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/cgpt/cgpt.h"
#include "cg.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"
#include "model/model.h"
#include "nn/gemm.h"
#include "nn/transformer.h"

#define TEST_NAME "test_cgpt"
#include "check.h"

#include "fd.h"
#include "lowp.h"

#define MAXV 256

/*
 * Two float evaluations of the same function that differ only in the
 * order of their sums (a batch cut in two, a shorter sequence: other
 * matrix shapes, so other blocks and edge kernels in a BLAS) differ by
 * rounding alone.  A float sum of n terms is within gamma(n) = n u / (1 -
 * n u) (u = 2^-24) of the exact sum times the sum of its terms'
 * magnitudes (Higham, Accuracy and Stability of Numerical Algorithms,
 * 3.1), so two such evaluations differ by at most 2 gamma(n) times that
 * magnitude.  Here n is the longest sum on the path (named at each use)
 * and the magnitude is taken as the largest entry of the group compared
 * (a parameter view, a row of logits): the test's weights and tokens are
 * random, so no group cancels as a whole.  Measured: at most 11 u of the
 * largest entry (a bound of 2 gamma(V) = 520 u), with OpenBLAS's Haswell
 * kernels, whose edge kernels sum in another order than their inner ones;
 * at most 7 u with its SkylakeX, Sandybridge and Nehalem kernels and the
 * built-in one.
 */
#define U 0x1p-24

static double
gamma_n(int n)
{
	return n * U / (1 - n * U);
}

/* max |x - r| / max |r| over [n]: the error relative to the group's
 * scale. */
static double
normwise(const float *x, const float *r, size_t n)
{
	double d = 0, big = 0;

	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)x[i] - r[i]));
		big = fmax(big, fabs(r[i]));
	}
	return big > 0 ? d / big : d;
}

static struct cg_rng rng;

/* ------------------------------------------------------------- config */

static void
test_config(void)
{
	struct cg_cgpt_config ok = {3, 16, 12, 2, 3, 0, 0, 0};
	struct cg_cgpt_config bad[] = {
	    {0, 16, 12, 2, 3, 0, 0, 0},                /* no conditions */
	    {3, 0, 12, 2, 3, 0, 0, 0},                 /* no context */
	    {3, 16, 12, 2, 5, 0, 0, 0},                /* 5 heads in 12 */
	    {3, 16, 12, 0, 3, 0, 0, 0},                /* no layers */
	    {3, 16, 12, 2, 3, 2, 0, 0},                /* tied = 2 */
	    {3, CG_CGPT_MAX_T + 1, 12, 2, 3, 0, 0, 0}, /* context too long */
	    {3, 16, CG_CGPT_MAX_C, CG_CGPT_MAX_L, 1, 0, 0, 0}, /* too many */
	    {3, 16, 12, 2, 3, 0, CG_CGPT_MAX_C, 0}, /* heads too wide */
	    {3, 16, 12, 2, 3, 0, 0, -1},               /* negative MLP */
	};
	int all = 1;

	expect(cg_cgpt_check_config(&ok) == 0, "a good config passes");
	ok.NH = 5, ok.hs = 4, ok.F = 7; /* heads of 4 in 12: as pruned */
	expect(cg_cgpt_check_config(&ok) == 0 &&
	           cg_cgpt_nparams(&ok) ==
	               (size_t)(256 + 3 + 1 + 16) * 12 + 2 * 12 +
	                   2 * (4 * 20 * 12 + 2 * 7 * 12 + 3 * 20 + 7 +
	                        6 * 12) +
	                   (256 + 3 + 1) * 12,
	       "heads of their own size, and an MLP of its own width");
	ok.NH = 3, ok.hs = 0, ok.F = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (cg_cgpt_check_config(&bad[i]) == 0 ||
		    cg_cgpt_nparams(&bad[i]) != 0) {
			printf("     bad config %zu accepted\n", i);
			all = 0;
		}
	expect(all, "bad configs are refused with a message");
	expect(cg_cgpt_ws_new(&ok, 0, 0) == NULL, "a batch of 0 is refused");
}

/* ------------------------------------------------------------- views */

static const char *const decayed[] = {"attn.qkv.w", "attn.proj.w", "mlp.fc.w",
                                      "mlp.proj.w"};

static int
should_decay(const char *name)
{
	if (strcmp(name, "lm_head.w") == 0)
		return 1;
	for (size_t i = 0; i < 4; i++) {
		size_t n = strlen(name), m = strlen(decayed[i]);
		if (n > m && strcmp(name + n - m, decayed[i]) == 0)
			return 1;
	}
	return 0;
}

static const struct cg_view *
find_view(const struct cg_view *v, int nv, const char *name)
{
	for (int i = 0; i < nv; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

static int
has_shape(const struct cg_view *v, int ndim, uint64_t d0, uint64_t d1)
{
	return v != NULL && v->ndim == ndim && v->shape[0] == d0 &&
	       (ndim == 1 || v->shape[1] == d1);
}

static void
test_views(int tied)
{
	struct cg_cgpt_config c = {5, 16, 12, 3, 3, tied, 0, 0};
	struct cg_view v[MAXV];
	int nv = cg_cgpt_views(&c, v, MAXV);
	uint64_t V = 256 + 5 + 1, C = 12;
	size_t off = 0;
	int contiguous = 1, decay = 1;
	char what[96];

	snprintf(what, sizeof(what), "%s: %d views, 12 L + %d",
	         tied ? "tied" : "untied", nv, tied ? 4 : 5);
	expect(nv == cg_cgpt_nviews(&c) && nv == 12 * 3 + 4 + !tied, what);
	for (int i = 0; i < nv; i++) {
		contiguous &= v[i].off == off;
		off += v[i].n;
		decay &= v[i].decay == should_decay(v[i].name);
	}
	expect(contiguous && off == cg_cgpt_nparams(&c),
	       "views tile the buffer in order");
	expect(decay, "decay on Linear weights only (not embeddings, "
	              "biases, LayerNorm)");
	expect(strcmp(v[0].name, "wte") == 0 && has_shape(&v[0], 2, V, C) &&
	           strcmp(v[1].name, "wpe") == 0 && has_shape(&v[1], 2, 16, C),
	       "wte [V, C] then wpe [T, C]");
	expect(strcmp(v[2].name, "h.0.ln1.w") == 0 &&
	           has_shape(find_view(v, nv, "h.2.attn.qkv.w"), 2, 3 * C, C) &&
	           has_shape(find_view(v, nv, "h.2.attn.qkv.b"), 1, 3 * C, 0) &&
	           has_shape(find_view(v, nv, "h.1.attn.proj.w"), 2, C, C) &&
	           has_shape(find_view(v, nv, "h.1.mlp.fc.w"), 2, 4 * C, C) &&
	           has_shape(find_view(v, nv, "h.1.mlp.fc.b"), 1, 4 * C, 0) &&
	           has_shape(find_view(v, nv, "h.0.mlp.proj.w"), 2, C, 4 * C) &&
	           has_shape(find_view(v, nv, "h.0.ln2.b"), 1, C, 0),
	       "block tensors named and shaped as GPT-2's");
	expect(tied ? strcmp(v[nv - 1].name, "lnf.b") == 0 &&
	                  find_view(v, nv, "lm_head.w") == NULL
	            : strcmp(v[nv - 1].name, "lm_head.w") == 0 &&
	                  has_shape(&v[nv - 1], 2, V, C),
	       tied ? "tied: no lm_head.w" : "untied: lm_head.w [V, C] last");
	expect(cg_cgpt_views(&c, v, nv - 1) == -1, "a short view table fails");
}

/* -------------------------------------------------------------- init */

static void
stats(const float *p, size_t n, double *mean, double *sd)
{
	double s = 0, ss = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	*mean = s / n;
	for (size_t i = 0; i < n; i++)
		ss += (p[i] - *mean) * (p[i] - *mean);
	*sd = sqrt(ss / n);
}

static void
test_init(void)
{
	struct cg_cgpt_config c = {3, 64, 64, 4, 4, 0, 0, 0};
	struct cg_view v[MAXV];
	int nv = cg_cgpt_views(&c, v, MAXV);
	size_t np = cg_cgpt_nparams(&c);
	float *p = xcalloc(np, sizeof(float)), *q = xcalloc(np, sizeof(float));
	int ok = 1;
	struct cg_rng r;

	cg_rng_seed(&r, 7);
	cg_cgpt_init(&c, p, &r);
	cg_rng_seed(&r, 7);
	cg_cgpt_init(&c, q, &r);
	expect(memcmp(p, q, np * sizeof(float)) == 0, "init is seeded");
	for (int i = 0; i < nv; i++) {
		const char *name = v[i].name;
		size_t len = strlen(name);
		double mean, sd, want;
		int ln = strstr(name, "ln") != NULL;

		stats(p + v[i].off, v[i].n, &mean, &sd);
		if (name[len - 1] == 'b')
			ok &= mean == 0 && sd == 0;
		else if (ln)
			ok &= mean == 1 && sd == 0;
		else {
			want = strstr(name, "proj.w") ? 0.02 / sqrt(2.0 * c.L)
			                              : 0.02;
			if (fabs(sd - want) > 0.1 * want ||
			    fabs(mean) > 4 * want / sqrt((double)v[i].n)) {
				printf("     %s: mean %.3g sd %.4g, want sd "
				       "%.4g\n",
				       name, mean, sd, want);
				ok = 0;
			}
		}
	}
	expect(ok, "GPT-2 init: N(0, 0.02), residual projections / sqrt(2L), "
	           "biases 0, gains 1");
	free(p);
	free(q);
}

/* ------------------------------------------------------ the test case */

struct tcase {
	struct cg_cgpt_config c;
	int B, T;
	size_t np;
	struct cg_view v[MAXV];
	int nv;
	float *params, *grad, *weight;
	int *tokens, *targets;
	struct cg_cgpt_ws *ws;
	/* Distilled (tlogp != NULL): a teacher's log-probabilities [B, T,
	 * V] at tau, the teacher term's weight alpha, the last terms. */
	float *tlogp;
	float alpha, tau;
	double data, teach;
};

/*
 * A case of B sequences of T positions; weights positive on about 3 in 4
 * positions and summing to 1, the rest 0 with garbage targets.
 * big: parameters far from init (N(0, 0.3), gains 1 + N(0, 0.2)) so
 * that no gradient is trivially small.
 */
static void
tcase_init(struct tcase *t, struct cg_cgpt_config c, int B, int T, int big)
{
	int V = cg_cgpt_vocab(&c);
	double wsum = 0;

	memset(t, 0, sizeof(*t));
	t->c = c;
	t->B = B;
	t->T = T;
	t->np = cg_cgpt_nparams(&c);
	t->nv = cg_cgpt_views(&c, t->v, MAXV);
	t->params = xcalloc(t->np, sizeof(float));
	t->grad = xcalloc(t->np, sizeof(float));
	t->weight = xcalloc((size_t)B * T, sizeof(float));
	t->tokens = xcalloc((size_t)B * T, sizeof(int));
	t->targets = xcalloc((size_t)B * T, sizeof(int));
	cg_cgpt_init(&c, t->params, &rng);
	if (big)
		for (int i = 0; i < t->nv; i++) {
			const struct cg_view *v = &t->v[i];
			int gain = strstr(v->name, "ln") &&
			           v->name[strlen(v->name) - 1] == 'w';
			for (size_t j = 0; j < v->n; j++)
				t->params[v->off + j] =
				    gain ? 1 + 0.2f * cg_rng_normal(&rng)
				         : 0.3f * cg_rng_normal(&rng);
		}
	for (int i = 0; i < B * T; i++) {
		t->tokens[i] = (int)cg_rng_below(&rng, V);
		if (cg_rng_below(&rng, 4) == 0) {
			t->targets[i] = -1 - (int)cg_rng_below(&rng, 9);
			t->weight[i] = 0;
		} else {
			t->targets[i] = (int)cg_rng_below(&rng, V);
			t->weight[i] = 0.5f + cg_rng_uniform(&rng);
		}
		wsum += t->weight[i];
	}
	for (int i = 0; i < B * T; i++)
		t->weight[i] = (float)(t->weight[i] / wsum);
	if ((t->ws = cg_cgpt_ws_new(&c, B, 0)) == NULL)
		die("cg_cgpt_ws_new");
}

static void
tcase_free(struct tcase *t)
{
	free(t->params);
	free(t->grad);
	free(t->weight);
	free(t->tokens);
	free(t->targets);
	cg_cgpt_ws_free(t->ws);
}

static double
tloss(struct tcase *t, float *grad)
{
	double loss;

	if (t->tlogp) {
		if (cg_cgpt_distill_forward_backward(
		        &t->c, t->params, t->ws, t->tokens, t->targets,
		        t->weight, t->tlogp, t->alpha, t->tau, t->B, t->T, grad,
		        &loss, &t->data, &t->teach) != 0)
			die("cg_cgpt_distill_forward_backward");
		return loss;
	}
	if (cg_cgpt_forward_backward(&t->c, t->params, t->ws, t->tokens,
	                             t->targets, t->weight, t->B, t->T, grad,
	                             &loss) != 0)
		die("cg_cgpt_forward_backward");
	return loss;
}

/* ---------------------------------------------------- gradient checks */

/* t's one loss, whichever view's gradient (fd_views). */
static double
view_loss(void *ctx, int v)
{
	(void)v;
	return tloss(ctx, NULL);
}

static void
test_gradients(int tied)
{
	struct cg_cgpt_config c = {2, 6, 8, 2, 2, tied, 0, 0};
	struct tcase t;
	char what[128];

	tcase_init(&t, c, 3, 6, 1);
	/* Non-zero on entry: backward must add to it. */
	for (size_t i = 0; i < t.np; i++)
		t.grad[i] = 1.0f;
	tloss(&t, t.grad);
	for (size_t i = 0; i < t.np; i++)
		t.grad[i] -= 1.0f;
	printf("     %s model, %zu parameters, loss %.6f\n",
	       tied ? "tied" : "untied", t.np, tloss(&t, NULL));
	double worst = fd_views(&FD_TEXT, t.v, t.nv, t.params, t.grad,
	                        view_loss, &t, NULL, &rng, 0);
	snprintf(what, sizeof(what),
	         "%s: every gradient matches finite differences (worst %.3g)",
	         tied ? "tied" : "untied", worst);
	expect(worst <= FD_TEXT.tol, what);

	/* A directional derivative has far more signal than one entry. */
	float *d = xcalloc(t.np, sizeof(float)),
	      *p0 = xcalloc(t.np, sizeof(float));
	double gd = 0, h = 1e-3;
	memcpy(p0, t.params, t.np * sizeof(float));
	for (size_t i = 0; i < t.np; i++) {
		d[i] = cg_rng_normal(&rng);
		gd += (double)t.grad[i] * d[i];
	}
	for (size_t i = 0; i < t.np; i++)
		t.params[i] = p0[i] + (float)h * d[i];
	double lp = tloss(&t, NULL);
	for (size_t i = 0; i < t.np; i++)
		t.params[i] = p0[i] - (float)h * d[i];
	double lm = tloss(&t, NULL);
	memcpy(t.params, p0, t.np * sizeof(float));
	double fd = (lp - lm) / (2 * h), rel = fabs(fd - gd) / fabs(gd);
	snprintf(what, sizeof(what),
	         "%s: directional derivative g.d %.6g, fd %.6g (rel %.2g)",
	         tied ? "tied" : "untied", gd, fd, rel);
	expect(rel < 1e-3, what);

	/* The checker catches a 2% error in one entry of a gradient. */
	size_t at = t.v[4].off + 3; /* inside h.0.attn.qkv.w */
	struct cg_view one = t.v[4];
	one.off = at;
	one.n = 1;
	t.grad[at] *= 1.02f;
	expect(fabs(t.grad[at]) > 1e-2 &&
	           fd_views(&FD_TEXT, &one, 1, t.params, t.grad, view_loss, &t,
	                    NULL, &rng, 1) > FD_TEXT.tol,
	       "a corrupted gradient entry is caught");
	free(d);
	free(p0);
	tcase_free(&t);
}

/* ------------------------------------------------------- distillation */

/*
 * The distilled loss (1 - alpha) CE + alpha tau^2 KL(teacher || student
 * at tau): its two terms against a direct computation in double, every
 * parameter's gradient against finite differences for a mix and for the
 * teacher term alone, and alpha = 0 giving plain training's bits.
 */
static void
test_distill(void)
{
	struct cg_cgpt_config c = {2, 5, 8, 2, 2, 0, 0, 0};
	const int B = 3, T = 5, V = cg_cgpt_vocab(&c);
	const size_t R = (size_t)B * T;
	struct tcase t;
	char what[160];

	tcase_init(&t, c, B, T, 1);
	float *tl = xcalloc(R * V, sizeof(float));
	float *g0 = xcalloc(t.np, sizeof(float));
	t.tlogp = xcalloc(R * V, sizeof(float));
	/* A teacher far from uniform: logits N(0, 2). */
	for (size_t i = 0; i < R * V; i++)
		tl[i] = 2.0f * cg_rng_normal(&rng);
	t.tau = 2.0f;
	cg_log_softmax_forward(t.tlogp, tl, t.tau, R, V);

	/* The terms, from the logits the forward pass leaves. */
	t.alpha = 0.7f;
	double loss = tloss(&t, NULL), ce = 0, kl = 0, psum_err = 0;
	const float *lg = cg_cgpt_logits(t.ws);
	for (size_t r = 0; r < R; r++) {
		const float *l = lg + r * V, *lp = t.tlogp + r * V;
		double m1 = -INFINITY, m2 = -INFINITY, s1 = 0, s2 = 0, ps = 0;
		for (int v = 0; v < V; v++) {
			m1 = fmax(m1, l[v]);
			m2 = fmax(m2, l[v] / (double)t.tau);
		}
		for (int v = 0; v < V; v++) {
			s1 += exp(l[v] - m1);
			s2 += exp(l[v] / (double)t.tau - m2);
			ps += exp(lp[v]);
		}
		psum_err = fmax(psum_err, fabs(ps - 1));
		if (t.weight[r] == 0)
			continue;
		ce += t.weight[r] * (log(s1) + m1 - l[t.targets[r]]);
		double k = 0;
		for (int v = 0; v < V; v++) {
			double lq = l[v] / (double)t.tau - m2 - log(s2);
			k += exp(lp[v]) * (lp[v] - lq);
		}
		kl += t.weight[r] * k;
	}
	kl *= (double)t.tau * t.tau;
	snprintf(what, sizeof(what),
	         "distilled terms: data %.6f (direct %.6f), teacher %.6f "
	         "(direct %.6f), teacher rows sum to 1 within %.2g",
	         t.data, ce, t.teach, kl, psum_err);
	expect(fabs(t.data - ce) <= 1e-9 * fabs(ce) + 1e-12 &&
	           fabs(t.teach - kl) <= 1e-6 * fabs(kl) && kl > 0.1 &&
	           fabs(loss - (0.3 * ce + 0.7 * kl)) <= 1e-6 * fabs(loss) &&
	           psum_err < 1e-5,
	       what);

	/*
	 * Gradients: a mix, then the teacher term alone, with the shorter
	 * steps of FD_TEXT_FINE.
	 */
	const float alphas[] = {0.7f, 1.0f};
	for (int a = 0; a < 2; a++) {
		t.alpha = alphas[a];
		for (size_t i = 0; i < t.np; i++)
			t.grad[i] = 1.0f;
		tloss(&t, t.grad);
		for (size_t i = 0; i < t.np; i++)
			t.grad[i] -= 1.0f;
		double worst = fd_views(&FD_TEXT_FINE, t.v, t.nv, t.params,
		                        t.grad, view_loss, &t, NULL, &rng, 0);
		snprintf(what, sizeof(what),
		         "distilled (alpha %.1f, tau %.0f): every gradient "
		         "matches finite differences (worst %.3g)",
		         t.alpha, t.tau, worst);
		expect(worst <= FD_TEXT_FINE.tol, what);
	}

	/* alpha 0: the bits of plain training, loss and gradient. */
	float *tlogp = t.tlogp;
	memset(t.grad, 0, t.np * sizeof(float));
	t.alpha = 0;
	double ld = tloss(&t, t.grad);
	t.tlogp = NULL;
	double lplain = tloss(&t, g0);
	snprintf(what, sizeof(what),
	         "teacher weight 0: the loss and gradient of plain training, "
	         "bit for bit");
	expect(ld == lplain && memcmp(t.grad, g0, t.np * sizeof(float)) == 0,
	       what);

	/* A temperature or weight out of range is refused. */
	expect(cg_cgpt_distill_forward_backward(
	           &t.c, t.params, t.ws, t.tokens, t.targets, t.weight, tlogp,
	           0.5f, 0.0f, B, T, NULL, NULL, NULL, NULL) == -1 &&
	           cg_cgpt_distill_forward_backward(
	               &t.c, t.params, t.ws, t.tokens, t.targets, t.weight,
	               tlogp, 1.5f, 1.0f, B, T, NULL, NULL, NULL, NULL) == -1,
	       "distillation: temperature 0 and weight 1.5 refused");
	free(tlogp);
	free(tl);
	free(g0);
	tcase_free(&t);
}

/* ------------------------------------------------------ loss of a fresh
 * model, batch halves, causality, errors */

static void
test_fresh_loss(void)
{
	struct cg_cgpt_config c = {3, 32, 64, 2, 4, 1, 0, 0};
	struct tcase t;
	char what[96];

	tcase_init(&t, c, 4, 32, 0);
	double loss = tloss(&t, NULL), lnv = log(cg_cgpt_vocab(&c));
	snprintf(what, sizeof(what), "fresh model: loss %.4f, ln V = %.4f",
	         loss, lnv);
	expect(fabs(loss - lnv) < 0.05, what);
	tcase_free(&t);
}

/*
 * bf16 and f16: a workspace made in that precision rounds GELU's output
 * and gradient as they are made (the FFN's products read them rounded);
 * one made in f32 leaves the products to round them.  Both give the
 * same bits of loss and gradient, in deterministic mode and on oneDNN's
 * bf16 where the CPU runs it (the FFN's products are large enough:
 * 64 x 32 x 128); and the bf16 step is not f32's.
 */
static void
test_rounded_ffn(void)
{
	struct cg_cgpt_config c = {2, 16, 32, 2, 2, 0, 0, 0};
	const struct lowp_mode *modes = lowp_modes;
	struct tcase t;
	float *g32, *gplain;
	double l32, lplain, lfused;

	tcase_init(&t, c, 4, 16, 0); /* its workspace made in f32 */
	g32 = xcalloc(t.np, sizeof(float));
	gplain = xcalloc(t.np, sizeof(float));
	l32 = tloss(&t, g32);
	for (size_t m = 0; m < LOWP_MODES; m++) {
		struct cg_cgpt_ws *f32ws = t.ws;
		char what[256];
		int same, differs = 0;

		cg_set_deterministic(modes[m].det);
		cg_set_precision((enum cg_precision)modes[m].prec);
		memset(gplain, 0, t.np * sizeof(float));
		lplain = tloss(&t, gplain);
		if ((t.ws = cg_cgpt_ws_new(&c, 4, 0)) == NULL)
			die("cg_cgpt_ws_new");
		memset(t.grad, 0, t.np * sizeof(float));
		lfused = tloss(&t, t.grad);
		cg_cgpt_ws_free(t.ws);
		t.ws = f32ws;
		same = memcmp(&lplain, &lfused, sizeof(double)) == 0 &&
		       memcmp(gplain, t.grad, t.np * sizeof(float)) == 0;
		for (size_t i = 0; i < t.np; i++)
			differs += gplain[i] != g32[i];
		snprintf(what, sizeof(what),
		         "cgpt in %s: GELU's rounding in its own pass or the "
		         "products', the same bits (loss %.9g, %.9g; f32 "
		         "%.9g; %d of %zu gradients off f32's)",
		         modes[m].name, lplain, lfused, l32, differs, t.np);
		expect(same && differs > (int)t.np / 2, what);
	}
	cg_set_deterministic(0);
	cg_set_precision(CG_PREC_F32);
	free(g32);
	free(gplain);
	tcase_free(&t);
}

static void
test_halves(void)
{
	struct cg_cgpt_config c = {2, 7, 16, 2, 4, 0, 0, 0};
	struct tcase t;
	float *g2;
	double l1, l2;
	double worst = 0;
	char what[128];

	tcase_init(&t, c, 4, 7, 1);
	g2 = xcalloc(t.np, sizeof(float));
	l1 = tloss(&t, t.grad);
	/* First two sequences, then the last two, into one gradient. */
	t.B = 2;
	l2 = tloss(&t, g2);
	t.tokens += 2 * 7;
	t.targets += 2 * 7;
	t.weight += 2 * 7;
	l2 += tloss(&t, g2);
	t.tokens -= 2 * 7;
	t.targets -= 2 * 7;
	t.weight -= 2 * 7;
	t.B = 4;
	/* Per view, against 2 gamma(V) of its scale: the longest sums a
	 * gradient goes through are the V terms of a softmax row and of
	 * d(logits) @ W over the vocabulary. */
	for (int v = 0; v < t.nv; v++)
		worst = fmax(worst, normwise(g2 + t.v[v].off,
		                             t.grad + t.v[v].off, t.v[v].n));
	worst /= 2 * gamma_n(cg_cgpt_vocab(&c));
	/* The loss, a weighted mean (in double) of logsumexp(z) - z_t per
	 * position, moves by at most twice the largest change of a logit:
	 * by test_prefix's bound, 2 gamma(4C) of the logits' scale, a few
	 * units here; 1e-6 of a loss of about 4 leaves a margin (measured
	 * at most 7.7e-9, Haswell kernels). */
	snprintf(what, sizeof(what),
	         "a batch gives the sum of its halves (loss %.2g apart, "
	         "gradient error/bound %.3g)",
	         fabs(l1 - l2), worst);
	expect(fabs(l1 - l2) <= 1e-6 * fabs(l1) && worst <= 1, what);
	free(g2);
	tcase_free(&t);
}

static void
test_prefix(void)
{
	struct cg_cgpt_config c = {2, 9, 16, 2, 2, 1, 0, 0};
	struct tcase t;
	int V = cg_cgpt_vocab(&c);
	float *full;
	double worst = 0;

	tcase_init(&t, c, 2, 9, 1);
	full = xcalloc((size_t)2 * 9 * V, sizeof(float));
	if (cg_cgpt_forward(&c, t.params, t.ws, t.tokens, 2, 9) != 0)
		die("cg_cgpt_forward");
	memcpy(full, cg_cgpt_logits(t.ws), (size_t)2 * 9 * V * sizeof(float));
	/* The first 4 positions of each sequence, packed as [2, 4]. */
	int pre[2 * 4];
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < 4; i++)
			pre[b * 4 + i] = t.tokens[b * 9 + i];
	if (cg_cgpt_forward(&c, t.params, t.ws, pre, 2, 4) != 0)
		die("cg_cgpt_forward");
	const float *lg = cg_cgpt_logits(t.ws);
	/* Per row of logits, against 2 gamma(4C) of the row's scale: the
	 * longest sums of the forward pass are the 4C products of the MLP's
	 * projection (attention sums T <= 9 terms, LayerNorm C). */
	char what[128];
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < 4; i++)
			worst = fmax(
			    worst, normwise(lg + (size_t)(b * 4 + i) * V,
			                    full + (size_t)(b * 9 + i) * V, V));
	worst /= 2 * gamma_n(4 * c.C);
	snprintf(what, sizeof(what),
	         "causal: a prefix gets the logits it gets in the whole "
	         "sequence (error/bound %.3g)",
	         worst);
	expect(worst <= 1, what);
	free(full);
	tcase_free(&t);
}

static void
test_errors(void)
{
	struct cg_cgpt_config c = {2, 6, 8, 1, 2, 0, 0, 0}, other = c;
	struct tcase t;
	int V = cg_cgpt_vocab(&c);
	int ok = 1;

	tcase_init(&t, c, 2, 6, 0);
	for (size_t i = 0; i < t.np; i++)
		t.grad[i] = 3;
	double loss = 42;
	t.tokens[3] = V;
	ok &= cg_cgpt_forward_backward(&c, t.params, t.ws, t.tokens, t.targets,
	                               t.weight, 2, 6, t.grad, &loss) == -1 &&
	      strstr(cg_errmsg(), "token") != NULL;
	t.tokens[3] = -1;
	ok &= cg_cgpt_forward(&c, t.params, t.ws, t.tokens, 2, 6) == -1;
	t.tokens[3] = 0;
	t.weight[5] = 0.1f;
	t.targets[5] = V;
	ok &= cg_cgpt_forward_backward(&c, t.params, t.ws, t.tokens, t.targets,
	                               t.weight, 2, 6, t.grad, &loss) == -1 &&
	      strstr(cg_errmsg(), "target") != NULL;
	/* With weight 0 the same target is padding and never read. */
	t.weight[5] = 0;
	ok &= cg_cgpt_forward_backward(&c, t.params, t.ws, t.tokens, t.targets,
	                               t.weight, 2, 6, NULL, NULL) == 0;
	ok &= cg_cgpt_forward(&c, t.params, t.ws, t.tokens, 3, 6) == -1;
	ok &= cg_cgpt_forward(&c, t.params, t.ws, t.tokens, 0, 6) == -1;
	ok &= cg_cgpt_forward(&c, t.params, t.ws, t.tokens, 1, 7) == -1;
	other.tied = 1;
	ok &= cg_cgpt_forward(&other, t.params, t.ws, t.tokens, 1, 6) == -1 &&
	      strstr(cg_errmsg(), "another config") != NULL;
	for (size_t i = 0; i < t.np; i++)
		ok &= t.grad[i] == 3;
	ok &= loss == 42;
	expect(ok, "bad tokens, targets, sizes and configs fail, writing "
	           "nothing");
	tcase_free(&t);
}

/* ----------------------------------------------------------- the arch */

#define WINDOW_TAG 0x77696e646f77ULL /* as in arch_cgpt.c */

/* A text dataset: conditions "a", "b", "c"; example i has prompt_len pl[i]
 * (all 0 and no tensor when pl is NULL). */
static struct cg_shard *
text_shard(const char *const *texts, const uint32_t *pl, const uint32_t *cond,
           int n)
{
	static const char *const names[] = {"a", "b", "c"};
	struct cg_dataset d;
	struct cg_split sp = {CG_SPLIT_CONTIGUOUS, 1, NULL, 0, 0};
	uint64_t bytes = 0;
	int *assign = xcalloc(n, sizeof(int));

	memset(&d, 0, sizeof(d));
	d.kind = CG_PAYLOAD_TEXT;
	d.n = n;
	d.cond = xcalloc(n, sizeof(uint32_t));
	d.index = xcalloc(n, sizeof(uint64_t));
	d.offset = xcalloc(n + 1, sizeof(uint64_t));
	for (int i = 0; i < n; i++)
		bytes += strlen(texts[i]);
	d.payload = xcalloc(bytes, 1);
	if (pl)
		d.prompt_len = xcalloc(n, sizeof(uint32_t));
	bytes = 0;
	for (int i = 0; i < n; i++) {
		d.cond[i] = cond[i];
		d.index[i] = 100 + 3 * i; /* positions in some larger input */
		d.offset[i] = bytes;
		memcpy(d.payload + bytes, texts[i], strlen(texts[i]));
		bytes += strlen(texts[i]);
		if (pl)
			d.prompt_len[i] = pl[i];
	}
	d.offset[n] = bytes;
	if (cg_dataset_set_conditions(&d, names, 3) != 0)
		die("cg_dataset_set_conditions");
	struct cg_file *f = cg_shard_build(&d, assign, 0, &sp);
	if (f == NULL)
		die("cg_shard_build");
	/* A split input has at least 100 + 3 n examples. */
	cJSON *src = cJSON_GetObjectItemCaseSensitive(f->manifest, "source");
	cJSON_ReplaceItemInObject(src, "examples",
	                          cJSON_CreateNumber(100 + 3 * n));
	struct cg_shard *s = cg_shard_from_file(f, "test");
	if (s == NULL)
		die("cg_shard_from_file");
	cg_dataset_free(&d);
	free(assign);
	return s;
}

/*
 * The documented rule, written out again: example i as tokens, targets and
 * 0/1 weights of T positions.  Returns the scored count; *start says
 * whether the window holds the example's start.
 */
static int
ref_seq(const struct cg_shard *s, uint64_t i, int ncond, int T, uint64_t noise,
        int *tok, int *tgt, float *wt, int *start)
{
	uint64_t n = s->offset[i + 1] - s->offset[i];
	uint64_t P = s->prompt_len ? s->prompt_len[i] : 0, L = n + 3, o = 0;
	const uint8_t *p = s->payload + s->offset[i];
	int EOT = 256 + ncond, count = 0;
	/* The whole sequence: COND, the start mark, payload, the end. */
	int *seq = xcalloc(L, sizeof(int));

	seq[0] = 256 + (int)s->cond[i];
	seq[1] = EOT;
	for (uint64_t j = 0; j < n; j++)
		seq[2 + j] = p[j];
	seq[L - 1] = EOT;
	/* A window: COND, then seq[1 + o ..]; it holds T inputs and the
	 * next target, so everything fits when L <= T + 1. */
	if (L > (uint64_t)T + 1) {
		struct cg_rng r;
		/* The start window's last target is seq[T], the first text
		 * byte seq[2 + P]: it scores iff T >= 2 + P. */
		int can_start = (uint64_t)T >= 2 + P;
		cg_rng_derive(&r, noise, s->index[i], WINDOW_TAG);
		if (!can_start || cg_rng_below(&r, 4) != 0) {
			/* Offsets 1..L-1-T; the last target seq[o + T] must
			 * reach seq[2 + P]. */
			uint64_t first = can_start ? 1 : 2 + P - T;
			o = first + cg_rng_below(&r, L - 1 - T - first + 1);
		}
	}
	*start = o == 0;
	/* Position t > 0 holds seq[1 + o + t - 1]; its target is seq[1+o+t]. */
	for (int t = 0; t < T; t++) {
		uint64_t k = t == 0 ? 0 : 1 + o + t - 1;
		uint64_t kt = 1 + o + t;
		tok[t] = k < L ? seq[k] : EOT;
		int scored = kt < L && kt >= 2 + P;
		tgt[t] = scored ? seq[kt] : 0;
		wt[t] = (float)scored;
		count += scored;
	}
	free(seq);
	return count;
}

static struct cg_model *
make_model(int ncond, int T, int tied)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(cfg, "ncond", ncond);
	cJSON_AddNumberToObject(cfg, "context", T);
	cJSON_AddNumberToObject(cfg, "width", 16);
	cJSON_AddNumberToObject(cfg, "layers", 2);
	cJSON_AddNumberToObject(cfg, "heads", 2);
	cJSON_AddNumberToObject(cfg, "tied", tied);
	if ((m = cg_model_create("cgpt", cfg, NULL, 5)) == NULL)
		die("cg_model_create");
	return m;
}

/*
 * Batch ex[0..B) of s through the arch and through the model on the
 * sequences ref_seq builds: the same loss, count and gradient.  *starts
 * (may be NULL) += the windows that hold their example's start.
 */
static int
arch_vs_ref(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
            int B, uint64_t noise, struct cg_metrics *out, int *starts)
{
	struct cg_cgpt_config c = {3, 0, 16, 2, 2, 0, 0, 0};
	int T = (int)cg_json_u64(m->config, "context", 0);
	float *g1 = xcalloc(m->nparams, sizeof(float));
	float *g2 = xcalloc(m->nparams, sizeof(float));
	int *tok = xcalloc((size_t)B * T, sizeof(int));
	int *tgt = xcalloc((size_t)B * T, sizeof(int));
	float *wt = xcalloc((size_t)B * T, sizeof(float));
	int count = 0, ok;
	double loss;

	c.T = T;
	c.tied = (int)cg_json_u64(m->config, "tied", 0);
	if (m->arch->batch(m, s, ex, B, noise, g1, out) != 0)
		die("arch batch");
	for (int b = 0; b < B; b++) {
		int start;
		count += ref_seq(s, ex[b], 3, T, noise, tok + b * T,
		                 tgt + b * T, wt + b * T, &start);
		if (starts)
			*starts += start;
	}
	for (int i = 0; i < B * T; i++)
		wt[i] /= count;
	struct cg_cgpt_ws *ws = cg_cgpt_ws_new(&c, B, 0);
	if (ws == NULL || cg_cgpt_forward_backward(&c, m->params, ws, tok, tgt,
	                                           wt, B, T, g2, &loss) != 0)
		die("reference batch");
	/* The same sums, maybe in another order: per view, 2 gamma(V) of
	 * its scale (see U), and the loss as in test_halves. */
	double worst = 0;
	for (int v = 0; v < m->nviews; v++)
		worst =
		    fmax(worst, normwise(g1 + m->views[v].off,
		                         g2 + m->views[v].off, m->views[v].n));
	worst /= 2 * gamma_n(cg_cgpt_vocab(&c));
	ok = out->n == (uint64_t)B && fabs(out->part[0] * B - count) < 1e-9 &&
	     fabs(out->loss - loss) <= 1e-6 * loss && worst <= 1 &&
	     fabs(out->bits_per - out->loss / M_LN2) < 1e-12;
	if (!ok)
		printf("     arch loss %.9g tokens %.3f, reference %.9g %d; "
		       "gradient error/bound %.3g\n",
		       out->loss, out->part[0] * B, loss, count, worst);
	cg_cgpt_ws_free(ws);
	free(g1);
	free(g2);
	free(tok);
	free(tgt);
	free(wt);
	return ok;
}

static void
test_arch(void)
{
	static const char *const texts[] = {
	    "hi",           /* short, no prompt */
	    "",             /* empty: only EOT is scored */
	    "Q: 2+2? A: 4", /* prompt "Q: 2+2? " */
	    "the quick brown fox jumps over the lazy dog",  /* long */
	    "PROMPT THAT IS LONGER THAN THE CONTEXT: text", /* long prompt */
	    "abcdefghijklmn",  /* COND EOT text EOT = T + 1: fits exactly */
	    "abcdefghijklmno", /* one too long: two windows */
	};
	const uint32_t pl[] = {0, 0, 8, 4, 40, 3, 0};
	const uint32_t cond[] = {0, 1, 2, 0, 1, 2, 0};
	const int T = 16;
	struct cg_shard *s = text_shard(texts, pl, cond, 7);
	struct cg_shard *s0 = text_shard(texts, NULL, cond, 7);
	struct cg_metrics mt, m1, m2;
	int ok;

	for (int tied = 0; tied <= 1; tied++) {
		struct cg_model *m = make_model(3, T, tied);
		uint64_t all[] = {0, 1, 2, 3, 4, 5, 6}, rev[] = {5, 3, 1};
		uint64_t longs[] = {3, 6}, longp[] = {4};
		int starts = 0, starts_p = 0;
		char what[96];

		expect(m->arch->check_data(m, s) == 0 &&
		           m->arch->check_data(m, s0) == 0,
		       "text shards with and without prompts fit");
		snprintf(what, sizeof(what),
		         "%s: arch batches are the documented sequences",
		         tied ? "tied" : "untied");
		ok = arch_vs_ref(m, s, all, 7, 11, &mt, NULL) &&
		     arch_vs_ref(m, s, rev, 3, 11, &m1, NULL) &&
		     arch_vs_ref(m, s0, all, 7, 12, &m2, NULL) &&
		     arch_vs_ref(m, s, all + 3, 2, 99, &m2, NULL);
		/* Many windows of the long examples: start windows about
		 * one in four (64 draws each: 32 expected, sd 4.9), none
		 * where the prompt fills the context. */
		for (uint64_t k = 0; k < 64 && ok; k++)
			ok = arch_vs_ref(m, s, longs, 2, 1000 + k, &mt,
			                 &starts) &&
			     arch_vs_ref(m, s, longp, 1, 1000 + k, &mt,
			                 &starts_p);
		expect(ok, what);
		snprintf(what, sizeof(what),
		         "    start windows: %d of 128 (long prompt: %d of 64)",
		         starts, starts_p);
		expect(starts >= 12 && starts <= 52 && starts_p == 0, what);
		cg_model_free(m);
	}

	/* Counts: T tokens at most, prompts unscored, EOT scored. */
	struct cg_model *m = make_model(3, T, 0);
	int counts[7];
	for (uint64_t i = 0; i < 7; i++) {
		if (m->arch->batch(m, s, &i, 1, 3, NULL, &mt) != 0)
			die("arch batch");
		counts[i] = (int)lround(mt.part[0]);
	}
	expect(counts[0] == 3 && counts[1] == 1 && counts[2] == 5 &&
	           counts[5] == 12,
	       "scored: text bytes and EOT, never the prompt");
	expect(counts[3] >= 1 && counts[3] <= T && counts[4] >= 1 &&
	           counts[4] <= 5 && (counts[6] == 15 || counts[6] == 16),
	       "long examples: a window that scores at least one token");
	/* Example 6: the start window scores 15 (its first target is the
	 * start mark), the one middle window 16; both turn up. */
	int seen15 = 0, seen16 = 0;
	for (uint64_t k = 0; k < 32; k++) {
		uint64_t six = 6;
		if (m->arch->batch(m, s, &six, 1, k, NULL, &mt) != 0)
			die("arch batch");
		seen15 |= lround(mt.part[0]) == 15;
		seen16 |= lround(mt.part[0]) == 16;
	}
	expect(seen15 && seen16,
	       "one token too long: a start window or the middle one");

	/* Each example's share is the same wherever it lands. */
	uint64_t a[] = {0, 3}, b[] = {4, 2, 1}, ab[] = {3, 1, 4, 0, 2};
	if (m->arch->batch(m, s, a, 2, 8, NULL, &m1) != 0 ||
	    m->arch->batch(m, s, b, 3, 8, NULL, &m2) != 0 ||
	    m->arch->batch(m, s, ab, 5, 8, NULL, &mt) != 0)
		die("arch batch");
	double sum1 = m1.loss * m1.part[0] * 2 + m2.loss * m2.part[0] * 3;
	double sumt = mt.loss * mt.part[0] * 5;
	expect(fabs(sum1 - sumt) <= 1e-5 * sumt &&
	           fabs(m1.part[0] * 2 + m2.part[0] * 3 - mt.part[0] * 5) <
	               1e-9,
	       "batches split anyhow give the same total loss and count");

	/* Same noise seed, same windows; another seed moves them. */
	uint64_t longs[] = {3};
	double l[8];
	int differ = 0;
	for (int k = 0; k < 8; k++) {
		if (m->arch->batch(m, s, longs, 1, (uint64_t)k, NULL, &mt) != 0)
			die("arch batch");
		l[k] = mt.loss;
		differ |= k > 0 && l[k] != l[0];
	}
	if (m->arch->batch(m, s, longs, 1, 0, NULL, &mt) != 0)
		die("arch batch");
	expect(mt.loss == l[0] && differ,
	       "windows: a pure function of the noise seed");

	/* Image data and a model of other conditions do not fit. */
	struct cg_model *m4 = make_model(4, T, 0);
	expect(m4->arch->check_data(m4, s) == -1,
	       "a shard with another condition count is refused");
	cg_model_free(m4);
	cg_model_free(m);
	cg_shard_free(s);
	cg_shard_free(s0);
}

/* ------------------------------------------------------- checkpointing */

/*
 * A checkpointed workspace recomputes each block's activations from the
 * same inputs with the same kernels: the loss, the logits and every
 * gradient are the same bits as without, for calls that use part of the
 * workspace too; and it is smaller once there are two blocks or more.
 */
static void
test_checkpoint(void)
{
	const struct cg_cgpt_config cs[] = {
	    {2, 9, 16, 1, 2, 0, 0, 0},
	    {3, 9, 16, 3, 4, 0, 0, 0},
	    {2, 12, 24, 2, 3, 1, 0, 0},
	    {2, 9, 16, 2, 3, 0, 4, 40}, /* heads and MLP as pruned */
	};

	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		struct cg_cgpt_config c = cs[i];
		struct tcase t;
		struct cg_cgpt_ws *ck;
		char what[128];
		int same = 1;

		tcase_init(&t, c, 3, c.T, 1);
		if ((ck = cg_cgpt_ws_new(&c, 3, 1)) == NULL)
			die("cg_cgpt_ws_new");
		float *g2 = xcalloc(t.np, sizeof(float));
		size_t V = cg_cgpt_vocab(&c);
		/* The whole workspace, then 2 sequences of T - 3. */
		for (int k = 0; k < 2; k++) {
			int B = k ? 2 : 3, T = k ? c.T - 3 : c.T;
			double l1, l2;
			memset(t.grad, 0, t.np * sizeof(float));
			memset(g2, 0, t.np * sizeof(float));
			if (cg_cgpt_forward_backward(
			        &c, t.params, t.ws, t.tokens, t.targets,
			        t.weight, B, T, t.grad, &l1) != 0 ||
			    cg_cgpt_forward_backward(&c, t.params, ck, t.tokens,
			                             t.targets, t.weight, B, T,
			                             g2, &l2) != 0)
				die("cg_cgpt_forward_backward");
			same &= l1 == l2 &&
			        memcmp(t.grad, g2, t.np * sizeof(float)) == 0 &&
			        memcmp(cg_cgpt_logits(t.ws), cg_cgpt_logits(ck),
			               (size_t)B * T * V * sizeof(float)) == 0;
		}
		snprintf(what, sizeof(what),
		         "checkpointed, %d block%s%s: loss, logits, gradients "
		         "bit for bit",
		         c.L, c.L > 1 ? "s" : "", c.tied ? ", tied" : "");
		expect(same, what);

		size_t b1 = cg_cgpt_ws_bytes(&c, 1, 1);
		size_t b2 = cg_cgpt_ws_bytes(&c, 2, 1);
		size_t b3 = cg_cgpt_ws_bytes(&c, 3, 1);
		size_t full = cg_cgpt_ws_bytes(&c, 3, 0);
		snprintf(what, sizeof(what),
		         "    workspace for 3: %zu bytes checkpointed, %zu "
		         "not",
		         b3, full);
		expect(b1 > 0 && b1 < b2 && b2 < b3 &&
		           (c.L > 1 ? b3 < full : b3 == full),
		       what);
		free(g2);
		cg_cgpt_ws_free(ck);
		tcase_free(&t);
	}

	/* Through the arch: checkpointing alone changes nothing; chunks
	 * of one sequence only the rounding. */
	static const char *const texts[] = {"alpha beta", "gamma",
	                                    "delta epsilon zeta eta theta",
	                                    "iota", "kappa lambda mu"};
	const uint32_t cond[] = {0, 1, 2, 0, 1};
	struct cg_shard *s = text_shard(texts, NULL, cond, 5);
	struct cg_model *m = make_model(3, 16, 0);
	uint64_t ex[] = {4, 0, 2, 1, 3};
	float *g[3];
	struct cg_metrics mt[3];
	for (int k = 0; k < 3; k++) {
		g[k] = xcalloc(m->nparams, sizeof(float));
		m->checkpoint = k > 0;
		m->chunk = k == 2 ? 1 : 0;
		m->arch->free_ws(m);
		if (m->arch->batch(m, s, ex, 5, 7, g[k], &mt[k]) != 0)
			die("arch batch");
	}
	/* Chunks of one sum the batch's gradient in another order: per
	 * view, 2 gamma(V) of its scale (see U). */
	double worst = 0;
	for (int v = 0; v < m->nviews; v++)
		worst = fmax(worst,
		             normwise(g[2] + m->views[v].off,
		                      g[0] + m->views[v].off, m->views[v].n));
	const struct cg_cgpt_config mc = {3, 16, 16, 2, 2, 0, 0, 0}; /* m's */
	worst /= 2 * gamma_n(cg_cgpt_vocab(&mc));
	expect(mt[1].loss == mt[0].loss &&
	           memcmp(g[0], g[1], m->nparams * sizeof(float)) == 0,
	       "arch batch checkpointed: the same loss and gradient");
	char msg[128];
	snprintf(msg, sizeof(msg),
	         "arch batch in chunks of one: the same to rounding "
	         "(error/bound %.3g)",
	         worst);
	expect(fabs(mt[2].loss - mt[0].loss) <= 1e-6 * mt[0].loss &&
	           worst <= 1 && m->ws_batch == 1,
	       msg);
	size_t whole = m->arch->ws_bytes(m, 5, 0, 0);
	size_t ck = m->arch->ws_bytes(m, 5, 0, 1);
	size_t one = m->arch->ws_bytes(m, 5, 1, 1);
	expect(whole > ck && ck > one && one > 0,
	       "arch workspace: chunks and checkpointing shrink it");
	for (int k = 0; k < 3; k++)
		free(g[k]);
	cg_model_free(m);
	cg_shard_free(s);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	cg_rng_seed(&rng, 424242);
	test_config();
	test_views(0);
	test_views(1);
	test_init();
	test_fresh_loss();
	test_gradients(0);
	test_gradients(1);
	test_distill();
	test_halves();
	test_rounded_ffn();
	test_prefix();
	test_errors();
	test_arch();
	test_checkpoint();
	if (failures) {
		printf("test_cgpt: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_cgpt: all passed\n");
	return 0;
}

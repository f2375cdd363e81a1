/*
 * test_cclf.c - the image classifier against a naive double model and
 * finite differences.
 *
 * Checks the config limits, the view table (names, order, contiguity),
 * the error returns, the loss, accuracy, logits and features against an
 * independent double-precision implementation that walks the views,
 * batch invariance (a batch is the mean of its examples), and every
 * parameter gradient against central differences, element by element
 * and along a random direction, reported per view.  A corrupted
 * gradient must be caught.  Distillation (cg_cclf_distill_forward_backward):
 * its teacher term against a direct computation in double, its gradient
 * against central differences, teacher weight 0 giving plain training's
 * bits.  Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cclf/cclf.h"
#include "cg.h"
#include "cli/cli.h"
#include "nn/transformer.h"

#define TEST_NAME "test_cclf"
#include "check.h"

#include "fd.h"

#define MAXV 64

static struct cg_rng rng;

struct tcase {
	struct cg_cclf_config c;
	int B;
	size_t np;
	struct cg_view v[MAXV];
	int nv;
	float *params, *grad, *x;
	int *cond;
	struct cg_cclf_ws *ws;
};

static void
tcase_init(struct tcase *t, struct cg_cclf_config c, int B)
{
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->B = B;
	if ((t->np = cg_cclf_nparams(&c)) == 0 ||
	    (t->nv = cg_cclf_views(&c, t->v, MAXV)) < 0 ||
	    (t->ws = cg_cclf_ws_new(&c, B)) == NULL)
		die("tcase_init");
	t->params = xcalloc(t->np, sizeof(float));
	t->grad = xcalloc(t->np, sizeof(float));
	t->x = xcalloc((size_t)B * c.in_dim, sizeof(float));
	t->cond = xcalloc((size_t)B, sizeof(int));
	cg_cclf_init(&c, t->params, &rng);
	/* Biases away from 0, so that they matter. */
	for (size_t i = 0; i < t->np; i++)
		t->params[i] += 0.1f * cg_rng_normal(&rng);
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++)
		t->x[i] = cg_rng_uniform(&rng);
	for (int b = 0; b < B; b++)
		t->cond[b] = (int)cg_rng_below(&rng, (uint64_t)c.ncond);
}

static void
tcase_free(struct tcase *t)
{
	cg_cclf_ws_free(t->ws);
	free(t->params);
	free(t->grad);
	free(t->x);
	free(t->cond);
}

static double
tloss(struct tcase *t, float *grad, double *acc)
{
	double loss;

	if (cg_cclf_forward_backward(&t->c, t->params, t->ws, t->x, t->cond,
	                             t->B, grad, &loss, acc) != 0)
		die("cg_cclf_forward_backward");
	return loss;
}

/* ------------------------------------------------ the naive reference */

/* View i of t by name, checked: the reference walks names, not offsets
 * computed the way cclf.c computes them. */
static const struct cg_view *
view(const struct tcase *t, const char *name)
{
	for (int i = 0; i < t->nv; i++)
		if (strcmp(t->v[i].name, name) == 0)
			return &t->v[i];
	fprintf(stderr, TEST_NAME ": no view %s\n", name);
	exit(1);
}

/* out [OC] = W in + b (then ReLU) for the layer named layer. */
static void
ref_layer(const struct tcase *t, const char *layer, double *out,
          const double *in, int relu)
{
	char wn[64], bn[64];

	snprintf(wn, sizeof(wn), "%s.w", layer);
	snprintf(bn, sizeof(bn), "%s.b", layer);
	const struct cg_view *w = view(t, wn), *b = view(t, bn);
	int OC = (int)w->shape[0], C = (int)w->shape[1];

	for (int o = 0; o < OC; o++) {
		double s = t->params[b->off + o];
		for (int i = 0; i < C; i++)
			s += (double)t->params[w->off + (size_t)o * C + i] *
			     in[i];
		out[o] = relu && s < 0 ? 0 : s;
	}
}

/* Example b's logits [ncond] and features [hidden]. */
static void
ref_forward(const struct tcase *t, int b, double *logits, double *feat)
{
	const struct cg_cclf_config *c = &t->c;
	double *h = xcalloc((size_t)c->in_dim + c->hidden, sizeof(double));
	char name[32];

	for (int i = 0; i < c->in_dim; i++)
		h[i] = t->x[(size_t)b * c->in_dim + i];
	for (int l = 0; l < c->layers; l++) {
		snprintf(name, sizeof(name), "hid.%d", l);
		ref_layer(t, name, feat, h, 1);
		memcpy(h, feat, (size_t)c->hidden * sizeof(double));
	}
	ref_layer(t, "out", logits, feat, 0);
	free(h);
}

/* ------------------------------------------------------------- tests */

static void
test_config(void)
{
	struct cg_cclf_config c = {784, 10, 1024, 2, 0, 0, 0, 0};

	expect(cg_cclf_check_config(&c) == 0 &&
	           cg_cclf_nparams(&c) ==
	               (size_t)1024 * 785 + 1024 * 1025 + 10 * 1025,
	       "784-1024-1024-10: its parameter count");
	c.ncond = 1;
	expect(cg_cclf_check_config(&c) == -1 && strstr(cg_errmsg(), "1 cond"),
	       "one condition is refused");
	c.ncond = 10;
	c.layers = 0;
	expect(cg_cclf_nparams(&c) == 0 && strstr(cg_errmsg(), "layers"),
	       "no hidden layer is refused");
	c.layers = 64;
	c.hidden = 1 << 20;
	expect(cg_cclf_check_config(&c) == -1 &&
	           strstr(cg_errmsg(), "parameters"),
	       "2^20 wide and 64 deep: too many parameters");
}

static void
test_views(void)
{
	struct cg_cclf_config c = {12, 3, 5, 3, 0, 0, 0, 0};
	struct cg_view v[MAXV];
	int n = cg_cclf_views(&c, v, MAXV), ok = n == 8;
	static const char *const names[] = {"hid.0.w", "hid.0.b", "hid.1.w",
	                                    "hid.1.b", "hid.2.w", "hid.2.b",
	                                    "out.w",   "out.b"};
	size_t off = 0;

	for (int i = 0; ok && i < n; i++) {
		ok &= strcmp(v[i].name, names[i]) == 0 && v[i].off == off &&
		      v[i].decay == (i % 2 == 0);
		off += v[i].n;
	}
	ok &= off == cg_cclf_nparams(&c) && v[6].shape[0] == 3 &&
	      v[6].shape[1] == 5 && v[0].shape[1] == 12;
	expect(ok, "views: names, order, shapes, contiguous over the buffer");
	expect(cg_cclf_views(&c, v, 7) == -1, "views: too small a table");
}

static void
test_errors(void)
{
	struct tcase t;
	double loss = -1;

	tcase_init(&t, (struct cg_cclf_config){6, 3, 4, 1, 0, 0, 0, 0}, 3);
	t.cond[1] = 3;
	expect(cg_cclf_forward_backward(&t.c, t.params, t.ws, t.x, t.cond, 3,
	                                t.grad, &loss, NULL) == -1 &&
	           loss == -1 && strstr(cg_errmsg(), "condition 3"),
	       "a condition out of range: -1, nothing written");
	t.cond[1] = 0;
	expect(cg_cclf_forward_backward(&t.c, t.params, t.ws, t.x, t.cond, 4,
	                                NULL, &loss, NULL) == -1,
	       "a batch over the workspace's");
	expect(cg_cclf_forward_backward(&t.c, t.params, t.ws, t.x, NULL, 3,
	                                t.grad, NULL, NULL) == -1,
	       "a gradient without conditions");
	struct cg_cclf_config other = t.c;
	other.hidden = 5;
	expect(cg_cclf_forward_backward(&other, t.params, t.ws, t.x, t.cond, 3,
	                                NULL, &loss, NULL) == -1 &&
	           strstr(cg_errmsg(), "another config"),
	       "a workspace of another config");
	tcase_free(&t);
}

/* Loss, accuracy, logits and features against the reference; a batch
 * is the mean of its examples. */
static void
test_forward(struct cg_cclf_config c, int B)
{
	struct tcase t;
	double acc, loss, want = 0, wacc = 0, dl = 0, df = 0;
	double *logits = xcalloc((size_t)c.ncond, sizeof(double));
	double *feat = xcalloc((size_t)c.hidden, sizeof(double));
	char what[160];

	tcase_init(&t, c, B);
	loss = tloss(&t, NULL, &acc);
	for (int b = 0; b < B; b++) {
		double mx = -INFINITY, z = 0;
		int arg = 0;

		ref_forward(&t, b, logits, feat);
		for (int k = 0; k < c.ncond; k++) {
			dl = fmax(dl,
			          fabs(logits[k] -
			               cg_cclf_logits(t.ws)[b * c.ncond + k]));
			if (logits[k] > mx) {
				mx = logits[k];
				arg = k;
			}
		}
		for (int k = 0; k < c.hidden; k++)
			df = fmax(
			    df, fabs(feat[k] -
			             cg_cclf_features(t.ws)[b * c.hidden + k]));
		for (int k = 0; k < c.ncond; k++)
			z += exp(logits[k] - mx);
		want += (log(z) + mx - logits[t.cond[b]]) / B;
		wacc += (double)(arg == t.cond[b]) / B;
	}
	snprintf(what, sizeof(what),
	         "layers=%d B=%d: loss %.9g vs %.9g, accuracy %g vs %g, "
	         "logits within %.2g, features within %.2g",
	         c.layers, B, loss, want, acc, wacc, dl, df);
	expect(fabs(loss - want) < 1e-5 * (1 + want) && acc == wacc &&
	           dl < 1e-5 && df < 1e-5,
	       what);

	/* The mean of one-example batches is the batch's loss. */
	struct cg_cclf_ws *one = cg_cclf_ws_new(&c, 1);
	double sum = 0, sacc = 0;
	for (int b = 0; b < B; b++) {
		double l, a;
		if (one == NULL ||
		    cg_cclf_forward_backward(&c, t.params, one,
		                             t.x + (size_t)b * c.in_dim,
		                             t.cond + b, 1, NULL, &l, &a) != 0)
			die("one example");
		sum += l / B;
		sacc += a / B;
	}
	expect(fabs(sum - loss) < 1e-6 * (1 + loss) && fabs(sacc - acc) < 1e-12,
	       "a batch's loss and accuracy are the means of its examples'");
	cg_cclf_ws_free(one);
	free(logits);
	free(feat);
	tcase_free(&t);
}

/* The loss whose gradient view v of t holds. */
static double
view_loss(void *ctx, int v)
{
	struct tcase *t = ctx;

	(void)v;
	return tloss(t, NULL, NULL);
}

/* Every view's gradient against central differences (fd_views);
 * the largest relative error, each view's printed unless quiet. */
static double
check_grad(struct tcase *t, const float *grad, int quiet)
{
	return fd_views(&FD_IMAGE, t->v, t->nv, t->params, grad, view_loss, t,
	                NULL, &rng, quiet);
}

/* The same, quiet, over the views from *from on: where a spoilt gradient
 * lies, for a check that must fail (fd_reject). */
static double
check_grad_from(struct tcase *t, const float *grad, const struct cg_view *from)
{
	return fd_reject(&FD_IMAGE, t->v, t->nv, (int)(from - t->v), t->params,
	                 grad, view_loss, t, &rng);
}

static void
test_grad(struct cg_cclf_config c, int B)
{
	struct tcase t;
	char what[128];

	tcase_init(&t, c, B);
	tloss(&t, t.grad, NULL);
	printf("     config in=%d cond=%d hidden=%d layers=%d conv=%d, B=%d, "
	       "%zu params\n",
	       c.in_dim, c.ncond, c.hidden, c.layers, c.conv, B, t.np);
	double worst = check_grad(&t, t.grad, 0);
	snprintf(what, sizeof(what),
	         "layers=%d conv=%d: every gradient vs central differences "
	         "(worst rel err %.3g)",
	         c.layers, c.conv, worst);
	expect(worst <= FD_IMAGE.tol, what);

	t.grad[t.v[0].off + 1] += 0.05f;
	expect(check_grad_from(&t, t.grad, &t.v[0]) > FD_IMAGE.tol,
	       "checker rejects a gradient off by 0.05 in one element");
	t.grad[t.v[0].off + 1] -= 0.05f;
	const struct cg_view *v = &t.v[t.nv - 2];
	for (size_t j = 0; j < v->n; j++)
		t.grad[v->off + j] *= 0.97f;
	expect(check_grad_from(&t, t.grad, v) > FD_IMAGE.tol,
	       "checker rejects a view's gradient scaled by 0.97");
	tcase_free(&t);
}

/* ------------------------------------------------------- distillation */

/* A distilled case: t's, a teacher's log-probabilities at tau. */
struct dcase {
	struct tcase *t;
	float *tlogp; /* [B, ncond] */
	double alpha, tau;
};

static double
dloss(struct dcase *d, float *grad, double *data, double *teach)
{
	struct tcase *t = d->t;
	double loss;

	if (cg_cclf_distill_forward_backward(&t->c, t->params, t->ws, t->x,
	                                     t->cond, d->tlogp, d->alpha,
	                                     d->tau, t->B, grad, &loss, NULL,
	                                     data, teach) != 0)
		die("cg_cclf_distill_forward_backward");
	return loss;
}

static double
dview_loss(void *ctx, int v)
{
	(void)v;
	return dloss(ctx, NULL, NULL, NULL);
}

/*
 * The distilled loss (1 - alpha) xent + alpha tau^2 KL(teacher ||
 * student at tau): the teacher term against a direct computation in
 * double from the logits, every gradient against central differences
 * (the mix, then the teacher term alone), alpha 0 giving plain
 * training's bits, and a bad weight or temperature refused.
 */
static void
test_distill(struct cg_cclf_config c, int B)
{
	struct tcase t;
	const int K = c.ncond;
	char what[256];

	tcase_init(&t, c, B);
	struct dcase d = {&t, xcalloc((size_t)B * K, sizeof(float)), 0.7, 2};
	/* A teacher far from uniform: logits N(0, 2). */
	float *tl = xcalloc((size_t)B * K, sizeof(float));
	for (int i = 0; i < B * K; i++)
		tl[i] = 2 * cg_rng_normal(&rng);
	cg_log_softmax_forward(d.tlogp, tl, (float)d.tau, (size_t)B, K);
	double data, teach, loss = dloss(&d, NULL, &data, &teach);
	double plain = tloss(&t, NULL, NULL);
	/* directly: tau^2 mean_b sum_k p (log p - log q), q at tau */
	const float *lg = cg_cclf_logits(t.ws);
	double want = 0;
	for (int b = 0; b < B; b++) {
		const float *l = lg + (size_t)b * K;
		double mx = -INFINITY, z = 0;
		for (int k = 0; k < K; k++)
			mx = fmax(mx, l[k] / d.tau);
		for (int k = 0; k < K; k++)
			z += exp(l[k] / d.tau - mx);
		for (int k = 0; k < K; k++) {
			double lp = d.tlogp[(size_t)b * K + k];
			want += exp(lp) * (lp - (l[k] / d.tau - mx - log(z)));
		}
	}
	want *= d.tau * d.tau / B;
	snprintf(what, sizeof(what),
	         "distilled: teacher term %.6f (direct %.6f), data %.6f "
	         "(plain %.6f), loss %.6f their mix",
	         teach, want, data, plain, loss);
	expect(fabs(teach - want) < 1e-6 * (1 + want) && data == plain &&
	           teach > 0 &&
	           fabs(loss - (0.3 * data + 0.7 * teach)) < 1e-12 * (1 + loss),
	       what);

	/* Gradients: the mix, then the teacher term alone. */
	const double alphas[2] = {0.7, 1};
	for (int k = 0; k < 2; k++) {
		d.alpha = alphas[k];
		memset(t.grad, 0, t.np * sizeof(float));
		dloss(&d, t.grad, NULL, NULL);
		double worst = fd_views(&FD_IMAGE, t.v, t.nv, t.params, t.grad,
		                        dview_loss, &d, NULL, &rng, 1);
		snprintf(what, sizeof(what),
		         "distilled (alpha %g, tau %g, layers=%d conv=%d): every "
		         "gradient vs central differences (worst rel err %.3g)",
		         d.alpha, d.tau, c.layers, c.conv, worst);
		expect(worst <= FD_IMAGE.tol, what);
	}
	t.grad[t.v[0].off] += 0.05f;
	expect(fd_views(&FD_IMAGE, t.v, 1, t.params, t.grad, dview_loss, &d,
	                NULL, &rng, 1) > FD_IMAGE.tol,
	       "distilled: checker rejects a gradient off by 0.05");

	/* weight 0: plain training's loss and gradient, to the bit */
	float *g0 = xcalloc(t.np, sizeof(float));
	memset(t.grad, 0, t.np * sizeof(float));
	d.alpha = 0;
	double l0 = dloss(&d, t.grad, NULL, NULL);
	double lp = tloss(&t, g0, NULL);
	expect(l0 == lp && memcmp(t.grad, g0, t.np * sizeof(float)) == 0,
	       "distilled with teacher weight 0: plain training's bits");
	d.tau = 0;
	expect(cg_cclf_distill_forward_backward(&c, t.params, t.ws, t.x, t.cond,
	                                        d.tlogp, 0.5, 0, B, t.grad,
	                                        NULL, NULL, NULL, NULL) != 0 &&
	           cg_cclf_distill_forward_backward(
	               &c, t.params, t.ws, t.x, t.cond, d.tlogp, 1.5, 1, B,
	               t.grad, NULL, NULL, NULL, NULL) != 0 &&
	           cg_cclf_distill_forward_backward(
	               &c, t.params, t.ws, t.x, NULL, d.tlogp, 0.5, 1, B,
	               t.grad, NULL, NULL, NULL, NULL) != 0,
	       "distilled: temperature 0, weight 1.5 and no conditions "
	       "refused");
	free(g0);
	free(tl);
	free(d.tlogp);
	tcase_free(&t);
}

/* The CNN's config: the image must be in_dim's, and big enough. */
static void
test_conv_config(void)
{
	struct cg_cclf_config c = {784, 10, 64, 1, 8, 28, 28, 1};
	struct cg_view v[MAXV];
	int n;

	expect(cg_cclf_check_config(&c) == 0 &&
	           (n = cg_cclf_views(&c, v, MAXV)) == 10 &&
	           strcmp(v[0].name, "conv.0.w") == 0 && v[0].ndim == 4 &&
	           v[0].shape[0] == 8 && v[0].shape[1] == 1 &&
	           v[0].shape[2] == 3 && v[0].shape[3] == 3 &&
	           v[4].shape[0] == 32 && v[4].shape[1] == 16 &&
	           strcmp(v[6].name, "hid.0.w") == 0 &&
	           v[6].shape[1] == 7 * 7 * 32 &&
	           cg_cclf_nparams(&c) ==
	               v[n - 1].off + v[n - 1].n,
	       "conv=8 on 28x28: conv.0.w [8,1,3,3] .. conv.2.w [32,16,3,3], "
	       "then hid.0.w [64, 7*7*32]");
	c.height = 27;
	expect(cg_cclf_check_config(&c) != 0 &&
	           strstr(cg_errmsg(), "27x28x1 for 784") != NULL,
	       "an image shape that is not in_dim's is refused");
	c = (struct cg_cclf_config){2, 2, 4, 1, 4, 1, 2, 1};
	expect(cg_cclf_check_config(&c) == 0,
	       "a 1x2 image still makes a trunk (padding 1)");
	c.conv = CG_CCLF_MAX_CONV + 1;
	expect(cg_cclf_check_config(&c) != 0, "conv past its maximum is refused");
}

int
main(void)
{
	/* The BLAS as the programs run it (see lib/cli/runtime.c). */
	cg_set_threads(0);
	cg_rng_seed(&rng, 16);
	test_config();
	test_views();
	test_errors();
	test_forward((struct cg_cclf_config){13, 4, 9, 1, 0, 0, 0, 0}, 5);
	test_forward((struct cg_cclf_config){13, 4, 9, 3, 0, 0, 0, 0}, 7);
	test_grad((struct cg_cclf_config){7, 3, 6, 1, 0, 0, 0, 0}, 4);
	test_grad((struct cg_cclf_config){7, 5, 6, 2, 0, 0, 0, 0}, 5);
	/*
	 * The CNN: 4x4x3 images and 6x6x1.  A central difference whose step
	 * carries one of the trunk's many small ReLU inputs across 0 is off
	 * by the kink (3% on a bias, measured), so these cases are ones
	 * where no step of 1e-3 crosses one (other sizes and seeds did);
	 * tests/torch_check.py checks the CNN against PyTorch at other
	 * sizes, to 1e-8.
	 */
	test_grad((struct cg_cclf_config){48, 3, 6, 1, 2, 4, 4, 3}, 2);
	test_grad((struct cg_cclf_config){36, 4, 5, 1, 2, 6, 6, 1}, 2);
	test_conv_config();
	test_distill((struct cg_cclf_config){7, 3, 6, 1, 0, 0, 0, 0}, 4);
	test_distill((struct cg_cclf_config){7, 5, 6, 2, 0, 0, 0, 0}, 5);
	test_distill((struct cg_cclf_config){48, 3, 6, 1, 2, 4, 4, 3}, 2);
	if (failures) {
		printf("test_cclf: %d check(s) FAILED\n", failures);
		return 1;
	}
	printf("test_cclf: all checks passed\n");
	return 0;
}

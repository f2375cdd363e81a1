/*
 * test_cvae.c - the conditional VAE against a naive double model and
 * finite differences.
 *
 * Checks the config limits, the view table (names, order, contiguity),
 * the init, the error returns, the loss and decode against an independent
 * double-precision implementation that walks the views, batch invariance
 * (a batch is the mean of its examples), determinism, and every parameter
 * gradient against central differences, reported per view, plain and
 * distilled (a teacher's logits as soft targets; teacher weight 0 gives
 * plain training's bits), each with the prior N(0, I) and with a learnt
 * prior per class (class_prior), with the condition at the first layers
 * and at every hidden layer (cond_every), and draws from the prior.  A
 * corrupted gradient must be caught.  The convolutional nets (conv):
 * their shape checks and views, batch invariance, determinism, decoding,
 * and every gradient against central differences (their forward pass
 * against PyTorch's is torch_check.py's); checkpointed, the same bits of
 * loss and gradient from a smaller workspace.  Exit 0 pass, 1 fail
 * (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cvae/cvae.h"
#include "cg.h"
#include "cli/cli.h"

#define TEST_NAME "test_cvae"
#include "check.h"

#include "fd.h"

#define MAXV 64

static struct cg_rng rng;

/* ------------------------------------------------------ the test case */

struct tcase {
	struct cg_cvae_config c;
	int B;
	size_t np;
	struct cg_view v[MAXV];
	int nv;
	float *params, *grad, *x, *eps;
	int *cond;
	struct cg_cvae_ws *ws;
	/* Distilled (tl != NULL): a teacher's logits / tau [B, in_dim],
	 * the teacher term's weight alpha, and the last terms. */
	float *tl;
	float alpha, tau;
	double rec, kl, teach;
};

static void
tcase_init(struct tcase *t, struct cg_cvae_config c, int B, int max_batch)
{
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->B = B;
	t->np = cg_cvae_nparams(&c);
	t->nv = cg_cvae_views(&c, t->v, MAXV);
	t->params = xcalloc(t->np, sizeof(float));
	t->grad = xcalloc(t->np, sizeof(float));
	t->x = xcalloc((size_t)B * c.in_dim, sizeof(float));
	t->eps = xcalloc((size_t)B * c.latent, sizeof(float));
	t->cond = xcalloc(B, sizeof(int));
	cg_cvae_init(&c, t->params, &rng);
	/* Inits are small; bigger weights make the gradients less trivial. */
	for (size_t i = 0; i < t->np; i++)
		t->params[i] *= 2;
	/* The class prior starts at N(0, I), the condition's rows at zero;
	 * move them, so that they matter. */
	for (int i = 0; i < t->nv; i++)
		if (strncmp(t->v[i].name, "prior.", 6) == 0 ||
		    strstr(t->v[i].name, ".cond") != NULL)
			for (size_t j = 0; j < t->v[i].n; j++)
				t->params[t->v[i].off + j] =
				    0.5f * cg_rng_normal(&rng);
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++)
		t->x[i] = cg_rng_uniform(&rng);
	for (size_t i = 0; i < (size_t)B * c.latent; i++)
		t->eps[i] = cg_rng_normal(&rng);
	for (int b = 0; b < B; b++)
		t->cond[b] = (int)cg_rng_below(&rng, c.ncond);
	if ((t->ws = cg_cvae_ws_new(&c, max_batch, 0)) == NULL) {
		fprintf(stderr, "test_cvae: %s\n", cg_errmsg());
		exit(1);
	}
}

static void
tcase_free(struct tcase *t)
{
	free(t->params);
	free(t->grad);
	free(t->x);
	free(t->eps);
	free(t->cond);
	cg_cvae_ws_free(t->ws);
}

static double
tloss(struct tcase *t, float *grad)
{
	double loss;

	if (t->tl) {
		if (cg_cvae_distill_forward_backward(
		        &t->c, t->params, t->ws, t->x, t->cond, t->eps, t->tl,
		        t->alpha, t->tau, t->B, grad, &loss, &t->rec, &t->kl,
		        &t->teach) != 0) {
			fprintf(stderr, "test_cvae: %s\n", cg_errmsg());
			exit(1);
		}
		return loss;
	}
	if (cg_cvae_forward_backward(&t->c, t->params, t->ws, t->x, t->cond,
	                             t->eps, t->B, grad, &loss, NULL,
	                             NULL) != 0) {
		fprintf(stderr, "test_cvae: %s\n", cg_errmsg());
		exit(1);
	}
	return loss;
}

/* ------------------------------------------- a naive model in double */

/* out[nout] = w[nout, nin] in + b, optionally ReLU. */
static void
ref_linear(double *out, const double *in, const float *w, const float *b,
           int nin, int nout, int relu)
{
	for (int o = 0; o < nout; o++) {
		double s = b[o];
		for (int i = 0; i < nin; i++)
			s += (double)w[(size_t)o * nin + i] * in[i];
		out[o] = relu && s < 0 ? 0 : s;
	}
}

/* Linear layer i of the view table: W is v[2i], b is v[2i+1]. */
static void
ref_layer(const struct tcase *t, int i, double *out, const double *in, int relu)
{
	const struct cg_view *w = &t->v[2 * i], *b = &t->v[2 * i + 1];

	ref_linear(out, in, t->params + w->off, t->params + b->off,
	           (int)w->shape[1], (int)w->shape[0], relu);
}

/* Hidden layer l of side ("enc" or "dec", Linear i) for condition cond:
 * with cond_every and l > 0, the row cond of the view side.l.cond is
 * added before the ReLU. */
static void
ref_hidden(const struct tcase *t, const char *side, int l, int i, int cond,
           double *out, const double *in)
{
	char name[32];
	int H = t->c.hidden;

	if (!t->c.cond_every || l == 0) {
		ref_layer(t, i, out, in, 1);
		return;
	}
	ref_layer(t, i, out, in, 0);
	snprintf(name, sizeof(name), "%s.%d.cond", side, l);
	for (int v = 0; v < t->nv; v++)
		if (strcmp(t->v[v].name, name) == 0)
			for (int j = 0; j < H; j++)
				out[j] += t->params[t->v[v].off +
				                    (size_t)cond * H + j];
	for (int j = 0; j < H; j++)
		out[j] = out[j] < 0 ? 0 : out[j];
}

/* Decoder for one example: logits [in_dim] from z [latent]. */
static void
ref_decoder(const struct tcase *t, const double *z, int cond, double *logits)
{
	int L = t->c.layers, Z = t->c.latent, H = t->c.hidden;
	double *a = xcalloc(Z + t->c.ncond + H, sizeof(double));
	double *h = xcalloc(H, sizeof(double));

	memcpy(a, z, Z * sizeof(double));
	a[Z + cond] = 1;
	for (int l = 0; l < L; l++) {
		ref_hidden(t, "dec", l, L + 2 + l, cond, h, a);
		memcpy(a, h, H * sizeof(double));
	}
	ref_layer(t, 2 * L + 2, logits, a, 0);
	free(a);
	free(h);
}

static double
ref_loss(const struct tcase *t, double *rec, double *kl)
{
	int D = t->c.in_dim, K = t->c.ncond, H = t->c.hidden;
	int L = t->c.layers, Z = t->c.latent;
	double *a = xcalloc(D + K + H, sizeof(double));
	double *h = xcalloc(H, sizeof(double));
	double *mu = xcalloc(Z, sizeof(double)),
	       *lv = xcalloc(Z, sizeof(double));
	double *z = xcalloc(Z, sizeof(double)),
	       *lg = xcalloc(D, sizeof(double));
	double srec = 0, skl = 0;

	for (int b = 0; b < t->B; b++) {
		memset(a, 0, (D + K + H) * sizeof(double));
		for (int i = 0; i < D; i++)
			a[i] = t->x[(size_t)b * D + i];
		a[D + t->cond[b]] = 1;
		for (int l = 0; l < L; l++) {
			ref_hidden(t, "enc", l, l, t->cond[b], h, a);
			memcpy(a, h, H * sizeof(double));
		}
		ref_layer(t, L, mu, a, 0);
		ref_layer(t, L + 1, lv, a, 0);
		for (int i = 0; i < Z; i++) {
			double pm = 0, plv = 0;
			if (t->c.class_prior) {
				/* after the layers: prior.mu, prior.logvar */
				size_t k = (size_t)t->cond[b] * Z + i;
				pm = t->params[t->v[4 * L + 6].off + k];
				plv = t->params[t->v[4 * L + 7].off + k];
			}
			z[i] = mu[i] +
			       exp(0.5 * lv[i]) * t->eps[(size_t)b * Z + i];
			skl +=
			    0.5 * (plv - lv[i] - 1 +
			           (exp(lv[i]) + (mu[i] - pm) * (mu[i] - pm)) /
			               exp(plv));
		}
		ref_decoder(t, z, t->cond[b], lg);
		for (int i = 0; i < D; i++) {
			double p = 1 / (1 + exp(-lg[i]));
			double x = t->x[(size_t)b * D + i];
			srec -= x * log(p) + (1 - x) * log(1 - p);
		}
	}
	free(a);
	free(h);
	free(mu);
	free(lv);
	free(z);
	free(lg);
	*rec = srec / t->B;
	*kl = skl / t->B;
	return *rec + *kl;
}

/* ---------------------------------------------------------- the checks */

static void
test_config(void)
{
	struct cg_cvae_config good = {784, 10, 400, 2, 20, 0, 0, 0, 0, 0, 0};
	struct cg_cvae_config prior = {784, 10, 400, 2, 20, 1, 0, 0, 0, 0, 0};
	struct cg_cvae_config every = {784, 10, 400, 3, 20, 1, 1, 0, 0, 0, 0};
	struct cg_cvae_config bad[] = {
	    {784, 10, 400, 2, 20, 2, 0, 0, 0, 0, 0},
	    {784, 10, 400, 2, 20, -1, 0, 0, 0, 0, 0},
	    {784, 10, 400, 2, 20, 0, 2, 0, 0, 0, 0},
	    {0, 10, 400, 2, 20, 0, 0, 0, 0, 0, 0},
	    {784, 0, 400, 2, 20, 0, 0, 0, 0, 0, 0},
	    {784, 10, -1, 2, 20, 0, 0, 0, 0, 0, 0},
	    {784, 10, 400, 0, 20, 0, 0, 0, 0, 0, 0},
	    {784, 10, 400, 2, 0, 0, 0, 0, 0, 0, 0},
	    {(1 << 20) + 1, 10, 4, 1, 2, 0, 0, 0, 0, 0, 0},
	    {1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 0, 0, 0, 0, 0, 0},
	    {64, 10, 1 << 20, 64, 20, 0, 0, 0, 0, 0, 0},
	};
	int ok = 1;

	expect(cg_cvae_check_config(&good) == 0, "config 784/10/400x2/20 ok");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cg_seterr("none");
		ok &= cg_cvae_check_config(&bad[i]) == -1 &&
		      strcmp(cg_errmsg(), "none") != 0 &&
		      cg_cvae_nparams(&bad[i]) == 0 &&
		      cg_cvae_ws_new(&bad[i], 4, 0) == NULL;
	}
	printf("     e.g. \"%s\"\n", cg_errmsg());
	expect(ok, "bad configs rejected with a message (<= 0, > 2^20, "
	           "too many parameters, class_prior or cond_every not 0 or "
	           "1)");

	/* Hand count: enc 794*400+400 + 400*400+400, heads 2*(20*400+20),
	 * dec 30*400+400 + 400*400+400, out 400*784+784. */
	size_t want = 794 * 400 + 400 + 400 * 400 + 400 + 2 * (20 * 400 + 20) +
	              30 * 400 + 400 + 400 * 400 + 400 + 400 * 784 + 784;
	expect(cg_cvae_nparams(&good) == want, "nparams matches hand count");
	expect(cg_cvae_check_config(&prior) == 0 &&
	           cg_cvae_nparams(&prior) == want + 2 * 10 * 20,
	       "class prior: 2 x ncond x latent more");
	/* a third layer each side: 2 x (400*400+400) more */
	expect(cg_cvae_check_config(&every) == 0 &&
	           cg_cvae_nparams(&every) == want + 2 * (400 * 400 + 400) +
	                                          2 * 10 * 20 +
	                                          2 * 2 * 10 * 400,
	       "condition at every layer: 2 x (layers - 1) x ncond x hidden "
	       "more");
	expect(cg_cvae_ws_new(&good, 0, 0) == NULL &&
	           cg_cvae_ws_new(&good, CG_CVAE_MAX_BATCH + 1, 0) == NULL,
	       "workspace rejects batch 0 and batch > max");
	cg_cvae_ws_free(NULL);
}

static void
test_views(void)
{
	struct cg_cvae_config c = {5, 3, 4, 3, 2, 0, 0, 0, 0, 0, 0};
	struct cg_view v[MAXV];
	const char *names[] = {
	    "enc.0.w", "enc.0.b",   "enc.1.w",   "enc.1.b",      "enc.2.w",
	    "enc.2.b", "enc.mu.w",  "enc.mu.b",  "enc.logvar.w", "enc.logvar.b",
	    "dec.0.w", "dec.0.b",   "dec.1.w",   "dec.1.b",      "dec.2.w",
	    "dec.2.b", "dec.out.w", "dec.out.b",
	};
	/* [out, in] of each Linear, in order. */
	const int shp[][2] = {{4, 8}, {4, 4}, {4, 4}, {2, 4}, {2, 4},
	                      {4, 5}, {4, 4}, {4, 4}, {5, 4}};
	int n = cg_cvae_views(&c, v, MAXV), ok = n == 18;
	size_t off = 0;

	for (int i = 0; ok && i < n; i++) {
		const int *s = shp[i / 2];
		ok &= strcmp(v[i].name, names[i]) == 0 && v[i].off == off;
		if (i % 2 == 0)
			ok &= v[i].ndim == 2 &&
			      v[i].shape[0] == (uint64_t)s[0] &&
			      v[i].shape[1] == (uint64_t)s[1] &&
			      v[i].n == (size_t)s[0] * s[1] && v[i].decay == 1;
		else
			ok &= v[i].ndim == 1 &&
			      v[i].shape[0] == (uint64_t)s[0] &&
			      v[i].n == (size_t)s[0] && v[i].decay == 0;
		off += v[i].n;
	}
	ok &= off == cg_cvae_nparams(&c);
	expect(ok, "views: names, order, shapes, decay, contiguous, cover "
	           "nparams");
	expect(cg_cvae_views(&c, v, 17) == -1, "views: max too small is -1");

	/* The class prior: the same views, then its two tables. */
	struct cg_view p[MAXV];
	c.class_prior = 1;
	n = cg_cvae_views(&c, p, MAXV);
	ok = n == 20 && memcmp(p, v, 18 * sizeof(*v)) == 0;
	for (int i = 18; ok && i < 20; i++) {
		ok &= strcmp(p[i].name,
		             i == 18 ? "prior.mu" : "prior.logvar") == 0 &&
		      p[i].off == off + (i - 18) * 3 * 2 && p[i].ndim == 2 &&
		      p[i].shape[0] == 3 && p[i].shape[1] == 2 && p[i].n == 6 &&
		      p[i].decay == 0;
	}
	ok &= off + 12 == cg_cvae_nparams(&c);
	expect(ok, "views with the class prior: the layers' as without, then "
	           "prior.mu and prior.logvar [ncond, latent], decay 0");
	expect(cg_cvae_views(&c, p, 19) == -1,
	       "views with the class prior: max too small is -1");

	/* And the condition's rows of layers 1 and 2, each side. */
	const char *cn[] = {"enc.1.cond", "enc.2.cond", "dec.1.cond",
	                    "dec.2.cond"};
	c.cond_every = 1;
	n = cg_cvae_views(&c, v, MAXV);
	ok = n == 24 && n == cg_cvae_nviews(&c) &&
	     memcmp(p, v, 20 * sizeof(*v)) == 0;
	off += 12;
	for (int i = 20; ok && i < 24; i++) {
		ok &= strcmp(v[i].name, cn[i - 20]) == 0 && v[i].off == off &&
		      v[i].ndim == 2 && v[i].shape[0] == 3 &&
		      v[i].shape[1] == 4 && v[i].n == 12 && v[i].decay == 0;
		off += v[i].n;
	}
	ok &= off == cg_cvae_nparams(&c);
	expect(ok, "views with the condition at every layer: then "
	           "enc.1.cond .. dec.2.cond [ncond, hidden], decay 0");
}

static void
test_init(void)
{
	struct cg_cvae_config c = {9, 3, 7, 2, 3, 0, 0, 0, 0, 0, 0};
	size_t n = cg_cvae_nparams(&c);
	float *p = xcalloc(n, sizeof(float)), *q = xcalloc(n, sizeof(float));
	struct cg_view v[MAXV];
	struct cg_rng r;
	int nv = cg_cvae_views(&c, v, MAXV), inb = 1;

	cg_rng_seed(&r, 7);
	cg_cvae_init(&c, p, &r);
	cg_rng_seed(&r, 7);
	cg_cvae_init(&c, q, &r);
	expect(memcmp(p, q, n * sizeof(float)) == 0, "init: same seed, same "
	                                             "params");
	cg_rng_seed(&r, 8);
	cg_cvae_init(&c, q, &r);
	expect(memcmp(p, q, n * sizeof(float)) != 0, "init: seeds differ");
	for (int i = 0; i < nv; i++) {
		if (strncmp(v[i].name, "prior.", 6) == 0) {
			for (size_t j = 0; j < v[i].n; j++)
				inb &= p[v[i].off + j] == 0;
			continue;
		}
		/* The fan-in is the matching weight's column count. */
		double bound = 1 / sqrt((double)v[i & ~1].shape[1]);
		double mx = 0;
		for (size_t j = 0; j < v[i].n; j++)
			mx = fmax(mx, fabs(p[v[i].off + j]));
		inb &= mx <= bound && mx > 0.5 * bound;
	}
	expect(inb, "init: each tensor in U(-1/sqrt(fan_in), 1/sqrt(fan_in))");
	free(p);
	free(q);
}

/* The class prior at init draws the same layers as without it: the
 * tables follow them, zero, and take no draws. */
static void
test_init_prior(void)
{
	struct cg_cvae_config c = {9, 3, 7, 2, 3, 0, 0, 0, 0, 0, 0};
	struct cg_cvae_config cp = {9, 3, 7, 2, 3, 1, 1, 0, 0, 0, 0};
	size_t n = cg_cvae_nparams(&c), np = cg_cvae_nparams(&cp);
	float *p = xcalloc(n, sizeof(float)), *q = xcalloc(np, sizeof(float));
	struct cg_rng r;
	int zero = 1;

	for (size_t i = 0; i < np; i++)
		q[i] = 1;
	cg_rng_seed(&r, 7);
	cg_cvae_init(&c, p, &r);
	cg_rng_seed(&r, 7);
	cg_cvae_init(&cp, q, &r);
	for (size_t i = n; i < np; i++)
		zero &= q[i] == 0;
	expect(np == n + 2 * 3 * 3 + 2 * 3 * 7 &&
	           memcmp(p, q, n * sizeof(float)) == 0 && zero,
	       "init with the class prior and the condition at every layer: "
	       "the same layers, the prior (N(0, I)) and the rows zero");
	free(p);
	free(q);
}

/* Draws from the prior: mean + exp(logvar / 2) eps of each example's
 * condition, eps itself without a class prior. */
static void
test_prior_sample(void)
{
	struct cg_cvae_config c = {6, 3, 5, 1, 4, 1, 0, 0, 0, 0, 0}, c0 = c;
	struct tcase t;
	enum { B = 5 };
	float z[B * 4];
	double worst = 0;
	int ok;

	c0.class_prior = 0;
	tcase_init(&t, c, B, B);
	const float *pm = t.params + t.v[4 * c.layers + 6].off;
	const float *plv = t.params + t.v[4 * c.layers + 7].off;
	ok = cg_cvae_prior_sample(&c, t.params, z, t.eps, t.cond, B) == 0;
	for (int b = 0; b < B; b++)
		for (int i = 0; i < 4; i++) {
			size_t k = (size_t)t.cond[b] * 4 + i;
			double want =
			    pm[k] + exp(0.5 * plv[k]) * t.eps[b * 4 + i];
			worst = fmax(worst, fabs(z[b * 4 + i] - want));
		}
	ok &= worst < 1e-6;
	ok &= cg_cvae_prior_sample(&c0, t.params, z, t.eps, t.cond, B) == 0 &&
	      memcmp(z, t.eps, sizeof(z)) == 0;
	t.cond[2] = 3;
	ok &= cg_cvae_prior_sample(&c, t.params, z, t.eps, t.cond, B) == -1;
	expect(ok, "prior draws: the class's mean and variance (N(0, I) "
	           "without a class prior); a bad condition is -1");
	tcase_free(&t);
}

static void
test_errors(void)
{
	struct cg_cvae_config c = {6, 3, 5, 1, 2, 0, 0, 0, 0, 0, 0};
	struct cg_cvae_config other = {6, 3, 5, 2, 2, 0, 0, 0, 0, 0, 0};
	struct cg_cvae_config withprior = {6, 3, 5, 1, 2, 1, 0, 0, 0, 0, 0};
	struct tcase t;
	double loss;
	int ok = 1;

	tcase_init(&t, c, 3, 4);
	for (size_t i = 0; i < t.np; i++)
		t.grad[i] = 0.5f;
	ok &= cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond, t.eps,
	                               0, t.grad, &loss, NULL, NULL) == -1;
	ok &= cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond, t.eps,
	                               5, t.grad, &loss, NULL, NULL) == -1;
	t.cond[1] = 3;
	ok &= cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond, t.eps,
	                               3, t.grad, &loss, NULL, NULL) == -1;
	printf("     e.g. \"%s\"\n", cg_errmsg());
	t.cond[1] = -1;
	ok &= cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond, t.eps,
	                               3, t.grad, &loss, NULL, NULL) == -1;
	ok &= cg_cvae_decode(&c, t.params, t.ws, t.eps, t.cond, 3, t.x) == -1;
	t.cond[1] = 0;
	ok &=
	    cg_cvae_forward_backward(&other, t.params, t.ws, t.x, t.cond, t.eps,
	                             3, t.grad, &loss, NULL, NULL) == -1;
	ok &=
	    cg_cvae_forward_backward(&withprior, t.params, t.ws, t.x, t.cond,
	                             t.eps, 3, t.grad, &loss, NULL, NULL) == -1;
	for (size_t i = 0; i < t.np; i++)
		ok &= t.grad[i] == 0.5f;
	expect(ok, "bad batch, condition or workspace: -1, grad untouched");
	tcase_free(&t);
}

/* Loss, decode and batch invariance against the naive model. */
static void
test_forward(struct cg_cvae_config c, int B)
{
	struct tcase t;
	double loss, rec, kl, loss2, rrec, rkl, rloss;
	char what[160];

	tcase_init(&t, c, B, B + 3);
	if (cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond, t.eps, B,
	                             t.grad, &loss, &rec, &kl) != 0 ||
	    cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond, t.eps, B,
	                             NULL, &loss2, NULL, NULL) != 0) {
		fprintf(stderr, "test_cvae: %s\n", cg_errmsg());
		exit(1);
	}
	rloss = ref_loss(&t, &rrec, &rkl);
	snprintf(what, sizeof(what),
	         "layers=%d%s%s: loss %.6f rec %.6f kl %.6f vs double model "
	         "(rel diff %.2g)",
	         c.layers, c.class_prior ? " class prior" : "",
	         c.cond_every ? " cond every" : "", loss, rec, kl,
	         fabs(loss - rloss) / rloss);
	expect(fabs(loss - rloss) <= 1e-5 * rloss &&
	           fabs(rec - rrec) <= 1e-5 * rrec &&
	           fabs(kl - rkl) <= 1e-5 * fabs(rkl) + 1e-6 && loss2 == loss &&
	           fabs(rec + kl - loss) < 1e-12 * loss,
	       what);

	/* Decode on z = eps against the naive decoder. */
	float *probs = xcalloc((size_t)B * c.in_dim, sizeof(float));
	double *z = xcalloc(c.latent, sizeof(double));
	double *lg = xcalloc(c.in_dim, sizeof(double));
	double worst = 0;

	if (cg_cvae_decode(&c, t.params, t.ws, t.eps, t.cond, B, probs) != 0) {
		fprintf(stderr, "test_cvae: %s\n", cg_errmsg());
		exit(1);
	}
	for (int b = 0; b < B; b++) {
		for (int i = 0; i < c.latent; i++)
			z[i] = t.eps[(size_t)b * c.latent + i];
		ref_decoder(&t, z, t.cond[b], lg);
		for (int i = 0; i < c.in_dim; i++) {
			double p = 1 / (1 + exp(-lg[i]));
			double e = fabs(p - probs[(size_t)b * c.in_dim + i]);
			if (!(e <= worst))
				worst = e;
		}
	}
	snprintf(what, sizeof(what),
	         "layers=%d: decode vs double decoder (max diff %.2g)",
	         c.layers, worst);
	expect(worst < 1e-5, what);

	/* A batch is the mean of its examples, loss and gradient. */
	float *gsum = xcalloc(t.np, sizeof(float));
	double lsum = 0, gdiff = 0, gmax = 0;
	for (int b = 0; b < B; b++) {
		double l;
		if (cg_cvae_forward_backward(
		        &c, t.params, t.ws, t.x + (size_t)b * c.in_dim,
		        t.cond + b, t.eps + (size_t)b * c.latent, 1, gsum, &l,
		        NULL, NULL) != 0) {
			fprintf(stderr, "test_cvae: %s\n", cg_errmsg());
			exit(1);
		}
		lsum += l;
	}
	for (size_t i = 0; i < t.np; i++) {
		gdiff = fmax(gdiff, fabs(gsum[i] / B - t.grad[i]));
		gmax = fmax(gmax, fabs(t.grad[i]));
	}
	snprintf(what, sizeof(what),
	         "layers=%d: batch of %d = mean of single examples (loss "
	         "diff %.2g, grad diff %.2g)",
	         c.layers, B, fabs(lsum / B - loss), gdiff);
	expect(fabs(lsum / B - loss) < 1e-5 * loss && gdiff < 1e-5 * gmax,
	       what);

	/* Same inputs, same bits (threads included). */
	float *g2 = xcalloc(t.np, sizeof(float));
	tloss(&t, g2);
	expect(memcmp(g2, t.grad, t.np * sizeof(float)) == 0,
	       "deterministic gradient");

	free(g2);
	free(gsum);
	free(probs);
	free(z);
	free(lg);
	tcase_free(&t);
}

/* The loss whose gradient view v of t holds. */
static double
view_loss(void *ctx, int v)
{
	struct tcase *t = ctx;

	(void)v;
	return tloss(t, NULL);
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
test_grad(struct cg_cvae_config c, int B)
{
	struct tcase t;
	char what[128];

	tcase_init(&t, c, B, B);
	tloss(&t, t.grad);
	printf("     config in=%d cond=%d hidden=%d layers=%d latent=%d "
	       "class_prior=%d cond_every=%d, B=%d, %zu params\n",
	       c.in_dim, c.ncond, c.hidden, c.layers, c.latent, c.class_prior,
	       c.cond_every, B, t.np);
	double worst = check_grad(&t, t.grad, 0);
	snprintf(what, sizeof(what),
	         "layers=%d%s%s: every gradient vs central differences "
	         "(worst rel err %.3g)",
	         c.layers, c.class_prior ? " class prior" : "",
	         c.cond_every ? " cond every" : "", worst);
	expect(worst <= FD_IMAGE.tol, what);

	/* The check must be able to fail: spoil one decoder weight. */
	t.grad[t.v[2 * c.layers + 4].off + 1] += 0.05f;
	expect(check_grad_from(&t, t.grad, &t.v[2 * c.layers + 4]) >
	           FD_IMAGE.tol,
	       "checker rejects a gradient off by 0.05 in one element");
	t.grad[t.v[2 * c.layers + 4].off + 1] -= 0.05f;

	/* And a whole view 3% off, which no single element shows. */
	const struct cg_view *v = &t.v[2];
	for (size_t j = 0; j < v->n; j++)
		t.grad[v->off + j] *= 0.97f;
	expect(check_grad_from(&t, t.grad, v) > FD_IMAGE.tol,
	       "checker rejects a view's gradient scaled by 0.97");
	for (size_t j = 0; j < v->n; j++)
		t.grad[v->off + j] /= 0.97f;

	/* And the prior's: one of its log-variances off. */
	if (c.class_prior) {
		t.grad[t.v[4 * c.layers + 7].off + 1] += 0.05f;
		expect(check_grad_from(&t, t.grad, &t.v[4 * c.layers + 7]) >
		           FD_IMAGE.tol,
		       "checker rejects a prior gradient off by 0.05");
		t.grad[t.v[4 * c.layers + 7].off + 1] -= 0.05f;
	}
	/* And a condition's row. */
	if (c.cond_every && c.layers > 1) {
		t.grad[t.v[t.nv - 1].off + 1] += 0.05f;
		expect(
		    check_grad_from(&t, t.grad, &t.v[t.nv - 1]) > FD_IMAGE.tol,
		    "checker rejects a condition row's gradient off by 0.05");
	}
	tcase_free(&t);
}

/*
 * Distillation: the teacher's logits / tau as soft Bernoulli targets.
 * The teacher term against a direct computation in double from the
 * decoder's logits, every gradient against central differences for a
 * mix and for the teacher term alone, and alpha = 0 giving plain
 * training's bits.
 */
static void
test_distill(struct cg_cvae_config c, int B)
{
	struct tcase t;
	const size_t N = (size_t)B * c.in_dim;
	char what[192];

	tcase_init(&t, c, B, B);
	float *g0 = xcalloc(t.np, sizeof(float));
	t.tl = xcalloc(N, sizeof(float));
	t.tau = 2.0f;
	for (size_t i = 0; i < N; i++)
		t.tl[i] = 1.5f * cg_rng_normal(&rng) / t.tau;

	t.alpha = 0.6f;
	double loss = tloss(&t, NULL), teach = 0;
	const float *lg = cg_cvae_logits(t.ws);
	for (size_t i = 0; i < N; i++) {
		double p = 1 / (1 + exp(-(double)t.tl[i]));
		double q = 1 / (1 + exp(-(double)lg[i] / t.tau));
		teach += p * log(p / q) + (1 - p) * log((1 - p) / (1 - q));
	}
	teach *= (double)t.tau * t.tau / B;
	double mix = (0.4 * t.rec + t.kl) + 0.6 * teach;
	snprintf(what, sizeof(what),
	         "distilled: teacher term %.6f (direct %.6f), loss %.6f "
	         "(from the parts %.6f)",
	         t.teach, teach, loss, mix);
	expect(fabs(t.teach - teach) <= 1e-6 * teach && teach > 0.1 &&
	           fabs(loss - mix) <= 1e-6 * fabs(mix),
	       what);

	const float alphas[] = {0.6f, 1.0f};
	for (int a = 0; a < 2; a++) {
		t.alpha = alphas[a];
		memset(t.grad, 0, t.np * sizeof(float));
		tloss(&t, t.grad);
		double worst = check_grad(&t, t.grad, 1);
		snprintf(what, sizeof(what),
		         "distilled (alpha %.1f, tau %.0f, layers=%d): every "
		         "gradient vs central differences (worst rel err %.3g)",
		         t.alpha, t.tau, c.layers, worst);
		expect(worst <= FD_IMAGE.tol, what);
	}
	/* The check can fail here too: one decoder weight spoilt. */
	t.grad[t.v[2 * c.layers + 4].off + 1] += 0.05f;
	expect(check_grad_from(&t, t.grad, &t.v[2 * c.layers + 4]) >
	           FD_IMAGE.tol,
	       "distilled: checker rejects a gradient off by 0.05");

	/* alpha 0: plain training's loss and gradient, bit for bit. */
	float *tl = t.tl;
	t.alpha = 0;
	memset(t.grad, 0, t.np * sizeof(float));
	double ld = tloss(&t, t.grad);
	t.tl = NULL;
	double lp = tloss(&t, g0);
	expect(ld == lp && memcmp(t.grad, g0, t.np * sizeof(float)) == 0,
	       "distilled with teacher weight 0: plain training's bits");
	expect(cg_cvae_distill_forward_backward(
	           &t.c, t.params, t.ws, t.x, t.cond, t.eps, tl, 0.5f, 0.0f, B,
	           NULL, NULL, NULL, NULL, NULL) == -1,
	       "distilled: temperature 0 refused");
	free(tl);
	free(g0);
	tcase_free(&t);
}

/*
 * The convolutional nets' differences: their loss sums BCE over 64 to
 * 192 pixels (some 50 to 150 a batch), whose float rounding, ~1e-5,
 * makes ~5e-3 of noise in a difference of step 2e-3 (measured: 1% to
 * 3% past FD_IMAGE's floor on every view, the directional check fine).
 * The nets are smooth (SiLU, no kink), so a step of 1e-2 extrapolated
 * (h^2 cancelled) keeps truncation small and the noise a fifth.  The
 * directional step, every element of a view at once, is 3e-3: at 2e-3
 * the rounding of oneDNN's AVX-512 convolutions (an Intel Xeon, family 6
 * model 207) left 1.28% on the 4x8x2 net's enc.c1.b, at 5e-3 the
 * truncation 3.1%; at 3e-3 the worst view is at 0.74% there, 0.41% on
 * AVX2 kernels and 0.41% in the portable build (measured).
 */
static const struct fd_tol FD_CONV = {5e-3, 1e-2, 1e-1, 1, 3e-3};

/* The view of t called name (dies if there is none). */
static const struct cg_view *
view(const struct tcase *t, const char *name)
{
	for (int i = 0; i < t->nv; i++)
		if (strcmp(t->v[i].name, name) == 0)
			return &t->v[i];
	die(name);
	return NULL;
}

/*
 * The convolutional nets: views end to end, a batch the mean of its
 * examples, the same bits twice, decoding, every gradient against
 * central differences, and spoilt gradients caught.
 */
static void
test_conv(struct cg_cvae_config c, int B)
{
	struct tcase t;
	char what[192];
	size_t at = 0;

	tcase_init(&t, c, B, B);
	printf("     conv=%d image %dx%dx%d cond=%d latent=%d class_prior=%d "
	       "cond_every=%d, B=%d, %zu params, %d views\n",
	       c.conv, c.height, c.width, c.channels, c.ncond, c.latent,
	       c.class_prior, c.cond_every, B, t.np, t.nv);
	int contiguous = t.nv == 26 + 2 * c.class_prior + 5 * c.cond_every;
	for (int i = 0; i < t.nv; i++) {
		contiguous &= t.v[i].off == at;
		at += t.v[i].n;
	}
	expect(contiguous && at == t.np, "conv: views end to end, all of "
	                                 "the buffer");
	expect(view(&t, "dec.out.w")->n == (size_t)c.channels * c.conv * 9 &&
	           view(&t, "enc.mu.w")->shape[1] ==
	               (uint64_t)(c.height / 4 * (c.width / 4) * 2 * c.conv +
	                          c.ncond),
	       "conv: dec.out.w and enc.mu.w shaped as cvae.h says");

	/* A batch is the mean of its examples. */
	double whole = tloss(&t, NULL), sum = 0;
	struct tcase one;
	tcase_init(&one, c, 1, 1);
	memcpy(one.params, t.params, t.np * sizeof(float));
	for (int b = 0; b < B; b++) {
		memcpy(one.x, t.x + (size_t)b * c.in_dim,
		       c.in_dim * sizeof(float));
		memcpy(one.eps, t.eps + (size_t)b * c.latent,
		       c.latent * sizeof(float));
		one.cond[0] = t.cond[b];
		sum += tloss(&one, NULL);
	}
	snprintf(what, sizeof(what),
	         "conv: batch loss %.9g is the mean of its examples' %.9g",
	         whole, sum / B);
	expect(fabs(whole - sum / B) <= 1e-5 * fabs(whole), what);

	/* Decoding: the same bits twice, probabilities in (0, 1). */
	float *z = xcalloc((size_t)B * c.latent, sizeof(float));
	float *p1 = xcalloc((size_t)B * c.in_dim, sizeof(float));
	float *p2 = xcalloc((size_t)B * c.in_dim, sizeof(float));
	for (size_t i = 0; i < (size_t)B * c.latent; i++)
		z[i] = cg_rng_normal(&rng);
	int ok = cg_cvae_decode(&c, t.params, t.ws, z, t.cond, B, p1) == 0 &&
	         cg_cvae_decode(&c, t.params, t.ws, z, t.cond, B, p2) == 0 &&
	         memcmp(p1, p2, (size_t)B * c.in_dim * sizeof(float)) == 0;
	for (size_t i = 0; ok && i < (size_t)B * c.in_dim; i++)
		ok = p1[i] > 0 && p1[i] < 1;
	expect(ok, "conv: decoding twice gives the same probabilities in "
	           "(0, 1)");

	/* Gradients: deterministic, and against central differences. */
	tloss(&t, t.grad);
	float *g2 = xcalloc(t.np, sizeof(float));
	tloss(&t, g2);
	expect(memcmp(g2, t.grad, t.np * sizeof(float)) == 0,
	       "conv: deterministic gradient");
	double worst = fd_views(&FD_CONV, t.v, t.nv, t.params, t.grad,
	                        view_loss, &t, NULL, &rng, 0);
	snprintf(what, sizeof(what),
	         "conv=%d%s%s: every gradient vs central differences (worst "
	         "rel err %.3g)",
	         c.conv, c.class_prior ? " class prior" : "",
	         c.cond_every ? " cond every" : "", worst);
	expect(worst <= FD_CONV.tol, what);
	const char *spoil[] = {"dec.c1.w", "enc.c1.w", "enc.n2.g",
	                       c.cond_every ? "dec.n0.cond" : "dec.0.w",
	                       c.class_prior ? "prior.logvar" : "enc.mu.b"};
	for (int k = 0; k < 5; k++) {
		const struct cg_view *v = view(&t, spoil[k]);
		const float g = t.grad[v->off + 1];
		t.grad[v->off + 1] += 0.1f + 0.05f * fabsf(g);
		snprintf(what, sizeof(what),
		         "conv: checker rejects %s's gradient 0.1 + 5%% off",
		         spoil[k]);
		expect(fd_views(&FD_CONV, t.v, t.nv, t.params, t.grad,
		                view_loss, &t, NULL, &rng, 1) >
		           FD_CONV.tol,
		       what);
		t.grad[v->off + 1] = g;
	}
	free(z);
	free(p1);
	free(p2);
	free(g2);
	tcase_free(&one);
	tcase_free(&t);
}

/* The convolutional nets' configs that are refused, and what is. */
static void
test_conv_config(void)
{
	struct cg_cvae_config c = {36, 3, 8, 1, 3, 1, 1, 2, 6, 6, 1};

	expect(cg_cvae_check_config(&c) != 0 &&
	           strstr(cg_errmsg(), "6x6x1") != NULL,
	       "conv: a side not a multiple of 4 refused");
	c = (struct cg_cvae_config){64, 3, 8, 1, 3, 1, 1, 2, 8, 8, 2};
	expect(cg_cvae_check_config(&c) != 0,
	       "conv: a shape that is not in_dim's refused");
	c = (struct cg_cvae_config){64, 3, 8, 1, 3, 1, 1, -1, 8, 8, 1};
	expect(cg_cvae_check_config(&c) != 0, "conv: -1 refused");
	c = (struct cg_cvae_config){64, 3, 8, 1, 3, 1, 1, CG_CVAE_MAX_CONV + 1,
	                            8, 8, 1};
	expect(cg_cvae_check_config(&c) != 0 &&
	           strstr(cg_errmsg(), "conv") != NULL,
	       "conv: past CG_CVAE_MAX_CONV refused");
	c = (struct cg_cvae_config){64, 3, 8, 1, 3, 1, 1, 2, 8, 8, 1};
	expect(cg_cvae_check_config(&c) == 0 && cg_cvae_nparams(&c) > 0,
	       "conv: 8x8x1 at 2 channels accepted");
	struct cg_cvae_ws *w = cg_cvae_ws_new(&c, 2, 0);
	struct cg_wmat m[CG_CVAE_NMATS(1)];
	memset(m, 0, sizeof(m));
	expect(w != NULL && cg_cvae_ws_set_mats(w, m) != 0,
	       "conv: matrices as stored refused");
	expect(cg_cvae_ws_bytes(&c, 2, 0) > 0, "conv: its workspace's bytes");
	cg_cvae_ws_free(w);
}

/*
 * The convolutional nets checkpointed make each stage's maps again from
 * its layer's output with the same kernels: the loss, its terms and
 * every gradient are the same bits as without, for a call that uses part
 * of the workspace too, and a decode after; the workspace is smaller.
 * The MLP's is the same either way.
 */
static void
test_conv_checkpoint(struct cg_cvae_config c, int B)
{
	struct tcase t;
	struct cg_cvae_ws *ck;
	char what[160];
	int same = 1;

	tcase_init(&t, c, B, B);
	if ((ck = cg_cvae_ws_new(&c, B, 1)) == NULL)
		die("cg_cvae_ws_new checkpointed");
	float *g2 = xcalloc(t.np, sizeof(float));
	for (int k = 0; k < 2; k++) {
		const int n = k ? B - 1 : B;
		double l1, l2, r1, r2, k1, k2;
		memset(t.grad, 0, t.np * sizeof(float));
		memset(g2, 0, t.np * sizeof(float));
		if (cg_cvae_forward_backward(&c, t.params, t.ws, t.x, t.cond,
		                             t.eps, n, t.grad, &l1, &r1,
		                             &k1) != 0 ||
		    cg_cvae_forward_backward(&c, t.params, ck, t.x, t.cond,
		                             t.eps, n, g2, &l2, &r2, &k2) != 0)
			die("cg_cvae_forward_backward");
		same &= l1 == l2 && r1 == r2 && k1 == k2 && l1 > 0 &&
		        memcmp(t.grad, g2, t.np * sizeof(float)) == 0;
	}
	const size_t D = (size_t)c.in_dim;
	float *p1 = xcalloc((size_t)B * D, sizeof(float));
	float *p2 = xcalloc((size_t)B * D, sizeof(float));
	if (cg_cvae_decode(&c, t.params, t.ws, t.eps, t.cond, B, p1) != 0 ||
	    cg_cvae_decode(&c, t.params, ck, t.eps, t.cond, B, p2) != 0)
		die("cg_cvae_decode");
	same &= memcmp(p1, p2, (size_t)B * D * sizeof(float)) == 0;
	snprintf(what, sizeof(what),
	         "conv %d, %dx%dx%d, prior %d film %d checkpointed: loss, "
	         "terms, gradients, decode bit for bit",
	         c.conv, c.height, c.width, c.channels, c.class_prior,
	         c.cond_every);
	expect(same, what);

	size_t b1 = cg_cvae_ws_bytes(&c, 1, 1);
	size_t b2 = cg_cvae_ws_bytes(&c, B, 1);
	size_t full = cg_cvae_ws_bytes(&c, B, 0);
	snprintf(what, sizeof(what),
	         "    workspace for %d: %zu bytes checkpointed, %zu not", B, b2,
	         full);
	expect(b1 > 0 && b1 < b2 && b2 < full, what);
	struct cg_cvae_config mlp = c;
	mlp.conv = mlp.height = mlp.width = mlp.channels = 0;
	expect(cg_cvae_ws_bytes(&mlp, B, 1) == cg_cvae_ws_bytes(&mlp, B, 0) &&
	           cg_cvae_ws_bytes(&mlp, B, 0) > 0,
	       "    the MLP's workspace is the same checkpointed");
	free(p1);
	free(p2);
	free(g2);
	cg_cvae_ws_free(ck);
	tcase_free(&t);
}

int
main(void)
{
	/* The BLAS as the programs run it (see lib/cli/runtime.c). */
	cg_set_threads(0);
	cg_rng_seed(&rng, 42);
	test_config();
	test_views();
	test_init();
	test_init_prior();
	test_errors();
	/* The model before either option, with the class prior, with
	 * both (cg-init's default). */
	for (int k = 0; k < 3; k++) {
		int p = k > 0, e = k > 1;
		/* each new configuration its own draws (the first keeps
		 * those it had before the options); central differences
		 * are only right where no step crosses a ReLU's kink, and
		 * these seeds put no pre-activation within a step of 0 */
		if (k > 0)
			cg_rng_seed(&rng, 45 + (uint64_t)k);
		test_forward((struct cg_cvae_config){13, 4, 9, 1, 3, p, e, 0, 0, 0, 0}, 5);
		test_forward((struct cg_cvae_config){13, 4, 9, 3, 3, p, e, 0, 0, 0, 0}, 5);
		test_grad((struct cg_cvae_config){7, 3, 6, 1, 3, p, e, 0, 0, 0, 0}, 4);
		test_grad((struct cg_cvae_config){7, 3, 6, 2, 3, p, e, 0, 0, 0, 0}, 4);
		test_distill((struct cg_cvae_config){7, 3, 6, 1, 3, p, e, 0, 0, 0, 0}, 4);
		test_distill((struct cg_cvae_config){7, 3, 6, 2, 3, p, e, 0, 0, 0, 0}, 4);
	}
	test_prior_sample();
	/* The convolutional nets, 8x8x1 and 4x8x2 images, with and
	 * without the prior and FiLM. */
	test_conv_config();
	for (int k = 0; k < 2; k++)
		test_conv((struct cg_cvae_config){64, 3, 8, 1, 3, k, k, 3, 8, 8,
		                                  1},
		          3);
	test_conv((struct cg_cvae_config){64, 4, 8, 1, 2, 1, 1, 2, 4, 8, 2},
	          3);
	for (int k = 0; k < 2; k++)
		test_conv_checkpoint(
		    (struct cg_cvae_config){64, 3, 8, 1, 3, k, k, 3, 8, 8, 1},
		    4);
	test_conv_checkpoint(
	    (struct cg_cvae_config){64, 4, 8, 1, 2, 1, 1, 2, 4, 8, 2}, 3);
	if (failures) {
		printf("test_cvae: %d check(s) FAILED\n", failures);
		return 1;
	}
	printf("test_cvae: all checks passed\n");
	return 0;
}

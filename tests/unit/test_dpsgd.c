/*
 * test_dpsgd.c - DP-SGD's clipped per-example gradients against a pass
 * per example.
 *
 * The archs' DP-SGD passes (cg_cvae_dp_forward_backward,
 * cg_cclf_dp_forward_backward) make the sum of each example's gradient
 * clipped to a norm C from its ghost norm, with no pass per example.
 * Here the same sum is made the slow way: each example alone through
 * the plain pass (a batch of one: its own gradient), its norm in double,
 * scaled by min(1, C / norm), summed.  Both must agree within atol +
 * rtol |ref| on every parameter, and the norms too, with C at the
 * median norm (half the examples clipped, half not), for the cvae with
 * and without its learnt prior and its condition at every layer, one
 * and two layers, and the classifier, MLP and CNN; with C huge, the
 * clipped sum is B times the plain mean gradient.  A bad clip is
 * refused.  A corrupted sum must be caught.
 *
 * Then the streams of a whole step (cg_train_run): with a clip no
 * gradient comes near and a noise multiplier that drowns it, the
 * gradient is the secret noise, which must be the normals of the
 * stream of --dp-seed's own domain, and must not be the model noise's
 * stream (--seed's "noise" domain at the step's index) when --seed is
 * --dp-seed; with no noise, the cvae's reparameterisation noise (its
 * gradient) follows --seed and not --dp-seed.
 * Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/cclf/cclf.h"
#include "arch/cvae/cvae.h"
#include "cg.h"
#include "model/model.h"
#include "train/train.h"

#define TEST_NAME "test_dpsgd"
#include "check.h"
#include "shards.h"

#define B 9
#define ATOL 2e-5
#define RTOL 2e-4

static struct cg_rng rng;

/* The largest |got - want| beyond atol + rtol |want| over n, printed;
 * 1 when every element is within. */
static int
close_all(const char *what, const float *got, const double *want, size_t n)
{
	double worst = 0;
	size_t at = 0;
	int ok = 1;

	for (size_t i = 0; i < n; i++) {
		double d = fabs(got[i] - want[i]);
		if (d > ATOL + RTOL * fabs(want[i]))
			ok = 0;
		if (d > worst) {
			worst = d;
			at = i;
		}
	}
	printf("     %s: largest difference %.3g (at %zu of %zu)\n", what,
	       worst, at, n);
	return ok;
}

/* The median of n doubles (n odd), sorting a copy. */
static double
median(const double *v, int n)
{
	double s[B];

	memcpy(s, v, (size_t)n * sizeof(double));
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
			double t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return s[n / 2];
}

/*
 * want [np] = sum over b of g_b min(1, clip / |g_b|), norms [B] = |g_b|,
 * where one (b, g) fills g [np] with example b's own gradient.
 */
static void
brute(void (*one)(void *ctx, int b, float *g), void *ctx, size_t np,
      double clip, double *want, double *norms)
{
	float *g = xcalloc(np, sizeof(float));

	memset(want, 0, np * sizeof(double));
	for (int b = 0; b < B; b++) {
		double ss = 0, f;

		memset(g, 0, np * sizeof(float));
		one(ctx, b, g);
		for (size_t i = 0; i < np; i++)
			ss += (double)g[i] * g[i];
		norms[b] = sqrt(ss);
		f = norms[b] > clip ? clip / norms[b] : 1.0;
		for (size_t i = 0; i < np; i++)
			want[i] += f * g[i];
	}
	free(g);
}

/* ---------------------------------------------------------------- cvae */

struct vae {
	struct cg_cvae_config c;
	size_t np;
	float *p, *x, *eps;
	int cond[B];
	struct cg_cvae_ws *ws;
};

static void
vae_one(void *ctx, int b, float *g)
{
	struct vae *v = ctx;
	const int D = v->c.in_dim, Z = v->c.latent;

	if (cg_cvae_forward_backward(&v->c, v->p, v->ws, v->x + (size_t)b * D,
	                             v->cond + b, v->eps + (size_t)b * Z, 1, g,
	                             NULL, NULL, NULL) != 0)
		die("cvae pass");
}

static void
test_cvae(int layers, int class_prior, int cond_every)
{
	struct vae v = {.c = {.in_dim = 12,
	                      .ncond = 3,
	                      .hidden = 8,
	                      .layers = layers,
	                      .latent = 3,
	                      .class_prior = class_prior,
	                      .cond_every = cond_every}};
	char what[128];
	double norms[B], got_n[B], *want, clip;
	float *got;

	v.np = cg_cvae_nparams(&v.c);
	v.p = xcalloc(v.np, sizeof(float));
	v.x = xcalloc((size_t)B * v.c.in_dim, sizeof(float));
	v.eps = xcalloc((size_t)B * v.c.latent, sizeof(float));
	want = xcalloc(v.np, sizeof(double));
	got = xcalloc(v.np, sizeof(float));
	cg_cvae_init(&v.c, v.p, &rng);
	/* the prior's and the condition's rows away from their zero init,
	 * so that their gradients are not trivial */
	for (size_t i = 0; i < v.np; i++)
		v.p[i] += 0.2f * (cg_rng_uniform(&rng) - 0.5f);
	for (int i = 0; i < B * v.c.in_dim; i++)
		v.x[i] = cg_rng_uniform(&rng);
	for (int i = 0; i < B * v.c.latent; i++)
		v.eps[i] = cg_rng_normal(&rng);
	for (int b = 0; b < B; b++)
		v.cond[b] = b % v.c.ncond; /* classes shared in the batch */
	if ((v.ws = cg_cvae_ws_new(&v.c, B, 0)) == NULL)
		die("cvae workspace");

	brute(vae_one, &v, v.np, 1e30, want, norms);
	clip = median(norms, B);
	brute(vae_one, &v, v.np, clip, want, norms);
	if (cg_cvae_dp_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, v.eps, B,
	                                clip, got, NULL, NULL, NULL,
	                                got_n) != 0)
		die("cvae DP pass");
	snprintf(what, sizeof(what),
	         "cvae layers %d class_prior %d cond_every %d: clipped sum",
	         layers, class_prior, cond_every);
	expect(close_all(what, got, want, v.np), what);
	for (int b = 0; b < B; b++)
		CHECK(fabs(got_n[b] - norms[b]) <= 1e-4 * norms[b],
		      "cvae norm %d: %.9g, not %.9g", b, got_n[b], norms[b]);

	/* a corrupted sum is caught */
	got[v.np / 2] += 0.01f + 0.1f * fabsf(got[v.np / 2]);
	expect(!close_all("corrupted", got, want, v.np),
	       "cvae: a corrupted sum is caught");

	/* C huge: B times the plain mean gradient */
	double ns[B];
	brute(vae_one, &v, v.np, 1e30, want, ns);
	memset(got, 0, v.np * sizeof(float));
	if (cg_cvae_dp_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, v.eps, B,
	                                1e30, got, NULL, NULL, NULL, NULL) != 0)
		die("cvae DP pass");
	float *mean = xcalloc(v.np, sizeof(float));
	if (cg_cvae_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, v.eps, B,
	                             mean, NULL, NULL, NULL) != 0)
		die("cvae pass");
	for (size_t i = 0; i < v.np; i++)
		want[i] = (double)B * mean[i];
	snprintf(what, sizeof(what),
	         "cvae layers %d class_prior %d cond_every %d: C huge is B x "
	         "the mean gradient",
	         layers, class_prior, cond_every);
	expect(close_all(what, got, want, v.np), what);

	expect(cg_cvae_dp_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, v.eps,
	                                   B, 0, got, NULL, NULL, NULL,
	                                   NULL) == -1 &&
	           strstr(cg_errmsg(), "clip") != NULL,
	       "cvae: clip 0 refused");
	free(mean);
	free(v.p);
	free(v.x);
	free(v.eps);
	free(want);
	free(got);
	cg_cvae_ws_free(v.ws);
}

/* ---------------------------------------------------------------- cclf */

struct clf {
	struct cg_cclf_config c;
	size_t np;
	float *p, *x;
	int cond[B];
	struct cg_cclf_ws *ws;
};

static void
clf_one(void *ctx, int b, float *g)
{
	struct clf *v = ctx;

	if (cg_cclf_forward_backward(&v->c, v->p, v->ws,
	                             v->x + (size_t)b * v->c.in_dim,
	                             v->cond + b, 1, g, NULL, NULL) != 0)
		die("cclf pass");
}

static void
test_cclf(int layers)
{
	struct clf v = {
	    .c = {.in_dim = 16, .ncond = 4, .hidden = 8, .layers = layers}};
	char what[128];
	double norms[B], got_n[B], *want, clip;
	float *got;

	v.np = cg_cclf_nparams(&v.c);
	v.p = xcalloc(v.np, sizeof(float));
	v.x = xcalloc((size_t)B * v.c.in_dim, sizeof(float));
	want = xcalloc(v.np, sizeof(double));
	got = xcalloc(v.np, sizeof(float));
	cg_cclf_init(&v.c, v.p, &rng);
	for (int i = 0; i < B * v.c.in_dim; i++)
		v.x[i] = cg_rng_uniform(&rng);
	for (int b = 0; b < B; b++)
		v.cond[b] = (b * 3) % v.c.ncond;
	if ((v.ws = cg_cclf_ws_new(&v.c, B)) == NULL)
		die("cclf workspace");
	brute(clf_one, &v, v.np, 1e30, want, norms);
	clip = median(norms, B);
	brute(clf_one, &v, v.np, clip, want, norms);
	if (cg_cclf_dp_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, B, clip,
	                                got, NULL, NULL, got_n) != 0)
		die("cclf DP pass");
	snprintf(what, sizeof(what), "cclf layers %d: clipped sum", layers);
	expect(close_all(what, got, want, v.np), what);
	for (int b = 0; b < B; b++)
		CHECK(fabs(got_n[b] - norms[b]) <= 1e-4 * norms[b],
		      "cclf norm %d: %.9g, not %.9g", b, got_n[b], norms[b]);
	free(v.p);
	free(v.x);
	free(want);
	free(got);
	cg_cclf_ws_free(v.ws);

}

/* The CNN classifier: its trunk's convolutions clipped with the rest. */
static void
test_cclf_conv(void)
{
	struct clf v = {.c = {.in_dim = 64, .ncond = 4, .hidden = 8,
	                      .layers = 1, .conv = 2, .height = 8, .width = 8,
	                      .channels = 1}};
	double norms[B], got_n[B], *want, clip;
	float *got;

	v.np = cg_cclf_nparams(&v.c);
	v.p = xcalloc(v.np, sizeof(float));
	v.x = xcalloc((size_t)B * v.c.in_dim, sizeof(float));
	want = xcalloc(v.np, sizeof(double));
	got = xcalloc(v.np, sizeof(float));
	cg_cclf_init(&v.c, v.p, &rng);
	for (int i = 0; i < B * v.c.in_dim; i++)
		v.x[i] = cg_rng_uniform(&rng);
	for (int b = 0; b < B; b++)
		v.cond[b] = (b * 3) % v.c.ncond;
	if ((v.ws = cg_cclf_ws_new(&v.c, B)) == NULL)
		die("cclf conv workspace");
	brute(clf_one, &v, v.np, 1e30, want, norms);
	clip = median(norms, B);
	brute(clf_one, &v, v.np, clip, want, norms);
	if (cg_cclf_dp_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, B, clip,
	                                got, NULL, NULL, got_n) != 0)
		die("cclf conv DP pass");
	expect(close_all("cclf conv 2: clipped sum", got, want, v.np),
	       "cclf conv 2: clipped sum");
	for (int b = 0; b < B; b++)
		CHECK(fabs(got_n[b] - norms[b]) <= 1e-4 * norms[b],
		      "cclf conv norm %d: %.9g, not %.9g", b, got_n[b],
		      norms[b]);
	expect(cg_cclf_dp_forward_backward(&v.c, v.p, v.ws, v.x, v.cond, B,
	                                   -1, got, NULL, NULL, NULL) == -1,
	       "cclf: clip -1 refused");
	free(v.p);
	free(v.x);
	free(want);
	free(got);
	cg_cclf_ws_free(v.ws);
}

/* ------------------------------------------------------- the streams */

/* The domains of cg_rng_derive that train.c draws a step's streams from:
 * the model noise's seed from the options' seed, the DP noise from the
 * secret one. */
#define MODEL_NOISE 0x6e6f697365ULL    /* "noise" */
#define DP_NOISE 0x64702d6e6f697365ULL /* "dp-noise" */
#define NIMG 8

/* Pearson's correlation of x [n] with the normals of the stream (seed,
 * domain, 0), drawn as cg_rng_normal draws them. */
static double
corr_stream(const float *x, size_t n, uint64_t seed, uint64_t domain)
{
	double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
	struct cg_rng r;

	cg_rng_derive(&r, seed, domain, 0);
	for (size_t i = 0; i < n; i++) {
		double y = cg_rng_normal(&r);
		sx += x[i];
		sy += y;
		sxx += (double)x[i] * x[i];
		syy += y * y;
		sxy += x[i] * y;
	}
	double cxy = sxy - sx * sy / (double)n, cxx = sxx - sx * sx / (double)n,
	       cyy = syy - sy * sy / (double)n;
	return cxy / sqrt(cxx * cyy);
}

/* One DP-SGD step of a fresh cvae over s in grad mode, every example
 * sampled: its gradient into g [*np] (malloc'd). */
static float *
dp_step(const struct cg_shard *s, double clip, double sigma, uint64_t seed,
        uint64_t dp_seed, size_t *np)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_dpsgd dp = {
	    .clip = clip, .sigma = sigma, .q = 1, .seed = dp_seed};
	struct cg_train_opts o = {.steps = 1,
	                          .batch = NIMG,
	                          .seed = seed,
	                          .emit = CG_EMIT_GRAD,
	                          .dpsgd = &dp};
	struct cg_train_result res;
	struct cg_model *m;
	float *g;

	cJSON_AddNumberToObject(cfg, "in_dim", 64);
	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "hidden", 8);
	cJSON_AddNumberToObject(cfg, "layers", 1);
	cJSON_AddNumberToObject(cfg, "latent", 2);
	if ((m = cg_model_create("cvae", cfg, NULL, 1)) == NULL)
		die("cvae model");
	cg_optim_defaults(&o.opt, CG_OPT_SGD);
	*np = m->nparams;
	g = xcalloc(*np, sizeof(float));
	if (cg_train_run(m, s, &o, NULL, g, &res) != 0)
		die(cg_errmsg());
	cg_model_free(m);
	return g;
}

static void
test_streams(void)
{
	struct cg_shard *s = image_shard(NIMG, 8, 8, "images", NULL);
	char what[160];
	size_t np;
	double c;

	/* clip 1e-6, sigma 1e6: the noise's std 1 against a clipped sum
	 * of norm 8e-6 at most; equal seeds */
	float *g = dp_step(s, 1e-6, 1e6, 5, 5, &np);
	c = corr_stream(g, np, 5, DP_NOISE);
	snprintf(what, sizeof(what),
	         "the noise is the normals of --dp-seed's domain "
	         "(correlation %.6f over %zu parameters)",
	         c, np);
	expect(c > 0.9999, what);
	c = corr_stream(g, np, 5, MODEL_NOISE);
	snprintf(what, sizeof(what),
	         "--seed 5 --dp-seed 5: the noise is not the model noise's "
	         "stream (correlation %.6f)",
	         c);
	expect(fabs(c) < 0.15, what);
	free(g);

	/* no noise: the gradient is the cvae's, its reparameterisation
	 * noise from --seed alone */
	float *a = dp_step(s, 1e30, 0, 5, 5, &np);
	float *b = dp_step(s, 1e30, 0, 5, 6, &np);
	float *d = dp_step(s, 1e30, 0, 6, 5, &np);
	expect(memcmp(a, b, np * sizeof(float)) == 0,
	       "no noise: another --dp-seed, the same model noise");
	expect(memcmp(a, d, np * sizeof(float)) != 0,
	       "no noise: another --seed, other model noise");
	free(a);
	free(b);
	free(d);
	cg_shard_free(s);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	test_streams();
	cg_rng_seed(&rng, 34);
	for (int layers = 1; layers <= 2; layers++)
		for (int cp = 0; cp <= 1; cp++)
			for (int ce = 0; ce <= 1; ce++)
				test_cvae(layers, cp, ce);
	test_cclf(1);
	test_cclf(2);
	test_cclf_conv();
	return failures ? 1 : 0;
}

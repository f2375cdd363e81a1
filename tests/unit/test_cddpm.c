/*
 * test_cddpm.c - the diffusion model against a naive double model and
 * finite differences.
 *
 * Checks the config limits, the view table (names, order, contiguity),
 * the schedule's end points, the error returns, the loss and the
 * network's output against an independent double-precision
 * implementation that walks the views, batch invariance, and every
 * parameter gradient against central differences, element by element
 * and along a random direction, reported per view (the null
 * condition's embedding row included).  A corrupted gradient must be
 * caught.  The samplers against a loop written here from cddpm.h's
 * description over cg_cddpm_predict: DDIM and DDPM, guided and not, with
 * the same draws; DDIM is a function of the seed alone, guidance 0 is the
 * conditional prediction alone, and guidance changes nothing where the
 * null condition's embedding is the condition's.  The U-Net: its config
 * limits and view table, batch invariance, and every view's gradient
 * against central differences (its forward pass against PyTorch's is
 * torch_check.py's); checkpointed, the same bits of loss and gradient.
 * Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cddpm/cddpm.h"
#include "cg.h"
#include "cli/cli.h"

#define TEST_NAME "test_cddpm"
#include "check.h"

#include "fd.h"

#define MAXV 128
#define EPS CG_CDDPM_EPS_LOSS

static struct cg_rng rng;

struct tcase {
	struct cg_cddpm_config c;
	int B;
	size_t np;
	struct cg_view v[MAXV];
	int nv;
	float *params, *grad, *x0, *eps;
	int *cond, *t;
	struct cg_cddpm_ws *ws;
};

static void
tcase_init(struct tcase *t, struct cg_cddpm_config c, int B)
{
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->B = B;
	if ((t->np = cg_cddpm_nparams(&c)) == 0 ||
	    (t->nv = cg_cddpm_views(&c, t->v, MAXV)) < 0 ||
	    (t->ws = cg_cddpm_ws_new(&c, 2 * B, 0)) == NULL)
		die("tcase_init");
	t->params = xcalloc(t->np, sizeof(float));
	t->grad = xcalloc(t->np, sizeof(float));
	t->x0 = xcalloc((size_t)B * c.in_dim, sizeof(float));
	t->eps = xcalloc((size_t)B * c.in_dim, sizeof(float));
	t->cond = xcalloc((size_t)B, sizeof(int));
	t->t = xcalloc((size_t)B, sizeof(int));
	cg_cddpm_init(&c, t->params, &rng);
	/* Biases away from 0, so that they matter. */
	for (size_t i = 0; i < t->np; i++)
		t->params[i] += 0.1f * cg_rng_normal(&rng);
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++) {
		t->x0[i] = 2 * cg_rng_uniform(&rng) - 1;
		t->eps[i] = cg_rng_normal(&rng);
	}
	/* Every condition and the null one, early and late timesteps. */
	for (int b = 0; b < B; b++) {
		t->cond[b] = b % (c.ncond + 1);
		t->t[b] = b == 0 ? 0
		          : b == 1
		              ? c.timesteps - 1
		              : (int)cg_rng_below(&rng, (uint64_t)c.timesteps);
	}
}

static void
tcase_free(struct tcase *t)
{
	cg_cddpm_ws_free(t->ws);
	free(t->params);
	free(t->grad);
	free(t->x0);
	free(t->eps);
	free(t->cond);
	free(t->t);
}

static double
tloss(struct tcase *t, float *grad)
{
	double loss;

	if (cg_cddpm_forward_backward(&t->c, t->params, t->ws, t->x0, t->cond,
	                              t->t, t->eps, t->B, grad, &loss) != 0)
		die("cg_cddpm_forward_backward");
	return loss;
}

/* ------------------------------------------------ the naive reference */

static const struct cg_view *
view(const struct tcase *t, const char *name)
{
	for (int i = 0; i < t->nv; i++)
		if (strcmp(t->v[i].name, name) == 0)
			return &t->v[i];
	fprintf(stderr, TEST_NAME ": no view %s\n", name);
	exit(1);
}

/* out [OC] = W in + b (+ add [OC] if not NULL) (then ReLU) for the layer
 * named layer. */
static void
ref_layer(const struct tcase *t, const char *layer, double *out,
          const double *in, const double *add, int relu)
{
	char wn[64], bn[64];

	snprintf(wn, sizeof(wn), "%s.w", layer);
	snprintf(bn, sizeof(bn), "%s.b", layer);
	const struct cg_view *w = view(t, wn), *b = view(t, bn);
	int OC = (int)w->shape[0], C = (int)w->shape[1];

	for (int o = 0; o < OC; o++) {
		double s = t->params[b->off + o] + (add ? add[o] : 0);
		for (int i = 0; i < C; i++)
			s += (double)t->params[w->off + (size_t)o * C + i] *
			     in[i];
		out[o] = relu && s < 0 ? 0 : s;
	}
}

/* Nichol and Dhariwal's f(u) = cos^2((u + 0.008) / 1.008 pi / 2). */
static double
ref_cos_f(double u)
{
	double q = cos((u + 0.008) / 1.008 * 3.14159265358979323846 / 2);

	return q * q;
}

/* The schedule of c in double, from its definition in cddpm.h: the
 * linear betas' product, or the cosine's closed form f((t + 1) / T) /
 * f(0), the last step's beta (1, f(1) being 0) clipped at 0.999. */
static double
ref_abar(const struct cg_cddpm_config *c, int t)
{
	const int T = c->timesteps;
	double a = 1, lo = 0.1 / T, hi = 20.0 / T;

	if (c->cosine)
		return t < T - 1 ? ref_cos_f((t + 1.0) / T) / ref_cos_f(0)
		                 : ref_cos_f((double)(T - 1) / T) /
		                       ref_cos_f(0) * (1 - 0.999);
	for (int s = 0; s <= t; s++)
		a *= 1 - (lo + (hi - lo) * s / (T - 1));
	return a;
}

/* eps_hat [in_dim] of the network on xt [in_dim], timestep ts, cond;
 * the last layer's output (x0_hat or v_hat) [in_dim] too where v is not
 * NULL. */
static void
ref_net(const struct tcase *t, const double *xt, int ts, int cond, double *out,
        double *v)
{
	const struct cg_cddpm_config *c = &t->c;
	const int H = c->hidden, half = c->embed / 2;
	double *temb = xcalloc((size_t)c->embed, sizeof(double));
	double *emb = xcalloc((size_t)H, sizeof(double));
	double *h = xcalloc((size_t)H, sizeof(double));
	double *h2 = xcalloc((size_t)H, sizeof(double));
	const struct cg_view *ce = view(t, "cond.emb");
	char name[32];

	for (int i = 0; i < half; i++) {
		temb[i] = sin(ts * pow(10000.0, -(double)i / half));
		temb[half + i] = cos(ts * pow(10000.0, -(double)i / half));
	}
	ref_layer(t, "time", emb, temb, NULL, 0);
	for (int j = 0; j < H; j++)
		emb[j] += t->params[ce->off + (size_t)cond * H + j];
	for (int l = 0; l < c->layers; l++) {
		snprintf(name, sizeof(name), "hid.%d", l);
		ref_layer(t, name, h2, l == 0 ? xt : h, emb, 1);
		memcpy(h, h2, (size_t)H * sizeof(double));
	}
	ref_layer(t, "out", out, h, NULL, 0);
	if (v)
		memcpy(v, out, (size_t)c->in_dim * sizeof(double));
	double ab = ref_abar(c, ts);
	for (int i = 0; i < c->in_dim; i++)
		out[i] = c->predict_x0
		             ? (xt[i] - sqrt(ab) * out[i]) / sqrt(1 - ab)
		             : sqrt(ab) * out[i] + sqrt(1 - ab) * xt[i];
	free(temb);
	free(emb);
	free(h);
	free(h2);
}

/* ------------------------------------------------------------- tests */

static void
test_config(void)
{
	struct cg_cddpm_config c = {784, 10, 512, 3, 128, 1000, 5, 1,
	                            0,   0,  0,   0, 0,   0,    0};
	size_t want = 512 * 128 + 512 + 11 * 512 + 512 * 785 + 2 * (512 * 513) +
	              784 * 513;

	expect(cg_cddpm_check_config(&c) == 0 && cg_cddpm_nparams(&c) == want,
	       "784-512x3-784, embed 128, 10 conditions: its parameter count");
	c.embed = 127;
	expect(cg_cddpm_check_config(&c) == -1 && strstr(cg_errmsg(), "even"),
	       "an odd time encoding is refused");
	c.embed = 128;
	c.timesteps = CG_CDDPM_MIN_T - 1;
	expect(cg_cddpm_nparams(&c) == 0 && strstr(cg_errmsg(), "timesteps"),
	       "too few timesteps are refused");
	c.timesteps = 1000;
	c.snr_clip = -0.5;
	expect(cg_cddpm_check_config(&c) == -1 &&
	           strstr(cg_errmsg(), "snr-clip"),
	       "a negative clip other than the eps loss's is refused");
	c.snr_clip = 2e6;
	expect(cg_cddpm_check_config(&c) == -1, "too large a clip is refused");
	c.snr_clip = NAN;
	expect(cg_cddpm_check_config(&c) == -1, "a nan clip is refused");
	c.snr_clip = EPS;
	expect(cg_cddpm_check_config(&c) == 0, "the eps loss is a config");
	c.predict_x0 = 2;
	expect(cg_cddpm_check_config(&c) == -1 && strstr(cg_errmsg(), "x0"),
	       "predict_x0 is 0 or 1");
	c.predict_x0 = 1;
	c.layers = 64;
	c.hidden = 1 << 20;
	expect(cg_cddpm_check_config(&c) == -1 &&
	           strstr(cg_errmsg(), "parameters"),
	       "2^20 wide and 64 deep: too many parameters");

	/* Ho et al.'s schedule at T = 1000: abar_999 = 4.04e-5. */
	struct cg_cddpm_config h = {4, 2, 3, 1, 2, 1000, 5, 1,
	                            0, 0, 0, 0, 0, 0,    0};
	double *ab = xcalloc(1000, sizeof(double));
	cg_cddpm_schedule(&h, ab);
	char what[128];
	snprintf(what, sizeof(what),
	         "schedule: abar_0 = %.9g (1 - 1e-4), abar_999 = %.4g", ab[0],
	         ab[999]);
	expect(fabs(ab[0] - (1 - 1e-4)) < 1e-15 &&
	           fabs(ab[999] - 4.04e-5) < 0.01e-5 &&
	           fabs(ab[500] - ref_abar(&h, 500)) < 1e-12,
	       what);
	free(ab);

	/* The cosine schedule against its closed form at T = 1000 and 50
	 * (few steps: the largest betas), every t. */
	for (int T = 50; T <= 1000; T += 950) {
		struct cg_cddpm_config k = h;
		double worst = 0;

		k.timesteps = T;
		k.cosine = 1;
		ab = xcalloc((size_t)T, sizeof(double));
		cg_cddpm_schedule(&k, ab);
		for (int i = 0; i < T; i++) {
			double r = ref_abar(&k, i);
			worst = fmax(worst, fabs(ab[i] - r) / r);
		}
		snprintf(what, sizeof(what),
		         "cosine schedule, T = %d: abar_0 = %.9g, abar_%d = "
		         "%.4g, largest relative difference %.3g",
		         T, ab[0], T - 1, ab[T - 1], worst);
		expect(worst < 1e-12 && ab[0] < 1 && ab[T - 1] > 0, what);
		free(ab);
	}
	h.cosine = 2;
	expect(cg_cddpm_check_config(&h) == -1 && strstr(cg_errmsg(), "cosine"),
	       "cosine is 0 or 1");
}

static void
test_views(void)
{
	struct cg_cddpm_config c = {12, 3, 5, 2, 4, 50, 5, 1,
	                            0,  0, 0, 0, 0, 0,  0};
	struct cg_view v[MAXV];
	int n = cg_cddpm_views(&c, v, MAXV), ok = n == 9;
	static const char *const names[] = {"time.w",  "time.b",  "cond.emb",
	                                    "hid.0.w", "hid.0.b", "hid.1.w",
	                                    "hid.1.b", "out.w",   "out.b"};
	static const int decay[] = {1, 0, 0, 1, 0, 1, 0, 1, 0};
	size_t off = 0;

	for (int i = 0; ok && i < n; i++) {
		ok &= strcmp(v[i].name, names[i]) == 0 && v[i].off == off &&
		      v[i].decay == decay[i];
		off += v[i].n;
	}
	ok &= off == cg_cddpm_nparams(&c) && v[0].shape[0] == 5 &&
	      v[0].shape[1] == 4 && v[2].shape[0] == 4 && v[2].shape[1] == 5 &&
	      v[3].shape[1] == 12 && v[7].shape[0] == 12;
	expect(ok, "views: names, order, shapes, contiguous over the buffer");
	expect(cg_cddpm_views(&c, v, 8) == -1, "views: too small a table");
}

static void
test_errors(void)
{
	struct tcase t;
	double loss = -1;

	tcase_init(&t,
	           (struct cg_cddpm_config){6, 3, 4, 1, 2, 50, 5, 1, 0, 0, 0, 0,
	                                    0, 0, 0},
	           3);
	t.cond[1] = 4;
	expect(cg_cddpm_forward_backward(&t.c, t.params, t.ws, t.x0, t.cond,
	                                 t.t, t.eps, 3, t.grad, &loss) == -1 &&
	           loss == -1 && strstr(cg_errmsg(), "condition 4"),
	       "a condition past the null one: -1, nothing written");
	t.cond[1] = 3;
	t.t[2] = 50;
	expect(cg_cddpm_forward_backward(&t.c, t.params, t.ws, t.x0, t.cond,
	                                 t.t, t.eps, 3, NULL, &loss) == -1 &&
	           strstr(cg_errmsg(), "timestep 50"),
	       "a timestep out of range");
	t.t[2] = 49;
	expect(cg_cddpm_forward_backward(&t.c, t.params, t.ws, t.x0, t.cond,
	                                 t.t, t.eps, 7, NULL, &loss) == -1,
	       "a batch over the workspace's");
	struct cg_cddpm_config other = t.c;
	other.timesteps = 60;
	expect(cg_cddpm_forward_backward(&other, t.params, t.ws, t.x0, t.cond,
	                                 t.t, t.eps, 3, NULL, &loss) == -1 &&
	           strstr(cg_errmsg(), "another config"),
	       "a workspace of another config");
	tcase_free(&t);
}

/* Loss and eps_hat against the reference; a batch is the mean of its
 * examples. */
static void
test_forward(struct cg_cddpm_config c, int B)
{
	struct tcase t;
	const int D = c.in_dim;
	double want = 0, dout = 0;
	double *xt = xcalloc((size_t)D, sizeof(double));
	double *e = xcalloc((size_t)D, sizeof(double));
	double *v = xcalloc((size_t)D, sizeof(double));
	float *pred = xcalloc((size_t)B * D, sizeof(float));
	float *xtf = xcalloc((size_t)B * D, sizeof(float));
	char what[160];

	tcase_init(&t, c, B);
	double loss = tloss(&t, NULL);
	for (int b = 0; b < B; b++) {
		double ab = ref_abar(&c, t.t[b]), s = 0;

		for (int i = 0; i < D; i++) {
			size_t k = (size_t)b * D + i;
			xt[i] = sqrt(ab) * t.x0[k] + sqrt(1 - ab) * t.eps[k];
			xtf[k] = (float)xt[i];
		}
		ref_net(&t, xt, t.t[b], t.cond[b], e, v);
		/* wx |x0_hat - x0|^2 (cddpm.h), x0_hat from the network's
		 * output and x_t (for v: sqrt(abar) x_t - sqrt(1 - abar) v);
		 * the loss on eps is snr |x0_hat - x0|^2. */
		double snr = ab / (1 - ab);
		double wx = c.snr_clip == CG_CDDPM_EPS_LOSS
		                ? snr
		                : fmin(snr, c.snr_clip) + 1;
		for (int i = 0; i < D; i++) {
			size_t k = (size_t)b * D + i;
			double x0h = c.predict_x0 ? v[i]
			                          : sqrt(ab) * xt[i] -
			                                sqrt(1 - ab) * v[i];
			s += (x0h - t.x0[k]) * (x0h - t.x0[k]);
		}
		want += wx * s / D / B;
		if (cg_cddpm_predict(&c, t.params, t.ws, xtf + (size_t)b * D,
		                     t.cond + b, t.t + b, 1,
		                     pred + (size_t)b * D) != 0)
			die("cg_cddpm_predict");
		for (int i = 0; i < D; i++)
			dout = fmax(dout, fabs(e[i] - pred[(size_t)b * D + i]));
	}
	snprintf(what, sizeof(what),
	         "layers=%d B=%d T=%d%s snr-clip %g x0 %d: loss %.9g vs %.9g, "
	         "eps_hat within %.2g",
	         c.layers, B, c.timesteps, c.cosine ? " cosine" : "",
	         c.snr_clip, c.predict_x0, loss, want, dout);
	expect(fabs(loss - want) < 1e-5 * (1 + want) && dout < 1e-4, what);

	struct cg_cddpm_ws *one = cg_cddpm_ws_new(&c, 1, 0);
	double sum = 0;
	for (int b = 0; b < B; b++) {
		double l;
		if (one == NULL ||
		    cg_cddpm_forward_backward(
		        &c, t.params, one, t.x0 + (size_t)b * D, t.cond + b,
		        t.t + b, t.eps + (size_t)b * D, 1, NULL, &l) != 0)
			die("one example");
		sum += l / B;
	}
	expect(fabs(sum - loss) < 1e-6 * (1 + loss),
	       "a batch's loss is the mean of its examples'");
	cg_cddpm_ws_free(one);
	free(xt);
	free(e);
	free(v);
	free(pred);
	free(xtf);
	tcase_free(&t);
}

/*
 * The time encodings a workspace keeps (a slot a timestep modulo 1024):
 * timesteps that share a slot, in turn, predict what a fresh workspace
 * predicts, bit for bit, and so does the training pass's loss.
 */
static void
test_time_slots(void)
{
	struct cg_cddpm_config c = {13, 4, 9, 2, 8, 3000, 5, 1,
	                             0,  0, 0, 0, 0, 0, 0};
	struct tcase t;
	const int D = c.in_dim, ts[] = {5, 1029, 2053, 5, 2999, 951, 1029};
	float *p1 = xcalloc((size_t)D, sizeof(float));
	float *p2 = xcalloc((size_t)D, sizeof(float));
	int same = 1;

	tcase_init(&t, c, 4);
	for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		struct cg_cddpm_ws *fresh = cg_cddpm_ws_new(&c, 1, 0);
		int cond = (int)i % (c.ncond + 1);
		if (fresh == NULL ||
		    cg_cddpm_predict(&c, t.params, t.ws, t.x0, &cond, ts + i, 1,
		                     p1) != 0 ||
		    cg_cddpm_predict(&c, t.params, fresh, t.x0, &cond, ts + i,
		                     1, p2) != 0)
			die("cg_cddpm_predict");
		same &= memcmp(p1, p2, (size_t)D * sizeof(float)) == 0;
		cg_cddpm_ws_free(fresh);
	}
	expect(same, "timesteps sharing a kept encoding's slot (T 3000): a "
	             "fresh workspace's predictions, bit for bit");
	/* the batch's own timesteps, then ones that evict them, then the
	 * first again: each loss a fresh workspace's */
	double l[3], f[3];
	for (int k = 0; k < 3; k++) {
		struct cg_cddpm_ws *keep = t.ws;
		l[k] = tloss(&t, NULL);
		if ((t.ws = cg_cddpm_ws_new(&c, t.B, 0)) == NULL)
			die("cg_cddpm_ws_new");
		f[k] = tloss(&t, NULL);
		cg_cddpm_ws_free(t.ws);
		t.ws = keep;
		for (int b = 0; b < t.B; b++)
			t.t[b] = (t.t[b] + (k ? c.timesteps - 1024 : 1024)) %
			         c.timesteps;
	}
	expect(l[0] == f[0] && l[1] == f[1] && l[2] == f[2] && l[0] == l[2],
	       "a batch's loss, its encodings evicted and made again: a "
	       "fresh workspace's, bit for bit");
	free(p1);
	free(p2);
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
test_grad(struct cg_cddpm_config c, int B)
{
	struct tcase t;
	char what[128];

	tcase_init(&t, c, B);
	tloss(&t, t.grad);
	printf("     config in=%d cond=%d hidden=%d layers=%d embed=%d "
	       "T=%d snr-clip %g x0 %d unet %d (%dx%dx%d) attn %d film %d, "
	       "B=%d, %zu params\n",
	       c.in_dim, c.ncond, c.hidden, c.layers, c.embed, c.timesteps,
	       c.snr_clip, c.predict_x0, c.unet, c.height, c.width, c.channels,
	       c.attn, c.film, B, t.np);
	double worst = check_grad(&t, t.grad, 0);
	snprintf(what, sizeof(what),
	         "layers=%d snr-clip %g unet %d attn %d film %d: every "
	         "gradient vs central differences (worst rel err %.3g)",
	         c.layers, c.snr_clip, c.unet, c.attn, c.film, worst);
	expect(worst <= FD_IMAGE.tol, what);

	/* The null condition's row gets a gradient (tcase_init gives
	 * example ncond the null condition). */
	const struct cg_view *ce = view(&t, "cond.emb");
	double gnull = 0;
	for (int j = 0; j < c.hidden; j++)
		gnull += fabs(t.grad[ce->off + (size_t)c.ncond * c.hidden + j]);
	expect(gnull > 0, "the null condition's embedding is trained");

	t.grad[t.v[2].off + 1] += 0.05f;
	expect(check_grad_from(&t, t.grad, &t.v[2]) > FD_IMAGE.tol,
	       "checker rejects a gradient off by 0.05 in one element");
	t.grad[t.v[2].off + 1] -= 0.05f;
	/* The MLP's time layer; the U-Net's output convolution (its time
	 * layer's gradient can be below the checker's floor: the embedding
	 * reaches it through group norms). */
	const struct cg_view *v = c.unet ? view(&t, "out.w") : &t.v[0];
	for (size_t j = 0; j < v->n; j++)
		t.grad[v->off + j] *= 0.97f;
	snprintf(what, sizeof(what),
	         "checker rejects %s's gradient scaled by 0.97", v->name);
	expect(check_grad_from(&t, t.grad, v) > FD_IMAGE.tol, what);
	tcase_free(&t);
}

/* ---------------------------------------------------------- sampling */

/*
 * The sampler of cddpm.h, step by step over cg_cddpm_predict: n images of
 * condition cond each into out [n, in_dim], drawing from r in the order
 * cg_cddpm_sample draws (the starting noise, then each step's noise
 * element by element).
 */
static void
ref_sample(struct tcase *t, int cond, int n, const struct cg_cddpm_sampling *s,
           struct cg_rng *r, float *out)
{
	const struct cg_cddpm_config *c = &t->c;
	const int D = c->in_dim, T = c->timesteps, N = s->steps;
	double *ab = xcalloc((size_t)T, sizeof(double));
	float *x = xcalloc((size_t)n * D, sizeof(float));
	float *ec = xcalloc((size_t)n * D, sizeof(float));
	float *eu = xcalloc((size_t)n * D, sizeof(float));
	int *cv = xcalloc((size_t)n, sizeof(int));
	int *nv = xcalloc((size_t)n, sizeof(int));
	int *tv = xcalloc((size_t)n, sizeof(int));
	const double eta = s->ddim ? 0 : 1;

	for (int i = 0; i < T; i++)
		ab[i] = ref_abar(c, i);
	for (int b = 0; b < n; b++) {
		cv[b] = cond;
		nv[b] = c->ncond;
	}
	for (size_t k = 0; k < (size_t)n * D; k++)
		x[k] = (float)s->temperature * cg_rng_normal(r);
	for (int i = N - 1; i >= 0; i--) {
		int ts = N == 1
		             ? T - 1
		             : (int)floor((double)i * (T - 1) / (N - 1) + 0.5);
		int tp =
		    i == 0
		        ? -1
		        : (int)floor((double)(i - 1) * (T - 1) / (N - 1) + 0.5);
		double at = ab[ts], as = tp < 0 ? 1 : ab[tp];
		for (int b = 0; b < n; b++)
			tv[b] = ts;
		if (cg_cddpm_predict(c, t->params, t->ws, x, cv, tv, n, ec) !=
		        0 ||
		    cg_cddpm_predict(c, t->params, t->ws, x, nv, tv, n, eu) !=
		        0)
			die("cg_cddpm_predict");
		double sig = eta * sqrt((1 - as) / (1 - at) * (1 - at / as));
		/* guided where the step's t / (T - 1) is in the interval */
		double f = (double)ts / (T - 1);
		double w = !s->interval || (f >= s->glo && f <= s->ghi)
		               ? s->guidance
		               : 0;
		for (size_t k = 0; k < (size_t)n * D; k++) {
			double e = w == 0 ? ec[k]
			                  : (1 + w) * ec[k] - w * eu[k];
			double x0 = fmin(
			    fmax((x[k] - sqrt(1 - at) * e) / sqrt(at), -1), 1);
			double e2 = (x[k] - sqrt(at) * x0) / sqrt(1 - at);
			double nx = sqrt(as) * x0 +
			            sqrt(fmax(1 - as - sig * sig, 0)) * e2;
			if (sig > 0)
				nx += sig * s->temperature * cg_rng_normal(r);
			x[k] = (float)nx;
		}
	}
	for (size_t k = 0; k < (size_t)n * D; k++)
		out[k] = (float)fmin(fmax(0.5 * (x[k] + 1), 0), 1);
	free(ab);
	free(x);
	free(ec);
	free(eu);
	free(cv);
	free(nv);
	free(tv);
}

/* The largest |a - b| over N. */
static double
maxdiff(const float *a, const float *b, size_t N)
{
	double d = 0;

	for (size_t i = 0; i < N; i++)
		d = fmax(d, fabs((double)a[i] - b[i]));
	return d;
}

static void
test_sample(int cosine)
{
	struct tcase t;
	const int n = 3;
	struct cg_cddpm_config c = {10, 3, 8, 2, 4, 50, 5, 1,
	                            0,  0, 0, 0, 0, 0,  0};
	int cond[3] = {1, 1, 1};
	char what[160];

	c.cosine = cosine;
	tcase_init(&t, c, n);
	const size_t N = (size_t)n * c.in_dim;
	float *a = xcalloc(N, sizeof(float)), *b = xcalloc(N, sizeof(float));
	float *ref = xcalloc(N, sizeof(float));
	struct cg_rng r;
	const struct {
		double w;
		int steps, ddim;
		double temp;
		int interval;
		double glo, ghi;
	} runs[] = {{0, 50, 1, 1, 0, 0, 0},     {0, 7, 1, 1, 0, 0, 0},
	            {2.5, 10, 1, 1, 0, 0, 0},   {0, 50, 0, 1, 0, 0, 0},
	            {1.5, 6, 0, 0.8, 0, 0, 0},  {0, 1, 1, 1, 0, 0, 0},
	            {2.5, 10, 1, 1, 1, 0.2, 0.6}, {1.5, 6, 0, 0.8, 1, 0, 0.5},
	            {3, 50, 1, 1, 1, 0.5, 1}};

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct cg_cddpm_sampling s = {runs[i].w,     runs[i].steps,
		                              runs[i].ddim,  runs[i].temp,
		                              runs[i].interval, runs[i].glo,
		                              runs[i].ghi};
		cg_rng_seed(&r, 5);
		if (cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, a) !=
		    0)
			die("cg_cddpm_sample");
		cg_rng_seed(&r, 5);
		ref_sample(&t, 1, n, &s, &r, ref);
		double d = maxdiff(a, ref, N);
		snprintf(what, sizeof(what),
		         "%s%s, %d steps, guidance %g (t/T in [%g, %g]): the "
		         "sampler's images within %.2g of the loop's",
		         runs[i].ddim ? "DDIM" : "DDPM",
		         cosine ? " cosine" : "", runs[i].steps, runs[i].w,
		         runs[i].interval ? runs[i].glo : 0,
		         runs[i].interval ? runs[i].ghi : 1, d);
		expect(d < 1e-5, what);
	}

	/* DDIM: the seed alone decides; a second seed changes the images. */
	struct cg_cddpm_sampling s = {0, 20, 1, 1, 0, 0, 0};
	cg_rng_seed(&r, 9);
	cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, a);
	cg_rng_seed(&r, 9);
	cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, b);
	expect(memcmp(a, b, N * sizeof(float)) == 0,
	       "DDIM with the same seed: the same bytes");
	cg_rng_seed(&r, 10);
	cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, b);
	expect(maxdiff(a, b, N) > 1e-3, "DDIM with another seed: other images");

	/* Guidance reaches the images, and is nothing where the null
	 * condition is the condition. */
	s.guidance = 3;
	cg_rng_seed(&r, 9);
	cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, b);
	expect(maxdiff(a, b, N) > 1e-3, "guidance 3 changes the images");

	/* The guidance interval: [0, 1] is every step, the same bytes;
	 * one that holds none of the 20 steps' timesteps (every 49/19 of T)
	 * is no guidance, the same bytes; a part of it is neither. */
	{
		struct cg_cddpm_sampling si = s;
		float *c2 = xcalloc(N, sizeof(float));
		si.interval = 1;
		si.glo = 0;
		si.ghi = 1;
		cg_rng_seed(&r, 9);
		cg_cddpm_sample(&c, t.params, t.ws, cond, n, &si, &r, c2);
		expect(memcmp(b, c2, N * sizeof(float)) == 0,
		       "guidance at t/T in [0, 1]: the bytes of guidance at "
		       "every step");
		si.glo = 0.01; /* between t = 0 and t = 3 (3/49 = 0.061) */
		si.ghi = 0.05;
		cg_rng_seed(&r, 9);
		cg_cddpm_sample(&c, t.params, t.ws, cond, n, &si, &r, c2);
		expect(memcmp(a, c2, N * sizeof(float)) == 0,
		       "guidance at no step's t/T: the bytes of guidance 0");
		si.glo = 0.3;
		si.ghi = 0.7;
		cg_rng_seed(&r, 9);
		cg_cddpm_sample(&c, t.params, t.ws, cond, n, &si, &r, c2);
		expect(maxdiff(a, c2, N) > 1e-4 && maxdiff(b, c2, N) > 1e-4,
		       "guidance at t/T in [0.3, 0.7]: neither guidance 0's "
		       "images nor guidance 3's");
		free(c2);
	}
	const struct cg_view *ce = view(&t, "cond.emb");
	memcpy(t.params + ce->off + (size_t)c.ncond * c.hidden,
	       t.params + ce->off + (size_t)1 * c.hidden,
	       (size_t)c.hidden * sizeof(float));
	s.guidance = 0;
	cg_rng_seed(&r, 9);
	cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, a);
	s.guidance = 3;
	cg_rng_seed(&r, 9);
	cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, b);
	snprintf(what, sizeof(what),
	         "null embedding = the condition's: guidance 3 within %.2g "
	         "of guidance 0",
	         maxdiff(a, b, N));
	expect(maxdiff(a, b, N) < 1e-5, what);

	/* What the sampler refuses. */
	s.steps = 51;
	expect(cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, a) == -1 &&
	           strstr(cg_errmsg(), "51 steps"),
	       "more steps than T are refused");
	s.steps = 10;
	s.guidance = 1;
	expect(cg_cddpm_sample(&c, t.params, t.ws, cond, 2 * n, &s, &r, a) ==
	           -1,
	       "guided, 2n images need a workspace of 4n");
	cond[0] = 4;
	s.guidance = 0;
	expect(cg_cddpm_sample(&c, t.params, t.ws, cond, n, &s, &r, a) == -1 &&
	           strstr(cg_errmsg(), "condition 4"),
	       "a condition out of range is refused");
	free(a);
	free(b);
	free(ref);
	tcase_free(&t);
}

/* ------------------------------------------------------------- U-Net */

/* The U-Net's parameter count from cddpm.h, for C channels, an image of
 * ch channels, embedding width E after the embeddings' P0 floats; each
 * block's e ne times its channels (2 with film). */
static size_t
unet_count_e(size_t P0, int C, int ch, int E, int ne)
{
	/* in, out channels of each block: down.0 .. up.0 */
	static const int in[7] = {1, 1, 2, 2, 4, 4, 3};
	static const int out[7] = {1, 2, 2, 2, 2, 2, 1};
	size_t n = P0 + (size_t)ch * C * 9 + C;

	n += (size_t)C * C * 9 + C + (size_t)4 * C * C * 9 + 2 * C; /* ds */
	for (int i = 0; i < 7; i++) {
		size_t a = (size_t)in[i] * C, b = (size_t)out[i] * C;
		n += 2 * a + a * b * 9 + b + ne * (b * E + b) + 2 * b +
		     b * b * 9 + b;
		if (a != b)
			n += a * b + b;
	}
	return n + 2 * (size_t)C + (size_t)ch * C * 9 + ch;
}

static size_t
unet_count(size_t P0, int C, int ch, int E)
{
	return unet_count_e(P0, C, ch, E, 1);
}

static void
test_unet_config(void)
{
	struct cg_cddpm_config c = {784, 10, 64, 3, 32, 1000, 5, 1,
	                            16,  28, 28, 1, 0,  0,    0};
	struct cg_view v[MAXV];
	size_t emb = 64 * 32 + 64 + 11 * 64;
	char what[160];

	snprintf(what, sizeof(what),
	         "28x28x1, unet 16, hidden 64: %zu parameters as counted",
	         cg_cddpm_nparams(&c));
	expect(cg_cddpm_check_config(&c) == 0 &&
	           cg_cddpm_nparams(&c) == unet_count(emb, 16, 1, 64),
	       what);
	int n = cg_cddpm_views(&c, v, MAXV), ok = n == CG_CDDPM_UNET_VIEWS;
	size_t off = 0;
	for (int i = 0; ok && i < n; i++) {
		ok &= v[i].off == off;
		off += v[i].n;
	}
	ok &= off == cg_cddpm_nparams(&c);
	snprintf(what, sizeof(what),
	         "unet views: %d, contiguous over the buffer", n);
	expect(ok, what);
	static const struct {
		int i;
		const char *name;
		int ndim, s0, s1, decay;
	} some[] = {{2, "cond.emb", 2, 11, 64, 0},
	            {3, "in.w", 4, 16, 1, 1},
	            {5, "down.0.n1.g", 1, 16, 0, 0},
	            {9, "down.0.emb.w", 2, 16, 64, 1},
	            {15, "ds.1.w", 4, 16, 16, 1},
	            {27, "down.1.skip.w", 4, 32, 16, 1},
	            {87, "out.n.g", 1, 16, 0, 0},
	            {89, "out.w", 4, 1, 16, 1},
	            {90, "out.b", 1, 1, 0, 0}};
	ok = n == CG_CDDPM_UNET_VIEWS;
	for (size_t i = 0; ok && i < sizeof(some) / sizeof(some[0]); i++) {
		const struct cg_view *w = &v[some[i].i];
		ok &= strcmp(w->name, some[i].name) == 0 &&
		      w->ndim == some[i].ndim &&
		      w->shape[0] == (uint64_t)some[i].s0 &&
		      (some[i].ndim == 1 ||
		       w->shape[1] == (uint64_t)some[i].s1) &&
		      w->decay == some[i].decay;
		if (!ok)
			printf("     view %d: %s\n", some[i].i, w->name);
	}
	ok &= v[27].shape[2] == 1 && v[3].shape[2] == 3;
	expect(ok, "unet views: names, shapes and decay");
	expect(cg_cddpm_views(&c, v, CG_CDDPM_UNET_VIEWS - 1) == -1,
	       "unet views: too small a table");

	c.height = 14, c.width = 56;
	expect(cg_cddpm_check_config(&c) == -1 &&
	           strstr(cg_errmsg(), "14x56x1") != NULL,
	       "the U-Net refuses a side not a multiple of 4");
	c.height = 28, c.width = 28, c.channels = 3;
	expect(cg_cddpm_check_config(&c) == -1,
	       "the U-Net refuses a shape that is not in_dim's");
	c.channels = 1;
	c.unet = CG_CDDPM_MAX_UNET + 1;
	expect(cg_cddpm_check_config(&c) == -1 && strstr(cg_errmsg(), "unet"),
	       "too wide a U-Net is refused");
	c.unet = 0;
	c.height = 5; /* read only with a U-Net */
	expect(cg_cddpm_check_config(&c) == 0, "unet 0: the shape is unread");
	c.attn = 1;
	expect(cg_cddpm_check_config(&c) == -1 && strstr(cg_errmsg(), "attn"),
	       "attn without a U-Net is refused");

	/* attn: 6 views after mid's, d = 2C = 32. */
	c = (struct cg_cddpm_config){784, 10, 64, 3, 32, 1000, 5, 1,
	                             16,  28, 28, 1, 1,  0,    0};
	n = cg_cddpm_views(&c, v, MAXV);
	size_t d = 32;
	snprintf(what, sizeof(what),
	         "attn: %d views, %zu parameters (%zu more)", n,
	         cg_cddpm_nparams(&c),
	         cg_cddpm_nparams(&c) - unet_count(emb, 16, 1, 64));
	expect(n == CG_CDDPM_UNET_VIEWS + CG_CDDPM_ATTN_VIEWS &&
	           cg_cddpm_nparams(&c) == unet_count(emb, 16, 1, 64) + 2 * d +
	                                       3 * d * d + 3 * d + d * d + d &&
	           strcmp(v[51].name, "attn.n.g") == 0 &&
	           strcmp(v[53].name, "attn.qkv.w") == 0 &&
	           v[53].shape[0] == 3 * d && v[53].shape[1] == d &&
	           strcmp(v[56].name, "attn.proj.b") == 0 &&
	           strcmp(v[57].name, "up.2.n1.g") == 0 &&
	           v[51].off == v[50].off + v[50].n,
	       what);

	/* film: each block's emb [2 out, E]. */
	c = (struct cg_cddpm_config){784, 10, 64, 3, 32, 1000, 5, 1,
	                             16,  28, 28, 1, 0,  1,    0};
	n = cg_cddpm_views(&c, v, MAXV);
	snprintf(what, sizeof(what), "film: %d views, %zu parameters", n,
	         cg_cddpm_nparams(&c));
	expect(n == CG_CDDPM_UNET_VIEWS &&
	           cg_cddpm_nparams(&c) == unet_count_e(emb, 16, 1, 64, 2) &&
	           strcmp(v[9].name, "down.0.emb.w") == 0 &&
	           v[9].shape[0] == 32 && v[9].shape[1] == 64 &&
	           v[10].n == 32,
	       what);
	c.film = 2;
	expect(cg_cddpm_check_config(&c) == -1 && strstr(cg_errmsg(), "film"),
	       "film 2 is refused");
	c.attn = 2;
	expect(cg_cddpm_check_config(&c) == -1, "attn is 0 or 1");
}

/* The loss of a batch is the mean of its examples', and
 * cg_cddpm_predict agrees with the training pass's x0 or v. */
static void
test_unet_batch(struct cg_cddpm_config c, int B)
{
	struct tcase t;
	const int D = c.in_dim;
	char what[160];

	tcase_init(&t, c, B);
	double loss = tloss(&t, NULL);
	struct cg_cddpm_ws *one = cg_cddpm_ws_new(&c, 1, 0);
	double sum = 0;
	for (int b = 0; b < B; b++) {
		double l;
		if (one == NULL ||
		    cg_cddpm_forward_backward(
		        &c, t.params, one, t.x0 + (size_t)b * D, t.cond + b,
		        t.t + b, t.eps + (size_t)b * D, 1, NULL, &l) != 0)
			die("one example");
		sum += l / B;
	}
	snprintf(what, sizeof(what),
	         "unet %d, %dx%dx%d: a batch's loss %.9g is the mean of its "
	         "examples' %.9g",
	         c.unet, c.height, c.width, c.channels, loss, sum);
	expect(loss > 0 && fabs(sum - loss) < 1e-6 * (1 + loss), what);

	/* The sampler runs the U-Net as it runs the MLP: guided DDPM, the
	 * conditional and null passes as one batch of 2B. */
	struct cg_cddpm_sampling smp = {1.5, 4, 0, 1, 0, 0, 0};
	float *img = xcalloc((size_t)B * D, sizeof(float));
	struct cg_rng r;
	int ok = 1;
	cg_rng_seed(&r, 3);
	ok = cg_cddpm_sample(&c, t.params, t.ws, t.cond, B, &smp, &r, img) == 0;
	for (size_t i = 0; ok && i < (size_t)B * D; i++)
		ok = img[i] >= 0 && img[i] <= 1;
	ok &= maxdiff(img, img + D, (size_t)D) > 0;
	expect(ok, "unet: guided DDPM draws images in [0, 1]");
	free(img);
	cg_cddpm_ws_free(one);
	tcase_free(&t);
}

/*
 * A checkpointed workspace recomputes each residual block's activations
 * from its input map with the same kernels: the loss, every gradient and
 * a distilled pass's are the same bits as without, for a call that uses
 * part of the workspace too, the sampler's prediction as well; and the
 * workspace is smaller.  The MLP's is the same either way.
 */
static void
test_unet_checkpoint(struct cg_cddpm_config c, int B)
{
	struct tcase t;
	struct cg_cddpm_ws *ck;
	char what[160];
	int same = 1;

	tcase_init(&t, c, B);
	if ((ck = cg_cddpm_ws_new(&c, 2 * B, 1)) == NULL)
		die("cg_cddpm_ws_new checkpointed");
	float *g2 = xcalloc(t.np, sizeof(float));
	const size_t D = (size_t)c.in_dim;
	/* The whole batch, then B - 1 examples (rows of a part). */
	for (int k = 0; k < 2; k++) {
		const int n = k ? B - 1 : B;
		double l1, l2, d1, d2, e1, e2;
		memset(t.grad, 0, t.np * sizeof(float));
		memset(g2, 0, t.np * sizeof(float));
		if (cg_cddpm_forward_backward(&c, t.params, t.ws, t.x0, t.cond,
		                              t.t, t.eps, n, t.grad,
		                              &l1) != 0 ||
		    cg_cddpm_forward_backward(&c, t.params, ck, t.x0, t.cond,
		                              t.t, t.eps, n, g2, &l2) != 0)
			die("cg_cddpm_forward_backward");
		same &= l1 == l2 && l1 > 0 &&
		        memcmp(t.grad, g2, t.np * sizeof(float)) == 0;
		/* distilled: x_t, the targets and a teacher's made up */
		memset(t.grad, 0, t.np * sizeof(float));
		memset(g2, 0, t.np * sizeof(float));
		if (cg_cddpm_distill_forward_backward(
		        &c, t.params, t.ws, t.eps, t.x0, t.eps, t.eps, t.x0,
		        0.3, t.cond, t.t, n, t.grad, &l1, &d1, &e1) != 0 ||
		    cg_cddpm_distill_forward_backward(
		        &c, t.params, ck, t.eps, t.x0, t.eps, t.eps, t.x0, 0.3,
		        t.cond, t.t, n, g2, &l2, &d2, &e2) != 0)
			die("cg_cddpm_distill_forward_backward");
		same &= l1 == l2 && d1 == d2 && e1 == e2 &&
		        memcmp(t.grad, g2, t.np * sizeof(float)) == 0;
	}
	float *p1 = xcalloc((size_t)B * D, sizeof(float));
	float *p2 = xcalloc((size_t)B * D, sizeof(float));
	if (cg_cddpm_predict(&c, t.params, t.ws, t.x0, t.cond, t.t, B, p1) !=
	        0 ||
	    cg_cddpm_predict(&c, t.params, ck, t.x0, t.cond, t.t, B, p2) != 0)
		die("cg_cddpm_predict");
	same &= memcmp(p1, p2, (size_t)B * D * sizeof(float)) == 0;
	snprintf(what, sizeof(what),
	         "unet %d, %dx%dx%d, attn %d film %d checkpointed: loss, "
	         "gradients, distilled, prediction bit for bit",
	         c.unet, c.height, c.width, c.channels, c.attn, c.film);
	expect(same, what);

	size_t b1 = cg_cddpm_ws_bytes(&c, 1, 1);
	size_t b2 = cg_cddpm_ws_bytes(&c, 2 * B, 1);
	size_t full = cg_cddpm_ws_bytes(&c, 2 * B, 0);
	snprintf(what, sizeof(what),
	         "    workspace for %d: %zu bytes checkpointed, %zu not", 2 * B,
	         b2, full);
	expect(b1 > 0 && b1 < b2 && b2 < full, what);
	struct cg_cddpm_config mlp = c;
	mlp.unet = 0, mlp.attn = 0;
	expect(cg_cddpm_ws_bytes(&mlp, B, 1) == cg_cddpm_ws_bytes(&mlp, B, 0) &&
	           cg_cddpm_ws_bytes(&mlp, B, 0) > 0,
	       "    the MLP's workspace is the same checkpointed");
	free(p1);
	free(p2);
	free(g2);
	cg_cddpm_ws_free(ck);
	tcase_free(&t);
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
	/* The network's v with the loss on eps (models made before
	 * snr-clip and predict-x0), and with the weighted loss: on x0 (clip
	 * 0), clipped where some of the timesteps drawn pass the clip, on v
	 * (clip past every snr); its x0, with the same and the loss on
	 * eps. */
	test_forward((struct cg_cddpm_config){13, 4, 9, 1, 6, 50, EPS, 0, 0, 0,
	                                      0, 0, 0, 0, 0},
	             5);
	test_forward((struct cg_cddpm_config){13, 4, 9, 3, 8, 200, 5, 0, 0, 0,
	                                      0, 0, 0, 0, 0},
	             7);
	test_forward((struct cg_cddpm_config){13, 4, 9, 2, 8, 1000, 0, 0, 0, 0,
	                                      0, 0, 0, 0, 0},
	             6);
	test_forward((struct cg_cddpm_config){13, 4, 9, 2, 8, 100, 1e6, 0, 0, 0,
	                                      0, 0, 0, 0, 0},
	             6);
	test_forward((struct cg_cddpm_config){13, 4, 9, 3, 8, 200, 5, 1, 0, 0,
	                                      0, 0, 0, 0, 0},
	             7);
	test_forward((struct cg_cddpm_config){13, 4, 9, 2, 8, 1000, 0, 1, 0, 0,
	                                      0, 0, 0, 0, 0},
	             6);
	test_forward((struct cg_cddpm_config){13, 4, 9, 1, 6, 50, EPS, 1, 0, 0,
	                                      0, 0, 0, 0, 0},
	             5);
	test_grad((struct cg_cddpm_config){7, 2, 6, 1, 4, 50, EPS, 0, 0, 0, 0,
	                                   0, 0, 0, 0},
	          4);
	test_grad((struct cg_cddpm_config){7, 3, 6, 2, 6, 100, 5, 0, 0, 0, 0, 0,
	                                   0, 0, 0},
	          6);
	test_grad((struct cg_cddpm_config){7, 3, 6, 2, 6, 1000, 0, 0, 0, 0, 0,
	                                   0, 0, 0, 0},
	          6);
	test_grad((struct cg_cddpm_config){7, 3, 6, 2, 6, 100, 5, 1, 0, 0, 0, 0,
	                                   0, 0, 0},
	          6);
	test_grad((struct cg_cddpm_config){7, 2, 6, 1, 4, 1000, 2, 1, 0, 0, 0,
	                                   0, 0, 0, 0},
	          5);
	/* The cosine schedule: the loss, the gradient and both samplers. */
	test_forward((struct cg_cddpm_config){13, 4, 9, 2, 8, 50, 5, 1, 0, 0, 0,
	                                      0, 0, 0, 1},
	             6);
	test_forward((struct cg_cddpm_config){13, 4, 9, 1, 6, 1000, EPS, 0, 0,
	                                      0, 0, 0, 0, 0, 1},
	             7);
	test_grad((struct cg_cddpm_config){7, 3, 6, 2, 6, 100, 5, 1, 0, 0, 0, 0,
	                                   0, 0, 1},
	          6);
	test_time_slots();
	test_sample(0);
	test_sample(1);

	/* The U-Net: 8x8x1 at 2 channels (groups of 1 and 2), 4x8x3 at 4
	 * (down to 1x2 positions, groups of 1 to 4), each output. */
	test_unet_config();
	test_unet_batch((struct cg_cddpm_config){64, 3, 6, 1, 4, 100, 5, 1, 2,
	                                         8, 8, 1, 0, 0, 0},
	                5);
	test_grad((struct cg_cddpm_config){64, 3, 6, 1, 4, 100, 5, 1, 2, 8, 8,
	                                   1, 0, 0, 0},
	          4);
	test_grad((struct cg_cddpm_config){96, 2, 5, 1, 6, 50, EPS, 0, 4, 4, 8,
	                                   3, 0, 0, 0},
	          3);
	/* Self-attention over 3x2 positions. */
	test_unet_batch((struct cg_cddpm_config){96, 3, 6, 1, 4, 100, 5, 1, 2,
	                                         12, 8, 1, 1, 0, 0},
	                4);
	test_grad((struct cg_cddpm_config){96, 3, 6, 1, 4, 100, 5, 1, 2, 12, 8,
	                                   1, 1, 0, 0},
	          4);
	/* The embedding as scale and shift after the norm (film). */
	test_unet_batch((struct cg_cddpm_config){64, 3, 6, 1, 4, 100, 5, 1, 2,
	                                         8, 8, 1, 0, 1, 0},
	                5);
	test_grad((struct cg_cddpm_config){64, 3, 6, 1, 4, 100, 5, 1, 2, 8, 8,
	                                   1, 0, 1, 0},
	          4);
	test_grad((struct cg_cddpm_config){96, 2, 5, 1, 6, 50, EPS, 0, 4, 4, 8,
	                                   3, 1, 1, 0},
	          3);
	/* Checkpointed: each form of block (film or the sum), with and
	 * without attention, v and x0. */
	test_unet_checkpoint((struct cg_cddpm_config){64, 3, 6, 1, 4, 100, 5, 1,
	                                              2, 8, 8, 1, 0, 0, 0},
	                     4);
	test_unet_checkpoint((struct cg_cddpm_config){96, 3, 6, 1, 4, 100, 5, 1,
	                                              4, 12, 8, 1, 1, 1, 0},
	                     3);
	test_unet_checkpoint((struct cg_cddpm_config){96, 2, 5, 1, 6, 50, EPS,
	                                              0, 4, 4, 8, 3, 0, 1, 1},
	                     3);
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}

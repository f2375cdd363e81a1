/*
 * test_cgan.c - the conditional GAN and its new kernels against finite
 * differences and a naive double model.
 *
 * Kernels: leaky ReLU's backward, the spectral norm's backward (u and v
 * held fixed) against central differences, and the power iteration's
 * sigma against a matrix of known singular values; the estimate is a
 * function of the weights alone.  The model: the config limits, the view
 * table, the error returns, the three losses against an independent
 * double-precision implementation that walks the views (with the u, v
 * the pass used), and every parameter gradient against central
 * differences, element by element and along a random direction per view:
 * the generator's views of L_G, the discriminator's of L_D (with enough
 * power iterations that sigma is exact to float, so that the fixed-u, v
 * gradient is the true one).  Some reals lie past the hinge's margin, so
 * both of its branches are taken.  A corrupted gradient must be caught.
 * Distillation (cg_cgan_distill_forward_backward): the teacher term
 * against the squared distance of the generated images, the generator's
 * mixed objective against central differences, the discriminator's
 * gradient the bytes it is without a teacher, weight 0 plain training's.
 * Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cgan/cgan.h"
#include "cg.h"
#include "cli/cli.h"
#include "nn/nn.h"

#define TEST_NAME "test_cgan"
#include "check.h"

#define MAXV 64

#include "fd.h"

static struct cg_rng rng;
/* The smallest |pre-activation| of a ReLU or leaky ReLU the reference
 * met since it was last set: how near the passes run to a kink. */
static double ref_kink = INFINITY;
/* The auxiliary classifier's cross-entropy for the condition of the last
 * reference discriminator's call (aux > 0; else 0). */
static double ref_ce;

/* ------------------------------------------------------------ kernels */

struct lrelu_ctx {
	float *x, *y, *r;
	size_t n;
};

static double
lrelu_loss(void *p)
{
	struct lrelu_ctx *c = p;

	cg_lrelu_forward(c->y, c->x, CG_CGAN_SLOPE, c->n);
	return dot(c->y, c->r, c->n);
}

struct sn_ctx {
	float *w, *wsn, *u, *v, *r;
	int OC, C;
};

/* sum r . (w / (u^T w v)), u and v fixed. */
static double
sn_loss(void *p)
{
	struct sn_ctx *c = p;

	cg_spectral_norm_forward(c->wsn, c->w, c->u, c->v, c->OC, c->C);
	return dot(c->wsn, c->r, (size_t)c->OC * c->C);
}

static void
test_kernels(void)
{
	/* Leaky ReLU: values away from 0, so that no step crosses it. */
	struct lrelu_ctx l = {falloc(40), falloc(40), falloc(40), 40};
	float *dx = falloc(40), *dy = falloc(40);
	for (int i = 0; i < 40; i++) {
		float a = 0.1f + cg_rng_uniform(&rng);
		l.x[i] = i % 2 ? a : -a;
		l.r[i] = cg_rng_normal(&rng);
		dy[i] = l.r[i];
	}
	lrelu_loss(&l);
	cg_lrelu_backward(dx, dy, l.y, CG_CGAN_SLOPE, 40);
	fdcheck(&FD_IMAGE, "lrelu backward", l.x, dx, 40, lrelu_loss, &l, 0);
	free(l.x), free(l.y), free(l.r), free(dx), free(dy);

	/* Spectral norm with u, v fixed (from a few iterations: any u, v
	 * will do for the identity the backward pass computes). */
	const int OC = 5, C = 7;
	struct sn_ctx s = {falloc(OC * C),
	                   falloc(OC * C),
	                   falloc(OC),
	                   falloc(C),
	                   falloc(OC * C),
	                   OC,
	                   C};
	float *dw = falloc(OC * C), *dwsn = falloc(OC * C);
	for (int i = 0; i < OC * C; i++) {
		s.w[i] = cg_rng_normal(&rng);
		s.r[i] = cg_rng_normal(&rng);
		dwsn[i] = s.r[i];
	}
	cg_spectral_power(s.u, s.v, s.w, OC, C, 2);
	double sigma = cg_spectral_norm_forward(s.wsn, s.w, s.u, s.v, OC, C);
	cg_spectral_norm_backward(dw, dwsn, s.wsn, s.u, s.v, sigma, OC, C);
	fdcheck(&FD_IMAGE, "spectral norm backward", s.w, dw, OC * C, sn_loss,
	        &s, 0);
	free(dw), free(dwsn);

	/* w = sum_k s_k a_k b_k^T, a and b orthonormal, s = 3, 1.5, 1, 0.5,
	 * 0.2: sigma is 3.  Gram-Schmidt in double. */
	double a[5][5], b[5][7];
	const double sv[5] = {3, 1.5, 1, 0.5, 0.2};
	for (int k = 0; k < 5; k++) {
		for (int i = 0; i < 5; i++)
			a[k][i] = cg_rng_normal(&rng);
		for (int j = 0; j < 7; j++)
			b[k][j] = cg_rng_normal(&rng);
		for (int q = 0; q < k; q++) {
			double da = 0, db = 0;
			for (int i = 0; i < 5; i++)
				da += a[k][i] * a[q][i];
			for (int j = 0; j < 7; j++)
				db += b[k][j] * b[q][j];
			for (int i = 0; i < 5; i++)
				a[k][i] -= da * a[q][i];
			for (int j = 0; j < 7; j++)
				b[k][j] -= db * b[q][j];
		}
		double na = 0, nb = 0;
		for (int i = 0; i < 5; i++)
			na += a[k][i] * a[k][i];
		for (int j = 0; j < 7; j++)
			nb += b[k][j] * b[k][j];
		for (int i = 0; i < 5; i++)
			a[k][i] /= sqrt(na);
		for (int j = 0; j < 7; j++)
			b[k][j] /= sqrt(nb);
	}
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 7; j++) {
			double x = 0;
			for (int k = 0; k < 5; k++)
				x += sv[k] * a[k][i] * b[k][j];
			s.w[i * 7 + j] = (float)x;
		}
	double s30 = cg_spectral_power(s.u, s.v, s.w, 5, 7, 30);
	float u1[5], v1[7];
	double s1 = cg_spectral_power(u1, v1, s.w, 5, 7, 1);
	double again = cg_spectral_power(u1, v1, s.w, 5, 7, 1);
	char what[160];
	snprintf(what, sizeof(what),
	         "power iteration: sigma %.7g after 30 (3 wanted), %.5g after "
	         "1, the same again",
	         s30, s1);
	expect(fabs(s30 - 3) < 3e-6 && s1 <= 3 + 1e-6 && s1 > 1 && again == s1,
	       what);
	double sg = cg_spectral_norm_forward(s.wsn, s.w, s.u, s.v, 5, 7);
	expect(fabs(sg - s30) < 1e-9, "the forward's sigma is u^T w v");
	memset(s.w, 0, sizeof(float) * 35);
	expect(cg_spectral_power(s.u, s.v, s.w, 5, 7, 3) == 0 &&
	           cg_spectral_norm_forward(s.wsn, s.w, s.u, s.v, 5, 7) == 1,
	       "a zero matrix: sigma 0, left unscaled");
	free(s.w), free(s.wsn), free(s.u), free(s.v), free(s.r);
}

/* --------------------------------------------------------------- model */

struct tcase {
	struct cg_cgan_config c;
	int B;
	size_t np, doff;
	struct cg_view v[MAXV];
	int nv;
	float *params, *grad, *x, *z;
	int *cond;
	struct cg_cgan_ws *ws;
};

static struct cg_cgan_loss
tloss(struct tcase *t, float *grad)
{
	struct cg_cgan_loss l;

	if (cg_cgan_forward_backward(&t->c, t->params, t->ws, t->x, t->cond,
	                             t->z, t->B, grad, &l) != 0)
		die("cg_cgan_forward_backward");
	return l;
}

static const struct cg_view *
view(const struct tcase *t, const char *name)
{
	for (int i = 0; i < t->nv; i++)
		if (strcmp(t->v[i].name, name) == 0)
			return &t->v[i];
	fprintf(stderr, TEST_NAME ": no view %s\n", name);
	exit(1);
}

static void
tcase_free(struct tcase *t)
{
	cg_cgan_ws_free(t->ws);
	free(t->params);
	free(t->grad);
	free(t->x);
	free(t->z);
	free(t->cond);
}

/* ------------------------------------------------ the naive reference */

/* out [OC] = W in + b of view prefix NAME (W [OC, IC]); scale divides W. */
static void
ref_linear(const struct tcase *t, const char *name, const double *in,
           double *out, double scale)
{
	char wn[64], bn[64];
	snprintf(wn, sizeof(wn), "%s.w", name);
	snprintf(bn, sizeof(bn), "%s.b", name);
	const struct cg_view *w = view(t, wn), *b = view(t, bn);
	const int OC = (int)w->shape[0], IC = (int)w->shape[1];

	for (int o = 0; o < OC; o++) {
		double s = 0;
		for (int i = 0; i < IC; i++)
			s += (double)t->params[w->off + (size_t)o * IC + i] *
			     in[i];
		out[o] = s / scale + t->params[b->off + o];
	}
}

/* sigma = u^T W v of the pass's u, v for discriminator matrix i. */
static double
ref_sigma(const struct tcase *t, int i, const struct cg_view *w)
{
	const float *u, *v;
	double sig, s = 0;

	if (cg_cgan_sn_vectors(t->ws, i, &u, &v, &sig) != 0)
		die("cg_cgan_sn_vectors");
	/* A convolution's weight is the matrix [out, in x 9]. */
	const size_t cols = w->n / w->shape[0];
	for (size_t o = 0; o < w->shape[0]; o++)
		for (size_t j = 0; j < cols; j++)
			s += (double)u[o] * t->params[w->off + o * cols + j] *
			     v[j];
	return s;
}

/*
 * out [OH, OW, OC] = the KxK convolution (K the weight's side, 3 or 4;
 * padding 1, stride st) of in [H, W, C] by view prefix NAME, its weight
 * divided by scale, summed directly; each output's distance from 0 goes
 * to ref_kink when kink.
 */
static void
ref_conv(const struct tcase *t, const char *name, const double *in, int H,
         int W, int C, int st, double *out, double scale, int kink)
{
	char wn[64], bn[64];
	snprintf(wn, sizeof(wn), "%s.w", name);
	snprintf(bn, sizeof(bn), "%s.b", name);
	const struct cg_view *w = view(t, wn), *b = view(t, bn);
	const int OC = (int)w->shape[0], K = (int)w->shape[2],
	          OH = (H + 2 - K) / st + 1, OW = (W + 2 - K) / st + 1;

	for (int oh = 0; oh < OH; oh++)
		for (int ow = 0; ow < OW; ow++)
			for (int o = 0; o < OC; o++) {
				double s = 0;
				for (int c = 0; c < C; c++)
					for (int kh = 0; kh < K; kh++)
						for (int kw = 0; kw < K; kw++) {
							int ih = oh * st - 1 + kh, iw = ow * st - 1 + kw;
							if (ih < 0 || ih >= H || iw < 0 || iw >= W)
								continue;
							s += (double)t->params[w->off + ((size_t)(o * C + c) * K + kh) * K + kw] *
							     in[(ih * W + iw) * C + c];
						}
				double v = s / scale + t->params[b->off + o];
				out[(oh * OW + ow) * OC + o] = v;
				if (kink)
					ref_kink = fmin(ref_kink, fabs(v));
			}
}

/* in [H, W, C] up-sampled by 2 (nearest) into out. */
static void
ref_up(const double *in, int H, int W, int C, double *out)
{
	for (int y = 0; y < 2 * H; y++)
		for (int x = 0; x < 2 * W; x++)
			for (int c = 0; c < C; c++)
				out[(y * 2 * W + x) * C + c] =
				    in[((y / 2) * W + x / 2) * C + c];
}

/* The groups of a norm over C channels, as cgan.c chooses them. */
static int
ref_groups(int C)
{
	return C % 8 == 0 ? 8 : C % 4 == 0 ? 4 : C % 2 == 0 ? 2 : 1;
}

/*
 * a [HW, C] = relu(group norm of a by view prefix NAME (.g, .b), eps
 * 1e-5), in double; each normalised value's distance from 0 to ref_kink.
 */
static void
ref_norm_relu(const struct tcase *t, const char *name, double *a, int HW,
              int C)
{
	char gn[64], bn[64];
	snprintf(gn, sizeof(gn), "%s.g", name);
	snprintf(bn, sizeof(bn), "%s.b", name);
	const struct cg_view *g = view(t, gn), *b = view(t, bn);
	const int G = ref_groups(C), CG = C / G;

	for (int k = 0; k < G; k++) {
		double m = 0, v = 0;
		for (int p = 0; p < HW; p++)
			for (int c = k * CG; c < (k + 1) * CG; c++)
				m += a[p * C + c];
		m /= (double)HW * CG;
		for (int p = 0; p < HW; p++)
			for (int c = k * CG; c < (k + 1) * CG; c++)
				v += (a[p * C + c] - m) * (a[p * C + c] - m);
		v /= (double)HW * CG;
		for (int p = 0; p < HW; p++)
			for (int c = k * CG; c < (k + 1) * CG; c++) {
				double y = (a[p * C + c] - m) / sqrt(v + 1e-5) *
				               t->params[g->off + c] +
				           t->params[b->off + c];
				ref_kink = fmin(ref_kink, fabs(y));
				a[p * C + c] = y > 0 ? y : 0;
			}
	}
}

/* ref_ce = the classifier's cross-entropy of features h [F] for y (0
 * without one). */
static void
ref_aux(const struct tcase *t, const double *h, int F, int y)
{
	double lg[16], mx = -INFINITY, sum = 0;

	ref_ce = 0;
	if (t->c.aux <= 0)
		return;
	ref_linear(t, "disc.cls", h, lg, 1);
	for (int k = 0; k < t->c.ncond; k++)
		mx = fmax(mx, lg[k]);
	for (int k = 0; k < t->c.ncond; k++)
		sum += exp(lg[k] - mx);
	ref_ce = log(sum) + mx - lg[y];
	(void)F;
}

/* The convolutional discriminator's score, as cgan.h writes it. */
static double
ref_cdisc(const struct tcase *t, const double *x, int y)
{
	const int H = t->c.height, W = t->c.width, C = t->c.conv;
	const int F = H / 4 * (W / 4) * 2 * C;
	double h1[1024], h2[1024];

	ref_conv(t, "disc.c1", x, H, W, t->c.channels, 2, h1,
	         ref_sigma(t, 0, view(t, "disc.c1.w")), 1);
	for (int j = 0; j < H / 2 * (W / 2) * C; j++)
		h1[j] *= h1[j] < 0 ? CG_CGAN_SLOPE : 1;
	ref_conv(t, "disc.c2", h1, H / 2, W / 2, C, 2, h2,
	         ref_sigma(t, 1, view(t, "disc.c2.w")), 1);
	for (int j = 0; j < F; j++)
		h2[j] *= h2[j] < 0 ? CG_CGAN_SLOPE : 1;
	const struct cg_view *pw = view(t, "disc.psi.w"),
	                     *pb = view(t, "disc.psi.b"),
	                     *e = view(t, "disc.emb");
	double sp = ref_sigma(t, 2, pw), se = ref_sigma(t, 3, e);
	double s = t->params[pb->off];
	for (int j = 0; j < F; j++)
		s += h2[j] * (t->params[pw->off + j] / sp +
		              t->params[e->off + (size_t)y * F + j] / se);
	ref_aux(t, h2, F, y);
	return s;
}

/* The convolutional generator's image, as cgan.h writes it. */
static void
ref_cgen(const struct tcase *t, const float *z, int y, double *out)
{
	const int H = t->c.height, W = t->c.width, C = t->c.conv;
	const int F = H / 4 * (W / 4) * 2 * C;
	const struct cg_view *w0 = view(t, "gen.0.w"), *b0 = view(t, "gen.0.b"),
	                     *e = view(t, "gen.emb");
	double a[1024], u[1024];

	for (int j = 0; j < F; j++) {
		double s = t->params[b0->off + j] +
		           t->params[e->off + (size_t)y * F + j];
		for (int i = 0; i < t->c.latent; i++)
			s += (double)t->params[w0->off +
			                       (size_t)j * t->c.latent + i] *
			     z[i];
		a[j] = s;
	}
	ref_norm_relu(t, "gen.n0", a, H / 4 * (W / 4), 2 * C);
	ref_up(a, H / 4, W / 4, 2 * C, u);
	ref_conv(t, "gen.c1", u, H / 2, W / 2, 2 * C, 1, a, 1, 0);
	ref_norm_relu(t, "gen.n1", a, H / 2 * (W / 2), C);
	ref_up(a, H / 2, W / 2, C, u);
	ref_conv(t, "gen.c2", u, H, W, C, 1, a, 1, 0);
	ref_norm_relu(t, "gen.n2", a, H * W, C);
	ref_conv(t, "gen.out", a, H, W, C, 1, out, 1, 0);
	for (int i = 0; i < t->c.in_dim; i++)
		out[i] = 1 / (1 + exp(-out[i]));
}

static double
ref_disc(const struct tcase *t, const double *x, int y)
{
	const int H = t->c.hidden, L = t->c.layers;
	double h[2][64], *in = NULL;
	char name[32];

	if (t->c.conv)
		return ref_cdisc(t, x, y);
	for (int l = 0; l < L; l++) {
		char wn[40];
		snprintf(name, sizeof(name), "disc.%d", l);
		snprintf(wn, sizeof(wn), "%s.w", name);
		double sig = ref_sigma(t, l, view(t, wn));
		ref_linear(t, name, l == 0 ? x : in, h[l % 2], sig);
		for (int j = 0; j < H; j++) {
			ref_kink = fmin(ref_kink, fabs(h[l % 2][j]));
			if (h[l % 2][j] < 0)
				h[l % 2][j] *= CG_CGAN_SLOPE;
		}
		in = h[l % 2];
	}
	const struct cg_view *pw = view(t, "disc.psi.w"),
	                     *pb = view(t, "disc.psi.b"),
	                     *e = view(t, "disc.emb");
	double sp = ref_sigma(t, L, pw), se = ref_sigma(t, L + 1, e);
	double s = t->params[pb->off];
	for (int j = 0; j < H; j++)
		s += in[j] * (t->params[pw->off + j] / sp +
		              t->params[e->off + (size_t)y * H + j] / se);
	ref_aux(t, in, H, y);
	return s;
}

static void
ref_gen(const struct tcase *t, const float *z, int y, double *out)
{
	const int H = t->c.hidden, L = t->c.layers;
	double zin[64], h[2][64], *in = zin;
	char name[32];

	if (t->c.conv) {
		ref_cgen(t, z, y, out);
		return;
	}
	for (int i = 0; i < t->c.latent; i++)
		zin[i] = z[i];
	for (int l = 0; l < L; l++) {
		snprintf(name, sizeof(name), "gen.%d", l);
		ref_linear(t, name, in, h[l % 2], 1);
		for (int j = 0; j < H; j++) {
			if (l == 0)
				h[0][j] += t->params[view(t, "gen.emb")->off +
				                     (size_t)y * H + j];
			ref_kink = fmin(ref_kink, fabs(h[l % 2][j]));
			if (h[l % 2][j] < 0)
				h[l % 2][j] = 0;
		}
		in = h[l % 2];
	}
	ref_linear(t, "gen.out", in, out, 1);
	for (int i = 0; i < t->c.in_dim; i++)
		out[i] = 1 / (1 + exp(-out[i]));
}

/*
 * How near the pass on t runs to a kink (a ReLU, a leaky ReLU, the
 * hinge), in its own units: what a finite difference of step FD_IMAGE.h must
 * not cross.
 */
static double
kink_margin(struct tcase *t)
{
	double *img = xcalloc((size_t)t->c.in_dim, sizeof(double));
	double x[256], m = INFINITY;

	tloss(t, NULL); /* the u, v the reference uses */
	ref_kink = INFINITY;
	for (int b = 0; b < t->B; b++) {
		for (int i = 0; i < t->c.in_dim; i++)
			x[i] = t->x[(size_t)b * t->c.in_dim + i];
		m = fmin(m, fabs(ref_disc(t, x, t->cond[b]) - 1));
		ref_gen(t, t->z + (size_t)b * t->c.latent, t->cond[b], img);
		m = fmin(m, fabs(ref_disc(t, img, t->cond[b]) + 1));
	}
	free(img);
	return fmin(m, ref_kink);
}

static void
tcase_init(struct tcase *t, struct cg_cgan_config c, int B)
{
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->B = B;
	if ((t->np = cg_cgan_nparams(&c)) == 0 ||
	    (t->nv = cg_cgan_views(&c, t->v, MAXV)) < 0 ||
	    (t->ws = cg_cgan_ws_new(&c, B, 0)) == NULL)
		die("tcase_init");
	t->doff = cg_cgan_disc_off(&c);
	t->params = xcalloc(t->np, sizeof(float));
	t->grad = xcalloc(t->np, sizeof(float));
	t->x = xcalloc((size_t)B * c.in_dim, sizeof(float));
	t->z = xcalloc((size_t)B * c.latent, sizeof(float));
	t->cond = xcalloc((size_t)B, sizeof(int));
	/* Every activation and the hinge are piecewise linear: a difference
	 * across a kink is off by the jump in slope.  Draw again until none
	 * lies within 8 steps of the values a difference moves. */
	for (int tries = 0;; tries++) {
		if (tries == 1000) {
			fprintf(stderr, TEST_NAME ": no draw clear of kinks\n");
			exit(1);
		}
		cg_cgan_init(&c, t->params, &rng);
		/* Biases away from 0, so that they matter. */
		for (size_t i = 0; i < t->np; i++)
			t->params[i] += 0.1f * cg_rng_normal(&rng);
		for (size_t i = 0; i < (size_t)B * c.in_dim; i++)
			t->x[i] = cg_rng_uniform(&rng);
		for (size_t i = 0; i < (size_t)B * c.latent; i++)
			t->z[i] = cg_rng_normal(&rng);
		for (int b = 0; b < B; b++)
			t->cond[b] = b % c.ncond;
		/* psi's bias puts the reals' median score at 1: half of them
		 * past the margin. */
		float *sc = xcalloc((size_t)B, sizeof(float));
		if (cg_cgan_discriminate(&c, t->params, t->ws, t->x, t->cond, B,
		                         sc) != 0)
			die("cg_cgan_discriminate");
		float med = 0;
		for (int b = 0; b < B; b++) {
			int below = 0;
			for (int q = 0; q < B; q++)
				below += sc[q] < sc[b];
			if (below == B / 2)
				med = sc[b];
		}
		const struct cg_view *pb = view(t, "disc.psi.b");
		/* Between the median and the next score up, not on either. */
		float next = INFINITY;
		for (int b = 0; b < B; b++)
			if (sc[b] > med && sc[b] < next)
				next = sc[b];
		t->params[pb->off] +=
		    1 - (med + (isfinite(next) ? next : med + 1)) / 2;
		free(sc);
		if (kink_margin(t) > 8 * FD_IMAGE.h)
			break;
	}
}

/* ------------------------------------------------------------- tests */

static void
test_config(void)
{
	struct cg_cgan_config c = {784, 10, 64, 512, 2, 5, 0, 0, 0, 0, 0, 3, 0};
	size_t gen = 10 * 512 + 512 * 65 + 512 * 513 + 784 * 513;
	size_t disc = 512 * 785 + 512 * 513 + 513 + 10 * 512;

	expect(cg_cgan_check_config(&c) == 0 &&
	           cg_cgan_nparams(&c) == gen + disc &&
	           cg_cgan_disc_off(&c) == gen,
	       "784, 64-512-512 G, 512-512 D, 10 conditions: parameter counts");
	c.sn_iters = 0;
	expect(cg_cgan_nparams(&c) == 0 && strstr(cg_errmsg(), "sn-iters"),
	       "no power iteration is refused");
	c.sn_iters = 5;
	c.layers = 0;
	expect(cg_cgan_check_config(&c) == -1 && strstr(cg_errmsg(), "layers"),
	       "no hidden layer is refused");
	c.layers = 64;
	c.hidden = 1 << 20;
	expect(cg_cgan_check_config(&c) == -1 &&
	           strstr(cg_errmsg(), "parameters"),
	       "2^20 wide and 64 deep: too many parameters");
}

static void
test_views(void)
{
	struct cg_cgan_config c = {12, 3, 4, 5, 2, 1, 0, 0, 0, 0, 0, 3, 0};
	struct cg_view v[MAXV];
	int n = cg_cgan_views(&c, v, MAXV), ok = n == 14;
	static const char *const names[] = {
	    "gen.emb",   "gen.0.w",    "gen.0.b",    "gen.1.w",  "gen.1.b",
	    "gen.out.w", "gen.out.b",  "disc.0.w",   "disc.0.b", "disc.1.w",
	    "disc.1.b",  "disc.psi.w", "disc.psi.b", "disc.emb"};
	static const int decay[] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0};
	size_t off = 0;

	for (int i = 0; ok && i < n; i++) {
		ok &= strcmp(v[i].name, names[i]) == 0 && v[i].off == off &&
		      v[i].decay == decay[i];
		off += v[i].n;
	}
	ok &= off == cg_cgan_nparams(&c) && v[7].off == cg_cgan_disc_off(&c) &&
	      v[1].shape[0] == 5 && v[1].shape[1] == 4 && v[5].shape[0] == 12 &&
	      v[7].shape[1] == 12 && v[11].shape[0] == 1 &&
	      v[13].shape[0] == 3 && v[13].shape[1] == 5;
	expect(ok, "views: names, order, shapes, contiguous; disc after gen");
	expect(cg_cgan_views(&c, v, 13) == -1, "views: too small a table");
}

/*
 * With aux: the classifier's two views after the rest, every other view
 * where it was; cg-init's draws of the rest the same bytes as without
 * (the classifier is drawn last); lambda out of range refused.
 */
static void
test_aux_layout(struct cg_cgan_config c)
{
	struct cg_cgan_config c0 = c;
	struct cg_view v[MAXV], v0[MAXV];
	struct cg_rng r, r0;
	char what[160];

	c0.aux = 0;
	int n = cg_cgan_views(&c, v, MAXV), n0 = cg_cgan_views(&c0, v0, MAXV);
	size_t np = cg_cgan_nparams(&c), np0 = cg_cgan_nparams(&c0);
	int ok = n == n0 + 2 && n == cg_cgan_nviews(&c) &&
	         n0 == cg_cgan_nviews(&c0) &&
	         np == np0 + (size_t)c.ncond * (v[n - 2].shape[1] + 1) &&
	         cg_cgan_disc_off(&c) == cg_cgan_disc_off(&c0);
	for (int i = 0; ok && i < n0; i++)
		ok &= strcmp(v[i].name, v0[i].name) == 0 &&
		      v[i].off == v0[i].off && v[i].n == v0[i].n;
	ok &= ok && strcmp(v[n - 2].name, "disc.cls.w") == 0 &&
	      strcmp(v[n - 1].name, "disc.cls.b") == 0 &&
	      v[n - 2].off == np0 && v[n - 2].shape[0] == (size_t)c.ncond &&
	      v[n - 2].decay == 1 && v[n - 1].decay == 0 &&
	      v[n - 1].off + v[n - 1].n == np;
	snprintf(what, sizeof(what),
	         "aux, conv=%d: disc.cls.w [%zu, %zu] and .b after the other "
	         "%d views, which stay where they were",
	         c.conv, ok ? v[n - 2].shape[0] : 0,
	         ok ? v[n - 2].shape[1] : 0, n0);
	expect(ok, what);
	float *p = xcalloc(np, sizeof(float)), *p0 = xcalloc(np0, sizeof(float));
	cg_rng_seed(&r, 5);
	cg_rng_seed(&r0, 5);
	cg_cgan_init(&c, p, &r);
	cg_cgan_init(&c0, p0, &r0);
	double mx = 0;
	for (size_t i = np0; i < np; i++)
		mx = fmax(mx, fabs(p[i]));
	expect(memcmp(p, p0, np0 * sizeof(float)) == 0 && mx > 0 &&
	           mx <= 1 / sqrt((double)v[n - 2].shape[1]),
	       "aux: the rest drawn as without it, the classifier as a "
	       "Linear");
	free(p);
	free(p0);
	c.aux = -1;
	expect(cg_cgan_check_config(&c) != 0 && strstr(cg_errmsg(), "aux"),
	       "aux below 0 refused");
	c.aux = 2 * CG_CGAN_MAX_AUX;
	expect(cg_cgan_check_config(&c) != 0 && strstr(cg_errmsg(), "aux"),
	       "aux past its largest refused");
}

static void
test_errors(void)
{
	struct tcase t;
	struct cg_cgan_loss l = {-1, -1, -1, -1, -1, -1, -1, -1};

	tcase_init(&t, (struct cg_cgan_config){6, 3, 2, 4, 1, 3, 0, 0, 0, 0, 0, 3, 0},
	           3);
	t.cond[1] = 3;
	expect(cg_cgan_forward_backward(&t.c, t.params, t.ws, t.x, t.cond, t.z,
	                                3, t.grad, &l) == -1 &&
	           l.d == -1 && strstr(cg_errmsg(), "condition 3"),
	       "a condition out of range: -1, nothing written");
	t.cond[1] = 2;
	expect(cg_cgan_forward_backward(&t.c, t.params, t.ws, t.x, t.cond, t.z,
	                                4, NULL, &l) == -1,
	       "a batch over the workspace's");
	struct cg_cgan_config other = t.c;
	other.sn_iters = 4;
	expect(cg_cgan_forward_backward(&other, t.params, t.ws, t.x, t.cond,
	                                t.z, 3, NULL, &l) == -1 &&
	           strstr(cg_errmsg(), "another config"),
	       "a workspace of another config");
	for (size_t i = 0; i < t.np; i++)
		if (t.grad[i] != 0)
			l.d = 0;
	expect(l.d == -1, "the gradient untouched by the refused calls");
	tcase_free(&t);
}

/* The losses against the reference (with the pass's own u, v), the
 * generator against it too, and the losses without grad the same. */
static void
test_forward(struct cg_cgan_config c, int B)
{
	struct tcase t;
	double real = 0, fake = 0, g = 0, worst = 0, ar = 0, af = 0;
	double *img = xcalloc((size_t)c.in_dim, sizeof(double));
	float *gen = xcalloc((size_t)B * c.in_dim, sizeof(float));
	char what[256];
	int past = 0;

	tcase_init(&t, c, B);
	struct cg_cgan_loss l = tloss(&t, NULL);
	if (cg_cgan_generate(&c, t.params, t.ws, t.z, t.cond, B, gen) != 0)
		die("cg_cgan_generate");
	for (int b = 0; b < B; b++) {
		double x[256];
		for (int i = 0; i < c.in_dim; i++)
			x[i] = t.x[(size_t)b * c.in_dim + i];
		double sr = ref_disc(&t, x, t.cond[b]);
		ar += ref_ce / B;
		ref_gen(&t, t.z + (size_t)b * c.latent, t.cond[b], img);
		for (int i = 0; i < c.in_dim; i++)
			worst =
			    fmax(worst,
			         fabs(img[i] - gen[(size_t)b * c.in_dim + i]));
		double sf = ref_disc(&t, img, t.cond[b]);
		af += ref_ce / B;
		real += fmax(0, 1 - sr) / B;
		fake += fmax(0, 1 + sf) / B;
		g -= sf / B;
		past += sr >= 1;
	}
	double err = fmax(fmax(fabs(l.d_real - real), fabs(l.d_fake - fake)),
	                  fmax(fabs(l.g - g), fabs(l.d - real - fake)));
	err = fmax(err, fmax(fabs(l.aux_real - ar), fabs(l.aux_fake - af)));
	snprintf(what, sizeof(what),
	         "layers=%d conv=%d dk=%d aux=%g: d_real %.6f d_fake %.6f g "
	         "%.6f aux %.6f %.6f as the reference (max diff %.2g; %d of "
	         "%d reals past the margin), G's images %.2g",
	         c.layers, c.conv, c.disc_kernel, c.aux, l.d_real, l.d_fake,
	         l.g, l.aux_real, l.aux_fake, err, past, B, worst);
	expect(err < 1e-5 && worst < 1e-6 && past > 0 && past < B &&
	           (c.aux > 0) == (ar > 0 && af > 0),
	       what);
	struct cg_cgan_loss l2 = tloss(&t, t.grad);
	expect(l2.d == l.d && l2.g == l.g && l2.aux_real == l.aux_real &&
	           l2.aux_fake == l.aux_fake,
	       "the losses are the same with the backward pass");
	free(img);
	free(gen);
	tcase_free(&t);
}

/* L_G for the generator's views of t, L_D for the discriminator's. */
static double
view_loss(void *ctx, int v)
{
	struct tcase *t = ctx;

	struct cg_cgan_loss l = tloss(t, NULL);

	return t->v[v].off >= t->doff ? l.d + l.r1 + t->c.aux * l.aux_real
	                              : l.g + t->c.aux * l.aux_fake;
}

static const char *
view_tag(void *ctx, int v)
{
	struct tcase *t = ctx;

	if (t->v[v].off < t->doff)
		return t->c.aux > 0 ? "of L_G + aux CE" : "of L_G";
	return t->c.r1 > 0 ? (t->c.aux > 0 ? "of L_D + R1 + aux CE"
	                                   : "of L_D + R1")
	                   : (t->c.aux > 0 ? "of L_D + aux CE" : "of L_D");
}

/*
 * Central differences of L_G for the generator's views, of L_D for the
 * discriminator's (fd_views); the largest relative error, each view's
 * printed unless quiet.
 */
static double
check_grad(struct tcase *t, const float *grad, int quiet)
{
	return fd_views(t->c.conv ? &FD_IMAGE_BENT : &FD_IMAGE, t->v, t->nv,
	                t->params, grad, view_loss, t,
	                view_tag, &rng, quiet);
}

/* The same, quiet, over the views from *from on: where a spoilt gradient
 * lies, for a check that must fail (fd_reject). */
static double
check_grad_from(struct tcase *t, const float *grad, const struct cg_view *from)
{
	return fd_reject(t->c.conv ? &FD_IMAGE_BENT : &FD_IMAGE, t->v, t->nv,
	                 (int)(from - t->v), t->params, grad, view_loss, t,
	                 &rng);
}

static void
test_grad(struct cg_cgan_config c, int B)
{
	struct tcase t;
	char what[128];

	tcase_init(&t, c, B);
	tloss(&t, t.grad);
	printf("     config in=%d cond=%d latent=%d hidden=%d layers=%d "
	       "sn-iters=%d conv=%d r1=%g aux=%g, B=%d, %zu params\n",
	       c.in_dim, c.ncond, c.latent, c.hidden, c.layers, c.sn_iters,
	       c.conv, c.r1, c.aux, B, t.np);
	double worst = check_grad(&t, t.grad, 0);
	snprintf(what, sizeof(what),
	         "layers=%d conv=%d dk=%d r1=%g aux=%g: every gradient vs "
	         "central differences (worst rel err %.3g)",
	         c.layers, c.conv, c.disc_kernel, c.r1, c.aux, worst);
	expect(worst <= FD_IMAGE.tol, what);

	const struct cg_view *e = view(&t, "disc.emb");
	t.grad[e->off + 1] += 0.05f;
	expect(check_grad_from(&t, t.grad, e) > FD_IMAGE.tol,
	       "checker rejects a gradient off by 0.05 in one element");
	t.grad[e->off + 1] -= 0.05f;
	for (size_t j = 0; j < t.doff; j++)
		t.grad[j] *= 0.9f;
	expect(check_grad_from(&t, t.grad, &t.v[0]) > FD_IMAGE.tol,
	       "checker rejects the generator's gradient scaled by 0.9");
	tcase_free(&t);
}

/*
 * The R1 penalty of t's config (r1 > 0): its value against gamma / 2
 * mean |grad_x D|^2 with grad_x D by central differences of the
 * reference discriminator (piecewise linear in x: exact between kinks,
 * which tcase_init keeps far from a step of 1e-5); the generator's
 * gradient the same bytes as without the penalty, the discriminator's
 * not.
 */
static void
test_r1(struct cg_cgan_config c, int B)
{
	struct tcase t;
	const double h = 1e-5;
	double want = 0;
	char what[160];

	tcase_init(&t, c, B);
	struct cg_cgan_loss l = tloss(&t, t.grad);
	for (int b = 0; b < B; b++) {
		double x[256];
		for (int i = 0; i < c.in_dim; i++)
			x[i] = t.x[(size_t)b * c.in_dim + i];
		for (int i = 0; i < c.in_dim; i++) {
			const double x0 = x[i];
			x[i] = x0 + h;
			double up = ref_disc(&t, x, t.cond[b]);
			x[i] = x0 - h;
			double dn = ref_disc(&t, x, t.cond[b]);
			x[i] = x0;
			want += (up - dn) / (2 * h) * (up - dn) / (2 * h);
		}
	}
	want *= c.r1 / 2 / B;
	snprintf(what, sizeof(what),
	         "layers=%d conv=%d dk=%d r1=%g: the penalty %.9g, by "
	         "differences of D in x %.9g",
	         c.layers, c.conv, c.disc_kernel, c.r1, l.r1, want);
	expect(fabs(l.r1 - want) < 1e-5 * want && want > 0, what);

	struct tcase n;
	struct cg_cgan_config c0 = c;
	c0.r1 = 0;
	tcase_init(&n, c0, B);
	memcpy(n.params, t.params, t.np * sizeof(float));
	memcpy(n.x, t.x, (size_t)B * c.in_dim * sizeof(float));
	memcpy(n.z, t.z, (size_t)B * c.latent * sizeof(float));
	struct cg_cgan_loss l0 = tloss(&n, n.grad);
	double dd = 0;
	for (size_t j = t.doff; j < t.np; j++)
		dd = fmax(dd, fabs(t.grad[j] - n.grad[j]));
	expect(l0.r1 == 0 && l0.d == l.d && l0.g == l.g &&
	           memcmp(t.grad, n.grad, t.doff * sizeof(float)) == 0 &&
	           dd > 1e-4,
	       "R1 leaves the losses and G's gradient as they were and "
	       "changes D's");
	tcase_free(&n);
	tcase_free(&t);
}

/* ------------------------------------------------------- distillation */

/* A distilled case: t's, a teacher's images and weight. */
struct dcase {
	struct tcase *t;
	float *target; /* [B, in_dim] */
	double alpha;
};

static struct cg_cgan_loss
dloss(struct dcase *d, float *grad)
{
	struct tcase *t = d->t;
	struct cg_cgan_loss l;

	if (cg_cgan_distill_forward_backward(&t->c, t->params, t->ws, t->x,
	                                     t->cond, t->z, d->target,
	                                     d->alpha, t->B, grad, &l) != 0)
		die("cg_cgan_distill_forward_backward");
	return l;
}

/* (1 - alpha) L_G + alpha T for the generator's views, L_D (+ R1) for
 * the discriminator's. */
static double
dview_loss(void *ctx, int v)
{
	struct dcase *d = ctx;
	struct cg_cgan_loss l = dloss(d, NULL);

	const double aux = d->t->c.aux;

	return d->t->v[v].off >= d->t->doff
	           ? l.d + l.r1 + aux * l.aux_real
	           : (1 - d->alpha) * (l.g + aux * l.aux_fake) +
	                 d->alpha * l.teacher;
}

static void
test_distill(struct cg_cgan_config c, int B)
{
	struct tcase t, p;
	const size_t N = (size_t)B * c.in_dim;
	float *gen = xcalloc(N, sizeof(float));
	char what[256];

	tcase_init(&t, c, B);
	struct dcase d = {&t, xcalloc(N, sizeof(float)), 0.6};
	/* the teacher's images: the model's own, moved; some saturated */
	if (cg_cgan_generate(&c, t.params, t.ws, t.z, t.cond, B, gen) != 0)
		die("cg_cgan_generate");
	double want = 0;
	for (size_t i = 0; i < N; i++) {
		float u = cg_rng_uniform(&rng);
		d.target[i] = i % 5 == 0 ? (u < 0.5f ? 0.0f : 1.0f) : u;
		want += ((double)gen[i] - d.target[i]) *
		        ((double)gen[i] - d.target[i]);
	}
	want /= B;
	struct cg_cgan_loss l = dloss(&d, t.grad), l0 = tloss(&t, NULL);
	snprintf(what, sizeof(what),
	         "distilled conv=%d: teacher term %.6f (direct %.6f), L_D and "
	         "L_G as without a teacher",
	         c.conv, l.teacher, want);
	expect(fabs(l.teacher - want) < 1e-6 * (1 + want) && l.d == l0.d &&
	           l.g == l0.g && l.r1 == l0.r1,
	       what);
	/* D's gradient the bytes of plain training, G's not */
	tcase_init(&p, c, B);
	memcpy(p.params, t.params, t.np * sizeof(float));
	memcpy(p.x, t.x, N * sizeof(float));
	memcpy(p.z, t.z, (size_t)B * c.latent * sizeof(float));
	memcpy(p.cond, t.cond, (size_t)B * sizeof(int));
	tloss(&p, p.grad);
	expect(memcmp(t.grad + t.doff, p.grad + t.doff,
	              (t.np - t.doff) * sizeof(float)) == 0 &&
	           memcmp(t.grad, p.grad, t.doff * sizeof(float)) != 0,
	       "distilled: D's gradient as without a teacher, G's another");

	const double alphas[2] = {0.6, 1};
	for (int k = 0; k < 2; k++) {
		d.alpha = alphas[k];
		memset(t.grad, 0, t.np * sizeof(float));
		dloss(&d, t.grad);
		double worst = fd_views(c.conv ? &FD_IMAGE_BENT : &FD_IMAGE,
		                        t.v, t.nv, t.params, t.grad,
		                        dview_loss, &d, NULL, &rng, 1);
		snprintf(what, sizeof(what),
		         "distilled (alpha %g, layers=%d conv=%d): every "
		         "gradient vs central differences (worst rel err %.3g)",
		         d.alpha, c.layers, c.conv, worst);
		expect(worst <= FD_IMAGE.tol, what);
	}
	t.grad[1] += 0.05f;
	expect(fd_views(&FD_IMAGE, t.v, 2, t.params, t.grad, dview_loss, &d,
	                NULL, &rng, 1) > FD_IMAGE.tol,
	       "distilled: checker rejects a gradient off by 0.05");

	/* weight 0: plain training's gradient, to the bit */
	d.alpha = 0;
	memset(t.grad, 0, t.np * sizeof(float));
	l = dloss(&d, t.grad);
	expect(memcmp(t.grad, p.grad, t.np * sizeof(float)) == 0 &&
	           l.d == l0.d && l.g == l0.g,
	       "distilled with teacher weight 0: plain training's bits");
	expect(cg_cgan_distill_forward_backward(&c, t.params, t.ws, t.x, t.cond,
	                                        t.z, d.target, 1.5, B, t.grad,
	                                        NULL) != 0 &&
	           cg_cgan_distill_forward_backward(&c, t.params, t.ws, t.x,
	                                            t.cond, t.z, NULL, 0.5, B,
	                                            t.grad, NULL) != 0,
	       "distilled: weight 1.5 and no target refused");
	free(gen);
	free(d.target);
	tcase_free(&p);
	tcase_free(&t);
}

int
main(void)
{
	/* The BLAS as the programs run it (see lib/cli/runtime.c). */
	cg_set_threads(0);
	cg_rng_seed(&rng, 16);
	test_kernels();
	test_config();
	test_views();
	test_errors();
	test_forward((struct cg_cgan_config){13, 4, 5, 9, 1, 5, 0, 0, 0, 0, 0, 3, 0},
	             8);
	test_forward((struct cg_cgan_config){13, 4, 5, 9, 3, 2, 0, 0, 0, 0, 0, 3, 0},
	             7);
	test_grad((struct cg_cgan_config){7, 3, 4, 6, 1, 300, 0, 0, 0, 0, 0, 3, 0},
	          6);
	test_grad((struct cg_cgan_config){7, 3, 4, 6, 2, 300, 0, 0, 0, 0, 0, 3, 0},
	          6);
	{
		struct cg_cgan_config c = {36, 3, 4, 6, 1, 5, 2, 6, 6, 1, 0, 3, 0};
		expect(cg_cgan_check_config(&c) != 0 &&
		           strstr(cg_errmsg(), "6x6x1") != NULL,
		       "convolutional nets refuse a side not a multiple of 4");
		c = (struct cg_cgan_config){64, 3, 4, 6, 1, 5, 2, 8, 8, 2, 0, 3, 0};
		expect(cg_cgan_check_config(&c) != 0,
		       "convolutional nets refuse a shape that is not in_dim's");
	}
	/* The convolutional nets: 4x4x1 and 4x8x2 images, against the
	 * direct sums and central differences. */
	test_forward((struct cg_cgan_config){64, 3, 4, 6, 1, 5, 1, 8, 8, 1, 0, 3, 0},
	             3);
	test_forward((struct cg_cgan_config){64, 2, 3, 6, 1, 2, 1, 4, 8, 2, 0, 3, 0},
	             3);
	test_grad((struct cg_cgan_config){16, 3, 4, 6, 1, 300, 2, 4, 4, 1, 0, 3, 0},
	          3);
	test_grad((struct cg_cgan_config){128, 2, 3, 6, 1, 300, 2, 8, 8, 2, 0, 3, 0},
	          3);
	/* The R1 penalty: its value, and its gradient (the exact second
	 * derivative) within every view's, the MLPs and the conv nets. */
	test_r1((struct cg_cgan_config){13, 4, 5, 9, 1, 5, 0, 0, 0, 0, 10, 3, 0}, 8);
	test_r1((struct cg_cgan_config){13, 4, 5, 9, 2, 2, 0, 0, 0, 0, 3, 3, 0}, 7);
	test_r1((struct cg_cgan_config){64, 3, 4, 6, 1, 5, 2, 8, 8, 1, 10, 3, 0}, 3);
	test_grad((struct cg_cgan_config){7, 3, 4, 6, 1, 300, 0, 0, 0, 0, 10, 3, 0},
	          6);
	test_grad((struct cg_cgan_config){7, 3, 4, 6, 2, 300, 0, 0, 0, 0, 5, 3, 0},
	          6);
	test_grad((struct cg_cgan_config){16, 3, 4, 6, 1, 300, 2, 4, 4, 1, 10, 3, 0},
	          3);
	test_grad((struct cg_cgan_config){128, 2, 3, 6, 1, 300, 2, 8, 8, 2, 4, 3, 0},
	          3);
	/* Distillation: the MLPs, with R1, and the conv nets. */
	test_distill((struct cg_cgan_config){7, 3, 4, 6, 1, 300, 0, 0, 0, 0, 0, 3, 0},
	             6);
	test_distill((struct cg_cgan_config){7, 3, 4, 6, 2, 300, 0, 0, 0, 0, 5, 3, 0},
	             6);
	test_distill(
	    (struct cg_cgan_config){16, 3, 4, 6, 1, 300, 2, 4, 4, 1, 0, 3, 0}, 3);
	/* The discriminator's 4x4 kernels (disc-kernel 4), with R1 too (last:
	 * the draws of the cases above stay as they were). */
	test_forward((struct cg_cgan_config){64, 3, 4, 6, 1, 5, 1, 8, 8, 1, 0, 4, 0},
	             3);
	test_forward((struct cg_cgan_config){64, 2, 3, 6, 1, 2, 1, 4, 8, 2, 0, 4, 0},
	             3);
	test_grad((struct cg_cgan_config){16, 3, 4, 6, 1, 300, 2, 4, 4, 1, 0, 4, 0},
	          3);
	test_grad((struct cg_cgan_config){128, 2, 3, 6, 1, 300, 2, 8, 8, 2, 0, 4, 0},
	          3);
	{
		struct cg_cgan_config c = {64, 3, 4, 6, 1, 5, 2, 8, 8, 1, 0, 5, 0};
		expect(cg_cgan_check_config(&c) != 0 &&
		           strstr(cg_errmsg(), "disc-kernel = 5") != NULL,
		       "a disc-kernel other than 3 or 4 is refused");
	}
	test_r1((struct cg_cgan_config){64, 3, 4, 6, 1, 5, 2, 8, 8, 1, 10, 4, 0}, 3);
	test_grad((struct cg_cgan_config){128, 2, 3, 6, 1, 300, 2, 8, 8, 2, 4, 4, 0},
	          3);
	/* The auxiliary classifier (aux): its layout, its cross-entropies
	 * against the reference, every gradient of L_D + lambda CE(reals)
	 * and L_G + lambda CE(fakes), with R1 and distilled too. */
	test_aux_layout((struct cg_cgan_config){12, 3, 4, 5, 2, 1, 0, 0, 0, 0,
	                                        0, 3, 1});
	test_aux_layout((struct cg_cgan_config){64, 3, 4, 6, 1, 5, 2, 8, 8, 1,
	                                        0, 4, 0.5});
	test_forward((struct cg_cgan_config){13, 4, 5, 9, 2, 5, 0, 0, 0, 0, 0, 3,
	                                     1.5},
	             8);
	test_forward((struct cg_cgan_config){64, 3, 4, 6, 1, 5, 1, 8, 8, 1, 0, 4,
	                                     2},
	             3);
	test_grad((struct cg_cgan_config){7, 3, 4, 6, 1, 300, 0, 0, 0, 0, 0, 3,
	                                  1},
	          6);
	test_grad((struct cg_cgan_config){7, 3, 4, 6, 2, 300, 0, 0, 0, 0, 5, 3,
	                                  2},
	          6);
	test_grad((struct cg_cgan_config){16, 3, 4, 6, 1, 300, 2, 4, 4, 1, 0, 3,
	                                  1},
	          3);
	test_grad((struct cg_cgan_config){128, 2, 3, 6, 1, 300, 2, 8, 8, 2, 4, 4,
	                                  0.7},
	          3);
	test_distill((struct cg_cgan_config){16, 3, 4, 6, 1, 300, 2, 4, 4, 1, 0,
	                                     3, 1},
	             3);
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}

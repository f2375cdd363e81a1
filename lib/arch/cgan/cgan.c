/*
 * arch/cgan/cgan.c - conditional GAN: layout, init and the passes of both nets.
 *
 * The model of cgan.h on the kernels of nn.c.  The layout is a closed-
 * form function of the config (gen_lin, disc_lin), so views, init and
 * the passes agree by construction.  The workspace holds every
 * activation of a batch in one allocation; the discriminator runs on
 * the reals and the fakes as one batch of 2B rows (reals first), so its
 * products are made once.  The backward pass runs the discriminator
 * twice: once with L_D's upstream gradient for its own parameters (the
 * fakes fixed), once with L_G's for the gradient reaching the fakes,
 * which goes on through the generator.  Spectral norms are estimated
 * once per pass and their u, v kept for the backward pass.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cgan/cgan.h"
#include "core/arena.h"
#include "nn/gemm.h"
#include "nn/nn.h"

/* ---------------------------------------------------------------- layout */

struct linear {
	size_t w, b;
	int in, out;
};

/* Generator layer l in [0, layers]: layers is the output layer. */
static struct linear
gen_lin(const struct cg_cgan_config *c, int l)
{
	size_t H = c->hidden, Z = c->latent;
	size_t first = (size_t)c->ncond * H; /* after gen.emb */
	struct linear ln;

	ln.in = l == 0 ? c->latent : c->hidden;
	ln.out = l == c->layers ? c->in_dim : c->hidden;
	ln.w =
	    l == 0 ? first : first + H * Z + H + (size_t)(l - 1) * (H * H + H);
	ln.b = ln.w + (size_t)ln.out * ln.in;
	return ln;
}

size_t
cg_cgan_disc_off(const struct cg_cgan_config *c)
{
	if (cg_cgan_check_config(c) != 0)
		return 0;
	struct linear o = gen_lin(c, c->layers);
	return o.b + o.out;
}

/*
 * Discriminator matrix l in [0, layers + 2): the hidden layers, then
 * layers = psi [1, hidden] (its bias one float), layers + 1 = the
 * embedding [ncond, hidden] (no bias: b is where it would be).
 */
static struct linear
disc_lin(const struct cg_cgan_config *c, int l)
{
	size_t H = c->hidden, D = c->in_dim;
	struct linear o = gen_lin(c, c->layers);
	size_t first = o.b + o.out,
	       hl = first + H * D + H + (size_t)(c->layers - 1) * (H * H + H);
	struct linear ln;

	if (l < c->layers) {
		ln.in = l == 0 ? c->in_dim : c->hidden;
		ln.out = c->hidden;
		ln.w = l == 0
		           ? first
		           : first + H * D + H + (size_t)(l - 1) * (H * H + H);
	} else if (l == c->layers) {
		ln.in = c->hidden;
		ln.out = 1;
		ln.w = hl;
	} else {
		ln.in = c->hidden;
		ln.out = c->ncond;
		ln.w = hl + H + 1;
	}
	ln.b = ln.w + (size_t)ln.out * ln.in;
	return ln;
}

int
cg_cgan_check_config(const struct cg_cgan_config *c)
{
	const struct {
		const char *name;
		int v;
	} f[] = {
	    {"in_dim", c->in_dim},
	    {"ncond", c->ncond},
	    {"latent", c->latent},
	    {"hidden", c->hidden},
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v < 1 || f[i].v > CG_CGAN_MAX_DIM)
			return cg_seterr("cgan: %s = %d: not in [1, %d]",
			                 f[i].name, f[i].v, CG_CGAN_MAX_DIM);
	if (c->layers < 1 || c->layers > 64)
		return cg_seterr("cgan: layers = %d: not in [1, 64]",
		                 c->layers);
	if (c->sn_iters < 1 || c->sn_iters > CG_CGAN_MAX_ITERS)
		return cg_seterr("cgan: sn-iters = %d: not in [1, %d]",
		                 c->sn_iters, CG_CGAN_MAX_ITERS);
	/* Widths at most 2^20 and layers 64: no wrap below 2^63. */
	uint64_t D = c->in_dim, K = c->ncond, H = c->hidden, Z = c->latent;
	uint64_t L = c->layers, hh = H * H + H;
	uint64_t n = K * H + H * Z + H + (L - 1) * hh + D * H + D + /* G */
	             H * D + H + (L - 1) * hh + H + 1 + K * H;      /* D */

	if (n > CG_CGAN_MAX_PARAMS || n > SIZE_MAX / sizeof(float))
		return cg_seterr("cgan: %llu parameters: more than %llu",
		                 (unsigned long long)n,
		                 (unsigned long long)CG_CGAN_MAX_PARAMS);
	return 0;
}

size_t
cg_cgan_nparams(const struct cg_cgan_config *c)
{
	if (cg_cgan_check_config(c) != 0)
		return 0;
	struct linear e = disc_lin(c, c->layers + 1);
	return e.b;
}

int
cg_cgan_views(const struct cg_cgan_config *c, struct cg_view *v, int max)
{
	int n = 0;

	if (cg_cgan_check_config(c) != 0)
		return -1;
	if (max < 4 * c->layers + 6)
		return cg_seterr("cgan: %d views do not fit in %d",
		                 4 * c->layers + 6, max);
	cg_view_set(&v[n++], "gen.emb", 0, (size_t)c->ncond, c->hidden, 0);
	for (int l = 0; l <= c->layers; l++) {
		struct linear ln = gen_lin(c, l);
		char layer[32];

		if (l < c->layers)
			snprintf(layer, sizeof(layer), "gen.%d", l);
		else
			snprintf(layer, sizeof(layer), "gen.out");
		cg_view_linear(&v[n], layer, ln.w, ln.b, ln.out, ln.in);
		n += 2;
	}
	for (int l = 0; l <= c->layers; l++) {
		struct linear ln = disc_lin(c, l);
		char layer[32];

		if (l < c->layers)
			snprintf(layer, sizeof(layer), "disc.%d", l);
		else
			snprintf(layer, sizeof(layer), "disc.psi");
		cg_view_linear(&v[n], layer, ln.w, ln.b, ln.out, ln.in);
		n += 2;
	}
	struct linear e = disc_lin(c, c->layers + 1);
	cg_view_set(&v[n++], "disc.emb", e.w, (size_t)c->ncond, c->hidden, 0);
	return n;
}

static void
init_linear(float *params, struct linear ln, struct cg_rng *r)
{
	float bound = 1.0f / sqrtf((float)ln.in);
	size_t n = (size_t)ln.out * ln.in + ln.out; /* W then b */

	for (size_t j = 0; j < n; j++)
		params[ln.w + j] = (2.0f * cg_rng_uniform(r) - 1.0f) * bound;
}

void
cg_cgan_init(const struct cg_cgan_config *c, float *params, struct cg_rng *r)
{
	size_t ne = (size_t)c->ncond * c->hidden;

	if (cg_cgan_check_config(c) != 0)
		return;
	/* gen.emb and gen.0 are one Linear on (z, one-hot(y)): one bound. */
	const float gb = 1.0f / sqrtf((float)(c->latent + c->ncond));
	for (size_t j = 0; j < ne; j++)
		params[j] = (2.0f * cg_rng_uniform(r) - 1.0f) * gb;
	for (int l = 0; l <= c->layers; l++) {
		struct linear ln = gen_lin(c, l);
		if (l == 0)
			ln.in = c->latent + c->ncond;
		init_linear(params, ln, r);
	}
	for (int l = 0; l <= c->layers; l++)
		init_linear(params, disc_lin(c, l), r);
	struct linear e = disc_lin(c, c->layers + 1);
	for (size_t j = 0; j < ne; j++)
		params[e.w + j] = cg_rng_normal(r);
}

/* ------------------------------------------------------------- workspace */

struct sn {
	float *wsn, *dwsn; /* [OC, C] */
	float *u, *v;      /* [OC], [C] */
	double sigma;
};

struct cg_cgan_ws {
	struct cg_cgan_config c;
	int max_batch;
	void *mem;
	/* Generator, each [max_batch, width]. */
	float *g;      /* [layers][B, hidden], after ReLU */
	float *fake;   /* [B, in_dim] */
	float *dlogit; /* [B, in_dim] */
	float *dg;     /* [B, hidden] */
	float *dpre;   /* [B, hidden] */
	/* Discriminator, over 2B rows: reals, then fakes. */
	float *h;      /* [layers][2B, hidden], after leaky ReLU */
	float *s;      /* [2B] scores */
	float *ds;     /* [2B] */
	float *dh;     /* [2B, hidden] */
	float *dpre2;  /* [2B, hidden] */
	float *dx;     /* [2B, in_dim]: gradient reaching the fakes (and the
	                * reals' rows, as scratch) */
	int *cond2;    /* [2B] */
	struct sn *sn; /* [layers + 2] */
};

/* The workspace's buffers in struct order, then the spectral norms'
 * (each matrix twice, and u, v), in arena a (counting, then assigning:
 * core/arena.h). */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cgan_ws *w = ws;
	const struct cg_cgan_config *c = &w->c;
	size_t B = w->max_batch, D = c->in_dim, H = c->hidden, L = c->layers;

	w->g = CG_ARENA_FLOATS(a, B, L * H);
	w->fake = CG_ARENA_FLOATS(a, B, D);
	w->dlogit = CG_ARENA_FLOATS(a, B, D);
	w->dg = CG_ARENA_FLOATS(a, B, H);
	w->dpre = CG_ARENA_FLOATS(a, B, H);
	w->h = CG_ARENA_FLOATS(a, 2 * B, L * H);
	w->s = CG_ARENA_FLOATS(a, 2, B);
	w->ds = CG_ARENA_FLOATS(a, 2, B);
	w->dh = CG_ARENA_FLOATS(a, 2 * B, H);
	w->dpre2 = CG_ARENA_FLOATS(a, 2 * B, H);
	w->dx = CG_ARENA_FLOATS(a, 2 * B, D);
	w->cond2 = cg_arena_take(a, 2, B, sizeof(int));
	for (int l = 0; l < c->layers + 2; l++) {
		struct linear ln = disc_lin(c, l);
		w->sn[l].wsn = CG_ARENA_FLOATS(a, ln.out, ln.in);
		w->sn[l].dwsn = CG_ARENA_FLOATS(a, ln.out, ln.in);
		w->sn[l].u = CG_ARENA_FLOATS(a, ln.out, 1);
		w->sn[l].v = CG_ARENA_FLOATS(a, ln.in, 1);
	}
}

struct cg_cgan_ws *
cg_cgan_ws_new(const struct cg_cgan_config *c, int max_batch)
{
	struct cg_cgan_ws *w;
	struct cg_arena a;

	if (cg_cgan_check_config(c) != 0)
		return NULL;
	if (max_batch < 1 || max_batch > CG_CGAN_MAX_BATCH) {
		cg_seterr("cgan: batch %d: not in [1, %d]", max_batch,
		          CG_CGAN_MAX_BATCH);
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->sn = calloc((size_t)c->layers + 2, sizeof(*w->sn))) == NULL) {
		free(w);
		cg_seterr("cgan: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	if (cg_arena_make(&a, lay, w, "cgan", max_batch) != 0) {
		free(w->sn);
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	return w;
}

void
cg_cgan_ws_free(struct cg_cgan_ws *w)
{
	if (w == NULL)
		return;
	free(w->mem);
	free(w->sn);
	free(w);
}

int
cg_cgan_sn_vectors(const struct cg_cgan_ws *w, int i, const float **u,
                   const float **v, double *sigma)
{
	if (i < 0 || i >= w->c.layers + 2)
		return -1;
	*u = w->sn[i].u;
	*v = w->sn[i].v;
	*sigma = w->sn[i].sigma;
	return 0;
}

/* --------------------------------------------------------------- passes */

static int
check_call(const struct cg_cgan_config *c, const struct cg_cgan_ws *w,
           const int *cond, int B, int max)
{
	if (memcmp(c, &w->c, sizeof(*c)) != 0)
		return cg_seterr("cgan: workspace made for another config");
	if (B < 1 || B > max)
		return cg_seterr("cgan: batch %d: not in [1, %d]", B, max);
	for (int b = 0; b < B; b++)
		if (cond[b] < 0 || cond[b] >= c->ncond)
			return cg_seterr("cgan: condition %d (example %d): "
			                 "not in [0, %d)",
			                 cond[b], b, c->ncond);
	return 0;
}

/* w->fake [B, in_dim] = G(z, cond); the activations stay in w. */
static void
gen_forward(const struct cg_cgan_config *c, const float *params,
            struct cg_cgan_ws *w, const float *z, const int *cond, int B)
{
	const int H = c->hidden;
	const size_t stride = (size_t)w->max_batch * H;
	struct linear l0 = gen_lin(c, 0);

	cg_linear_forward(w->g, z, params + l0.w, params + l0.b, B, c->latent,
	                  H);
	for (int b = 0; b < B; b++) {
		float *g = w->g + (size_t)b * H;
		const float *e = params + (size_t)cond[b] * H;
		for (int j = 0; j < H; j++)
			g[j] += e[j];
	}
	cg_relu_forward(w->g, w->g, (size_t)B * H);
	for (int l = 1; l < c->layers; l++) {
		struct linear ln = gen_lin(c, l);
		cg_linear_relu_forward(w->g + l * stride,
		                       w->g + (l - 1) * stride, params + ln.w,
		                       params + ln.b, B, H, H);
	}
	struct linear o = gen_lin(c, c->layers);
	cg_linear_forward(w->fake, w->g + (c->layers - 1) * stride,
	                  params + o.w, params + o.b, B, H, c->in_dim);
	cg_sigmoid_forward(w->fake, w->fake, (size_t)B * c->in_dim);
}

/* The spectral norms of the discriminator's matrices into w->sn. */
static void
disc_normalise(const struct cg_cgan_config *c, const float *params,
               struct cg_cgan_ws *w)
{
	for (int l = 0; l < c->layers + 2; l++) {
		struct linear ln = disc_lin(c, l);
		struct sn *s = &w->sn[l];

		cg_spectral_power(s->u, s->v, params + ln.w, ln.out, ln.in,
		                  c->sn_iters);
		s->sigma = cg_spectral_norm_forward(s->wsn, params + ln.w, s->u,
		                                    s->v, ln.out, ln.in);
	}
}

/* w->s [n] = D(x [n, in_dim], cond [n]) with the normalised weights of
 * w->sn; the activations stay in w. */
static void
disc_forward(const struct cg_cgan_config *c, const float *params,
             struct cg_cgan_ws *w, const float *x, const int *cond, int n)
{
	const int H = c->hidden, L = c->layers;
	const size_t stride = (size_t)2 * w->max_batch * H;

	for (int l = 0; l < L; l++) {
		struct linear ln = disc_lin(c, l);
		float *h = w->h + l * stride;

		cg_linear_forward(h, l == 0 ? x : h - stride, w->sn[l].wsn,
		                  params + ln.b, n, ln.in, H);
		cg_lrelu_forward(h, h, CG_CGAN_SLOPE, (size_t)n * H);
	}
	const float *phi = w->h + (L - 1) * stride;
	const float *psi = w->sn[L].wsn, *emb = w->sn[L + 1].wsn;
	const float psib = params[disc_lin(c, L).b];
	for (int b = 0; b < n; b++) {
		const float *f = phi + (size_t)b * H;
		const float *e = emb + (size_t)cond[b] * H;
		double s = psib;

		for (int j = 0; j < H; j++)
			s += (double)f[j] * (psi[j] + e[j]);
		w->s[b] = (float)s;
	}
}

/*
 * Backward of disc_forward over rows [r0, r0 + n) given ds [n]: with
 * grad, d(params) of the discriminator += (through the spectral norms);
 * with dx, dx [n, in_dim] = the gradient reaching the input.
 */
static void
disc_backward(const struct cg_cgan_config *c, const float *params,
              struct cg_cgan_ws *w, const float *x, const int *cond, int r0,
              int n, const float *ds, float *grad, float *dx)
{
	const int H = c->hidden, L = c->layers;
	const size_t stride = (size_t)2 * w->max_batch * H;
	const float *phi = w->h + (L - 1) * stride + (size_t)r0 * H;
	const float *psi = w->sn[L].wsn, *emb = w->sn[L + 1].wsn;

	if (grad)
		for (int l = 0; l < L + 2; l++) {
			struct linear ln = disc_lin(c, l);
			memset(w->sn[l].dwsn, 0,
			       (size_t)ln.out * ln.in * sizeof(float));
		}
	/* The head: s = (psi + emb[y]) . phi + psi.b. */
	for (int b = 0; b < n; b++) {
		const float *f = phi + (size_t)b * H;
		const float *e = emb + (size_t)cond[b] * H;
		float *d = w->dh + (size_t)b * H;
		const float g = ds[b];

		for (int j = 0; j < H; j++)
			d[j] = g * (psi[j] + e[j]);
		if (grad) {
			float *dpsi = w->sn[L].dwsn;
			float *demb = w->sn[L + 1].dwsn + (size_t)cond[b] * H;
			for (int j = 0; j < H; j++) {
				dpsi[j] += g * f[j];
				demb[j] += g * f[j];
			}
			grad[disc_lin(c, L).b] += g;
		}
	}
	for (int l = L - 1; l >= 0; l--) {
		struct linear ln = disc_lin(c, l);
		const float *h = w->h + l * stride + (size_t)r0 * H;
		const float *in = l == 0 ? x : h - stride;
		float *din = l > 0 ? w->dh : dx;

		memset(w->dpre2, 0, (size_t)n * H * sizeof(float));
		cg_lrelu_backward(w->dpre2, w->dh, h, CG_CGAN_SLOPE,
		                  (size_t)n * H);
		if (grad)
			cg_linear_backward_set(din, w->sn[l].dwsn, grad + ln.b,
			                       w->dpre2, in, w->sn[l].wsn, n,
			                       ln.in, H);
		else if (din)
			cg_sgemm(0, 0, n, ln.in, H, 1.0f, w->dpre2, H,
			         w->sn[l].wsn, ln.in, 0.0f, din, ln.in);
	}
	if (grad)
		for (int l = 0; l < L + 2; l++) {
			struct linear ln = disc_lin(c, l);
			const struct sn *s = &w->sn[l];
			cg_spectral_norm_backward(grad + ln.w, s->dwsn, s->wsn,
			                          s->u, s->v, s->sigma, ln.out,
			                          ln.in);
		}
}

/* Backward of gen_forward given w->dlogit [B, in_dim] (d/d(the output
 * layer's pre-activation)): grad of the generator's views +=. */
static void
gen_backward(const struct cg_cgan_config *c, const float *params,
             struct cg_cgan_ws *w, const float *z, const int *cond, int B,
             float *grad)
{
	const int H = c->hidden, L = c->layers;
	const size_t stride = (size_t)w->max_batch * H;
	struct linear o = gen_lin(c, L);

	cg_linear_backward_set(w->dg, grad + o.w, grad + o.b, w->dlogit,
	                       w->g + (L - 1) * stride, params + o.w, B, H,
	                       c->in_dim);
	for (int l = L - 1; l >= 1; l--) {
		struct linear ln = gen_lin(c, l);
		cg_linear_relu_backward(w->dg, grad + ln.w, grad + ln.b,
		                        w->dpre, w->dg, w->g + l * stride,
		                        w->g + (l - 1) * stride, params + ln.w,
		                        B, H, H);
	}
	struct linear l0 = gen_lin(c, 0);
	memset(w->dpre, 0, (size_t)B * H * sizeof(float));
	cg_relu_backward(w->dpre, w->dg, w->g, (size_t)B * H);
	cg_linear_backward(NULL, grad + l0.w, grad + l0.b, w->dpre, z,
	                   params + l0.w, B, c->latent, H);
	for (int b = 0; b < B; b++) {
		float *e = grad + (size_t)cond[b] * H;
		const float *d = w->dpre + (size_t)b * H;
		for (int j = 0; j < H; j++)
			e[j] += d[j];
	}
}

int
cg_cgan_forward_backward(const struct cg_cgan_config *c, const float *params,
                         struct cg_cgan_ws *w, const float *x, const int *cond,
                         const float *z, int B, float *grad,
                         struct cg_cgan_loss *loss)
{
	const int D = c->in_dim;
	double real = 0, fake = 0, g = 0;

	if (check_call(c, w, cond, B, w->max_batch) != 0)
		return -1;
	gen_forward(c, params, w, z, cond, B);
	/* Reals then fakes, one batch of 2B for the discriminator. */
	memcpy(w->dx, x, (size_t)B * D * sizeof(float));
	memcpy(w->dx + (size_t)B * D, w->fake, (size_t)B * D * sizeof(float));
	memcpy(w->cond2, cond, (size_t)B * sizeof(int));
	memcpy(w->cond2 + B, cond, (size_t)B * sizeof(int));
	disc_normalise(c, params, w);
	disc_forward(c, params, w, w->dx, w->cond2, 2 * B);
	for (int b = 0; b < B; b++) {
		const double sr = w->s[b], sf = w->s[B + b];
		real += sr < 1 ? 1 - sr : 0;
		fake += sf > -1 ? 1 + sf : 0;
		g -= sf;
	}
	if (loss) {
		loss->d_real = real / B;
		loss->d_fake = fake / B;
		loss->d = loss->d_real + loss->d_fake;
		loss->g = g / B;
	}
	if (grad == NULL)
		return 0;
	/* L_D: each real below the margin pulls up, each fake above -1
	 * pushes down; the input (reals, fakes) is fixed. */
	for (int b = 0; b < B; b++) {
		w->ds[b] = w->s[b] < 1 ? -1.0f / B : 0.0f;
		w->ds[B + b] = w->s[B + b] > -1 ? 1.0f / B : 0.0f;
	}
	disc_backward(c, params, w, w->dx, w->cond2, 0, 2 * B, w->ds, grad,
	              NULL);
	/* L_G = -mean D(fake): to the fakes alone, then through G.  The
	 * fakes' gradient goes to the reals' rows of dx, which the pass
	 * above no longer needs. */
	for (int b = 0; b < B; b++)
		w->ds[b] = -1.0f / B;
	disc_backward(c, params, w, w->dx + (size_t)B * D, w->cond2 + B, B, B,
	              w->ds, NULL, w->dx);
	for (size_t i = 0; i < (size_t)B * D; i++) {
		const float f = w->fake[i];
		w->dlogit[i] = w->dx[i] * f * (1 - f);
	}
	gen_backward(c, params, w, z, cond, B, grad);
	return 0;
}

int
cg_cgan_generate(const struct cg_cgan_config *c, const float *params,
                 struct cg_cgan_ws *w, const float *z, const int *cond, int n,
                 float *out)
{
	if (check_call(c, w, cond, n, w->max_batch) != 0)
		return -1;
	gen_forward(c, params, w, z, cond, n);
	memcpy(out, w->fake, (size_t)n * c->in_dim * sizeof(float));
	return 0;
}

int
cg_cgan_discriminate(const struct cg_cgan_config *c, const float *params,
                     struct cg_cgan_ws *w, const float *x, const int *cond,
                     int n, float *score)
{
	if (check_call(c, w, cond, n, 2 * w->max_batch) != 0)
		return -1;
	disc_normalise(c, params, w);
	disc_forward(c, params, w, x, cond, n);
	memcpy(score, w->s, (size_t)n * sizeof(float));
	return 0;
}

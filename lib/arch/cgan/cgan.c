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
 * once per pass and their u, v kept for the backward pass.  The
 * convolutional nets (conv > 0) have their own layout (cnet_of) and
 * passes (cgen_*, cdisc_*), and share the projection head, the spectral
 * norms and the loss with the MLPs; checkpointed, the generator keeps
 * only its norms' inputs p0, p1, p2, and makes a norm's output and an
 * up-sampled map again from them (no convolution) just before its
 * backward pass reads them.  The R1 penalty (r1 > 0) runs D
 * backward once more on the reals for grad_x D, and then forward once
 * more for the penalty's exact gradient (its section says why that is
 * exact).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cgan/cgan.h"
#include "core/arena.h"
#include "nn/conv.h"
#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

/* Floats of unfolded input the convolutions may take at once (16 MiB). */
#define COL_BUDGET ((size_t)1 << 22)

/* ---------------------------------------------------------------- layout */

struct linear {
	size_t w, b;
	int in, out;
};

/*
 * The convolutional nets' shapes and tensors (cgan.h), in buffer order:
 * the generator's, then from d1w the discriminator's.  F is the width of
 * the generator's first map and of the discriminator's features.
 */
struct cnet {
	int C, Hq, Wq, F;
	int G0, G; /* groups of the norms of the 2C and the C channel maps */
	struct cg_conv g1, g2, go, d1, d2;
	size_t emb, g0w, g0b, n0g, n0b, g1w, g1b, n1g, n1b, g2w, g2b, n2g, n2b;
	size_t gow, gob;
	size_t d1w, d1b, d2w, d2b, psiw, psib, demb, end;
};

/* The groups of a norm over C channels: 8, or the most of 4, 2, 1 that
 * divides C. */
static int
norm_groups(int C)
{
	return C % 8 == 0 ? 8 : C % 4 == 0 ? 4 : C % 2 == 0 ? 2 : 1;
}

/* The nets of c (conv > 0); -1 (no message) where the image does not
 * make them. */
static int
cnet_of(const struct cg_cgan_config *c, struct cnet *n)
{
	const int C = c->conv, H = c->height, W = c->width, ch = c->channels;
	const int dk = c->disc_kernel;
	size_t o = 0;

	memset(n, 0, sizeof(*n));
	if (C < 1 || H < 4 || W < 4 || H % 4 || W % 4 || ch < 1 ||
	    (int64_t)H * W * ch != c->in_dim ||
	    (int64_t)(H / 4) * (W / 4) * 2 * C > CG_CGAN_MAX_DIM)
		return -1;
	n->C = C, n->Hq = H / 4, n->Wq = W / 4;
	n->F = n->Hq * n->Wq * 2 * C;
	n->G0 = norm_groups(2 * C), n->G = norm_groups(C);
	if (cg_conv_shape(&n->g1, 2 * C, H / 2, W / 2, C, 3, 1, 1) != 0 ||
	    cg_conv_shape(&n->g2, C, H, W, C, 3, 1, 1) != 0 ||
	    cg_conv_shape(&n->go, C, H, W, ch, 3, 1, 1) != 0 ||
	    cg_conv_shape(&n->d1, ch, H, W, C, dk, 2, 1) != 0 ||
	    cg_conv_shape(&n->d2, C, H / 2, W / 2, 2 * C, dk, 2, 1) != 0 ||
	    n->d1.OH != H / 2 || n->d1.OW != W / 2 || n->d2.OH != n->Hq ||
	    n->d2.OW != n->Wq)
		return -1;
#define TAKE(f, k) (n->f = o, o += (size_t)(k))
	TAKE(emb, (size_t)c->ncond * n->F);
	TAKE(g0w, (size_t)n->F * c->latent);
	TAKE(g0b, n->F);
	TAKE(n0g, 2 * C);
	TAKE(n0b, 2 * C);
	TAKE(g1w, cg_conv_wsize(&n->g1));
	TAKE(g1b, C);
	TAKE(n1g, C);
	TAKE(n1b, C);
	TAKE(g2w, cg_conv_wsize(&n->g2));
	TAKE(g2b, C);
	TAKE(n2g, C);
	TAKE(n2b, C);
	TAKE(gow, cg_conv_wsize(&n->go));
	TAKE(gob, ch);
	TAKE(d1w, cg_conv_wsize(&n->d1));
	TAKE(d1b, C);
	TAKE(d2w, cg_conv_wsize(&n->d2));
	TAKE(d2b, 2 * C);
	TAKE(psiw, n->F);
	TAKE(psib, 1);
	TAKE(demb, (size_t)c->ncond * n->F);
#undef TAKE
	n->end = o;
	return 0;
}

/* The discriminator's hidden layers: the MLP's, or the 2 convolutions. */
static int
disc_layers(const struct cg_cgan_config *c)
{
	return c->conv ? 2 : c->layers;
}

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
	if (c->conv) {
		struct cnet n;

		cnet_of(c, &n);
		return n.d1w;
	}
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
	if (c->conv) {
		/* The convolutions as matrices [out, in x k x k], psi, the
		 * embedding. */
		struct cnet n;
		struct linear ln;

		cnet_of(c, &n);
		const struct cg_conv *v = l == 0 ? &n.d1 : &n.d2;
		switch (l) {
		case 0:
		case 1:
			ln.w = l == 0 ? n.d1w : n.d2w;
			ln.b = l == 0 ? n.d1b : n.d2b;
			ln.out = v->OC;
			ln.in = v->C * v->KH * v->KW;
			break;
		case 2:
			ln.w = n.psiw, ln.b = n.psib, ln.out = 1, ln.in = n.F;
			break;
		default:
			ln.w = n.demb, ln.out = c->ncond, ln.in = n.F;
			ln.b = n.demb + (size_t)c->ncond * n.F;
		}
		return ln;
	}
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

/* The width of the discriminator's features: the MLP's hidden, the
 * convolutional nets' F. */
static int
feat_width(const struct cg_cgan_config *c)
{
	if (c->conv) {
		struct cnet n;

		cnet_of(c, &n);
		return n.F;
	}
	return c->hidden;
}

/* The auxiliary classifier (aux > 0): disc.cls.w [ncond, F], then
 * disc.cls.b [ncond], after every other tensor. */
static struct linear
cls_lin(const struct cg_cgan_config *c)
{
	struct linear e = disc_lin(c, disc_layers(c) + 1), ln;

	ln.in = feat_width(c);
	ln.out = c->ncond;
	ln.w = e.b;
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
	if (c->conv < 0 || c->conv > CG_CGAN_MAX_CONV)
		return cg_seterr("cgan: conv = %d: not in [0, %d]", c->conv,
		                 CG_CGAN_MAX_CONV);
	if (!(c->r1 >= 0 && c->r1 <= CG_CGAN_MAX_R1))
		return cg_seterr("cgan: r1 = %g: not in [0, %g]", c->r1,
		                 CG_CGAN_MAX_R1);
	if (c->conv && c->disc_kernel != 3 && c->disc_kernel != 4)
		return cg_seterr("cgan: disc-kernel = %d: 3 or 4",
		                 c->disc_kernel);
	if (!(c->aux >= 0 && c->aux <= CG_CGAN_MAX_AUX))
		return cg_seterr("cgan: aux = %g: not in [0, %g]", c->aux,
		                 CG_CGAN_MAX_AUX);
	/* the classifier's, with aux */
	const uint64_t K = c->ncond, A = c->aux > 0;
	if (c->conv) {
		struct cnet n;

		if (cnet_of(c, &n) != 0)
			return cg_seterr("cgan: images of %dx%dx%d for %d "
			                 "inputs: the convolutional nets want "
			                 "them so, sides multiples of 4 (and at "
			                 "most %d features)",
			                 c->height, c->width, c->channels,
			                 c->in_dim, CG_CGAN_MAX_DIM);
		const uint64_t all = n.end + A * (K * (uint64_t)n.F + K);
		if (all > CG_CGAN_MAX_PARAMS || all > SIZE_MAX / sizeof(float))
			return cg_seterr("cgan: %llu parameters: more than "
			                 "%llu",
			                 (unsigned long long)all,
			                 (unsigned long long)CG_CGAN_MAX_PARAMS);
		return 0;
	}
	/* Widths at most 2^20 and layers 64: no wrap below 2^63. */
	uint64_t D = c->in_dim, H = c->hidden, Z = c->latent;
	uint64_t L = c->layers, hh = H * H + H;
	uint64_t n = K * H + H * Z + H + (L - 1) * hh + D * H + D + /* G */
	             H * D + H + (L - 1) * hh + H + 1 + K * H +     /* D */
	             A * (K * H + K);

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
	if (c->aux > 0)
		return cls_lin(c).b + (size_t)c->ncond;
	return disc_lin(c, disc_layers(c) + 1).b;
}

int
cg_cgan_nviews(const struct cg_cgan_config *c)
{
	if (cg_cgan_check_config(c) != 0)
		return 0;
	return (c->conv ? CG_CGAN_CONV_VIEWS : 4 * c->layers + 6) +
	       (c->aux > 0 ? 2 : 0);
}

static int
cnet_views(const struct cg_cgan_config *c, struct cg_view *v)
{
	struct cnet n;

	cnet_of(c, &n);
	cg_view_set(&v[0], "gen.emb", n.emb, (size_t)c->ncond, n.F, 0);
	cg_view_linear(&v[1], "gen.0", n.g0w, n.g0b, n.F, c->latent);
	cg_view_set(&v[3], "gen.n0.g", n.n0g, 2 * (size_t)n.C, 0, 0);
	cg_view_set(&v[4], "gen.n0.b", n.n0b, 2 * (size_t)n.C, 0, 0);
	cg_view_conv(&v[5], "gen.c1", n.g1w, n.g1b, &n.g1);
	cg_view_set(&v[7], "gen.n1.g", n.n1g, (size_t)n.C, 0, 0);
	cg_view_set(&v[8], "gen.n1.b", n.n1b, (size_t)n.C, 0, 0);
	cg_view_conv(&v[9], "gen.c2", n.g2w, n.g2b, &n.g2);
	cg_view_set(&v[11], "gen.n2.g", n.n2g, (size_t)n.C, 0, 0);
	cg_view_set(&v[12], "gen.n2.b", n.n2b, (size_t)n.C, 0, 0);
	cg_view_conv(&v[13], "gen.out", n.gow, n.gob, &n.go);
	cg_view_conv(&v[15], "disc.c1", n.d1w, n.d1b, &n.d1);
	cg_view_conv(&v[17], "disc.c2", n.d2w, n.d2b, &n.d2);
	cg_view_linear(&v[19], "disc.psi", n.psiw, n.psib, 1, n.F);
	cg_view_set(&v[21], "disc.emb", n.demb, (size_t)c->ncond, n.F, 0);
	return CG_CGAN_CONV_VIEWS;
}

/* The MLPs' views (those of the auxiliary classifier aside). */
static int
mlp_views(const struct cg_cgan_config *c, struct cg_view *v)
{
	int n = 0;

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

int
cg_cgan_views(const struct cg_cgan_config *c, struct cg_view *v, int max)
{
	int n, need;

	if (cg_cgan_check_config(c) != 0)
		return -1;
	need = cg_cgan_nviews(c);
	if (max < need)
		return cg_seterr("cgan: %d views do not fit in %d", need, max);
	n = c->conv ? cnet_views(c, v) : mlp_views(c, v);
	if (c->aux > 0) {
		struct linear k = cls_lin(c);

		cg_view_linear(&v[n], "disc.cls", k.w, k.b, k.out, k.in);
		n += 2;
	}
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

/* The convolutional nets' init, in buffer order as cg_cgan_init's. */
static void
cnet_init(const struct cg_cgan_config *c, float *params, struct cg_rng *r)
{
	struct cnet n;
	const struct cg_conv *cv[] = {&n.g1, &n.g2, &n.go, &n.d1, &n.d2};

	cnet_of(c, &n);
	const size_t at[] = {n.g1w, n.g2w, n.gow, n.d1w, n.d2w};
	cg_init_uniform(params + n.emb, (size_t)c->ncond * n.F,
	             (size_t)c->latent + c->ncond, r);
	cg_init_uniform(params + n.g0w, (size_t)n.F * c->latent + n.F,
	             (size_t)c->latent + c->ncond, r);
	/* The norms' scales 1 and shifts 0 (nn.GroupNorm's), no draw. */
	const size_t ng[] = {n.n0g, n.n1g, n.n2g}, nb[] = {n.n0b, n.n1b, n.n2b};
	for (int i = 0; i < 3; i++)
		for (size_t j = 0; j < (size_t)(i ? n.C : 2 * n.C); j++) {
			params[ng[i] + j] = 1;
			params[nb[i] + j] = 0;
		}
	for (int i = 0; i < 5; i++)
		cg_init_uniform(params + at[i], cg_conv_wsize(cv[i]) + cv[i]->OC,
		             (size_t)cv[i]->C * cv[i]->KH * cv[i]->KW, r);
	cg_init_uniform(params + n.psiw, (size_t)n.F + 1, (size_t)n.F, r);
	for (size_t j = 0; j < (size_t)c->ncond * n.F; j++)
		params[n.demb + j] = cg_rng_normal(r);
}

/* The MLPs' init, in buffer order as cg_cgan_init's. */
static void
mlp_init(const struct cg_cgan_config *c, float *params, struct cg_rng *r)
{
	size_t ne = (size_t)c->ncond * c->hidden;

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

void
cg_cgan_init(const struct cg_cgan_config *c, float *params, struct cg_rng *r)
{
	if (cg_cgan_check_config(c) != 0)
		return;
	if (c->conv)
		cnet_init(c, params, r);
	else
		mlp_init(c, params, r);
	if (c->aux > 0)
		init_linear(params, cls_lin(c), r);
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
	/* Checkpointed (the conv generator's only): a0, a1, a2 share one
	 * map, which holds a_aheld (-1: none), and u1, u2 another, which
	 * holds u_uheld. */
	int ckpt, aheld, uheld;
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
	struct sn *sn; /* [disc_layers + 2] */
	/* The convolutional nets (conv > 0; else empty), maps [rows, ..]. */
	struct cnet n;
	float *a0, *u1, *a1, *u2, *a2; /* generator, [B, ..] */
	float *p0, *p1, *p2;           /* the norms' inputs */
	float *mean, *rstd;            /* [3][B, 8]: the norms' */
	float *d0, *dm1, *dm2, *db1, *db2; /* their gradients */
	float *h1;   /* [2B, H/2 W/2 C]: the discriminator's first map */
	float *phi;  /* [2B, F]: its features */
	float *dmid; /* [2B, H/2 W/2 C] */
	float *col;  /* [ncol] */
	size_t ncol;
	/* The R1 penalty's (r1 > 0; else empty), over the B reals. */
	float *rg; /* [B, in_dim]: grad_x D, then d(penalty)/d(it) */
	float *rp; /* each layer's gradient before its leaky ReLU: the
	            * MLP's [layers][B, hidden], the conv's [B, F] then
	            * [B, H/2 W/2 C] */
	/* The auxiliary classifier's (aux > 0; else empty), over 2B rows. */
	float *lg; /* [2B, ncond]: its logits, then their softmax */
	float *dl; /* [2B, ncond]: the gradient reaching the logits */
	struct cg_wset ks; /* the weights as stored (cg_cgan_ws_set_mats) */
};

/* The workspace's buffers in struct order, then the spectral norms'
 * (each matrix twice, and u, v), in arena a (counting, then assigning:
 * core/arena.h). */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cgan_ws *w = ws;
	const struct cg_cgan_config *c = &w->c;
	const struct cnet *n = &w->n;
	size_t B = w->max_batch, D = c->in_dim, H = c->hidden, L = c->layers;
	/* The MLPs' buffers (none for the conv nets), the head's width, and
	 * the widest map a layer of the discriminator passes back. */
	size_t HL = c->conv ? 0 : L * H, HG = c->conv ? 0 : H;
	size_t FW = c->conv ? (size_t)n->F : H;
	size_t P1 = c->conv ? (size_t)n->g1.H * n->g1.W : 0;
	size_t P = c->conv ? (size_t)c->height * c->width : 0;
	size_t C = (size_t)c->conv;

	w->g = CG_ARENA_FLOATS(a, B, HL);
	w->fake = CG_ARENA_FLOATS(a, B, D);
	w->dlogit = CG_ARENA_FLOATS(a, B, D);
	w->dg = CG_ARENA_FLOATS(a, B, HG);
	w->dpre = CG_ARENA_FLOATS(a, B, HG);
	w->h = CG_ARENA_FLOATS(a, 2 * B, HL);
	w->s = CG_ARENA_FLOATS(a, 2, B);
	w->ds = CG_ARENA_FLOATS(a, 2, B);
	w->dh = CG_ARENA_FLOATS(a, 2 * B, FW);
	w->dpre2 = CG_ARENA_FLOATS(a, 2 * B, FW > P1 * C ? FW : P1 * C);
	w->dx = CG_ARENA_FLOATS(a, 2 * B, D);
	w->cond2 = cg_arena_take(a, 2, B, sizeof(int));
	/* checkpointed: the largest of the maps that share */
	size_t A = C ? (size_t)n->F : 0, U = P1 * 2 * C;
	if (w->ckpt) {
		A = A > P1 * C ? A : P1 * C;
		A = A > P * C ? A : P * C;
		U = U > P * C ? U : P * C;
	}
	w->a0 = CG_ARENA_FLOATS(a, B, A);
	w->p0 = CG_ARENA_FLOATS(a, B, C ? (size_t)n->F : 0);
	w->p1 = CG_ARENA_FLOATS(a, B, P1 * C);
	w->p2 = CG_ARENA_FLOATS(a, B, P * C);
	w->mean = CG_ARENA_FLOATS(a, B, C ? 3 * 8 : 0);
	w->rstd = CG_ARENA_FLOATS(a, B, C ? 3 * 8 : 0);
	w->u1 = CG_ARENA_FLOATS(a, B, U);
	if (w->ckpt) {
		w->a1 = w->a2 = w->a0;
		w->u2 = w->u1;
	} else {
		w->a1 = CG_ARENA_FLOATS(a, B, P1 * C);
		w->u2 = CG_ARENA_FLOATS(a, B, P * C);
		w->a2 = CG_ARENA_FLOATS(a, B, P * C);
	}
	w->d0 = CG_ARENA_FLOATS(a, B, C ? (size_t)n->F : 0);
	w->dm1 = CG_ARENA_FLOATS(a, B, P1 * 2 * C);
	w->dm2 = CG_ARENA_FLOATS(a, B, P1 * 2 * C);
	w->db1 = CG_ARENA_FLOATS(a, B, P * C);
	w->db2 = CG_ARENA_FLOATS(a, B, P * C);
	w->h1 = CG_ARENA_FLOATS(a, 2 * B, P1 * C);
	w->phi = CG_ARENA_FLOATS(a, 2 * B, C ? (size_t)n->F : 0);
	w->dmid = CG_ARENA_FLOATS(a, 2 * B, P1 * C);
	w->col = CG_ARENA_FLOATS(a, w->ncol, 1);
	w->rg = CG_ARENA_FLOATS(a, B, c->r1 > 0 ? D : 0);
	w->rp = CG_ARENA_FLOATS(
	    a, B, c->r1 > 0 ? (C ? (size_t)n->F + P1 * C : L * H) : 0);
	w->lg = CG_ARENA_FLOATS(a, 2 * B, c->aux > 0 ? (size_t)c->ncond : 0);
	w->dl = CG_ARENA_FLOATS(a, 2 * B, c->aux > 0 ? (size_t)c->ncond : 0);
	for (int l = 0; l < disc_layers(c) + 2; l++) {
		struct linear ln = disc_lin(c, l);
		w->sn[l].wsn = CG_ARENA_FLOATS(a, ln.out, ln.in);
		w->sn[l].dwsn = CG_ARENA_FLOATS(a, ln.out, ln.in);
		w->sn[l].u = CG_ARENA_FLOATS(a, ln.out, 1);
		w->sn[l].v = CG_ARENA_FLOATS(a, ln.in, 1);
	}
}

/* A workspace's struct for batches of up to max_batch, its arena not
 * laid out; NULL with a message. */
static struct cg_cgan_ws *
ws_prep(const struct cg_cgan_config *c, int max_batch, int checkpoint)
{
	struct cg_cgan_ws *w;

	if (cg_cgan_check_config(c) != 0)
		return NULL;
	if (max_batch < 1 || max_batch > CG_CGAN_MAX_BATCH) {
		cg_seterr("cgan: batch %d: not in [1, %d]", max_batch,
		          CG_CGAN_MAX_BATCH);
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->sn = calloc((size_t)disc_layers(c) + 2, sizeof(*w->sn))) ==
	        NULL) {
		free(w);
		cg_seterr("cgan: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	w->ckpt = checkpoint != 0 && c->conv > 0;
	w->aheld = w->uheld = -1;
	if (c->conv) {
		/* The discriminator's convolutions see 2B rows. */
		const struct cg_conv *cv[] = {&w->n.g1, &w->n.g2, &w->n.go,
		                              &w->n.d1, &w->n.d2};

		cnet_of(c, &w->n);
		for (int i = 0; i < 5; i++) {
			size_t k = cg_conv_scratch(cv[i], (i < 3 ? 1 : 2) *
			                                      max_batch,
			                           COL_BUDGET);
			if (k > w->ncol)
				w->ncol = k;
		}
	}
	return w;
}

struct cg_cgan_ws *
cg_cgan_ws_new(const struct cg_cgan_config *c, int max_batch, int checkpoint)
{
	struct cg_cgan_ws *w = ws_prep(c, max_batch, checkpoint);
	struct cg_arena a;

	if (w == NULL)
		return NULL;
	if (cg_arena_make(&a, lay, w, "cgan", max_batch) != 0) {
		free(w->sn);
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	return w;
}

size_t
cg_cgan_ws_bytes(const struct cg_cgan_config *c, int max_batch, int checkpoint)
{
	struct cg_cgan_ws *w = ws_prep(c, max_batch, checkpoint);
	size_t n;

	if (w == NULL)
		return 0;
	n = cg_arena_bytes(lay, w,
	                   sizeof(*w) + ((size_t)disc_layers(c) + 2) *
	                                    sizeof(*w->sn),
	                   "cgan", max_batch);
	free(w->sn);
	free(w);
	return n;
}

void
cg_cgan_ws_free(struct cg_cgan_ws *w)
{
	if (w == NULL)
		return;
	cg_wset_free(&w->ks);
	free(w->mem);
	free(w->sn);
	free(w);
}

int
cg_cgan_ws_set_mats(struct cg_cgan_ws *w, const struct cg_wmat *mats, int nv)
{
	const struct cg_cgan_config *c = &w->c;
	const int n = cg_cgan_nviews(c);
	const size_t doff = cg_cgan_disc_off(c);
	struct cg_view *v;
	struct cg_wset ks;

	if (mats != NULL && nv != n)
		return cg_seterr("cgan: %d weights for %d views", nv, n);
	if ((v = calloc((size_t)n, sizeof(*v))) == NULL)
		return cg_seterr("cgan: out of memory");
	if (cg_cgan_views(c, v, n) < 0) {
		free(v);
		return -1;
	}
	/* the discriminator reads its weights through their spectral
	 * norms, from params */
	for (int i = 0; mats != NULL && i < n; i++)
		if (v[i].off >= doff && mats[i].dtype != CG_F32) {
			cg_seterr("cgan: tensor %s: the discriminator's "
			          "weights are read as f32",
			          v[i].name);
			free(v);
			return -1;
		}
	if (cg_wset_make(&ks, v, mats, n, w->max_batch) != 0) {
		free(v);
		return -1;
	}
	free(v);
	cg_wset_free(&w->ks);
	w->ks = ks;
	return 0;
}

int
cg_cgan_sn_vectors(const struct cg_cgan_ws *w, int i, const float **u,
                   const float **v, double *sigma)
{
	if (i < 0 || i >= disc_layers(&w->c) + 2)
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

	cg_wset_linear(&w->ks, w->g, z, params, l0.w, params + l0.b, B,
	               c->latent, H, 0);
	for (int b = 0; b < B; b++) {
		float *g = w->g + (size_t)b * H;
		const float *e = params + (size_t)cond[b] * H;
		for (int j = 0; j < H; j++)
			g[j] += e[j];
	}
	cg_relu_forward(w->g, w->g, (size_t)B * H);
	for (int l = 1; l < c->layers; l++) {
		struct linear ln = gen_lin(c, l);
		cg_wset_linear(&w->ks, w->g + l * stride,
		               w->g + (l - 1) * stride, params, ln.w,
		               params + ln.b, B, H, H, 1);
	}
	struct linear o = gen_lin(c, c->layers);
	cg_wset_linear(&w->ks, w->fake, w->g + (c->layers - 1) * stride, params,
	               o.w, params + o.b, B, H, c->in_dim, 0);
	cg_sigmoid_forward(w->fake, w->fake, (size_t)B * c->in_dim);
}

/* The spectral norms of the discriminator's matrices into w->sn. */
static void
disc_normalise(const struct cg_cgan_config *c, const float *params,
               struct cg_cgan_ws *w)
{
	for (int l = 0; l < disc_layers(c) + 2; l++) {
		struct linear ln = disc_lin(c, l);
		struct sn *s = &w->sn[l];

		cg_spectral_power(s->u, s->v, params + ln.w, ln.out, ln.in,
		                  c->sn_iters);
		s->sigma = cg_spectral_norm_forward(s->wsn, params + ln.w, s->u,
		                                    s->v, ln.out, ln.in);
	}
}

/* The projection head: w->s [n] = psi . phi + psi.b + emb[y] . phi for
 * the features phi [n, F] (normalised psi and emb, of w->sn); with aux,
 * the classifier's logits w->lg [n, ncond] = cls.w phi + cls.b too. */
static void
head_forward(const struct cg_cgan_config *c, const float *params,
             struct cg_cgan_ws *w, const float *phi, int F, const int *cond,
             int n)
{
	const int L = disc_layers(c);
	const float *psi = w->sn[L].wsn, *emb = w->sn[L + 1].wsn;
	const float psib = params[disc_lin(c, L).b];

	for (int b = 0; b < n; b++) {
		const float *f = phi + (size_t)b * F;
		const float *e = emb + (size_t)cond[b] * F;
		double s = psib;

		for (int j = 0; j < F; j++)
			s += (double)f[j] * (psi[j] + e[j]);
		w->s[b] = (float)s;
	}
	if (c->aux > 0) {
		struct linear k = cls_lin(c);
		cg_linear_forward(w->lg, phi, params + k.w, params + k.b, n, F,
		                  c->ncond);
	}
}

/*
 * Its backward given ds [n] and, with aux, dl [n, ncond] (the gradient
 * reaching the classifier's logits, or NULL for none): w->dh [n, F] = the
 * gradient reaching phi; with grad, psi's and emb's normalised gradients
 * += (w->sn's dwsn), psi.b's, and the classifier's (given dl).
 */
static void
head_backward(const struct cg_cgan_config *c, const float *params,
              struct cg_cgan_ws *w, const float *phi, int F, const int *cond,
              int n, const float *ds, const float *dl, float *grad)
{
	const int L = disc_layers(c);
	const float *psi = w->sn[L].wsn, *emb = w->sn[L + 1].wsn;

	for (int b = 0; b < n; b++) {
		const float *f = phi + (size_t)b * F;
		const float *e = emb + (size_t)cond[b] * F;
		float *d = w->dh + (size_t)b * F;
		const float g = ds[b];

		for (int j = 0; j < F; j++)
			d[j] = g * (psi[j] + e[j]);
		if (grad) {
			float *dpsi = w->sn[L].dwsn;
			float *demb = w->sn[L + 1].dwsn + (size_t)cond[b] * F;
			for (int j = 0; j < F; j++) {
				dpsi[j] += g * f[j];
				demb[j] += g * f[j];
			}
			grad[disc_lin(c, L).b] += g;
		}
	}
	if (c->aux > 0 && dl != NULL) {
		struct linear k = cls_lin(c);
		const int K = c->ncond;

		/* dh += dl cls.w; cls.w's gradient += dl^T phi */
		cg_sgemm(0, 0, n, F, K, 1.0f, dl, K, params + k.w, F, 1.0f,
		         w->dh, F);
		if (grad) {
			cg_sgemm(1, 0, K, F, n, 1.0f, dl, K, phi, F, 1.0f,
			         grad + k.w, F);
			for (int b = 0; b < n; b++)
				for (int j = 0; j < K; j++)
					grad[k.b + j] += dl[(size_t)b * K + j];
		}
	}
}

/* The spectral norms' backward: each normalised matrix's gradient
 * (w->sn's dwsn) into its weight's in grad. */
static void
sn_backward(const struct cg_cgan_config *c, struct cg_cgan_ws *w,
            float *grad)
{
	for (int l = 0; l < disc_layers(c) + 2; l++) {
		struct linear ln = disc_lin(c, l);
		const struct sn *s = &w->sn[l];
		cg_spectral_norm_backward(grad + ln.w, s->dwsn, s->wsn, s->u,
		                          s->v, s->sigma, ln.out, ln.in);
	}
}

/* Clear w->sn's gradients before a backward pass adds to them. */
static void
sn_clear(const struct cg_cgan_config *c, struct cg_cgan_ws *w)
{
	for (int l = 0; l < disc_layers(c) + 2; l++) {
		struct linear ln = disc_lin(c, l);
		memset(w->sn[l].dwsn, 0,
		       (size_t)ln.out * ln.in * sizeof(float));
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
	head_forward(c, params, w, w->h + (L - 1) * stride, H, cond, n);
}

/*
 * Backward of disc_forward over rows [r0, r0 + n) given ds [n]: with
 * grad, d(params) of the discriminator += (through the spectral norms);
 * with dx, dx [n, in_dim] = the gradient reaching the input.
 */
static void
disc_backward(const struct cg_cgan_config *c, const float *params,
              struct cg_cgan_ws *w, const float *x, const int *cond, int r0,
              int n, const float *ds, const float *dl, float *grad, float *dx)
{
	const int H = c->hidden, L = c->layers;
	const size_t stride = (size_t)2 * w->max_batch * H;
	const float *phi = w->h + (L - 1) * stride + (size_t)r0 * H;

	if (grad)
		sn_clear(c, w);
	/* The head: s = (psi + emb[y]) . phi + psi.b. */
	head_backward(c, params, w, phi, H, cond, n, ds, dl, grad);
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
		sn_backward(c, w, grad);
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

/* ------------------------------------------------ the convolutional nets */

/* x [N] = x where the forward's output a [N] was positive, else 0 (the
 * gradient through a ReLU whose output is a). */
static void
relu_mask(float *x, const float *a, size_t N)
{
	for (size_t i = 0; i < N; i++)
		x[i] = a[i] > 0 ? x[i] : 0;
}

/* a = relu(groupnorm(p)), mean and rstd [B, groups] kept. */
static void
norm_relu(float *a, float *mean, float *rstd, const float *p,
          const float *gamma, const float *beta, int B, int HW, int C,
          int groups)
{
	cg_groupnorm_forward(a, mean, rstd, p, gamma, beta, B, HW, C, groups);
	cg_relu_forward(a, a, (size_t)B * HW * C);
}

/*
 * Backward of norm_relu: d [B, HW, C], the gradient at a, is masked in
 * place by a's sign; dp (zeroed here) gets the gradient at p, and the
 * norm's scale and shift theirs in grad.
 */
static void
norm_relu_backward(float *dp, float *d, const float *a, const float *p,
                   const float *gamma, float *dgamma, float *dbeta,
                   const float *mean, const float *rstd, int B, int HW, int C,
                   int groups)
{
	const size_t N = (size_t)B * HW * C;

	relu_mask(d, a, N);
	memset(dp, 0, N * sizeof(float));
	cg_groupnorm_backward(dp, dgamma, dbeta, d, p, gamma, mean, rstd, B,
	                      HW, C, groups);
}

/*
 * The conv generator's norm k (0, 1, 2) on its input p_k into a_k,
 * and the up-sampling of a_{k-1} into u_k (k 1 or 2): in the forward
 * pass, and again in a checkpointed backward pass where the shared map
 * holds another (the same arithmetic on the same p: the same bits).
 */
static void
cgen_norm(const float *params, struct cg_cgan_ws *w, int k, int B)
{
	const struct cnet *n = &w->n;
	const size_t S = (size_t)B * 8;

	if (k == 0)
		norm_relu(w->a0, w->mean, w->rstd, w->p0, params + n->n0g,
		          params + n->n0b, B, n->Hq * n->Wq, 2 * n->C, n->G0);
	else if (k == 1)
		norm_relu(w->a1, w->mean + S, w->rstd + S, w->p1,
		          params + n->n1g, params + n->n1b, B,
		          n->g1.H * n->g1.W, n->C, n->G);
	else
		norm_relu(w->a2, w->mean + 2 * S, w->rstd + 2 * S, w->p2,
		          params + n->n2g, params + n->n2b, B,
		          n->g2.H * n->g2.W, n->C, n->G);
	w->aheld = k;
}

static void
cgen_up(struct cg_cgan_ws *w, int k, int B)
{
	const struct cnet *n = &w->n;

	if (k == 1)
		cg_upsample2_forward(w->u1, w->a0, B, n->Hq, n->Wq, 2 * n->C);
	else
		cg_upsample2_forward(w->u2, w->a1, B, n->g1.H, n->g1.W, n->C);
	w->uheld = k;
}

/* a_k and u_k for a backward pass (checkpointed: made again). */
static void
cgen_need_a(const float *params, struct cg_cgan_ws *w, int k, int B)
{
	if (w->ckpt && w->aheld != k)
		cgen_norm(params, w, k, B);
}

static void
cgen_need_u(const float *params, struct cg_cgan_ws *w, int k, int B)
{
	if (w->ckpt && w->uheld != k) {
		cgen_need_a(params, w, k - 1, B);
		cgen_up(w, k, B);
	}
}

/* w->fake [B, in_dim] = G(z, cond), the convolutional generator. */
static void
cgen_forward(const struct cg_cgan_config *c, const float *params,
             struct cg_cgan_ws *w, const float *z, const int *cond, int B)
{
	const struct cnet *n = &w->n;
	const int F = n->F;

	cg_wset_linear(&w->ks, w->p0, z, params, n->g0w, params + n->g0b, B,
	               c->latent, F, 0);
	for (int b = 0; b < B; b++) {
		float *g = w->p0 + (size_t)b * F;
		const float *e = params + n->emb + (size_t)cond[b] * F;
		for (int j = 0; j < F; j++)
			g[j] += e[j];
	}
	cgen_norm(params, w, 0, B);
	cgen_up(w, 1, B);
	cg_conv_forward(
	    &n->g1, w->p1, w->u1,
	    cg_wset_floats(&w->ks, params, n->g1w, cg_conv_wsize(&n->g1)),
	    params + n->g1b, B, w->col, w->ncol);
	cgen_norm(params, w, 1, B);
	cgen_up(w, 2, B);
	cg_conv_forward(
	    &n->g2, w->p2, w->u2,
	    cg_wset_floats(&w->ks, params, n->g2w, cg_conv_wsize(&n->g2)),
	    params + n->g2b, B, w->col, w->ncol);
	cgen_norm(params, w, 2, B);
	cg_conv_forward(
	    &n->go, w->fake, w->a2,
	    cg_wset_floats(&w->ks, params, n->gow, cg_conv_wsize(&n->go)),
	    params + n->gob, B, w->col, w->ncol);
	cg_sigmoid_forward(w->fake, w->fake, (size_t)B * c->in_dim);
}

/* Its backward given w->dlogit [B, in_dim]: grad of the generator's views
 * +=. */
static void
cgen_backward(const struct cg_cgan_config *c, const float *params,
              struct cg_cgan_ws *w, const float *z, const int *cond, int B,
              float *grad)
{
	const struct cnet *n = &w->n;
	const int F = n->F, C = n->C;
	const size_t n2 = (size_t)B * n->g2.H * n->g2.W * C,
	             n1 = (size_t)B * n->g1.H * n->g1.W * C;

	const int P1 = n->g1.H * n->g1.W, P = n->g2.H * n->g2.W;
	const size_t S = (size_t)B * 8; /* one norm's mean or rstd */

	/* db1 = d a2; db2 = d p2; db1 = d u2 */
	memset(w->db1, 0, n2 * sizeof(float));
	cgen_need_a(params, w, 2, B);
	cg_conv_backward(&n->go, w->db1, grad + n->gow, grad + n->gob,
	                 w->dlogit, w->a2, params + n->gow, B, w->col,
	                 w->ncol);
	norm_relu_backward(w->db2, w->db1, w->a2, w->p2, params + n->n2g,
	                   grad + n->n2g, grad + n->n2b, w->mean + 2 * S,
	                   w->rstd + 2 * S, B, P, C, n->G);
	memset(w->db1, 0, n2 * sizeof(float));
	cgen_need_u(params, w, 2, B);
	cg_conv_backward(&n->g2, w->db1, grad + n->g2w, grad + n->g2b, w->db2,
	                 w->u2, params + n->g2w, B, w->col, w->ncol);
	/* dm1 = d a1; dm2 = d p1; dm1 = d u1 */
	memset(w->dm1, 0, n1 * sizeof(float));
	cg_upsample2_backward(w->dm1, w->db1, B, n->g1.H, n->g1.W, C);
	cgen_need_a(params, w, 1, B);
	norm_relu_backward(w->dm2, w->dm1, w->a1, w->p1, params + n->n1g,
	                   grad + n->n1g, grad + n->n1b, w->mean + S,
	                   w->rstd + S, B, P1, C, n->G);
	memset(w->dm1, 0, 2 * n1 * sizeof(float));
	cgen_need_u(params, w, 1, B);
	cg_conv_backward(&n->g1, w->dm1, grad + n->g1w, grad + n->g1b, w->dm2,
	                 w->u1, params + n->g1w, B, w->col, w->ncol);
	/* d0 = d a0; dm2 = d p0 */
	memset(w->d0, 0, (size_t)B * F * sizeof(float));
	cg_upsample2_backward(w->d0, w->dm1, B, n->Hq, n->Wq, 2 * C);
	cgen_need_a(params, w, 0, B);
	norm_relu_backward(w->dm2, w->d0, w->a0, w->p0, params + n->n0g,
	                   grad + n->n0g, grad + n->n0b, w->mean, w->rstd, B,
	                   n->Hq * n->Wq, 2 * C, n->G0);
	cg_linear_backward(NULL, grad + n->g0w, grad + n->g0b, w->dm2, z,
	                   params + n->g0w, B, c->latent, F);
	for (int b = 0; b < B; b++) {
		float *e = grad + n->emb + (size_t)cond[b] * F;
		const float *d = w->dm2 + (size_t)b * F;
		for (int j = 0; j < F; j++)
			e[j] += d[j];
	}
}

/* w->s [m] = D(x [m, in_dim], cond [m]), the convolutional
 * discriminator, with the normalised weights of w->sn. */
static void
cdisc_forward(const struct cg_cgan_config *c, const float *params,
              struct cg_cgan_ws *w, const float *x, const int *cond, int m)
{
	const struct cnet *n = &w->n;

	cg_conv_forward(&n->d1, w->h1, x, w->sn[0].wsn, params + n->d1b, m,
	                w->col, w->ncol);
	cg_lrelu_forward(w->h1, w->h1, CG_CGAN_SLOPE,
	                 (size_t)m * n->d1.OH * n->d1.OW * n->C);
	cg_conv_forward(&n->d2, w->phi, w->h1, w->sn[1].wsn, params + n->d2b,
	                m, w->col, w->ncol);
	cg_lrelu_forward(w->phi, w->phi, CG_CGAN_SLOPE, (size_t)m * n->F);
	head_forward(c, params, w, w->phi, n->F, cond, m);
}

/* Its backward over rows [r0, r0 + m), as disc_backward. */
static void
cdisc_backward(const struct cg_cgan_config *c, const float *params,
               struct cg_cgan_ws *w, const float *x, const int *cond, int r0,
               int m, const float *ds, const float *dl, float *grad,
               float *dx)
{
	const struct cnet *n = &w->n;
	const size_t P1C = (size_t)n->d1.OH * n->d1.OW * n->C;
	const float *phi = w->phi + (size_t)r0 * n->F;
	const float *h1 = w->h1 + (size_t)r0 * P1C;

	if (grad)
		sn_clear(c, w);
	head_backward(c, params, w, phi, n->F, cond, m, ds, dl, grad);
	memset(w->dpre2, 0, (size_t)m * n->F * sizeof(float));
	cg_lrelu_backward(w->dpre2, w->dh, phi, CG_CGAN_SLOPE,
	                  (size_t)m * n->F);
	memset(w->dmid, 0, (size_t)m * P1C * sizeof(float));
	cg_conv_backward(&n->d2, w->dmid, grad ? w->sn[1].dwsn : NULL,
	                 grad ? grad + n->d2b : NULL, w->dpre2, h1,
	                 w->sn[1].wsn, m, w->col, w->ncol);
	if (grad || dx) {
		memset(w->dpre2, 0, (size_t)m * P1C * sizeof(float));
		cg_lrelu_backward(w->dpre2, w->dmid, h1, CG_CGAN_SLOPE,
		                  (size_t)m * P1C);
		if (dx)
			memset(dx, 0, (size_t)m * c->in_dim * sizeof(float));
		cg_conv_backward(&n->d1, dx, grad ? w->sn[0].dwsn : NULL,
		                 grad ? grad + n->d1b : NULL, w->dpre2, x,
		                 w->sn[0].wsn, m, w->col, w->ncol);
	}
	if (grad)
		sn_backward(c, w, grad);
}

/* ------------------------------------------------------ the R1 penalty */

/*
 * D's gradient in its input, g = grad_x D(x, y), is a linear function of
 * the normalised weights once the leaky ReLUs' slopes (1 or 0.2) are
 * fixed by the forward pass, and they do not move under a small change
 * of the weights or of x (the second derivative of a leaky ReLU is 0
 * but at its kink).  Backward from ds = 1, layer l's gradient before its
 * activation is p_l = slope_l (W_{l+1}^T p_{l+1}) (p_top = slope_top
 * (psi + emb[y])), and g = W_0^T p_0.  For the penalty P = gamma / (2 B)
 * sum_b |g_b|^2, with r_0 = dP/dg = gamma g / B, the exact second
 * derivative is a forward pass of r through the same layers without
 * their biases: dP/dW_l += p_l^T r_l (r_l [B, in] the layer's "input"),
 * r_{l+1} = slope_l (W_l r_l), and at the head dP/dpsi and
 * dP/demb[y] += r_top.  The biases get nothing; the normalised weights'
 * gradients go through the spectral norms as L_D's do.
 */

/* grad_x D of the reals, rows [0, B) of the last disc_fwd, into w->rg,
 * and each p_l into w->rp; returns sum_b |g_b|^2. */
static double
r1_grad_x(const struct cg_cgan_config *c, struct cg_cgan_ws *w, const float *x,
          const int *cond, int B)
{
	const int D = c->in_dim;
	double sum = 0;

	for (int b = 0; b < B; b++)
		w->ds[b] = 1;
	if (c->conv) {
		const struct cnet *n = &w->n;
		const size_t P1C = (size_t)n->d1.OH * n->d1.OW * n->C;
		float *p2 = w->rp, *p1 = w->rp + (size_t)w->max_batch * n->F;

		head_backward(c, NULL, w, w->phi, n->F, cond, B, w->ds, NULL,
		              NULL);
		memset(p2, 0, (size_t)B * n->F * sizeof(float));
		cg_lrelu_backward(p2, w->dh, w->phi, CG_CGAN_SLOPE,
		                  (size_t)B * n->F);
		memset(w->dmid, 0, (size_t)B * P1C * sizeof(float));
		cg_conv_backward(&n->d2, w->dmid, NULL, NULL, p2, w->h1,
		                 w->sn[1].wsn, B, w->col, w->ncol);
		memset(p1, 0, (size_t)B * P1C * sizeof(float));
		cg_lrelu_backward(p1, w->dmid, w->h1, CG_CGAN_SLOPE,
		                  (size_t)B * P1C);
		memset(w->rg, 0, (size_t)B * D * sizeof(float));
		cg_conv_backward(&n->d1, w->rg, NULL, NULL, p1, x, w->sn[0].wsn,
		                 B, w->col, w->ncol);
	} else {
		const int H = c->hidden, L = c->layers;
		const size_t stride = (size_t)2 * w->max_batch * H;

		head_backward(c, NULL, w, w->h + (L - 1) * stride, H, cond, B,
		              w->ds, NULL, NULL);
		for (int l = L - 1; l >= 0; l--) {
			struct linear ln = disc_lin(c, l);
			float *p = w->rp + (size_t)l * w->max_batch * H;

			memset(p, 0, (size_t)B * H * sizeof(float));
			cg_lrelu_backward(p, w->dh, w->h + l * stride,
			                  CG_CGAN_SLOPE, (size_t)B * H);
			cg_sgemm(0, 0, B, ln.in, H, 1.0f, p, H, w->sn[l].wsn,
			         ln.in, 0.0f, l > 0 ? w->dh : w->rg, ln.in);
		}
	}
	for (size_t i = 0; i < (size_t)B * D; i++)
		sum += (double)w->rg[i] * w->rg[i];
	return sum;
}

/* The head's share of dP: psi's and emb[y]'s normalised gradients +=
 * r [B, F]. */
static void
r1_head(const struct cg_cgan_config *c, struct cg_cgan_ws *w, const float *r,
        int F, const int *cond, int B)
{
	const int L = disc_layers(c);
	float *dpsi = w->sn[L].dwsn;

	for (int b = 0; b < B; b++) {
		const float *rb = r + (size_t)b * F;
		float *demb = w->sn[L + 1].dwsn + (size_t)cond[b] * F;
		for (int j = 0; j < F; j++) {
			dpsi[j] += rb[j];
			demb[j] += rb[j];
		}
	}
}

/* grad += dP/d(D's weights), after r1_grad_x (w->rg, w->rp) and with
 * its activations still in w. */
static void
r1_backward(const struct cg_cgan_config *c, struct cg_cgan_ws *w,
            const int *cond, int B, float *grad)
{
	/* times the loss scale (nn/gemm.h), as every gradient term */
	const float k = cg_loss_scale() * (float)(c->r1 / B);

	for (size_t i = 0; i < (size_t)B * c->in_dim; i++)
		w->rg[i] *= k;
	sn_clear(c, w);
	if (c->conv) {
		const struct cnet *n = &w->n;
		const size_t P1C = (size_t)n->d1.OH * n->d1.OW * n->C;
		const float *p2 = w->rp,
		            *p1 = w->rp + (size_t)w->max_batch * n->F;

		cg_conv_backward(&n->d1, NULL, w->sn[0].dwsn, NULL, p1, w->rg,
		                 w->sn[0].wsn, B, w->col, w->ncol);
		cg_conv_forward(&n->d1, w->dpre2, w->rg, w->sn[0].wsn, NULL, B,
		                w->col, w->ncol);
		memset(w->dmid, 0, (size_t)B * P1C * sizeof(float));
		cg_lrelu_backward(w->dmid, w->dpre2, w->h1, CG_CGAN_SLOPE,
		                  (size_t)B * P1C);
		cg_conv_backward(&n->d2, NULL, w->sn[1].dwsn, NULL, p2, w->dmid,
		                 w->sn[1].wsn, B, w->col, w->ncol);
		cg_conv_forward(&n->d2, w->dpre2, w->dmid, w->sn[1].wsn, NULL,
		                B, w->col, w->ncol);
		memset(w->dh, 0, (size_t)B * n->F * sizeof(float));
		cg_lrelu_backward(w->dh, w->dpre2, w->phi, CG_CGAN_SLOPE,
		                  (size_t)B * n->F);
		r1_head(c, w, w->dh, n->F, cond, B);
	} else {
		const int H = c->hidden, L = c->layers;
		const size_t stride = (size_t)2 * w->max_batch * H;
		const float *r = w->rg;

		for (int l = 0; l < L; l++) {
			struct linear ln = disc_lin(c, l);
			const float *p = w->rp + (size_t)l * w->max_batch * H;

			/* dW [H, in] += p^T r; then W r, through the
			 * slopes, is the next layer's r */
			cg_sgemm(1, 0, H, ln.in, B, 1.0f, p, H, r, ln.in, 1.0f,
			         w->sn[l].dwsn, ln.in);
			cg_sgemm(0, 1, B, H, ln.in, 1.0f, r, ln.in,
			         w->sn[l].wsn, ln.in, 0.0f, w->dpre2, H);
			memset(w->dh, 0, (size_t)B * H * sizeof(float));
			cg_lrelu_backward(w->dh, w->dpre2, w->h + l * stride,
			                  CG_CGAN_SLOPE, (size_t)B * H);
			r = w->dh;
		}
		r1_head(c, w, w->dh, H, cond, B);
	}
	sn_backward(c, w, grad);
}

/* The passes of either kind of net. */
static void
gen_fwd(const struct cg_cgan_config *c, const float *params,
        struct cg_cgan_ws *w, const float *z, const int *cond, int B)
{
	if (c->conv)
		cgen_forward(c, params, w, z, cond, B);
	else
		gen_forward(c, params, w, z, cond, B);
}

static void
disc_fwd(const struct cg_cgan_config *c, const float *params,
         struct cg_cgan_ws *w, const float *x, const int *cond, int m)
{
	if (c->conv)
		cdisc_forward(c, params, w, x, cond, m);
	else
		disc_forward(c, params, w, x, cond, m);
}

static void
disc_bwd(const struct cg_cgan_config *c, const float *params,
         struct cg_cgan_ws *w, const float *x, const int *cond, int r0, int m,
         const float *ds, const float *dl, float *grad, float *dx)
{
	if (c->conv)
		cdisc_backward(c, params, w, x, cond, r0, m, ds, dl, grad, dx);
	else
		disc_backward(c, params, w, x, cond, r0, m, ds, dl, grad, dx);
}

/*
 * The classifier's cross-entropies over the 2B rows of the last
 * disc_fwd (w->lg, made their softmax here): *real and *fake their sums
 * over the reals' rows and the fakes'.
 */
static void
aux_loss(const struct cg_cgan_config *c, struct cg_cgan_ws *w,
         const int *cond2, int B, double *real, double *fake)
{
	const int K = c->ncond;

	*real = *fake = 0;
	for (int r = 0; r < 2 * B; r++) {
		float *p = w->lg + (size_t)r * K;
		double mx = p[0], sum = 0;

		for (int j = 1; j < K; j++)
			mx = p[j] > mx ? p[j] : mx;
		for (int j = 0; j < K; j++)
			sum += exp((double)p[j] - mx);
		const double ce = log(sum) - ((double)p[cond2[r]] - mx);
		*(r < B ? real : fake) += ce;
		for (int j = 0; j < K; j++)
			p[j] = (float)(exp((double)p[j] - mx) / sum);
	}
}

/* w->dl's rows [r0, r0 + n) = k (softmax - one-hot(y)), from w->lg. */
static void
aux_grad(const struct cg_cgan_config *c, struct cg_cgan_ws *w,
         const int *cond2, int r0, int n, float k)
{
	const int K = c->ncond;

	for (int r = r0; r < r0 + n; r++) {
		const float *p = w->lg + (size_t)r * K;
		float *d = w->dl + (size_t)r * K;

		for (int j = 0; j < K; j++)
			d[j] = k * (p[j] - (j == cond2[r] ? 1.0f : 0.0f));
	}
}

/*
 * The pass of cg_cgan_forward_backward, distilled toward target [B,
 * in_dim] at weight alpha when target != NULL (the generator's
 * objective (1 - alpha) L_G + alpha T, cg_cgan_distill_forward_backward).
 */
static int
pass(const struct cg_cgan_config *c, const float *params, struct cg_cgan_ws *w,
     const float *x, const int *cond, const float *z, int B, float *grad,
     struct cg_cgan_loss *loss, const float *target, double alpha)
{
	const int D = c->in_dim, K = c->ncond;
	double real = 0, fake = 0, g = 0, r1 = 0, teach = 0;
	double areal = 0, afake = 0;

	if (check_call(c, w, cond, B, w->max_batch) != 0)
		return -1;
	if (grad != NULL && w->ks.n > 0)
		return cg_seterr("cgan: no gradient through weights as stored");
	gen_fwd(c, params, w, z, cond, B);
	if (target != NULL)
		for (size_t i = 0; i < (size_t)B * D; i++) {
			const double e = (double)w->fake[i] - target[i];
			teach += e * e;
		}
	/* Reals then fakes, one batch of 2B for the discriminator. */
	memcpy(w->dx, x, (size_t)B * D * sizeof(float));
	memcpy(w->dx + (size_t)B * D, w->fake, (size_t)B * D * sizeof(float));
	memcpy(w->cond2, cond, (size_t)B * sizeof(int));
	memcpy(w->cond2 + B, cond, (size_t)B * sizeof(int));
	disc_normalise(c, params, w);
	disc_fwd(c, params, w, w->dx, w->cond2, 2 * B);
	for (int b = 0; b < B; b++) {
		const double sr = w->s[b], sf = w->s[B + b];
		real += sr < 1 ? 1 - sr : 0;
		fake += sf > -1 ? 1 + sf : 0;
		g -= sf;
	}
	if (c->aux > 0)
		aux_loss(c, w, w->cond2, B, &areal, &afake);
	if (c->r1 > 0 && (loss || grad))
		r1 = c->r1 / 2 * r1_grad_x(c, w, w->dx, cond, B) / B;
	if (loss) {
		loss->d_real = real / B;
		loss->d_fake = fake / B;
		loss->d = loss->d_real + loss->d_fake;
		loss->g = g / B;
		loss->r1 = r1;
		loss->teacher = teach / B;
		loss->aux_real = areal / B;
		loss->aux_fake = afake / B;
	}
	if (grad == NULL)
		return 0;
	if (c->r1 > 0)
		r1_backward(c, w, cond, B, grad);
	/* Every seed below times the loss scale (nn/gemm.h). */
	const float ls = cg_loss_scale(), lb = ls / (float)B;
	/* L_D: each real below the margin pulls up, each fake above -1
	 * pushes down; the input (reals, fakes) is fixed. */
	for (int b = 0; b < B; b++) {
		w->ds[b] = w->s[b] < 1 ? -lb : 0.0f;
		w->ds[B + b] = w->s[B + b] > -1 ? lb : 0.0f;
	}
	/* and lambda CE on the reals alone: the fakes' rows get 0 */
	if (c->aux > 0) {
		aux_grad(c, w, w->cond2, 0, B, ls * (float)(c->aux / B));
		memset(w->dl + (size_t)B * K, 0, (size_t)B * K * sizeof(float));
	}
	disc_bwd(c, params, w, w->dx, w->cond2, 0, 2 * B, w->ds,
	         c->aux > 0 ? w->dl : NULL, grad, NULL);
	/* L_G = -mean D(fake): to the fakes alone, then through G.  The
	 * fakes' gradient goes to the reals' rows of dx, which the pass
	 * above no longer needs. */
	for (int b = 0; b < B; b++)
		w->ds[b] = -lb;
	/* L_G's lambda CE of the fakes */
	if (c->aux > 0)
		aux_grad(c, w, w->cond2, B, B, ls * (float)(c->aux / B));
	disc_bwd(c, params, w, w->dx + (size_t)B * D, w->cond2 + B, B, B,
	         w->ds, c->aux > 0 ? w->dl + (size_t)B * K : NULL, NULL,
	         w->dx);
	/* Distilled: d/d(fake) of (1 - alpha) L_G + alpha T, T's being
	 * 2 (fake - target) / B; at alpha 0 L_G's alone, to the bit. */
	if (target != NULL && alpha != 0) {
		const float a = (float)alpha, ka = 1.0f - a;
		const float k = ls * (2.0f * a / (float)B);
		for (size_t i = 0; i < (size_t)B * D; i++)
			w->dx[i] = ka * w->dx[i] + k * (w->fake[i] - target[i]);
	}
	for (size_t i = 0; i < (size_t)B * D; i++) {
		const float f = w->fake[i];
		w->dlogit[i] = w->dx[i] * f * (1 - f);
	}
	if (c->conv)
		cgen_backward(c, params, w, z, cond, B, grad);
	else
		gen_backward(c, params, w, z, cond, B, grad);
	return 0;
}

int
cg_cgan_forward_backward(const struct cg_cgan_config *c, const float *params,
                         struct cg_cgan_ws *w, const float *x, const int *cond,
                         const float *z, int B, float *grad,
                         struct cg_cgan_loss *loss)
{
	return pass(c, params, w, x, cond, z, B, grad, loss, NULL, 0);
}

int
cg_cgan_distill_forward_backward(const struct cg_cgan_config *c,
                                 const float *params, struct cg_cgan_ws *w,
                                 const float *x, const int *cond,
                                 const float *z, const float *target,
                                 double alpha, int B, float *grad,
                                 struct cg_cgan_loss *loss)
{
	if (!(alpha >= 0 && alpha <= 1))
		return cg_seterr("cgan: teacher weight %g: not in [0, 1]",
		                 alpha);
	if (target == NULL)
		return cg_seterr("cgan: distillation without a target");
	return pass(c, params, w, x, cond, z, B, grad, loss, target, alpha);
}

int
cg_cgan_generate(const struct cg_cgan_config *c, const float *params,
                 struct cg_cgan_ws *w, const float *z, const int *cond, int n,
                 float *out)
{
	if (check_call(c, w, cond, n, w->max_batch) != 0)
		return -1;
	gen_fwd(c, params, w, z, cond, n);
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
	disc_fwd(c, params, w, x, cond, n);
	memcpy(score, w->s, (size_t)n * sizeof(float));
	return 0;
}

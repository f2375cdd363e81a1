/*
 * arch/cvae/cvae_conv.c - the cvae's convolutional encoder and decoder.
 *
 * cvae.h's conv form on the kernels of nn/conv.c.  Each of the five
 * stages is a convolution (the decoder's first a Linear layer), a group
 * norm, FiLM from the condition's row of the stage's table (cond_every)
 * and SiLU; a stage keeps its convolution's output, the norm's, FiLM's
 * and SiLU's, which its backward reads.  SiLU rather than ReLU: no kink,
 * so that the finite differences of the tests are smooth everywhere.
 * The gradients of the maps go through three scratch maps of the widest
 * map's size, in turn.
 *
 * Checkpointed (cg_cvae_cnet_new's checkpoint), each stage keeps only its
 * layer's output p; the norm's, FiLM's and SiLU's maps of every stage
 * share one set of the largest stage's size, and the two up-sampled maps
 * one buffer.  The backward pass makes a stage's again from its p (the
 * norm, FiLM and SiLU: no convolution) just before it reads them, and an
 * up-sampled map from the stage below: the forward pass's arithmetic on
 * the same inputs, so the same bits.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cvae/cvae_conv.h"
#include "core/arena.h"
#include "nn/conv.h"
#include "nn/nn.h"

/* Floats of unfolded input the convolutions may take at once (16 MiB). */
#define COL_BUDGET ((size_t)1 << 22)

/* The stages: the encoder's two, the decoder's three. */
enum { E1, E2, D0, D1, D2, NSTAGE };

/* ---------------------------------------------------------------- layout */

/* The nets' shapes and offsets, in buffer order. */
struct net {
	int C, F, K, Z;
	int P1, P2, P;               /* positions of the three sizes of map */
	int ch[NSTAGE];              /* each stage's channels */
	int hw[NSTAGE];              /* and positions */
	struct cg_conv conv[NSTAGE]; /* D0 has none (the Linear layer) */
	struct cg_conv out;
	size_t cw[NSTAGE], cb[NSTAGE]; /* its weight and bias */
	size_t ng[NSTAGE], nb[NSTAGE]; /* its norm's scale and shift */
	size_t film[NSTAGE];           /* its FiLM table [K, 2 ch] */
	size_t muw, mub, lvw, lvb, ow, ob, prior, end;
};

/* The groups of a norm over C channels: the most of 8, 4, 2 that
 * divides C into groups of 2 channels or more, else 1.  A group of one
 * channel would make that channel's convolution bias dead (the norm
 * takes it out), and its map normalised alone bends sharply. */
static int
norm_groups(int C)
{
	for (int g = 8; g > 1; g /= 2)
		if (C % g == 0 && C / g >= 2)
			return g;
	return 1;
}

/* The nets of c; -1 (no message) where the image does not make them. */
static int
net_of(const struct cg_cvae_config *c, struct net *n)
{
	const int C = c->conv, H = c->height, W = c->width, ch = c->channels;
	size_t o = 0;

	memset(n, 0, sizeof(*n));
	if (C < 1 || C > CG_CVAE_MAX_CONV || H < 4 || W < 4 || H % 4 || W % 4 ||
	    ch < 1 || (int64_t)H * W * ch != c->in_dim ||
	    (int64_t)(H / 4) * (W / 4) * 2 * C > CG_CVAE_MAX_DIM)
		return -1;
	n->C = C, n->K = c->ncond, n->Z = c->latent;
	n->P = H * W, n->P1 = n->P / 4, n->P2 = n->P / 16;
	n->F = n->P2 * 2 * C;
	if (cg_conv_shape(&n->conv[E1], ch, H, W, C, 3, 2, 1) != 0 ||
	    cg_conv_shape(&n->conv[E2], C, H / 2, W / 2, 2 * C, 3, 2, 1) != 0 ||
	    cg_conv_shape(&n->conv[D1], 2 * C, H / 2, W / 2, C, 3, 1, 1) != 0 ||
	    cg_conv_shape(&n->conv[D2], C, H, W, C, 3, 1, 1) != 0 ||
	    cg_conv_shape(&n->out, C, H, W, ch, 3, 1, 1) != 0)
		return -1;
	const int chs[] = {C, 2 * C, 2 * C, C, C};
	const int hws[] = {n->P1, n->P2, n->P2, n->P1, n->P};
	memcpy(n->ch, chs, sizeof(chs));
	memcpy(n->hw, hws, sizeof(hws));
#define TAKE(f, k) (n->f = o, o += (size_t)(k))
	for (int s = E1; s <= E2; s++) {
		TAKE(cw[s], cg_conv_wsize(&n->conv[s]));
		TAKE(cb[s], n->ch[s]);
		TAKE(ng[s], n->ch[s]);
		TAKE(nb[s], n->ch[s]);
	}
	TAKE(muw, (size_t)c->latent * (n->F + c->ncond));
	TAKE(mub, c->latent);
	TAKE(lvw, (size_t)c->latent * (n->F + c->ncond));
	TAKE(lvb, c->latent);
	TAKE(cw[D0], (size_t)n->F * (c->latent + c->ncond));
	TAKE(cb[D0], n->F);
	TAKE(ng[D0], 2 * C);
	TAKE(nb[D0], 2 * C);
	for (int s = D1; s <= D2; s++) {
		TAKE(cw[s], cg_conv_wsize(&n->conv[s]));
		TAKE(cb[s], n->ch[s]);
		TAKE(ng[s], n->ch[s]);
		TAKE(nb[s], n->ch[s]);
	}
	TAKE(ow, cg_conv_wsize(&n->out));
	TAKE(ob, ch);
	TAKE(prior, c->class_prior ? 2 * (size_t)c->ncond * c->latent : 0);
	for (int s = 0; s < NSTAGE; s++)
		TAKE(film[s],
		     c->cond_every ? (size_t)c->ncond * 2 * n->ch[s] : 0);
#undef TAKE
	n->end = o;
	return 0;
}

int
cg_cvae_conv_check(const struct cg_cvae_config *c)
{
	struct net n;

	if (c->conv < 1 || c->conv > CG_CVAE_MAX_CONV)
		return cg_seterr("cvae: conv = %d: not in [0, %d]", c->conv,
		                 CG_CVAE_MAX_CONV);
	if (net_of(c, &n) != 0)
		return cg_seterr("cvae: images of %dx%dx%d for %d inputs: the "
		                 "convolutional nets want them so, sides "
		                 "multiples of 4 (and at most %d features)",
		                 c->height, c->width, c->channels, c->in_dim,
		                 CG_CVAE_MAX_DIM);
	/* Each piece is below 2^53 (sizes at most 2^20, a kernel's 9
	 * C^2 at most 2^29 with conv at most 4096): no wrap. */
	if (n.end > CG_CVAE_MAX_PARAMS || n.end > SIZE_MAX / sizeof(float))
		return cg_seterr("cvae: %llu parameters: more than %llu",
		                 (unsigned long long)n.end,
		                 (unsigned long long)CG_CVAE_MAX_PARAMS);
	return 0;
}

size_t
cg_cvae_conv_nparams(const struct cg_cvae_config *c)
{
	struct net n;

	net_of(c, &n);
	return n.end;
}

size_t
cg_cvae_conv_prior_at(const struct cg_cvae_config *c)
{
	struct net n;

	net_of(c, &n);
	return n.prior;
}

int
cg_cvae_conv_nviews(const struct cg_cvae_config *c)
{
	return CG_CVAE_CONV_NETS + (c->class_prior ? 2 : 0) +
	       (c->cond_every ? NSTAGE : 0);
}

/* The names of the stages' layers, norms and FiLM tables. */
static const char *const conv_name[] = {"enc.c1", "enc.c2", "dec.0", "dec.c1",
                                        "dec.c2"};
static const char *const norm_name[] = {"enc.n1", "enc.n2", "dec.n0", "dec.n1",
                                        "dec.n2"};

/* The views of stage s's layer and norm into v[0..4). */
static void
stage_views(const struct cg_cvae_config *c, const struct net *n, int s,
            struct cg_view *v)
{
	char name[32];

	if (s == D0)
		cg_view_linear(v, "dec.0", n->cw[s], n->cb[s], n->F,
		               c->latent + c->ncond);
	else
		cg_view_conv(v, conv_name[s], n->cw[s], n->cb[s], &n->conv[s]);
	snprintf(name, sizeof(name), "%s.g", norm_name[s]);
	cg_view_set(&v[2], name, n->ng[s], (size_t)n->ch[s], 0, 0);
	snprintf(name, sizeof(name), "%s.b", norm_name[s]);
	cg_view_set(&v[3], name, n->nb[s], (size_t)n->ch[s], 0, 0);
}

int
cg_cvae_conv_views(const struct cg_cvae_config *c, struct cg_view *v, int max)
{
	const int nv = cg_cvae_conv_nviews(c);
	struct net n;
	int i = 0;

	if (max < nv)
		return cg_seterr("cvae: %d views do not fit in %d", nv, max);
	net_of(c, &n);
	stage_views(c, &n, E1, &v[i]), i += 4;
	stage_views(c, &n, E2, &v[i]), i += 4;
	cg_view_linear(&v[i], "enc.mu", n.muw, n.mub, c->latent,
	               n.F + c->ncond),
	    i += 2;
	cg_view_linear(&v[i], "enc.logvar", n.lvw, n.lvb, c->latent,
	               n.F + c->ncond),
	    i += 2;
	for (int s = D0; s <= D2; s++)
		stage_views(c, &n, s, &v[i]), i += 4;
	cg_view_conv(&v[i], "dec.out", n.ow, n.ob, &n.out), i += 2;
	if (c->class_prior) {
		const size_t kz = (size_t)c->ncond * c->latent;
		cg_view_set(&v[i++], "prior.mu", n.prior, c->ncond, c->latent,
		            0);
		cg_view_set(&v[i++], "prior.logvar", n.prior + kz, c->ncond,
		            c->latent, 0);
	}
	for (int s = 0; c->cond_every && s < NSTAGE; s++) {
		char name[32];
		snprintf(name, sizeof(name), "%s.cond", norm_name[s]);
		cg_view_set(&v[i++], name, n.film[s], c->ncond,
		            2 * (size_t)n.ch[s], 0);
	}
	return i;
}

void
cg_cvae_conv_init(const struct cg_cvae_config *c, float *params,
                  struct cg_rng *r)
{
	struct net n;

	net_of(c, &n);
	for (int s = 0; s < NSTAGE; s++) {
		/* The layer (weight, then its bias: they lie in a row),
		 * drawn in buffer order; the norm 1 and 0. */
		if (s == D0) {
			const size_t in = (size_t)c->latent + c->ncond;
			/* the heads come before the decoder in the buffer */
			cg_init_uniform(params + n.muw,
			                ((size_t)n.F + c->ncond + 1) *
			                    c->latent,
			                (size_t)n.F + c->ncond, r);
			cg_init_uniform(params + n.lvw,
			                ((size_t)n.F + c->ncond + 1) *
			                    c->latent,
			                (size_t)n.F + c->ncond, r);
			cg_init_uniform(params + n.cw[s],
			                (size_t)n.F * (in + 1), in, r);
		} else
			cg_init_uniform(params + n.cw[s],
			                cg_conv_wsize(&n.conv[s]) + n.ch[s],
			                (size_t)n.conv[s].C * 9, r);
		for (int j = 0; j < n.ch[s]; j++) {
			params[n.ng[s] + j] = 1;
			params[n.nb[s] + j] = 0;
		}
	}
	cg_init_uniform(params + n.ow, cg_conv_wsize(&n.out) + n.out.OC,
	                (size_t)n.out.C * 9, r);
	memset(params + n.prior, 0, (n.end - n.prior) * sizeof(float));
}

/* ------------------------------------------------------------- workspace */

/* One stage's activations, each [B, hw, ch]: the layer's output p, the
 * norm's nrm, FiLM's f (nrm itself without cond_every), SiLU's a; the
 * norm's mean and rstd [B, groups]; FiLM's rows e [B, 2 ch]. */
struct stage {
	float *p, *nrm, *f, *a, *mean, *rstd, *e;
};

struct cg_cvae_cnet {
	struct cg_cvae_config c;
	struct net n;
	int max_batch;
	int ckpt; /* 1: st[] share nrm, f, a, mean, rstd, e; u1 is u2 */
	int held; /* the stage whose maps the shared set holds (-1: none) */
	void *mem;
	struct stage st[NSTAGE];
	float *hin;     /* [B, F + K]: a_2 ⊕ onehot, the heads' input */
	float *din;     /* [B, Z + K]: z ⊕ onehot, the decoder's */
	float *dhin;    /* [B, F + K] */
	float *ddin;    /* [B, Z + K] */
	float *u1, *u2; /* [B, P1, 2C], [B, P, C]: the up-sampled maps */
	float *s[3];    /* [B, widest map]: the maps' gradients */
	float *de;      /* [B, 4C]: FiLM's rows' gradient */
	float *col;     /* [ncol] */
	size_t ncol;
};

/* A stage's maps but p in arena a: B examples of N floats, ch
 * channels. */
static void
stage_lay(struct stage *t, struct cg_arena *a, size_t B, size_t N, size_t ch,
          int film)
{
	t->nrm = CG_ARENA_FLOATS(a, B, N);
	t->f = CG_ARENA_FLOATS(a, B, film ? N : 0);
	t->a = CG_ARENA_FLOATS(a, B, N);
	t->mean = CG_ARENA_FLOATS(a, B, 8);
	t->rstd = CG_ARENA_FLOATS(a, B, 8);
	t->e = CG_ARENA_FLOATS(a, B, film ? 2 * ch : 0);
}

static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cvae_cnet *w = ws;
	const struct net *n = &w->n;
	const size_t B = w->max_batch, C = n->C, K = n->K, Z = n->Z;
	const size_t M = (size_t)n->P * C > (size_t)n->P1 * 2 * C
	                     ? (size_t)n->P * C
	                     : (size_t)n->P1 * 2 * C;
	const int film = w->c.cond_every;

	size_t most = 0, ch = 0; /* the largest stage's floats, channels */

	for (int s = 0; s < NSTAGE; s++) {
		struct stage *t = &w->st[s];
		const size_t N = (size_t)n->hw[s] * n->ch[s];
		t->p = CG_ARENA_FLOATS(a, B, N);
		if (!w->ckpt)
			stage_lay(t, a, B, N, n->ch[s], film);
		most = N > most ? N : most;
		ch = (size_t)n->ch[s] > ch ? (size_t)n->ch[s] : ch;
	}
	if (w->ckpt) {
		struct stage *t = &w->st[0];
		stage_lay(t, a, B, most, ch, film);
		for (int s = 1; s < NSTAGE; s++) {
			w->st[s].nrm = t->nrm, w->st[s].f = t->f;
			w->st[s].a = t->a, w->st[s].mean = t->mean;
			w->st[s].rstd = t->rstd, w->st[s].e = t->e;
		}
	}
	w->hin = CG_ARENA_FLOATS(a, B, (size_t)n->F + K);
	w->din = CG_ARENA_FLOATS(a, B, Z + K);
	w->dhin = CG_ARENA_FLOATS(a, B, (size_t)n->F + K);
	w->ddin = CG_ARENA_FLOATS(a, B, Z + K);
	if (w->ckpt) {
		w->u1 = w->u2 = CG_ARENA_FLOATS(a, B, M);
	} else {
		w->u1 = CG_ARENA_FLOATS(a, B, (size_t)n->P1 * 2 * C);
		w->u2 = CG_ARENA_FLOATS(a, B, (size_t)n->P * C);
	}
	for (int i = 0; i < 3; i++)
		w->s[i] = CG_ARENA_FLOATS(a, B, M);
	w->de = CG_ARENA_FLOATS(a, B, 4 * C);
	w->col = CG_ARENA_FLOATS(a, w->ncol, 1);
}

/* The struct of a workspace, its arena not laid out; NULL with a
 * message. */
static struct cg_cvae_cnet *
cnet_prep(const struct cg_cvae_config *c, int max_batch, int checkpoint)
{
	struct cg_cvae_cnet *w;

	if (cg_cvae_conv_check(c) != 0)
		return NULL;
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("cvae: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	w->ckpt = checkpoint != 0;
	w->held = -1;
	net_of(c, &w->n);
	for (int s = 0; s <= NSTAGE; s++) {
		if (s == D0)
			continue;
		const struct cg_conv *cv =
		    s == NSTAGE ? &w->n.out : &w->n.conv[s];
		size_t k = cg_conv_scratch(cv, max_batch, COL_BUDGET);
		if (k > w->ncol)
			w->ncol = k;
	}
	return w;
}

struct cg_cvae_cnet *
cg_cvae_cnet_new(const struct cg_cvae_config *c, int max_batch, int checkpoint)
{
	struct cg_cvae_cnet *w = cnet_prep(c, max_batch, checkpoint);
	struct cg_arena a;

	if (w == NULL)
		return NULL;
	if (cg_arena_make(&a, lay, w, "cvae", max_batch) != 0) {
		free(w);
		return NULL;
	}
	w->mem = a.base;
	return w;
}

size_t
cg_cvae_cnet_bytes(const struct cg_cvae_config *c, int max_batch,
                   int checkpoint)
{
	struct cg_cvae_cnet *w = cnet_prep(c, max_batch, checkpoint);
	size_t b;

	if (w == NULL)
		return 0;
	b = cg_arena_bytes(lay, w, sizeof(*w), "cvae", max_batch);
	free(w);
	return b;
}

void
cg_cvae_cnet_free(struct cg_cvae_cnet *w)
{
	if (w == NULL)
		return;
	free(w->mem);
	free(w);
}

/* --------------------------------------------------------------- passes */

/*
 * Stage s after its layer (t->p written): the norm, FiLM with the rows
 * of cond, SiLU into t->a.
 */
static void
stage_forward(struct cg_cvae_cnet *w, const float *params, int s,
              const int *cond, int B)
{
	const struct net *n = &w->n;
	const struct stage *t = &w->st[s];
	const int HW = n->hw[s], Ch = n->ch[s];
	const size_t N = (size_t)B * HW * Ch;
	const float *f = t->nrm;

	cg_groupnorm_forward(t->nrm, t->mean, t->rstd, t->p, params + n->ng[s],
	                     params + n->nb[s], B, HW, Ch, norm_groups(Ch));
	if (w->c.cond_every) {
		for (int b = 0; b < B; b++)
			memcpy(t->e + (size_t)b * 2 * Ch,
			       params + n->film[s] + (size_t)cond[b] * 2 * Ch,
			       2 * (size_t)Ch * sizeof(float));
		cg_film_forward(t->f, t->nrm, t->e, B, HW, Ch);
		f = t->f;
	}
	cg_silu_forward(t->a, f, N);
	w->held = s;
}

/* Stage s's maps for its backward pass or a layer's: a checkpointed
 * workspace makes them again from t->p where the shared set holds
 * another stage's. */
static void
stage_need(struct cg_cvae_cnet *w, const float *params, int s, const int *cond,
           int B)
{
	if (w->ckpt && w->held != s)
		stage_forward(w, params, s, cond, B);
}

/*
 * Its backward: da [B, hw, ch], the gradient at t->a, becomes the
 * gradient at t->p (in place); t1 and t2 scratch of the same size.
 * grad += the norm's and the FiLM table's.
 */
static void
stage_backward(struct cg_cvae_cnet *w, const float *params, int s,
               const int *cond, int B, float *da, float *t1, float *t2,
               float *grad)
{
	const struct net *n = &w->n;
	const struct stage *t = &w->st[s];
	const int HW = n->hw[s], Ch = n->ch[s];
	const size_t N = (size_t)B * HW * Ch;
	float *dn = t1;

	stage_need(w, params, s, cond, B);

	memset(t1, 0, N * sizeof(float));
	cg_silu_backward(t1, da, w->c.cond_every ? t->f : t->nrm, N);
	if (w->c.cond_every) {
		memset(t2, 0, N * sizeof(float));
		memset(w->de, 0, (size_t)B * 2 * Ch * sizeof(float));
		cg_film_backward(t2, w->de, t1, t->nrm, t->e, B, HW, Ch);
		for (int b = 0; b < B; b++) {
			float *g = grad + n->film[s] + (size_t)cond[b] * 2 * Ch;
			const float *d = w->de + (size_t)b * 2 * Ch;
			for (int j = 0; j < 2 * Ch; j++)
				g[j] += d[j];
		}
		dn = t2;
	}
	memset(da, 0, N * sizeof(float));
	cg_groupnorm_backward(da, grad + n->ng[s], grad + n->nb[s], dn, t->p,
	                      params + n->ng[s], t->mean, t->rstd, B, HW, Ch,
	                      norm_groups(Ch));
}

void
cg_cvae_conv_encode(const struct cg_cvae_config *c, const float *params,
                    struct cg_cvae_cnet *w, const float *x, const int *cond,
                    int B, float *mu, float *logvar)
{
	const struct net *n = &w->n;
	const int FK = n->F + c->ncond;

	cg_conv_forward(&n->conv[E1], w->st[E1].p, x, params + n->cw[E1],
	                params + n->cb[E1], B, w->col, w->ncol);
	stage_forward(w, params, E1, cond, B);
	cg_conv_forward(&n->conv[E2], w->st[E2].p, w->st[E1].a,
	                params + n->cw[E2], params + n->cb[E2], B, w->col,
	                w->ncol);
	stage_forward(w, params, E2, cond, B);
	cg_concat_onehot_forward(w->hin, w->st[E2].a, cond, B, n->F, c->ncond);
	cg_linear_forward(mu, w->hin, params + n->muw, params + n->mub, B, FK,
	                  c->latent);
	cg_linear_forward(logvar, w->hin, params + n->lvw, params + n->lvb, B,
	                  FK, c->latent);
}

void
cg_cvae_conv_decode(const struct cg_cvae_config *c, const float *params,
                    struct cg_cvae_cnet *w, const float *z, const int *cond,
                    int B, float *logits)
{
	const struct net *n = &w->n;

	cg_concat_onehot_forward(w->din, z, cond, B, c->latent, c->ncond);
	cg_linear_forward(w->st[D0].p, w->din, params + n->cw[D0],
	                  params + n->cb[D0], B, c->latent + c->ncond, n->F);
	stage_forward(w, params, D0, cond, B);
	cg_upsample2_forward(w->u1, w->st[D0].a, B, c->height / 4, c->width / 4,
	                     2 * n->C);
	cg_conv_forward(&n->conv[D1], w->st[D1].p, w->u1, params + n->cw[D1],
	                params + n->cb[D1], B, w->col, w->ncol);
	stage_forward(w, params, D1, cond, B);
	cg_upsample2_forward(w->u2, w->st[D1].a, B, c->height / 2, c->width / 2,
	                     n->C);
	cg_conv_forward(&n->conv[D2], w->st[D2].p, w->u2, params + n->cw[D2],
	                params + n->cb[D2], B, w->col, w->ncol);
	stage_forward(w, params, D2, cond, B);
	cg_conv_forward(&n->out, logits, w->st[D2].a, params + n->ow,
	                params + n->ob, B, w->col, w->ncol);
}

void
cg_cvae_conv_decode_backward(const struct cg_cvae_config *c,
                             const float *params, struct cg_cvae_cnet *w,
                             const int *cond, int B, const float *dlogits,
                             float *grad, float *dz)
{
	const struct net *n = &w->n;
	const size_t Bs = (size_t)B, C = n->C;
	float **s = w->s;

	/* s0 = d a4, then d p4; s1 = d u2; s0 = d a3, then d p3 */
	memset(s[0], 0, Bs * n->P * C * sizeof(float));
	stage_need(w, params, D2, cond, B);
	cg_conv_backward(&n->out, s[0], grad + n->ow, grad + n->ob, dlogits,
	                 w->st[D2].a, params + n->ow, B, w->col, w->ncol);
	stage_backward(w, params, D2, cond, B, s[0], s[1], s[2], grad);
	if (w->ckpt) {
		/* u2 again: D1's maps, up-sampled */
		stage_need(w, params, D1, cond, B);
		cg_upsample2_forward(w->u2, w->st[D1].a, B, c->height / 2,
		                     c->width / 2, (int)C);
	}
	memset(s[1], 0, Bs * n->P * C * sizeof(float));
	cg_conv_backward(&n->conv[D2], s[1], grad + n->cw[D2], grad + n->cb[D2],
	                 s[0], w->u2, params + n->cw[D2], B, w->col, w->ncol);
	memset(s[0], 0, Bs * n->P1 * C * sizeof(float));
	cg_upsample2_backward(s[0], s[1], B, c->height / 2, c->width / 2,
	                      (int)C);
	stage_backward(w, params, D1, cond, B, s[0], s[1], s[2], grad);
	if (w->ckpt) {
		/* u1 again: D0's maps, up-sampled */
		stage_need(w, params, D0, cond, B);
		cg_upsample2_forward(w->u1, w->st[D0].a, B, c->height / 4,
		                     c->width / 4, 2 * (int)C);
	}
	/* s1 = d u1; s0 = d a0, then d p0 */
	memset(s[1], 0, Bs * n->P1 * 2 * C * sizeof(float));
	cg_conv_backward(&n->conv[D1], s[1], grad + n->cw[D1], grad + n->cb[D1],
	                 s[0], w->u1, params + n->cw[D1], B, w->col, w->ncol);
	memset(s[0], 0, Bs * n->F * sizeof(float));
	cg_upsample2_backward(s[0], s[1], B, c->height / 4, c->width / 4,
	                      2 * (int)C);
	stage_backward(w, params, D0, cond, B, s[0], s[1], s[2], grad);
	memset(w->ddin, 0, Bs * (c->latent + c->ncond) * sizeof(float));
	cg_linear_backward(w->ddin, grad + n->cw[D0], grad + n->cb[D0], s[0],
	                   w->din, params + n->cw[D0], B, c->latent + c->ncond,
	                   n->F);
	cg_concat_onehot_backward(dz, w->ddin, B, c->latent, c->ncond);
}

void
cg_cvae_conv_encode_backward(const struct cg_cvae_config *c,
                             const float *params, struct cg_cvae_cnet *w,
                             const float *x, const int *cond, int B,
                             const float *dmu, const float *dlogvar,
                             float *grad)
{
	const struct net *n = &w->n;
	const size_t Bs = (size_t)B;
	const int FK = n->F + c->ncond;
	float **s = w->s;

	memset(w->dhin, 0, Bs * FK * sizeof(float));
	cg_linear_backward(w->dhin, grad + n->muw, grad + n->mub, dmu, w->hin,
	                   params + n->muw, B, FK, c->latent);
	cg_linear_backward(w->dhin, grad + n->lvw, grad + n->lvb, dlogvar,
	                   w->hin, params + n->lvw, B, FK, c->latent);
	/* s0 = d a2, then d p2; s1 = d a1, then d p1 */
	memset(s[0], 0, Bs * n->F * sizeof(float));
	cg_concat_onehot_backward(s[0], w->dhin, B, n->F, c->ncond);
	stage_backward(w, params, E2, cond, B, s[0], s[1], s[2], grad);
	stage_need(w, params, E1, cond, B);
	memset(s[1], 0, Bs * n->P1 * n->C * sizeof(float));
	cg_conv_backward(&n->conv[E2], s[1], grad + n->cw[E2], grad + n->cb[E2],
	                 s[0], w->st[E1].a, params + n->cw[E2], B, w->col,
	                 w->ncol);
	stage_backward(w, params, E1, cond, B, s[1], s[0], s[2], grad);
	cg_conv_backward(&n->conv[E1], NULL, grad + n->cw[E1], grad + n->cb[E1],
	                 s[1], x, params + n->cw[E1], B, w->col, w->ncol);
}

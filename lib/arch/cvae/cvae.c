/*
 * arch/cvae/cvae.c - conditional VAE: layout, init, forward, backward, decode.
 *
 * The model of cvae.h on the kernels of nn.c.  The parameter layout is a
 * closed-form function of the config (linear_at), so views, init and the
 * passes agree by construction.  The workspace holds every activation of a
 * batch of up to max_batch examples in one allocation; B smaller than that
 * uses the leading rows of each buffer.  Hidden activations are kept after
 * ReLU: a ReLU output is > 0 exactly where its input was, so it is all that
 * backward needs.  The class prior's two tables, then the condition's
 * rows of the hidden layers after the first (cond_every), follow the
 * layers, so a model without them has the same layout up to there.
 * The convolutional nets (conv > 0) are cvae_conv.c's: their layout and
 * their passes on either side of the sample, the loss and the prior
 * here, as the MLP's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cvae/cvae.h"
#include "arch/cvae/cvae_conv.h"
#include "core/arena.h"
#include "nn/gemm.h"
#include "nn/nn.h"

/* ---------------------------------------------------------------- layout */

/* The encoder's Linear layers start at 0, the decoder's at layers + 2. */
enum { ENC, DEC };

/* One Linear layer: weight at w [out, in], bias at b [out]. */
struct linear {
	size_t w, b;
	int in, out;
};

/*
 * The idx-th Linear layer in buffer order: encoder 0..L-1, mu head L,
 * logvar head L+1, decoder L+2..2L+1, output layer 2L+2.  c is valid.
 */
static struct linear
linear_at(const struct cg_cvae_config *c, int idx)
{
	size_t D = c->in_dim, K = c->ncond, H = c->hidden, Z = c->latent;
	size_t L = c->layers, hh = H * H + H;
	size_t enc = H * (D + K) + H + (L - 1) * hh; /* encoder MLP */
	size_t head = Z * H + Z;
	size_t dec0 = enc + 2 * head; /* decoder MLP */
	struct linear ln;
	size_t i = idx;

	if (i < L) {
		ln.in = i == 0 ? c->in_dim + c->ncond : c->hidden;
		ln.out = c->hidden;
		ln.w = i == 0 ? 0 : H * (D + K) + H + (i - 1) * hh;
	} else if (i < L + 2) {
		ln.in = c->hidden;
		ln.out = c->latent;
		ln.w = enc + (i - L) * head;
	} else if (i < 2 * L + 2) {
		i -= L + 2;
		ln.in = i == 0 ? c->latent + c->ncond : c->hidden;
		ln.out = c->hidden;
		ln.w = dec0 + (i == 0 ? 0 : H * (Z + K) + H + (i - 1) * hh);
	} else {
		ln.in = c->hidden;
		ln.out = c->in_dim;
		ln.w = dec0 + H * (Z + K) + H + (L - 1) * hh;
	}
	ln.b = ln.w + (size_t)ln.out * ln.in;
	return ln;
}

static int
nlinear(const struct cg_cvae_config *c)
{
	return 2 * c->layers + 3;
}

/* Where the class prior's tables start: prior.mu [ncond, latent], then
 * prior.logvar [ncond, latent].  c is valid. */
static size_t
prior_at(const struct cg_cvae_config *c)
{
	if (c->conv)
		return cg_cvae_conv_prior_at(c);
	struct linear ln = linear_at(c, nlinear(c) - 1);

	return ln.b + ln.out;
}

/* Where side's (ENC or DEC) table of the condition's rows for hidden
 * layer l >= 1 starts: [ncond, hidden], cond_every only.  c is valid. */
static size_t
cond_at(const struct cg_cvae_config *c, int side, int l)
{
	size_t K = c->ncond, Z = c->latent, KH = K * c->hidden;
	size_t at = prior_at(c) + (c->class_prior ? 2 * K * Z : 0);

	return at + ((size_t)side * (c->layers - 1) + (size_t)(l - 1)) * KH;
}

int
cg_cvae_nviews(const struct cg_cvae_config *c)
{
	if (c->conv)
		return cg_cvae_conv_nviews(c);
	return 2 * nlinear(c) + (c->class_prior ? 2 : 0) +
	       (c->cond_every ? 2 * (c->layers - 1) : 0);
}

int
cg_cvae_check_config(const struct cg_cvae_config *c)
{
	const struct {
		const char *name;
		int v;
	} f[] = {
	    {"in_dim", c->in_dim}, {"ncond", c->ncond},   {"hidden", c->hidden},
	    {"layers", c->layers}, {"latent", c->latent},
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v < 1 || f[i].v > CG_CVAE_MAX_DIM)
			return cg_seterr("cvae: %s = %d: not in [1, %d]",
			                 f[i].name, f[i].v, CG_CVAE_MAX_DIM);
	/*
	 * With every field at most 2^20 the count stays below 2^63, so this
	 * arithmetic cannot wrap; the cap is what keeps the model sane.
	 */
	uint64_t D = c->in_dim, K = c->ncond, H = c->hidden, Z = c->latent;
	uint64_t L = c->layers, hh = H * H + H;
	uint64_t n = (H * (D + K) + H + (L - 1) * hh) + 2 * (Z * H + Z) +
	             (H * (Z + K) + H + (L - 1) * hh) + (D * H + D) +
	             (c->class_prior ? 2 * K * Z : 0) +
	             (c->cond_every ? 2 * (L - 1) * K * H : 0);

	if (c->class_prior != 0 && c->class_prior != 1)
		return cg_seterr("cvae: class_prior = %d: not 0 or 1",
		                 c->class_prior);
	if (c->cond_every != 0 && c->cond_every != 1)
		return cg_seterr("cvae: cond_every = %d: not 0 or 1",
		                 c->cond_every);
	if (c->conv < 0 || c->conv > CG_CVAE_MAX_CONV)
		return cg_seterr("cvae: conv = %d: not in [0, %d]", c->conv,
		                 CG_CVAE_MAX_CONV);
	if (c->conv)
		return cg_cvae_conv_check(c);

	if (n > CG_CVAE_MAX_PARAMS || n > SIZE_MAX / sizeof(float))
		return cg_seterr("cvae: %llu parameters: more than %llu",
		                 (unsigned long long)n,
		                 (unsigned long long)CG_CVAE_MAX_PARAMS);
	return 0;
}

size_t
cg_cvae_nparams(const struct cg_cvae_config *c)
{
	if (cg_cvae_check_config(c) != 0)
		return 0;
	if (c->conv)
		return cg_cvae_conv_nparams(c);
	return cond_at(c, ENC, 1) +
	       (c->cond_every
	            ? 2 * (size_t)(c->layers - 1) * c->ncond * c->hidden
	            : 0);
}

int
cg_cvae_views(const struct cg_cvae_config *c, struct cg_view *v, int max)
{
	int n;

	if (cg_cvae_check_config(c) != 0)
		return -1;
	if (c->conv)
		return cg_cvae_conv_views(c, v, max);
	n = cg_cvae_nviews(c);
	if (max < n)
		return cg_seterr("cvae: %d views do not fit in %d", n, max);
	for (int i = 0; i < nlinear(c); i++) {
		struct linear ln = linear_at(c, i);
		char layer[32];

		if (i < c->layers)
			snprintf(layer, sizeof(layer), "enc.%d", i);
		else if (i == c->layers)
			snprintf(layer, sizeof(layer), "enc.mu");
		else if (i == c->layers + 1)
			snprintf(layer, sizeof(layer), "enc.logvar");
		else if (i < nlinear(c) - 1)
			snprintf(layer, sizeof(layer), "dec.%d",
			         i - c->layers - 2);
		else
			snprintf(layer, sizeof(layer), "dec.out");
		cg_view_linear(&v[2 * i], layer, ln.w, ln.b, ln.out, ln.in);
	}
	if (c->class_prior) {
		size_t at = prior_at(c), kz = (size_t)c->ncond * c->latent;

		cg_view_set(&v[2 * nlinear(c)], "prior.mu", at, c->ncond,
		            c->latent, 0);
		cg_view_set(&v[2 * nlinear(c) + 1], "prior.logvar", at + kz,
		            c->ncond, c->latent, 0);
	}
	for (int i = 0, side = ENC; c->cond_every && side <= DEC; side++)
		for (int l = 1; l < c->layers; l++, i++) {
			char name[32];

			snprintf(name, sizeof(name), "%s.%d.cond",
			         side == ENC ? "enc" : "dec", l);
			cg_view_set(&v[n - 2 * (c->layers - 1) + i], name,
			            cond_at(c, side, l), c->ncond, c->hidden,
			            0);
		}
	return n;
}

void
cg_cvae_init(const struct cg_cvae_config *c, float *params, struct cg_rng *r)
{
	if (cg_cvae_check_config(c) != 0)
		return;
	if (c->conv) {
		cg_cvae_conv_init(c, params, r);
		return;
	}
	for (int i = 0; i < nlinear(c); i++) {
		struct linear ln = linear_at(c, i);
		float bound = 1.0f / sqrtf((float)ln.in);
		size_t n = (size_t)ln.out * ln.in + ln.out; /* W then b */

		for (size_t j = 0; j < n; j++)
			params[ln.w + j] =
			    (2.0f * cg_rng_uniform(r) - 1.0f) * bound;
	}
	/* The prior and the condition's rows: zero (N(0, I), and the
	 * condition at the first layers only, to begin with). */
	memset(params + prior_at(c), 0,
	       (cg_cvae_nparams(c) - prior_at(c)) * sizeof(float));
}

/* ------------------------------------------------------------- workspace */

struct cg_cvae_ws {
	struct cg_cvae_config c;
	int max_batch;
	void *mem;
	/* Activations, each [max_batch, width]; the first B rows are used. */
	float *enc_in; /* [B, in_dim + ncond] */
	float *enc_h;  /* [layers][B, hidden], after ReLU */
	float *mu;     /* [B, latent] */
	float *logvar; /* [B, latent] */
	float *z;      /* [B, latent] */
	float *dec_in; /* [B, latent + ncond] */
	float *dec_h;  /* [layers][B, hidden], after ReLU */
	float *logits; /* [B, in_dim] */
	/* Gradients of activations. */
	float *dlogits; /* [B, in_dim] */
	float *dh0;     /* [B, hidden] */
	float *dh1;     /* [B, hidden] */
	float *ddec_in; /* [B, latent + ncond] */
	float *dz;      /* [B, latent] */
	float *dmu;     /* [B, latent] */
	float *dlogvar; /* [B, latent] */
	double *rec;    /* [B] */
	double *kl;     /* [B] */
	double *sq;     /* [B], DP-SGD: each example's squared norm */
	float *rs;      /* [B], DP-SGD: each example's clip factor */
	/* The matrices as stored (cg_cvae_ws_set_mats), else NULL. */
	struct cg_wmat *mats; /* [CG_CVAE_NMATS(layers)] */
	void *qscratch;       /* cg_qlinear_scratch(B, widest input) */
	struct cg_cvae_cnet *cnet; /* the convolutional nets' (conv > 0) */
	const float *x_in;         /* the last forward's images (conv) */
};

/* The workspace's buffers in struct order, in arena a (counting, then
 * assigning: core/arena.h). */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cvae_ws *w = ws;
	const struct cg_cvae_config *c = &w->c;
	size_t B = w->max_batch, D = c->in_dim, K = c->ncond, H = c->hidden;
	size_t Z = c->latent, L = c->layers;

	/* The convolutional nets keep their own activations. */
	if (c->conv)
		H = L = 0;
	w->enc_in = CG_ARENA_FLOATS(a, B, c->conv ? 0 : D + K);
	w->enc_h = CG_ARENA_FLOATS(a, B, L * H);
	w->mu = CG_ARENA_FLOATS(a, B, Z);
	w->logvar = CG_ARENA_FLOATS(a, B, Z);
	w->z = CG_ARENA_FLOATS(a, B, Z);
	w->dec_in = CG_ARENA_FLOATS(a, B, Z + K);
	w->dec_h = CG_ARENA_FLOATS(a, B, L * H);
	w->logits = CG_ARENA_FLOATS(a, B, D);
	w->dlogits = CG_ARENA_FLOATS(a, B, D);
	w->dh0 = CG_ARENA_FLOATS(a, B, H);
	w->dh1 = CG_ARENA_FLOATS(a, B, H);
	w->ddec_in = CG_ARENA_FLOATS(a, B, Z + K);
	w->dz = CG_ARENA_FLOATS(a, B, Z);
	w->dmu = CG_ARENA_FLOATS(a, B, Z);
	w->dlogvar = CG_ARENA_FLOATS(a, B, Z);
	w->rec = cg_arena_take(a, B, 1, sizeof(double));
	w->kl = cg_arena_take(a, B, 1, sizeof(double));
	w->sq = cg_arena_take(a, B, 1, sizeof(double));
	w->rs = CG_ARENA_FLOATS(a, B, 1);
}

/* A workspace's struct for batches of up to max_batch, its arena not
 * laid out; NULL with a message. */
static struct cg_cvae_ws *
ws_prep(const struct cg_cvae_config *c, int max_batch)
{
	struct cg_cvae_ws *w;

	if (cg_cvae_check_config(c) != 0)
		return NULL;
	if (max_batch < 1 || max_batch > CG_CVAE_MAX_BATCH) {
		cg_seterr("cvae: batch %d: not in [1, %d]", max_batch,
		          CG_CVAE_MAX_BATCH);
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("cvae: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	return w;
}

struct cg_cvae_ws *
cg_cvae_ws_new(const struct cg_cvae_config *c, int max_batch, int checkpoint)
{
	struct cg_cvae_ws *w = ws_prep(c, max_batch);
	struct cg_arena a;

	if (w == NULL)
		return NULL;
	if (cg_arena_make(&a, lay, w, "cvae", max_batch) != 0) {
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	if (c->conv &&
	    (w->cnet = cg_cvae_cnet_new(c, max_batch, checkpoint)) == NULL) {
		cg_cvae_ws_free(w);
		return NULL;
	}
	return w;
}

size_t
cg_cvae_ws_bytes(const struct cg_cvae_config *c, int max_batch, int checkpoint)
{
	struct cg_cvae_ws *w = ws_prep(c, max_batch);
	size_t n, k = 0;

	if (w == NULL)
		return 0;
	n = cg_arena_bytes(lay, w, sizeof(*w), "cvae", max_batch);
	free(w);
	if (n != 0 && c->conv &&
	    (k = cg_cvae_cnet_bytes(c, max_batch, checkpoint)) == 0)
		return 0;
	return n + k;
}

void
cg_cvae_ws_free(struct cg_cvae_ws *w)
{
	if (w == NULL)
		return;
	free(w->mem);
	free(w->mats);
	free(w->qscratch);
	cg_cvae_cnet_free(w->cnet);
	free(w);
}

int
cg_cvae_ws_set_mats(struct cg_cvae_ws *w, const struct cg_wmat *mats)
{
	const int n = CG_CVAE_NMATS(w->c.layers);
	struct cg_wmat *copy = NULL;
	void *scratch = NULL;
	int widest = 1;

	if (mats != NULL && w->c.conv)
		return cg_seterr("cvae: the convolutional nets multiply f32 "
		                 "weights only");
	if (mats != NULL) {
		for (int i = 0; i < n; i++) {
			struct linear ln = linear_at(&w->c, i);
			if (!cg_wmat_ok(mats[i].dtype, (uint64_t)ln.in))
				return cg_seterr("cvae: matrix %d: %s [*, %d] "
				                 "cannot be multiplied as "
				                 "stored",
				                 i, cg_dtype_name(mats[i].dtype),
				                 ln.in);
			widest = ln.in > widest ? ln.in : widest;
		}
		if ((copy = malloc((size_t)n * sizeof(*copy))) == NULL ||
		    (scratch = cg_alloc(cg_qlinear_scratch(w->max_batch,
		                                           widest))) == NULL) {
			free(copy);
			return cg_seterr("cvae: out of memory");
		}
		memcpy(copy, mats, (size_t)n * sizeof(*copy));
	}
	free(w->mats);
	free(w->qscratch);
	w->mats = copy;
	w->qscratch = scratch;
	return 0;
}

/* --------------------------------------------------------------- passes */

static int
check_call(const struct cg_cvae_config *c, const struct cg_cvae_ws *w,
           const int *cond, int B)
{
	if (c->in_dim != w->c.in_dim || c->ncond != w->c.ncond ||
	    c->hidden != w->c.hidden || c->layers != w->c.layers ||
	    c->latent != w->c.latent || c->class_prior != w->c.class_prior ||
	    c->cond_every != w->c.cond_every || c->conv != w->c.conv ||
	    (c->conv && (c->height != w->c.height || c->width != w->c.width ||
	                 c->channels != w->c.channels)))
		return cg_seterr("cvae: workspace made for another config");
	if (B < 1 || B > w->max_batch)
		return cg_seterr("cvae: batch %d: not in [1, %d]", B,
		                 w->max_batch);
	for (int b = 0; b < B; b++)
		if (cond[b] < 0 || cond[b] >= c->ncond)
			return cg_seterr("cvae: condition %d (example %d): "
			                 "not in [0, %d)",
			                 cond[b], b, c->ncond);
	return 0;
}

/* Linear layer idx (then a ReLU with relu) on the weights in params, or
 * on the matrix as stored when w has them. */
static void
linear(const struct cg_cvae_config *c, const struct cg_cvae_ws *w,
       const float *params, int idx, float *out, const float *inp, int B,
       int relu)
{
	struct linear ln = linear_at(c, idx);

	if (w->mats == NULL) {
		if (relu)
			cg_linear_relu_forward(out, inp, params + ln.w,
			                       params + ln.b, B, ln.in, ln.out);
		else
			cg_linear_forward(out, inp, params + ln.w,
			                  params + ln.b, B, ln.in, ln.out);
		return;
	}
	cg_qlinear_forward(out, inp, &w->mats[idx], params + ln.b, B, ln.in,
	                   ln.out, w->qscratch);
	if (relu)
		for (size_t i = 0; i < (size_t)B * ln.out; i++)
			out[i] = out[i] > 0 ? out[i] : 0;
}

/*
 * out [B, H] += the row of table [K, H] of each example's condition
 * cond [B], then ReLU: a hidden layer after the first with cond_every.
 */
static void
cond_relu_forward(float *out, const float *table, const int *cond, int B,
                  int H)
{
	for (int b = 0; b < B; b++) {
		float *o = out + (size_t)b * H;
		const float *e = table + (size_t)cond[b] * H;

		for (int j = 0; j < H; j++) {
			float v = o[j] + e[j];
			o[j] = v > 0 ? v : 0;
		}
	}
}

/* Layers of Linear+ReLU of side (ENC or DEC), from inp [B, in] to h
 * [layers][B, hidden]; with cond_every, the condition's row of cond
 * [B] added to each layer after the first. */
static void
mlp_forward(const struct cg_cvae_config *c, const struct cg_cvae_ws *w,
            const float *params, int side, float *h, const float *inp,
            const int *cond, int B, size_t stride)
{
	const int first = side == ENC ? 0 : c->layers + 2;

	for (int l = 0; l < c->layers; l++) {
		float *out = h + l * stride;
		const int emb = c->cond_every && l > 0;

		linear(c, w, params, first + l, out,
		       l == 0 ? inp : out - stride, B, !emb);
		if (emb)
			cond_relu_forward(out, params + cond_at(c, side, l),
			                  cond, B, c->hidden);
	}
}

/*
 * Backward through the Linear+ReLU stack of mlp_forward.  dh [B, hidden]
 * holds d(loss)/d(last h) on entry and is clobbered; tmp [B, hidden] is
 * scratch; dinp [B, in] = d(loss)/d(inp) (written), or NULL.  With
 * cond_every, each table's row of an example's condition gets the
 * layer's d(loss)/d(pre-activation) of that example, in batch order.
 * grad NULL: no weight's gradient; sq [B] (or NULL) += each example's
 * squared norm of its own gradient of these layers (DP-SGD's ghost
 * norm, cg_linear_ghost_sq; a condition's row is one example's tmp row).
 */
static void
mlp_backward(const struct cg_cvae_config *c, const float *params, float *grad,
             int side, const float *h, const float *inp, const int *cond,
             float *dh, float *tmp, float *dinp, int B, size_t stride,
             double *sq)
{
	const int first = side == ENC ? 0 : c->layers + 2, H = c->hidden;

	for (int l = c->layers - 1; l >= 0; l--) {
		struct linear ln = linear_at(c, first + l);
		const float *out = h + l * stride;
		const float *x = l > 0 ? out - stride : inp;

		/* tmp: d(loss)/d(pre-activation) [B, hidden] */
		cg_linear_relu_backward(l > 0 ? dh : dinp,
		                        grad ? grad + ln.w : NULL,
		                        grad ? grad + ln.b : NULL, tmp, dh, out,
		                        x, params + ln.w, B, ln.in, ln.out);
		if (sq)
			cg_linear_ghost_sq(sq, tmp, x, B, ln.in, ln.out, 1);
		if (!c->cond_every || l == 0)
			continue;
		if (sq)
			cg_linear_ghost_sq(sq, tmp, NULL, B, 0, H, 1);
		if (grad == NULL)
			continue;
		float *g = grad + cond_at(c, side, l);
		for (int b = 0; b < B; b++)
			for (int j = 0; j < H; j++)
				g[(size_t)cond[b] * H + j] +=
				    tmp[(size_t)b * H + j];
	}
}

/*
 * KL(N(mu, exp(logvar)) || N(pm[cond], exp(plv[cond]))) per example, summed
 * over the latent in double: kl [B], mu [B, Z], logvar [B, Z], pm [K, Z],
 * plv [K, Z], cond [B].
 */
static void
prior_kl_forward(double *kl, const float *mu, const float *logvar,
                 const float *pm, const float *plv, const int *cond, int B,
                 int Z)
{
	for (int b = 0; b < B; b++) {
		const float *m = mu + (size_t)b * Z,
		            *lv = logvar + (size_t)b * Z;
		const float *qm = pm + (size_t)cond[b] * Z;
		const float *qlv = plv + (size_t)cond[b] * Z;
		double s = 0;

		for (int i = 0; i < Z; i++) {
			double d = (double)m[i] - qm[i];

			s += qlv[i] - lv[i] +
			     (exp(lv[i]) + d * d) * exp(-(double)qlv[i]) - 1.0;
		}
		kl[b] = 0.5 * s;
	}
}

/*
 * Backward of prior_kl_forward, times scale: dmu, dlogvar [B, Z] and the
 * prior's dpm, dplv [K, Z] += (each class's rows summed over its
 * examples, in batch order).  dpm NULL: not the prior's; sq [B] (or
 * NULL) += each example's squared norm of its own gradient of the prior.
 */
static void
prior_kl_backward(float *dmu, float *dlogvar, float *dpm, float *dplv,
                  const float *mu, const float *logvar, const float *pm,
                  const float *plv, const int *cond, float scale, int B, int Z,
                  double *sq)
{
	for (int b = 0; b < B; b++) {
		const size_t r = (size_t)b * Z, k = (size_t)cond[b] * Z;
		double s2 = 0;

		for (int i = 0; i < Z; i++) {
			float e = expf(-plv[k + i]), d = mu[r + i] - pm[k + i];
			float v = expf(logvar[r + i] - plv[k + i]);
			float gm = scale * d * e;
			float gv = scale * 0.5f * (1 - v - d * d * e);

			dmu[r + i] += gm;
			dlogvar[r + i] += scale * 0.5f * (v - 1);
			s2 += (double)gm * gm + (double)gv * gv;
			if (dpm == NULL)
				continue;
			dpm[k + i] -= gm;
			dplv[k + i] += gv;
		}
		if (sq)
			sq[b] += s2;
	}
}

/* What a distilled pass adds: the teacher's logits at tau, tlogits [B,
 * in_dim], alpha and tau; *teacher receives the teacher term's mean. */
struct distill {
	const float *tlogits;
	double alpha, tau;
	double *teacher;
};

/* Encoder, sample, decoder: the activations of x, cond, eps [B] into w.
 * The call is checked. */
static void
forward(const struct cg_cvae_config *c, const float *params,
        struct cg_cvae_ws *w, const float *x, const int *cond, const float *eps,
        int B)
{
	const int L = c->layers, D = c->in_dim, K = c->ncond, Z = c->latent;
	const size_t hstride = (size_t)w->max_batch * c->hidden;
	const float *htop = w->enc_h + (L - 1) * hstride;
	const float *dtop = w->dec_h + (L - 1) * hstride;

	if (c->conv) {
		w->x_in = x;
		cg_cvae_conv_encode(c, params, w->cnet, x, cond, B, w->mu,
		                    w->logvar);
		cg_reparam_forward(w->z, w->mu, w->logvar, eps, (size_t)B * Z);
		cg_cvae_conv_decode(c, params, w->cnet, w->z, cond, B,
		                    w->logits);
		return;
	}
	cg_concat_onehot_forward(w->enc_in, x, cond, B, D, K);
	mlp_forward(c, w, params, ENC, w->enc_h, w->enc_in, cond, B, hstride);
	linear(c, w, params, L, w->mu, htop, B, 0);
	linear(c, w, params, L + 1, w->logvar, htop, B, 0);
	cg_reparam_forward(w->z, w->mu, w->logvar, eps, (size_t)B * Z);
	cg_concat_onehot_forward(w->dec_in, w->z, cond, B, Z, K);
	mlp_forward(c, w, params, DEC, w->dec_h, w->dec_in, cond, B, hstride);
	linear(c, w, params, 2 * L + 2, w->logits, dtop, B, 0);
}

/*
 * From w->dlogits (the reconstruction's gradient, kept) down to the
 * encoder's input, the KL's gradient added at the sample times scale,
 * or times rs [b] for example b where rs != NULL.  grad [nparams] +=
 * every weight's gradient, or with grad NULL none; sq [B] (or NULL) +=
 * each example's squared norm of its own gradient (DP-SGD's ghost norm:
 * the layers' inputs and output gradients give it, cg_linear_ghost_sq).
 */
static void
backward(const struct cg_cvae_config *c, const float *params,
         struct cg_cvae_ws *w, const int *cond, const float *eps, int B,
         float *grad, float scale, const float *rs, double *sq)
{
	const int L = c->layers, K = c->ncond, Z = c->latent;
	const size_t hstride = (size_t)w->max_batch * c->hidden;
	const size_t nh = (size_t)B * c->hidden, nz = (size_t)B * Z;
	const struct linear mu = linear_at(c, L), lv = linear_at(c, L + 1);
	const struct linear out = linear_at(c, 2 * L + 2);
	const float *htop = w->enc_h + (L - 1) * hstride;
	const float *dtop = w->dec_h + (L - 1) * hstride;
#define G(off) (grad ? grad + (off) : NULL)

	/* Decoder backward, down to d(loss)/d(z). */
	memset(w->dz, 0, nz * sizeof(float));
	if (c->conv)
		cg_cvae_conv_decode_backward(c, params, w->cnet, cond, B,
		                             w->dlogits, grad, w->dz);
	else {
		memset(w->dh0, 0, nh * sizeof(float));
		if (sq)
			cg_linear_ghost_sq(sq, w->dlogits, dtop, B, out.in,
			                   out.out, 1);
		cg_linear_backward(w->dh0, G(out.w), G(out.b), w->dlogits,
		                   dtop, params + out.w, B, out.in, out.out);
		mlp_backward(c, params, grad, DEC, w->dec_h, w->dec_in, cond,
		             w->dh0, w->dh1, w->ddec_in, B, hstride, sq);
		cg_concat_onehot_backward(w->dz, w->ddec_in, B, Z, K);
	}

	/* Sampling and KL, then the heads and the encoder. */
	memset(w->dmu, 0, nz * sizeof(float));
	memset(w->dlogvar, 0, nz * sizeof(float));
	cg_reparam_backward(w->dmu, w->dlogvar, w->dz, w->logvar, eps, nz);
	for (int b = 0, n = rs ? B : 1; b < n; b++) {
		/* one call for the batch, or one for each example */
		const size_t r = rs ? (size_t)b * Z : 0;
		const int nb = rs ? 1 : B;
		const float sc = rs ? rs[b] : scale;

		if (c->class_prior) {
			size_t pm = prior_at(c), plv = pm + (size_t)K * Z;

			prior_kl_backward(w->dmu + r, w->dlogvar + r, G(pm),
			                  G(plv), w->mu + r, w->logvar + r,
			                  params + pm, params + plv, cond + b,
			                  sc, nb, Z, sq ? sq + b : NULL);
		} else
			cg_gauss_kl_backward(w->dmu + r, w->dlogvar + r,
			                     w->mu + r, w->logvar + r, sc, nb,
			                     Z);
	}
	if (c->conv) {
		cg_cvae_conv_encode_backward(c, params, w->cnet, w->x_in, cond,
		                             B, w->dmu, w->dlogvar, grad);
		return;
	}
	memset(w->dh0, 0, nh * sizeof(float));
	if (sq) {
		cg_linear_ghost_sq(sq, w->dmu, htop, B, mu.in, mu.out, 1);
		cg_linear_ghost_sq(sq, w->dlogvar, htop, B, lv.in, lv.out, 1);
	}
	cg_linear_backward(w->dh0, G(mu.w), G(mu.b), w->dmu, htop,
	                   params + mu.w, B, mu.in, mu.out);
	cg_linear_backward(w->dh0, G(lv.w), G(lv.b), w->dlogvar, htop,
	                   params + lv.w, B, lv.in, lv.out);
	mlp_backward(c, params, grad, ENC, w->enc_h, w->enc_in, cond, w->dh0,
	             w->dh1, NULL, B, hstride, sq);
#undef G
}

/* The passes of cg_cvae_forward_backward, distilled when d != NULL (see
 * cg_cvae_distill_forward_backward). */
static int
passes(const struct cg_cvae_config *c, const float *params,
       struct cg_cvae_ws *w, const float *x, const int *cond, const float *eps,
       int B, float *grad, double *loss, double *rec, double *kl,
       const struct distill *d)
{
	int K = c->ncond, Z = c->latent, D = c->in_dim;
	double srec = 0, skl = 0;

	if (check_call(c, w, cond, B) != 0)
		return -1;
	if (grad != NULL && w->mats != NULL)
		return cg_seterr("cvae: no gradient through matrices as "
		                 "stored");
	if (d != NULL && c->conv)
		return cg_seterr("cvae: no distillation for the convolutional "
		                 "nets");
	forward(c, params, w, x, cond, eps, B);

	/* Loss; with a gradient wanted, d(loss)/d(logits) in the same pass,
	 * times the loss scale (nn/gemm.h), as every gradient term is. */
	float scale = cg_loss_scale() / B;
	/* Distilled, the data's reconstruction term is weighed by 1 -
	 * alpha ((1 - 0) * scale is scale: alpha 0 is plain training to the
	 * bit), and the teacher's term by alpha. */
	const double alpha = d ? d->alpha : 0;
	const float af = (float)alpha;
	if (grad != NULL) {
		memset(w->dlogits, 0, (size_t)B * D * sizeof(float));
		if (alpha < 1)
			cg_bce_logits_forward_backward(
			    w->rec, w->dlogits, w->logits, x,
			    (1.0f - af) * scale, B, D);
		else
			cg_bce_logits_forward(w->rec, w->logits, x, B, D);
	} else
		cg_bce_logits_forward(w->rec, w->logits, x, B, D);
	if (c->class_prior)
		prior_kl_forward(w->kl, w->mu, w->logvar, params + prior_at(c),
		                 params + prior_at(c) + (size_t)K * Z, cond, B,
		                 Z);
	else
		cg_gauss_kl_forward(w->kl, w->mu, w->logvar, B, Z);
	for (int b = 0; b < B; b++) {
		srec += w->rec[b];
		skl += w->kl[b];
	}
	if (d != NULL) {
		/* w->rec is spent: it takes the teacher term per example. */
		double st = 0;
		cg_bern_kl_forward_backward(
		    w->rec, grad && alpha != 0 ? w->dlogits : NULL, w->logits,
		    d->tlogits, (float)d->tau, af * scale, B, D);
		for (int b = 0; b < B; b++)
			st += w->rec[b];
		st *= d->tau * d->tau / B;
		*d->teacher = st;
		if (loss != NULL)
			*loss = ((1.0 - alpha) * srec + skl) / B + alpha * st;
	} else if (loss != NULL)
		*loss = (srec + skl) / B;
	if (rec != NULL)
		*rec = srec / B;
	if (kl != NULL)
		*kl = skl / B;
	if (grad == NULL)
		return 0;
	backward(c, params, w, cond, eps, B, grad, scale, NULL, NULL);
	return 0;
}

int
cg_cvae_dp_forward_backward(const struct cg_cvae_config *c, const float *params,
                            struct cg_cvae_ws *w, const float *x,
                            const int *cond, const float *eps, int B,
                            double clip, float *grad, double *loss, double *rec,
                            double *kl, double *norms)
{
	const int K = c->ncond, Z = c->latent, D = c->in_dim;
	double srec = 0, skl = 0;

	if (check_call(c, w, cond, B) != 0)
		return -1;
	if (w->mats != NULL)
		return cg_seterr("cvae: no gradient through matrices as "
		                 "stored");
	if (c->conv)
		return cg_seterr("cvae: no DP-SGD for the convolutional nets");
	if (!(clip > 0 && clip <= 1e30))
		return cg_seterr("cvae: clip %g: not in (0, 1e30]", clip);
	forward(c, params, w, x, cond, eps, B);
	/* Each example's own loss (scale 1): its gradient is g_b. */
	memset(w->dlogits, 0, (size_t)B * D * sizeof(float));
	cg_bce_logits_forward_backward(w->rec, w->dlogits, w->logits, x, 1.0f,
	                               B, D);
	if (c->class_prior)
		prior_kl_forward(w->kl, w->mu, w->logvar, params + prior_at(c),
		                 params + prior_at(c) + (size_t)K * Z, cond, B,
		                 Z);
	else
		cg_gauss_kl_forward(w->kl, w->mu, w->logvar, B, Z);
	for (int b = 0; b < B; b++) {
		srec += w->rec[b];
		skl += w->kl[b];
		w->sq[b] = 0;
		w->rs[b] = 1.0f;
	}
	/* The ghost pass: |g_b|^2 with no weight's gradient made. */
	backward(c, params, w, cond, eps, B, NULL, 1.0f, w->rs, w->sq);
	for (int b = 0; b < B; b++) {
		const double n = sqrt(w->sq[b]);

		w->rs[b] = n > clip ? (float)(clip / n) : 1.0f;
		if (norms)
			norms[b] = n;
	}
	/* Backward is linear in the loss's gradient: scaled by rs [b] at
	 * each example's start, it makes sum_b rs [b] g_b. */
	cg_scale_rows(w->dlogits, w->rs, B, (size_t)D);
	backward(c, params, w, cond, eps, B, grad, 1.0f, w->rs, NULL);
	if (loss)
		*loss = (srec + skl) / B;
	if (rec)
		*rec = srec / B;
	if (kl)
		*kl = skl / B;
	return 0;
}

int
cg_cvae_forward_backward(const struct cg_cvae_config *c, const float *params,
                         struct cg_cvae_ws *w, const float *x, const int *cond,
                         const float *eps, int B, float *grad, double *loss,
                         double *rec, double *kl)
{
	return passes(c, params, w, x, cond, eps, B, grad, loss, rec, kl, NULL);
}

int
cg_cvae_distill_forward_backward(const struct cg_cvae_config *c,
                                 const float *params, struct cg_cvae_ws *w,
                                 const float *x, const int *cond,
                                 const float *eps, const float *tlogits,
                                 double alpha, double tau, int B, float *grad,
                                 double *loss, double *rec, double *kl,
                                 double *teacher)
{
	double t;
	struct distill d = {tlogits, alpha, tau, &t};

	if (!(tau > 0) || !(alpha >= 0 && alpha <= 1))
		return cg_seterr(
		    "cvae: temperature %g or teacher weight %g out "
		    "of range",
		    tau, alpha);
	if (passes(c, params, w, x, cond, eps, B, grad, loss, rec, kl, &d) != 0)
		return -1;
	if (teacher != NULL)
		*teacher = t;
	return 0;
}

const float *
cg_cvae_logits(const struct cg_cvae_ws *w)
{
	return w->logits;
}

int
cg_cvae_decode(const struct cg_cvae_config *c, const float *params,
               struct cg_cvae_ws *w, const float *z, const int *cond, int B,
               float *probs)
{
	int L = c->layers;
	size_t hstride;

	if (check_call(c, w, cond, B) != 0)
		return -1;
	if (c->conv) {
		cg_cvae_conv_decode(c, params, w->cnet, z, cond, B, probs);
		cg_sigmoid_forward(probs, probs, (size_t)B * c->in_dim);
		return 0;
	}
	hstride = (size_t)w->max_batch * c->hidden;
	cg_concat_onehot_forward(w->dec_in, z, cond, B, c->latent, c->ncond);
	mlp_forward(c, w, params, DEC, w->dec_h, w->dec_in, cond, B, hstride);
	linear(c, w, params, 2 * L + 2, probs, w->dec_h + (L - 1) * hstride, B,
	       0);
	cg_sigmoid_forward(probs, probs, (size_t)B * c->in_dim);
	return 0;
}

int
cg_cvae_prior_sample(const struct cg_cvae_config *c, const float *params,
                     float *z, const float *eps, const int *cond, int B)
{
	const size_t Z = c->latent, KZ = (size_t)c->ncond * c->latent;

	for (int b = 0; b < B; b++)
		if (cond[b] < 0 || cond[b] >= c->ncond)
			return cg_seterr("cvae: condition %d (example %d): "
			                 "not in [0, %d)",
			                 cond[b], b, c->ncond);
	if (!c->class_prior) {
		if (z != eps)
			memcpy(z, eps, (size_t)B * Z * sizeof(float));
		return 0;
	}
	const float *pm = params + prior_at(c), *plv = pm + KZ;
	for (int b = 0; b < B; b++) {
		const size_t r = (size_t)b * Z, k = (size_t)cond[b] * Z;

		for (size_t i = 0; i < Z; i++)
			z[r + i] =
			    pm[k + i] + expf(0.5f * plv[k + i]) * eps[r + i];
	}
	return 0;
}

/* ------------------------------------------------- inputs of the layers */

/* sq [W] += the sum over the B rows of x [B, W] of x squared. */
static void
add_sq(double *sq, const float *x, int B, size_t W)
{
	for (size_t r = 0; r < (size_t)B; r++)
		for (size_t j = 0; j < W; j++)
			sq[j] += (double)x[r * W + j] * x[r * W + j];
}

int
cg_cvae_input_sq(const struct cg_cvae_config *c, const float *params,
                 struct cg_cvae_ws *w, const float *x, const int *cond,
                 const float *eps, int B, double *sq)
{
	const int L = c->layers, D = c->in_dim, K = c->ncond, Z = c->latent;
	const size_t H = c->hidden;
	size_t hstride, at = 0;
	struct linear mu, lv;

	if (check_call(c, w, cond, B) != 0)
		return -1;
	if (c->conv)
		return cg_seterr("cvae: no input sums (Wanda) for the "
		                 "convolutional nets");
	hstride = (size_t)w->max_batch * c->hidden;
	mu = linear_at(c, L);
	lv = linear_at(c, L + 1);
	const float *htop = w->enc_h + (L - 1) * hstride;

	cg_concat_onehot_forward(w->enc_in, x, cond, B, D, K);
	mlp_forward(c, w, params, ENC, w->enc_h, w->enc_in, cond, B, hstride);
	cg_linear_forward(w->mu, htop, params + mu.w, params + mu.b, B, mu.in,
	                  mu.out);
	cg_linear_forward(w->logvar, htop, params + lv.w, params + lv.b, B,
	                  lv.in, lv.out);
	cg_reparam_forward(w->z, w->mu, w->logvar, eps, (size_t)B * Z);
	cg_concat_onehot_forward(w->dec_in, w->z, cond, B, Z, K);
	mlp_forward(c, w, params, DEC, w->dec_h, w->dec_in, cond, B, hstride);

	/* The layers in buffer order, each fed by the one before. */
	add_sq(sq, w->enc_in, B, (size_t)D + K);
	at = (size_t)D + K;
	for (int l = 1; l < L; l++, at += H)
		add_sq(sq + at, w->enc_h + (l - 1) * hstride, B, H);
	add_sq(sq + at, htop, B, H); /* enc.mu */
	at += H;
	add_sq(sq + at, htop, B, H); /* enc.logvar */
	at += H;
	add_sq(sq + at, w->dec_in, B, (size_t)Z + K);
	at += (size_t)Z + K;
	for (int l = 1; l < L; l++, at += H)
		add_sq(sq + at, w->dec_h + (l - 1) * hstride, B, H);
	add_sq(sq + at, w->dec_h + (L - 1) * hstride, B, H); /* dec.out */
	return 0;
}

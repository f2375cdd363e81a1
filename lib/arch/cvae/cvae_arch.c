/*
 * arch/cvae/cvae_arch.c - the cvae architecture as the model layer sees it.
 *
 * Binds lib/arch/cvae/cvae.c's kernels to struct cg_arch: config from JSON, the
 * shard's bytes turned into Bernoulli targets (pixel / 255), and the
 * reparameterisation noise drawn per example from (noise seed, example
 * index), so that a batch split over workers sees the same noise as the
 * whole batch on one machine.  A teacher (cvae_distill) decodes its
 * posterior mean, without noise, so distillation keeps that property.
 * The convolutional nets (--conv) take their image's shape from the
 * manifest; a batch runs in chunks where the memory planner asks, and
 * theirs checkpointed where it asks that (cvae_conv.h; the MLP has
 * nothing to recompute, and refuses).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/common.h"
#include "arch/cvae/cvae.h"
#include "model/model.h"

struct cvae_ws {
	struct cg_cvae_config c;
	struct cg_cvae_ws *ws;
	struct cg_wmat *mats; /* an inference model's matrices, or NULL */
	int cap;
	int ckpt; /* whether ws checkpoints */
	float *x, *eps;
	int *cond;
	float *tl; /* a teacher's: its logits / tau [cap, in_dim], or NULL */
};

extern const struct cg_arch cg_arch_cvae;

/*
 * m's config: its keys, and for the convolutional nets the image's shape
 * from the manifest, then checked whole.
 */
static int
get_config(const struct cg_model *m, struct cg_cvae_config *c)
{
	if (cg_arch_read_config(&cg_arch_cvae, m->config, c) != 0)
		return -1;
	if (c->conv == 0)
		return 0;
	if (cg_arch_image_hwc(m, c->in_dim, &c->height, &c->width,
	                      &c->channels) != 0)
		return -1;
	return cg_cvae_check_config(c);
}

static int
cvae_layout(struct cg_model *m)
{
	struct cg_cvae_config c;
	int nv;

	if (get_config(m, &c) != 0)
		return -1;
	m->nparams = cg_cvae_nparams(&c);
	nv = cg_cvae_nviews(&c);
	if ((m->views = calloc((size_t)nv, sizeof(*m->views))) == NULL)
		return cg_seterr("out of memory");
	if ((m->nviews = cg_cvae_views(&c, m->views, nv)) < 0)
		return -1;
	return 0;
}

static void
cvae_init(struct cg_model *m, struct cg_rng *r)
{
	struct cg_cvae_config c;

	if (get_config(m, &c) == 0)
		cg_cvae_init(&c, m->params, r);
}

static void
cvae_free_ws(struct cg_model *m)
{
	struct cvae_ws *w = m->ws;

	if (w == NULL)
		return;
	cg_cvae_ws_free(w->ws);
	free(w->mats);
	free(w->x);
	free(w->eps);
	free(w->cond);
	free(w->tl);
	free(w);
	m->ws = NULL;
	m->ws_batch = 0;
}

/* The Linear layers' weights (even views before the prior and the
 * condition's rows: each Linear's w, then its b) stay as stored in the
 * dtypes the products take as stored (f16, q8_0, q4_0); the tables after
 * them are read, not multiplied, and are decoded. */
static int
cvae_keeps(const struct cg_model *m, int i, enum cg_dtype dt)
{
	struct cg_cvae_config c;

	if (get_config(m, &c) != 0 || c.conv)
		return 0;
	return i % 2 == 0 && i < 2 * CG_CVAE_NMATS(c.layers) &&
	       cg_qlinear_keeps(dt);
}

/*
 * The matrices of inference model m (m->stored) in CG_CVAE_NMATS order
 * into *out (the caller frees it), or NULL for a model of f32 params.
 * Returns 0 or -1 with a message.
 */
static int
model_mats(const struct cg_model *m, const struct cg_cvae_config *c,
           struct cg_wmat **out)
{
	int n = CG_CVAE_NMATS(c->layers);

	*out = NULL;
	if (m->stored == NULL)
		return 0;
	if ((*out = calloc((size_t)n, sizeof(**out))) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < n; i++)
		(*out)[i] = m->stored[2 * i];
	return 0;
}

static struct cvae_ws *
get_ws(struct cg_model *m, int B)
{
	struct cvae_ws *w = m->ws;
	const int ckpt = m->checkpoint != 0;

	if (w && w->cap >= B && w->ckpt == ckpt)
		return w;
	cvae_free_ws(m);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	m->ws = w;
	if (get_config(m, &w->c) != 0 ||
	    (w->ws = cg_cvae_ws_new(&w->c, B, ckpt)) == NULL ||
	    model_mats(m, &w->c, &w->mats) != 0 ||
	    cg_cvae_ws_set_mats(w->ws, w->mats) != 0 ||
	    (w->x = cg_alloc((size_t)B * w->c.in_dim * sizeof(float))) ==
	        NULL ||
	    (w->eps = cg_alloc((size_t)B * w->c.latent * sizeof(float))) ==
	        NULL ||
	    (w->cond = cg_alloc((size_t)B * sizeof(int))) == NULL) {
		cvae_free_ws(m);
		return NULL;
	}
	w->cap = m->ws_batch = B;
	w->ckpt = ckpt;
	return w;
}

/* Examples ex[0..B) of s into w: images, conditions, and the noise
 * from (noise_seed, each example's index). */
static void
fill_batch(struct cvae_ws *w, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed)
{
	const int D = w->c.in_dim, L = w->c.latent;

	for (int b = 0; b < B; b++) {
		uint64_t len;
		const uint8_t *px = cg_shard_example(s, ex[b], &len);
		struct cg_rng r;

		for (int i = 0; i < D; i++)
			w->x[(size_t)b * D + i] = px[i] * (1.0f / 255.0f);
		w->cond[b] = (int)s->cond[ex[b]];
		cg_rng_derive(&r, noise_seed, s->index[ex[b]], 0);
		for (int i = 0; i < L; i++)
			w->eps[(size_t)b * L + i] = cg_rng_normal(&r);
	}
}

/* A batch, or a chunk of one, whole (cvae_batch chunks). */
static int
cvae_run(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
	 int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cvae_ws *w = get_ws(m, B);
	double loss, rec, kl;

	if (w == NULL)
		return -1;
	fill_batch(w, s, ex, B, noise_seed);
	if (cg_cvae_forward_backward(&w->c, m->params, w->ws, w->x, w->cond,
				     w->eps, B, grad, &loss, &rec, &kl) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->part[0] = rec;
	out->part[1] = kl;
	out->n = (uint64_t)B;
	return 0;
}

static int
cvae_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
	   int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	return cg_arch_chunked(m, cvae_run, s, ex, B, noise_seed, grad, out);
}

/* Its workspace for batches of B in chunks of chunk: the kernels'
 * (checkpointed or not), a chunk's inputs, and the chunks' gradient. */
static size_t
cvae_ws_bytes(struct cg_model *m, int B, int chunk, int checkpoint)
{
	struct cg_cvae_config c;
	const int cap = cg_arch_chunk_of(B, chunk);
	size_t n;

	if (get_config(m, &c) != 0 ||
	    (n = cg_cvae_ws_bytes(&c, cap, checkpoint)) == 0)
		return 0;
	return n + sizeof(struct cvae_ws) +
	       (size_t)cap * (((size_t)c.in_dim + c.latent) * sizeof(float) +
	                      sizeof(int)) +
	       cg_arch_chunk_bytes(m, B, cap);
}

/* The convolutional nets checkpoint; the MLP's activations are a few
 * rows of hidden beside its weights, nothing worth recomputing. */
static int
cvae_can_checkpoint(const struct cg_model *m)
{
	struct cg_cvae_config c;

	if (get_config(m, &c) != 0)
		return 0;
	if (c.conv == 0) {
		cg_seterr("cvae: the MLP has no activation checkpointing "
		          "(the convolutional nets, --conv, have)");
		return 0;
	}
	return 1;
}

static int
cvae_dp_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
              int B, uint64_t noise_seed, double clip, float *grad,
              struct cg_metrics *out)
{
	struct cvae_ws *w = get_ws(m, B);
	double loss, rec, kl;

	if (w == NULL)
		return -1;
	fill_batch(w, s, ex, B, noise_seed);
	if (cg_cvae_dp_forward_backward(&w->c, m->params, w->ws, w->x, w->cond,
	                                w->eps, B, clip, grad, &loss, &rec, &kl,
	                                NULL) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->part[0] = rec;
	out->part[1] = kl;
	out->n = (uint64_t)B;
	return 0;
}

/* ------------------------------------------------------- distillation */

/*
 * The teacher's reconstruction of each image as soft targets: the
 * teacher encodes the image and decodes its posterior mean (no noise, so
 * the targets are a function of the image and its condition alone), and
 * its pixel logits / tau are Bernoulli targets for the student's
 * decoder, whose own sample z is drawn as in training.  The latent
 * posteriors are not matched: two models' latent spaces agree only up to
 * an arbitrary rotation, so their KL would say nothing.
 */
static int
cvae_check_teacher(const struct cg_model *m, const struct cg_model *t)
{
	struct cg_cvae_config c, ct;

	if (get_config(m, &c) != 0 || get_config(t, &ct) != 0)
		return -1;
	if (c.conv || ct.conv)
		return cg_seterr("no distillation for the convolutional nets "
		                 "(--conv)");
	if (c.in_dim != ct.in_dim)
		return cg_seterr("the teacher's images have %d values, the "
		                 "model's %d",
		                 ct.in_dim, c.in_dim);
	if (c.ncond != ct.ncond)
		return cg_seterr("the teacher has %d conditions, the model %d",
		                 ct.ncond, c.ncond);
	return 0;
}

static int
cvae_distill(struct cg_model *m, const struct cg_distill *d,
             const struct cg_shard *s, const uint64_t *ex, int B,
             uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cvae_ws *w = get_ws(m, B), *tw;
	double loss, rec, kl, teach;
	const float tau = (float)d->tau;

	if (w == NULL || (tw = get_ws(d->teacher, B)) == NULL)
		return -1;
	const size_t N = (size_t)B * w->c.in_dim;
	if (tw->tl == NULL &&
	    (tw->tl = cg_alloc((size_t)tw->cap * tw->c.in_dim *
	                       sizeof(float))) == NULL)
		return -1;
	fill_batch(w, s, ex, B, noise_seed);
	memset(tw->eps, 0, (size_t)B * tw->c.latent * sizeof(float));
	if (cg_cvae_forward_backward(&tw->c, d->teacher->params, tw->ws, w->x,
	                             w->cond, tw->eps, B, NULL, NULL, NULL,
	                             NULL) != 0)
		return -1;
	const float *tl = cg_cvae_logits(tw->ws);
	for (size_t i = 0; i < N; i++)
		tw->tl[i] = tl[i] / tau;
	if (cg_cvae_distill_forward_backward(
	        &w->c, m->params, w->ws, w->x, w->cond, w->eps, tw->tl,
	        d->alpha, d->tau, B, grad, &loss, &rec, &kl, &teach) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->part[0] = rec;
	out->part[1] = kl;
	out->data = rec + kl;
	out->teacher = teach;
	out->n = (uint64_t)B;
	return 0;
}

/* Wanda's sums (struct cg_arch's input_sq): a row per example. */
static int
cvae_input_sq(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
              int B, uint64_t noise_seed, double *sq, uint64_t *rows)
{
	struct cvae_ws *w = get_ws(m, B);

	if (w == NULL)
		return -1;
	fill_batch(w, s, ex, B, noise_seed);
	if (cg_cvae_input_sq(&w->c, m->params, w->ws, w->x, w->cond, w->eps,
	                     B, sq) != 0)
		return -1;
	if (rows)
		*rows += (uint64_t)B;
	return 0;
}

static int
cvae_sample_image(struct cg_model *m, const int *cond, int n,
		  double temperature, struct cg_rng *r, float *out)
{
	struct cvae_ws *w = get_ws(m, n);

	if (w == NULL)
		return -1;
	for (size_t i = 0; i < (size_t)n * w->c.latent; i++)
		w->eps[i] = (float)(temperature * cg_rng_normal(r));
	if (cg_cvae_prior_sample(&w->c, m->params, w->eps, w->eps, cond, n) !=
	    0)
		return -1;
	return cg_cvae_decode(&w->c, m->params, w->ws, w->eps, cond, n, out);
}

/* cg-init's options; their keys follow in_dim and ncond in the config. */
static const struct cg_arch_opt cvae_opts[] = {
    {"hidden", CG_ARCH_OPT_INT, 512, 1, 1 << 20, "hidden width"},
    {"layers", CG_ARCH_OPT_INT, 2, 1, 64,
     "hidden layers of the encoder, and of the decoder"},
    {"latent", CG_ARCH_OPT_INT, 32, 1, 1 << 20, "latent size"},
    {"class-prior", CG_ARCH_OPT_BOOL, 1, 0, 1,
     "a learnt prior of z per condition (0: N(0, I))"},
    {"cond-every", CG_ARCH_OPT_BOOL, 1, 0, 1,
     "the condition at every hidden layer (0: the first)"},
    {"conv", CG_ARCH_OPT_INT, 0, 0, CG_CVAE_MAX_CONV,
     "convolutional nets of this many channels (0: the MLPs)"},
};

/* A model of the MLPs is the bytes it was before the option. */
static const char *const cvae_quiet[] = {"conv", NULL};

/* What the keys alone say: the convolutional nets' image shape is the
 * manifest's, which get_config adds and checks. */
static int
check_config(const void *config)
{
	struct cg_cvae_config c = *(const struct cg_cvae_config *)config;

	if (cg_arch_conv_keys("cvae", "conv", &c.conv, CG_CVAE_MAX_CONV,
	                      c.height) < 0)
		return -1;
	return cg_cvae_check_config(&c);
}

#define KEY(name, field, optional, absent)                                     \
	{name, offsetof(struct cg_cvae_config, field), 1, CG_CVAE_MAX_DIM,     \
	 optional, absent}
static const struct cg_arch_key cvae_keys[] = {
    KEY("in_dim", in_dim, 0, 0),
    KEY("ncond", ncond, 0, 0),
    KEY("hidden", hidden, 0, 0),
    KEY("layers", layers, 0, 0),
    KEY("latent", latent, 0, 0),
    /* models made before the class prior have N(0, I) */
    KEY("class-prior", class_prior, 1, 0),
    /* nor the condition past the first layers */
    KEY("cond-every", cond_every, 1, 0),
    /* and were the MLPs */
    {"conv", offsetof(struct cg_cvae_config, conv), 0, CG_CVAE_MAX_CONV, 1,
     0},
};
#undef KEY

/* Whether name ends in suffix. */
static int
ends_with(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return n >= k && strcmp(name + n - k, suffix) == 0;
}

/*
 * struct cg_arch's recondition.  The condition enters the cvae as the
 * last ncond columns of each side's first layer (enc.0.w, dec.0.w: a
 * one-hot after the input) and as the rows of prior.mu, prior.logvar
 * and the tables of cond-every (enc.L.cond, dec.L.cond; with conv the
 * heads enc.mu.w and enc.logvar.w take the one-hot in enc.0.w's place,
 * and the FiLM tables are enc.nL.cond, dec.nL.cond); condition k's
 * column or row is old's map[k] where old has it, else as m's init made
 * it.  Every other tensor is the same shape as old's, and copied.
 */
static int
cvae_recondition(struct cg_model *m, const struct cg_model *old,
                 const int *map)
{
	struct cg_cvae_config c, o;

	if (get_config(m, &c) != 0 || get_config(old, &o) != 0)
		return -1;
	if (m->nviews != old->nviews)
		return cg_seterr("%d tensors, the old model %d", m->nviews,
		                 old->nviews);
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i], *w = &old->views[i];
		float *dst = m->params + v->off;
		const float *src = old->params + w->off;
		if (strcmp(v->name, w->name) != 0 || v->ndim != w->ndim)
			return cg_seterr("tensor %s: the old model's is %s",
			                 v->name, w->name);
		if (strcmp(v->name, c.conv ? "enc.mu.w" : "enc.0.w") == 0 ||
		    (c.conv && strcmp(v->name, "enc.logvar.w") == 0) ||
		    strcmp(v->name, "dec.0.w") == 0) {
			/* [rows, base + ncond]: the input's columns, then
			 * the condition's */
			const size_t R = v->shape[0], nc = v->shape[1],
			             oc = w->shape[1];
			if (nc < (size_t)c.ncond || oc < (size_t)o.ncond ||
			    nc - c.ncond != oc - o.ncond || w->shape[0] != R)
				return cg_seterr("tensor %s: not of the "
				                 "conditions' columns",
				                 v->name);
			const size_t base = nc - c.ncond;
			for (size_t r = 0; r < R; r++) {
				memcpy(dst + r * nc, src + r * oc,
				       base * sizeof(float));
				for (int k = 0; k < c.ncond; k++)
					if (map[k] >= 0)
						dst[r * nc + base + k] =
						    src[r * oc + base + map[k]];
			}
			continue;
		}
		if (strcmp(v->name, "prior.mu") == 0 ||
		    strcmp(v->name, "prior.logvar") == 0 ||
		    ends_with(v->name, ".cond")) {
			/* [ncond, cols]: a row a condition */
			const size_t C = v->shape[1];
			if (v->shape[0] != (size_t)c.ncond ||
			    w->shape[0] != (size_t)o.ncond || w->shape[1] != C)
				return cg_seterr("tensor %s: not of the "
				                 "conditions' rows",
				                 v->name);
			for (int k = 0; k < c.ncond; k++)
				if (map[k] >= 0)
					memcpy(dst + (size_t)k * C,
					       src + (size_t)map[k] * C,
					       C * sizeof(float));
			continue;
		}
		if (v->n != w->n)
			return cg_seterr("tensor %s: shape differs from the "
			                 "old model's",
			                 v->name);
		memcpy(dst, src, v->n * sizeof(float));
	}
	return 0;
}

/* ------------------------------------------------ structured pruning */

static const char *const cvae_structures[] = {"units", NULL};

/* The index of m's view "SIDE.L.PART" (l < 0: "SIDE.PART"), or -1. */
static int
view_at(const struct cg_model *m, const char *side, int l, const char *part)
{
	char name[48];

	if (l >= 0)
		snprintf(name, sizeof(name), "%s.%d.%s", side, l, part);
	else
		snprintf(name, sizeof(name), "%s.%s", side, part);
	return cg_arch_view(m, name);
}

/*
 * struct cg_arch's shrink: "units", the hidden units of every hidden
 * layer of the encoder and of the decoder, each layer losing as many,
 * so that the config says the smaller model in one number (hidden).
 * A unit's importance is the norm of its row of its layer's weight
 * times that of its column of what reads it (the next layer's weight;
 * after the encoder's last layer, the mu and logvar heads' together).
 * A removed unit's row and bias, its column of the condition's table
 * (cond-every), and its column of what reads it go.
 */
static int
cvae_shrink(struct cg_model *m, const double *remove, cJSON *config,
            struct cg_model *small)
{
	static const char *const sides[] = {"enc", "dec"};
	struct cg_cvae_config c;
	unsigned char *keep = NULL;
	double *score = NULL;
	int rc = -1;

	if (get_config(m, &c) != 0)
		return -1;
	if (c.conv)
		return cg_seterr("cvae: no structured pruning of the "
		                 "convolutional nets");
	const int H = c.hidden, NL = c.layers;
	const int k = cg_arch_removed(remove[0], H);
	if (config != NULL && small == NULL) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(config, "hidden");
		if (v == NULL)
			return cg_seterr("config: no \"hidden\"");
		cJSON_SetNumberValue(v, H - k);
		return 0;
	}
	/* keep [side, layer, H]: all chosen before any is zeroed */
	if ((keep = malloc((size_t)2 * NL * H)) == NULL ||
	    (score = malloc((size_t)H * sizeof(*score))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (int sd = 0; sd < 2; sd++)
		for (int l = 0; l < NL; l++) {
			const struct cg_view *w =
			    &m->views[view_at(m, sides[sd], l, "w")];
			int next[2] = {-1, -1};
			if (l + 1 < NL)
				next[0] = view_at(m, sides[sd], l + 1, "w");
			else if (sd == 0)
				next[0] = view_at(m, "enc", -1, "mu.w"),
				next[1] = view_at(m, "enc", -1, "logvar.w");
			else
				next[0] = view_at(m, "dec", -1, "out.w");
			for (int j = 0; j < H; j++) {
				double out = 0;
				for (int q = 0; q < 2 && next[q] >= 0; q++) {
					const struct cg_view *x =
					    &m->views[next[q]];
					double a = cg_arch_norm(
					    m->params + x->off, x->shape[0],
					    x->shape[1], 0, j);
					out += a * a;
				}
				score[j] = cg_arch_norm(m->params + w->off,
				                        w->shape[0], w->shape[1],
				                        j, -1) *
				           sqrt(out);
			}
			cg_arch_least(keep + ((size_t)sd * NL + l) * H, score,
			              H, k);
		}
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		const unsigned char *kr = NULL, *kc = NULL;
		float *dst = small ? small->params + small->views[i].off : NULL;
		for (int sd = 0; sd < 2; sd++) {
			const unsigned char *ks = keep + (size_t)sd * NL * H;
			for (int l = 0; l < NL; l++) {
				if (i == view_at(m, sides[sd], l, "w") ||
				    i == view_at(m, sides[sd], l, "b"))
					kr = ks + (size_t)l * H;
				if (i == view_at(m, sides[sd], l, "w") && l > 0)
					kc = ks + (size_t)(l - 1) * H;
				if (i == view_at(m, sides[sd], l, "cond"))
					kc = ks + (size_t)l * H;
			}
			if (i == view_at(m, sides[sd], -1,
			                 sd == 0 ? "mu.w" : "out.w") ||
			    (sd == 0 && i == view_at(m, "enc", -1, "logvar.w")))
				kc = ks + (size_t)(NL - 1) * H;
		}
		cg_arch_sub(dst, m->params + v->off, v->shape[0],
		            v->ndim == 2 ? v->shape[1] : 1, kr, kc);
	}
	rc = 0;
out:
	free(keep);
	free(score);
	return rc;
}

const struct cg_arch cg_arch_cvae = {
    .name = "cvae",
    .summary = "conditional VAE (MLP or CNN encoder and decoder) for "
               "images",
    .loss_name = "nelbo",
    .part_names = {"rec", "kl", NULL},
    .opts = cvae_opts,
    .nopts = sizeof(cvae_opts) / sizeof(cvae_opts[0]),
    .keys = cvae_keys,
    .nkeys = sizeof(cvae_keys) / sizeof(cvae_keys[0]),
    .quiet = cvae_quiet,
    .config_size = sizeof(struct cg_cvae_config),
    .check_config = check_config,
    .config_from_shard = cg_arch_image_from_shard,
    .nconds = cg_arch_image_nconds,
    .recondition = cvae_recondition,
    .image_shape = cg_arch_image_sample_shape,
    .layout = cvae_layout,
    .init = cvae_init,
    .check_data = cg_arch_image_check,
    .batch = cvae_batch,
    .ws_bytes = cvae_ws_bytes,
    .checkpoints = 1,
    .can_checkpoint = cvae_can_checkpoint,
    .dp_batch = cvae_dp_batch,
    .sample_image = cvae_sample_image,
    .keeps = cvae_keeps,
    .free_ws = cvae_free_ws,
    .input_sq = cvae_input_sq,
    .check_teacher = cvae_check_teacher,
    .distill = cvae_distill,
    .structures = cvae_structures,
    .shrink = cvae_shrink,
};

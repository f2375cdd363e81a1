/*
 * arch/cddpm/cddpm_arch.c - the cddpm architecture (conditional diffusion with
 * classifier-free guidance) as the model layer sees it.
 *
 * Binds lib/arch/cddpm/cddpm.c to struct cg_arch: config from JSON, the shard's
 * bytes read as x0 = pixel / 127.5 - 1, and each example's draws -- its
 * timestep t, whether its condition is dropped (probability cond-drop),
 * its noise eps -- from (noise seed, example index) in that order, so
 * that a batch split over workers draws what the whole batch draws on
 * one machine.  Sampling follows m->diffusion: DDIM by default, 50 steps
 * (T if fewer; a model step distillation made, the steps its manifest
 * says it learnt), guidance 0 (the conditional model alone; a distilled
 * one carries its teacher's).  The U-Net
 * (--unet) takes the image's shape from the manifest; a model without
 * the key is the MLP.  A U-Net checkpoints its residual blocks'
 * activations when m->checkpoint says so (cddpm.h); the MLP has nothing
 * to recompute, and refuses.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/cddpm/cddpm.h"
#include "arch/common.h"
#include "core/par.h"
#include "model/model.h"

#define DEFAULT_STEPS 50

struct cddpm_ws {
	struct cg_cddpm_config c;
	double drop;
	struct cg_cddpm_ws *ws;
	int cap;
	int ckpt; /* whether ws checkpoints */
	float *x, *eps;
	int *cond, *t;
	/* Step distillation's (cddpm_distill), made at its first call for
	 * cap examples: the noised images zt, the teacher's chains and
	 * then its targets x0t and epst, a gathered chain sx [cap,
	 * in_dim] each; each example's middle and last timestep, and the
	 * gathered chains' conditions and timesteps [cap] each; the
	 * schedule [T]. */
	float *zt, *x0t, *epst, *sx;
	int *mid, *to, *gc, *gt, *gs;
	double *abar;
};

extern const struct cg_arch cg_arch_cddpm;

/* The config as its key table reads it: the kernels' struct, and the
 * probability of dropping a condition, which only training uses. */
struct config {
	struct cg_cddpm_config c;
	double drop;
};

/*
 * m's config: its keys, and for the U-Net the image's shape from the
 * manifest, then checked whole.
 */
static int
get_config(const struct cg_model *m, struct cg_cddpm_config *c, double *drop)
{
	struct config k;
	if (cg_arch_read_config(&cg_arch_cddpm, m->config, &k) != 0)
		return -1;
	*c = k.c;
	if (drop)
		*drop = k.drop;
	if (c->unet == 0)
		return 0;
	if (cg_arch_image_hwc(m, c->in_dim, &c->height, &c->width,
	                      &c->channels) != 0)
		return -1;
	return cg_cddpm_check_config(c);
}

static int
cddpm_layout(struct cg_model *m)
{
	struct cg_cddpm_config c;
	int nv;

	if (get_config(m, &c, NULL) != 0)
		return -1;
	m->nparams = cg_cddpm_nparams(&c);
	nv = c.unet ? CG_CDDPM_UNET_VIEWS + c.attn * CG_CDDPM_ATTN_VIEWS
	            : 2 * c.layers + 5;
	if ((m->views = calloc((size_t)nv, sizeof(*m->views))) == NULL)
		return cg_seterr("out of memory");
	if ((m->nviews = cg_cddpm_views(&c, m->views, nv)) < 0)
		return -1;
	return 0;
}

static void
cddpm_init(struct cg_model *m, struct cg_rng *r)
{
	struct cg_cddpm_config c;

	if (get_config(m, &c, NULL) == 0)
		cg_cddpm_init(&c, m->params, r);
}

static void
cddpm_free_ws(struct cg_model *m)
{
	struct cddpm_ws *w = m->ws;

	if (w == NULL)
		return;
	cg_cddpm_ws_free(w->ws);
	free(w->x);
	free(w->eps);
	free(w->cond);
	free(w->t);
	free(w->zt);
	free(w->mid);
	free(w->abar);
	free(w);
	m->ws = NULL;
	m->ws_batch = 0;
}

/* The weights (the views named *.w: the Linear layers' and the U-Net's
 * convolutions') stay as stored in any float dtype, multiplied so or
 * decoded one layer at a time (cg_cddpm_ws_set_mats); the condition
 * table, the norms and the biases are decoded. */
static int
cddpm_keeps(const struct cg_model *m, int i, enum cg_dtype dt)
{
	const char *name = m->views[i].name;
	size_t len = strlen(name);

	(void)dt;
	return len > 2 && strcmp(name + len - 2, ".w") == 0 ? CG_KEEP_ANY
	                                                    : CG_KEEP_NONE;
}

static struct cddpm_ws *
get_ws(struct cg_model *m, int B)
{
	struct cddpm_ws *w = m->ws;
	const int ckpt = m->checkpoint != 0;

	if (w && w->cap >= B && w->ckpt == ckpt)
		return w;
	cddpm_free_ws(m);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	m->ws = w;
	if (get_config(m, &w->c, &w->drop) != 0 ||
	    (w->ws = cg_cddpm_ws_new(&w->c, B, ckpt)) == NULL ||
	    (m->stored != NULL &&
	     cg_cddpm_ws_set_mats(w->ws, m->stored, m->nviews) != 0) ||
	    (w->x = cg_alloc((size_t)B * w->c.in_dim * sizeof(float))) ==
	        NULL ||
	    (w->eps = cg_alloc((size_t)B * w->c.in_dim * sizeof(float))) ==
	        NULL ||
	    (w->cond = cg_alloc((size_t)B * sizeof(int))) == NULL ||
	    (w->t = cg_alloc((size_t)B * sizeof(int))) == NULL) {
		cddpm_free_ws(m);
		return NULL;
	}
	w->cap = m->ws_batch = B;
	w->ckpt = ckpt;
	return w;
}

/* A batch, or a chunk of one, whole (cddpm_batch chunks). */
static int
cddpm_run(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
          int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cddpm_ws *w = get_ws(m, B);
	double loss;

	if (w == NULL)
		return -1;
	const int D = w->c.in_dim;
	/* Each example's noise is its own stream (its index in the data),
	 * so threads share the examples out and the bits do not depend on
	 * them; drawn a row at a time (cg_rng_normals, vectorised): a
	 * Box-Muller draw per pixel in libm's double was a fifth of a step. */
	PAR_FOR((size_t)B * D)
	for (int b = 0; b < B; b++) {
		uint64_t len;
		const uint8_t *px = cg_shard_example(s, ex[b], &len);
		struct cg_rng r;

		for (int i = 0; i < D; i++)
			w->x[(size_t)b * D + i] =
			    px[i] * (1.0f / 127.5f) - 1.0f;
		cg_rng_derive(&r, noise_seed, s->index[ex[b]], 0);
		w->t[b] = (int)cg_rng_below(&r, (uint64_t)w->c.timesteps);
		w->cond[b] = cg_rng_uniform(&r) < w->drop ? w->c.ncond
		                                          : (int)s->cond[ex[b]];
		cg_rng_normals(&r, w->eps + (size_t)b * D, (size_t)D);
	}
	if (cg_cddpm_forward_backward(&w->c, m->params, w->ws, w->x, w->cond,
	                              w->t, w->eps, B, grad, &loss) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->n = (uint64_t)B;
	return 0;
}

static int
cddpm_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
            int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	return cg_arch_chunked(m, cddpm_run, s, ex, B, noise_seed, grad, out);
}

/* Its workspace for batches of B in chunks of chunk: the kernels'
 * (checkpointed or not), the images, noise, conditions and timesteps of
 * a chunk, and the chunks' gradient. */
static size_t
cddpm_ws_bytes(struct cg_model *m, int B, int chunk, int checkpoint)
{
	struct cg_cddpm_config c;
	const int cap = cg_arch_chunk_of(B, chunk);
	size_t n;

	if (get_config(m, &c, NULL) != 0 ||
	    (n = cg_cddpm_ws_bytes(&c, cap, checkpoint)) == 0)
		return 0;
	return n + sizeof(struct cddpm_ws) +
	       (size_t)cap * (2 * (size_t)c.in_dim * sizeof(float) +
	                      2 * sizeof(int)) +
	       cg_arch_chunk_bytes(m, B, cap);
}

/* The U-Net checkpoints; the MLP's activations are a few rows of
 * hidden, nothing worth recomputing. */
static int
cddpm_can_checkpoint(const struct cg_model *m)
{
	struct cg_cddpm_config c;

	if (get_config(m, &c, NULL) != 0)
		return 0;
	if (c.unet == 0) {
		cg_seterr("cddpm: the MLP has no activation checkpointing "
		          "(the U-Net, --unet, has)");
		return 0;
	}
	return 1;
}

static int
cddpm_sample_image(struct cg_model *m, const int *cond, int n,
                   double temperature, struct cg_rng *r, float *out)
{
	const struct cg_diffusion_opts *o = &m->diffusion;
	struct cg_cddpm_sampling s;
	struct cddpm_ws *w = get_ws(m, o->guidance != 0 ? 2 * n : n);
	double carried;
	int taught;

	/* a student of step distillation samples in the steps it learnt */
	if (w == NULL || (taught = cg_model_distilled(m, &carried)) < 0)
		return -1;
	s.guidance = o->guidance;
	s.interval = o->interval;
	s.glo = o->glo;
	s.ghi = o->ghi;
	s.steps = o->steps != 0                    ? o->steps
	          : taught > 0                     ? taught
	          : w->c.timesteps < DEFAULT_STEPS ? w->c.timesteps
	                                           : DEFAULT_STEPS;
	s.ddim = o->sampler != CG_SAMPLER_DDPM;
	s.temperature = temperature;
	return cg_cddpm_sample(&w->c, m->params, w->ws, cond, n, &s, r, out);
}

/* ------------------------------------------------------- distillation */

/*
 * Progressive distillation (Salimans and Ho, 2022): the student learns
 * to take in one DDIM step of its N-step grid what the teacher takes in
 * two on the grid of 2N - 1 steps, which holds the student's at every
 * other point (cg_cddpm_visited).  For each example, from the noise
 * seed and its index as training draws them: i uniform in [0, N), t its
 * i-th timestep, the condition dropped with probability cond-drop, eps;
 * z_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps.  The teacher steps z_t
 * to the grid's middle point and on to s, the student's next timestep
 * (i = 0: one step, to the clean image), with its guidance on both; the
 * student's target is the x0 from which its own DDIM step lands where
 * the teacher did,
 *   x0t = (z_s - (sig_s / sig_t) z_t) / (alpha_s - (sig_s / sig_t) alpha_t)
 * (alpha = sqrt(abar), sig = sqrt(1 - abar)), weighted as training
 * weighs x0 (cddpm.h), beside the data's x0 at the teacher weight.  A
 * student sampled without guidance then draws what the guided teacher
 * draws.  Nothing is drawn but what training draws: the split among
 * workers changes nothing.
 */
static int
cddpm_check_teacher(const struct cg_model *m, const struct cg_model *t)
{
	struct cg_cddpm_config c, ct;

	if (get_config(m, &c, NULL) != 0 || get_config(t, &ct, NULL) != 0)
		return -1;
	if (c.in_dim != ct.in_dim)
		return cg_seterr("the teacher's images have %d values, the "
		                 "model's %d",
		                 ct.in_dim, c.in_dim);
	if (c.ncond != ct.ncond)
		return cg_seterr("the teacher has %d conditions, the model %d",
		                 ct.ncond, c.ncond);
	if (c.timesteps != ct.timesteps)
		return cg_seterr("the teacher's schedule has %d timesteps, "
		                 "the model's %d",
		                 ct.timesteps, c.timesteps);
	if (c.cosine != ct.cosine)
		return cg_seterr("the teacher's noise schedule is %s, the "
		                 "model's %s (--cosine)",
		                 ct.cosine ? "cosine" : "linear",
		                 c.cosine ? "cosine" : "linear");
	return 0;
}

/* w's distillation buffers for w->cap examples, if not made yet. */
static int
distill_bufs(struct cddpm_ws *w)
{
	const size_t n = (size_t)w->cap * w->c.in_dim;

	if (w->zt)
		return 0;
	if ((w->zt = cg_alloc(4 * n * sizeof(float))) == NULL ||
	    (w->mid = cg_alloc(5 * (size_t)w->cap * sizeof(int))) == NULL ||
	    (w->abar = cg_alloc((size_t)w->c.timesteps * sizeof(double))) ==
	        NULL) {
		free(w->zt);
		free(w->mid);
		w->zt = NULL;
		w->mid = NULL;
		return -1;
	}
	w->x0t = w->zt + n;
	w->epst = w->x0t + n;
	w->sx = w->epst + n;
	w->to = w->mid + w->cap;
	w->gc = w->to + w->cap;
	w->gt = w->gc + w->cap;
	w->gs = w->gt + w->cap;
	cg_cddpm_schedule(&w->c, w->abar);
	return 0;
}

/* The teacher's second step, for the examples that take one: gathered
 * into w->sx, stepped, put back into w->x0t. */
static int
second_step(struct cddpm_ws *w, struct cddpm_ws *tw, const float *tparams,
            int B, double guidance)
{
	const size_t D = (size_t)w->c.in_dim;
	int k = 0;

	for (int b = 0; b < B; b++) {
		if (w->mid[b] < 0)
			continue;
		memcpy(w->sx + k * D, w->x0t + b * D, D * sizeof(float));
		w->gc[k] = w->cond[b];
		w->gt[k] = w->mid[b];
		w->gs[k] = w->to[b];
		k++;
	}
	if (k == 0)
		return 0;
	if (cg_cddpm_ddim_step(&tw->c, tparams, tw->ws, w->sx, w->gc, w->gt,
	                       w->gs, k, guidance) != 0)
		return -1;
	k = 0;
	for (int b = 0; b < B; b++)
		if (w->mid[b] >= 0)
			memcpy(w->x0t + b * D, w->sx + (k++) * D,
			       D * sizeof(float));
	return 0;
}

static int
cddpm_distill(struct cg_model *m, const struct cg_distill *d,
              const struct cg_shard *s, const uint64_t *ex, int B,
              uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cddpm_ws *w = get_ws(m, B), *tw;
	double loss, data, teach;

	if (w == NULL)
		return -1;
	const int D = w->c.in_dim, T = w->c.timesteps, N = d->steps;
	if (N == 0)
		return cg_seterr("cddpm: a diffusion model learns its "
		                 "teacher's steps: the number of steps to "
		                 "distill is missing");
	if (N < 2 || 2 * N - 1 > T)
		return cg_seterr("cddpm: %d steps to distill: not in [2, %d] "
		                 "(the teacher's 2N - 1 at most T = %d)",
		                 N, (T + 1) / 2, T);
	if ((tw = get_ws(d->teacher, d->guidance != 0 ? 2 * B : B)) == NULL ||
	    distill_bufs(w) != 0)
		return -1;
	PAR_FOR((size_t)B * D)
	for (int b = 0; b < B; b++) {
		uint64_t len;
		const uint8_t *px = cg_shard_example(s, ex[b], &len);
		struct cg_rng r;

		cg_rng_derive(&r, noise_seed, s->index[ex[b]], 0);
		const int i = (int)cg_rng_below(&r, (uint64_t)N);
		w->t[b] = cg_cddpm_visited(i, N, T);
		w->mid[b] = i > 0 ? cg_cddpm_visited(2 * i - 1, 2 * N - 1, T)
		                  : -1;
		w->to[b] = i > 0 ? cg_cddpm_visited(i - 1, N, T) : -1;
		w->cond[b] = cg_rng_uniform(&r) < w->drop ? w->c.ncond
		                                          : (int)s->cond[ex[b]];
		const float sa = (float)sqrt(w->abar[w->t[b]]);
		const float sn = (float)sqrt(1 - w->abar[w->t[b]]);
		for (int j = 0; j < D; j++) {
			const size_t k = (size_t)b * D + j;
			w->x[k] = px[j] * (1.0f / 127.5f) - 1.0f;
			w->eps[k] = cg_rng_normal(&r);
			w->zt[k] = sa * w->x[k] + sn * w->eps[k];
		}
	}
	/* the teacher: z_t to the middle point (or the clean image), then
	 * on to s */
	memcpy(w->x0t, w->zt, (size_t)B * D * sizeof(float));
	if (cg_cddpm_ddim_step(&tw->c, d->teacher->params, tw->ws, w->x0t,
	                       w->cond, w->t, w->mid, B, d->guidance) != 0 ||
	    second_step(w, tw, d->teacher->params, B, d->guidance) != 0)
		return -1;
	/* z_s into the x0 (and eps) of the student's one step to it */
	for (int b = 0; b < B; b++) {
		const double at = w->abar[w->t[b]];
		const double as = w->to[b] >= 0 ? w->abar[w->to[b]] : 1.0;
		const double ratio = sqrt(1 - as) / sqrt(1 - at);
		const double den = sqrt(as) - ratio * sqrt(at);
		for (int j = 0; j < D; j++) {
			const size_t k = (size_t)b * D + j;
			const double x0 = (w->x0t[k] - ratio * w->zt[k]) / den;
			w->x0t[k] = (float)x0;
			w->epst[k] =
			    (float)((w->zt[k] - sqrt(at) * x0) / sqrt(1 - at));
		}
	}
	if (cg_cddpm_distill_forward_backward(
	        &w->c, m->params, w->ws, w->zt, w->x, w->eps, w->x0t, w->epst,
	        d->alpha, w->cond, w->t, B, grad, &loss, &data, &teach) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->data = data;
	out->teacher = teach;
	out->n = (uint64_t)B;
	return 0;
}

/* cg-init's options; their keys follow in_dim and ncond in the config. */
static const struct cg_arch_opt cddpm_opts[] = {
    {"hidden", CG_ARCH_OPT_INT, 512, 1, 1 << 20,
     "hidden width (and of the embeddings)"},
    {"layers", CG_ARCH_OPT_INT, 3, 1, 64, "hidden layers"},
    {"embed", CG_ARCH_OPT_INT, 128, 2, 1 << 20,
     "width of the sinusoidal time encoding (even)"},
    {"timesteps", CG_ARCH_OPT_INT, 1000, CG_CDDPM_MIN_T, CG_CDDPM_MAX_T,
     "diffusion steps T (linear betas: 1e-4 to 0.02 at 1000)"},
    {"cond-drop", CG_ARCH_OPT_FLOAT, 0.1, 0, 1,
     "probability that training drops an example's condition"},
    {"snr-clip", CG_ARCH_OPT_FLOAT, 5, 0, CG_CDDPM_MAX_SNR_CLIP,
     "the loss weight on x0 is min(snr, X) + 1"},
    {"predict-x0", CG_ARCH_OPT_BOOL, 1, 0, 1,
     "the last layer gives the clean image (0: v)"},
    {"unet", CG_ARCH_OPT_INT, 0, 0, CG_CDDPM_MAX_UNET,
     "a U-Net of this many channels at full size (0: the MLP)"},
    {"attn", CG_ARCH_OPT_BOOL, 0, 0, 1,
     "self-attention after the U-Net's middle block"},
    {"film", CG_ARCH_OPT_BOOL, 1, 0, 1,
     "U-Net: the embedding scales and shifts after each norm"},
    {"cosine", CG_ARCH_OPT_BOOL, 0, 0, 1,
     "the cosine noise schedule (0: linear betas)"},
};

/* What the keys alone say: the U-Net's image shape is the manifest's,
 * which get_config adds and checks. */
static int
check_config(const void *k)
{
	struct cg_cddpm_config c = ((const struct config *)k)->c;
	int alone = cg_arch_conv_keys("cddpm", "unet", &c.unet,
	                              CG_CDDPM_MAX_UNET, c.height);

	if (alone < 0)
		return -1;
	if (alone) {
		/* the attention is the U-Net's: the MLP has none */
		if (c.attn != 0 && c.attn != 1)
			return cg_seterr("cddpm: attn = %d: not 0 or 1",
			                 c.attn);
		c.attn = 0;
	}
	return cg_cddpm_check_config(&c);
}

#define KEY(name, field, optional, absent)                                     \
	{name, offsetof(struct config, field), 1, CG_CDDPM_MAX_DIM, optional,  \
	 absent}
static const struct cg_arch_key cddpm_keys[] = {
    KEY("in_dim", c.in_dim, 0, 0),
    KEY("ncond", c.ncond, 0, 0),
    KEY("hidden", c.hidden, 0, 0),
    KEY("layers", c.layers, 0, 0),
    KEY("embed", c.embed, 0, 0),
    KEY("timesteps", c.timesteps, 0, 0),
    KEY("cond-drop", drop, 0, 0),
    /* models made before the weighting have none: the loss on eps */
    KEY("snr-clip", c.snr_clip, 1, CG_CDDPM_EPS_LOSS),
    /* nor the choice of what the last layer gives: v */
    KEY("predict-x0", c.predict_x0, 1, 0),
    /* nor a U-Net: the MLP */
    KEY("unet", c.unet, 1, 0),
    KEY("attn", c.attn, 1, 0),
    /* nor scale and shift: the embedding added before the norm */
    KEY("film", c.film, 1, 0),
    /* nor a schedule but the linear one */
    KEY("cosine", c.cosine, 1, 0),
};
#undef KEY

const struct cg_arch cg_arch_cddpm = {
    .name = "cddpm",
    .summary = "conditional diffusion (MLP or U-Net, classifier-free "
               "guidance)",
    .loss_name = "mse",
    .part_names = {NULL, NULL, NULL},
    .opts = cddpm_opts,
    .nopts = sizeof(cddpm_opts) / sizeof(cddpm_opts[0]),
    .keys = cddpm_keys,
    .nkeys = sizeof(cddpm_keys) / sizeof(cddpm_keys[0]),
    .config_size = sizeof(struct config),
    .check_config = check_config,
    .config_from_shard = cg_arch_image_from_shard,
    .nconds = cg_arch_image_nconds,
    .image_shape = cg_arch_image_sample_shape,
    .layout = cddpm_layout,
    .init = cddpm_init,
    .check_data = cg_arch_image_check,
    .batch = cddpm_batch,
    .ws_bytes = cddpm_ws_bytes,
    .checkpoints = 1,
    .can_checkpoint = cddpm_can_checkpoint,
    .sample_image = cddpm_sample_image,
    .diffusion = 1,
    .free_ws = cddpm_free_ws,
    .check_teacher = cddpm_check_teacher,
    .keeps = cddpm_keeps,
    .distill = cddpm_distill,
};

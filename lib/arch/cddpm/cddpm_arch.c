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
 * (T if fewer), guidance 0 (the conditional model alone).  The U-Net
 * (--unet) takes the image's shape from the manifest; a model without
 * the key is the MLP.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/cddpm/cddpm.h"
#include "arch/common.h"
#include "model/model.h"

#define DEFAULT_STEPS 50

struct cddpm_ws {
	struct cg_cddpm_config c;
	double drop;
	struct cg_cddpm_ws *ws;
	int cap;
	float *x, *eps;
	int *cond, *t;
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
	free(w);
	m->ws = NULL;
	m->ws_batch = 0;
}

static struct cddpm_ws *
get_ws(struct cg_model *m, int B)
{
	struct cddpm_ws *w = m->ws;

	if (w && w->cap >= B)
		return w;
	cddpm_free_ws(m);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	m->ws = w;
	if (get_config(m, &w->c, &w->drop) != 0 ||
	    (w->ws = cg_cddpm_ws_new(&w->c, B)) == NULL ||
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
		for (int i = 0; i < D; i++)
			w->eps[(size_t)b * D + i] = cg_rng_normal(&r);
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

/* Its workspace for batches of B in chunks of chunk: the kernels', the
 * images, noise, conditions and timesteps of a chunk, and the chunks'
 * gradient.  No checkpointing. */
static size_t
cddpm_ws_bytes(struct cg_model *m, int B, int chunk, int checkpoint)
{
	struct cg_cddpm_config c;
	const int cap = cg_arch_chunk_of(B, chunk);
	size_t n;

	(void)checkpoint;
	if (get_config(m, &c, NULL) != 0 ||
	    (n = cg_cddpm_ws_bytes(&c, cap)) == 0)
		return 0;
	return n + sizeof(struct cddpm_ws) +
	       (size_t)cap * (2 * (size_t)c.in_dim * sizeof(float) +
	                      2 * sizeof(int)) +
	       cg_arch_chunk_bytes(m, B, cap);
}

static int
cddpm_sample_image(struct cg_model *m, const int *cond, int n,
                   double temperature, struct cg_rng *r, float *out)
{
	const struct cg_diffusion_opts *o = &m->diffusion;
	struct cg_cddpm_sampling s;
	struct cddpm_ws *w = get_ws(m, o->guidance != 0 ? 2 * n : n);

	if (w == NULL)
		return -1;
	s.guidance = o->guidance;
	s.steps = o->steps != 0                    ? o->steps
	          : w->c.timesteps < DEFAULT_STEPS ? w->c.timesteps
	                                           : DEFAULT_STEPS;
	s.ddim = o->sampler != CG_SAMPLER_DDPM;
	s.temperature = temperature;
	return cg_cddpm_sample(&w->c, m->params, w->ws, cond, n, &s, r, out);
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
     "the cosine noise schedule (Nichol and Dhariwal; 0: linear betas)"},
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
    .sample_image = cddpm_sample_image,
    .diffusion = 1,
    .free_ws = cddpm_free_ws,
};

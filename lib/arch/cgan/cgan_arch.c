/*
 * arch/cgan/cgan_arch.c - the cgan architecture (conditional GAN, hinge loss,
 * spectral normalisation) as the model layer sees it.
 *
 * Binds lib/arch/cgan/cgan.c to struct cg_arch: config from JSON, the shard's
 * bytes read as x = pixel / 255, and each example's noise z drawn from (noise
 * seed, example index), so that a batch split over workers draws what the whole
 * batch draws on one machine.  Each real example is paired with a fake of its
 * own condition.  The layout declares two parameter groups, "gen" and "disc",
 * each with its own optimizer step count; a batch's gradient holds L_G's in the
 * first and L_D's in the second, so one optimizer step (cg-train-step's, or
 * cg-apply's on a reduced gradient or a DiLoCo delta) is one simultaneous step
 * of both nets.  The objective reported is L_D (its parts d_real and d_fake,
 * and g = L_G beside them): on held-out reals and fresh fakes, how well D still
 * tells them apart.  With a teacher (cgan_distill, below) the generator
 * also learns the teacher generator's images for its own noise.
 * The convolutional generator checkpoints when m->checkpoint says so
 * (cgan.h); the MLPs have nothing to recompute, and refuse.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/cgan/cgan.h"
#include "arch/common.h"
#include "model/model.h"

struct cgan_ws {
	struct cg_cgan_config c;
	struct cg_cgan_ws *ws;
	int cap;
	int ckpt; /* whether ws checkpoints */
	float *x, *z;
	int *cond;
};

extern const struct cg_arch cg_arch_cgan;

/*
 * m's config: its keys, and for the convolutional nets the image's shape
 * from the manifest, then checked whole.
 */
static int
get_config(const struct cg_model *m, struct cg_cgan_config *c)
{
	if (cg_arch_read_config(&cg_arch_cgan, m->config, c) != 0)
		return -1;
	if (c->conv == 0)
		return 0;
	if (cg_arch_image_hwc(m, c->in_dim, &c->height, &c->width,
	                      &c->channels) != 0)
		return -1;
	return cg_cgan_check_config(c);
}

static int
cgan_layout(struct cg_model *m)
{
	struct cg_cgan_config c;
	struct cg_group g[2];
	int nv;

	if (get_config(m, &c) != 0)
		return -1;
	m->nparams = cg_cgan_nparams(&c);
	nv = cg_cgan_nviews(&c);
	if ((m->views = calloc((size_t)nv, sizeof(*m->views))) == NULL)
		return cg_seterr("out of memory");
	if ((m->nviews = cg_cgan_views(&c, m->views, nv)) < 0)
		return -1;
	memset(g, 0, sizeof(g));
	strcpy(g[0].name, "gen");
	g[0].off = 0;
	g[0].n = cg_cgan_disc_off(&c);
	strcpy(g[1].name, "disc");
	g[1].off = g[0].n;
	g[1].n = m->nparams - g[0].n;
	return cg_model_set_groups(m, g, 2);
}

static void
cgan_init(struct cg_model *m, struct cg_rng *r)
{
	struct cg_cgan_config c;

	if (get_config(m, &c) == 0)
		cg_cgan_init(&c, m->params, r);
}

static void
cgan_free_ws(struct cg_model *m)
{
	struct cgan_ws *w = m->ws;

	if (w == NULL)
		return;
	cg_cgan_ws_free(w->ws);
	free(w->x);
	free(w->z);
	free(w->cond);
	free(w);
	m->ws = NULL;
	m->ws_batch = 0;
}

/* The generator's weights (views gen.*.w: its Linear layers' and
 * convolutions') stay as stored in any float dtype, multiplied so or
 * decoded one layer at a time (cg_cgan_ws_set_mats); its condition
 * table, norms and biases are decoded, and the discriminator whole: its
 * spectral norms copy its weights to f32 in any case. */
static int
cgan_keeps(const struct cg_model *m, int i, enum cg_dtype dt)
{
	const char *name = m->views[i].name;
	size_t len = strlen(name);

	(void)dt;
	return strncmp(name, "gen.", 4) == 0 && len > 2 &&
	               strcmp(name + len - 2, ".w") == 0
	           ? CG_KEEP_ANY
	           : CG_KEEP_NONE;
}

static struct cgan_ws *
get_ws(struct cg_model *m, int B)
{
	struct cgan_ws *w = m->ws;
	const int ckpt = m->checkpoint != 0;

	if (w && w->cap >= B && w->ckpt == ckpt)
		return w;
	cgan_free_ws(m);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	m->ws = w;
	if (get_config(m, &w->c) != 0 ||
	    (w->ws = cg_cgan_ws_new(&w->c, B, ckpt)) == NULL ||
	    (m->stored != NULL &&
	     cg_cgan_ws_set_mats(w->ws, m->stored, m->nviews) != 0) ||
	    (w->x = cg_alloc((size_t)B * w->c.in_dim * sizeof(float))) ==
	        NULL ||
	    (w->z = cg_alloc((size_t)B * w->c.latent * sizeof(float))) ==
	        NULL ||
	    (w->cond = cg_alloc((size_t)B * sizeof(int))) == NULL) {
		cgan_free_ws(m);
		return NULL;
	}
	w->cap = m->ws_batch = B;
	w->ckpt = ckpt;
	return w;
}

/* Examples ex [B] of s into w: the images, their conditions, and each
 * one's noise from (noise_seed, its index). */
static void
fill_batch(struct cgan_ws *w, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed)
{
	const int D = w->c.in_dim, Z = w->c.latent;

	for (int b = 0; b < B; b++) {
		uint64_t len;
		const uint8_t *px = cg_shard_example(s, ex[b], &len);
		struct cg_rng r;

		for (int i = 0; i < D; i++)
			w->x[(size_t)b * D + i] = px[i] * (1.0f / 255.0f);
		w->cond[b] = (int)s->cond[ex[b]];
		cg_rng_derive(&r, noise_seed, s->index[ex[b]], 0);
		for (int i = 0; i < Z; i++)
			w->z[(size_t)b * Z + i] = cg_rng_normal(&r);
	}
}

/* A pass's figures into out: L_D the objective, its parts, L_G. */
static void
put_metrics(struct cg_metrics *out, const struct cg_cgan_loss *loss, int B)
{
	memset(out, 0, sizeof(*out));
	out->loss = loss->d;
	out->part[0] = loss->d_real;
	out->part[1] = loss->d_fake;
	out->part[2] = loss->g;
	out->n = (uint64_t)B;
}

/* A batch, or a chunk of one, whole (cgan_batch chunks). */
static int
cgan_run(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cgan_ws *w = get_ws(m, B);
	struct cg_cgan_loss loss;

	if (w == NULL)
		return -1;
	fill_batch(w, s, ex, B, noise_seed);
	if (cg_cgan_forward_backward(&w->c, m->params, w->ws, w->x, w->cond,
	                             w->z, B, grad, &loss) != 0)
		return -1;
	put_metrics(out, &loss, B);
	return 0;
}

static int
cgan_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	return cg_arch_chunked(m, cgan_run, s, ex, B, noise_seed, grad, out);
}

/* Its workspace for batches of B in chunks of chunk: the kernels'
 * (checkpointed or not), a chunk's inputs, and the chunks' gradient. */
static size_t
cgan_ws_bytes(struct cg_model *m, int B, int chunk, int checkpoint)
{
	struct cg_cgan_config c;
	const int cap = cg_arch_chunk_of(B, chunk);
	size_t n;

	if (get_config(m, &c) != 0 ||
	    (n = cg_cgan_ws_bytes(&c, cap, checkpoint)) == 0)
		return 0;
	return n + sizeof(struct cgan_ws) +
	       (size_t)cap * (((size_t)c.in_dim + c.latent) * sizeof(float) +
	                      sizeof(int)) +
	       cg_arch_chunk_bytes(m, B, cap);
}

/* ------------------------------------------------------- distillation */

/*
 * The teacher's generator draws, for each example, the image of the
 * student's own noise z and condition; its images are the targets of
 * cg_cgan_distill_forward_backward's squared distance T, and the
 * generator's objective is (1 - alpha) L_G + alpha T.  Why the student's
 * own discriminator and not the teacher's: the teacher's is fixed (the
 * teacher file is read, never trained), and a fixed discriminator is a
 * function the generator learns to fool with images no discriminator in
 * training would pass, nothing correcting it; the student's keeps
 * learning the student's fakes, so the adversarial term stays the
 * game it is without a teacher, and the student stays a whole cgan that
 * can train on after.  It is also the cheaper: the teacher runs its
 * generator only.
 *
 * A teacher must take the same noise (latent) and conditions and draw
 * images of the same shape; its size and kind (MLP or convolutional)
 * are its own.  It draws nothing: z is the student's, from (noise seed,
 * example index), so a distilled batch splits among workers as a plain
 * one.  The teacher term has no temperature (it compares images, not
 * distributions): a --teacher-temp other than 1 is refused.
 */
static int
cgan_check_teacher(const struct cg_model *m, const struct cg_model *t)
{
	struct cg_cgan_config c, ct;

	if (get_config(m, &c) != 0 || get_config(t, &ct) != 0)
		return -1;
	if (cg_arch_same_images(m, t, c.ncond, ct.ncond, c.in_dim, ct.in_dim,
	                        "draws") != 0)
		return -1;
	if (c.latent != ct.latent)
		return cg_seterr("the teacher's noise has %d values, the "
		                 "model's %d (--latent)",
		                 ct.latent, c.latent);
	return 0;
}

/* The teacher's workspace for batches of B in chunks of chunk. */
static size_t
cgan_teacher_bytes(struct cg_model *t, int B, int chunk)
{
	size_t n = cgan_ws_bytes(t, B, chunk, 0);

	/* its generator's images, not a gradient of its chunks */
	return n == 0
	           ? 0
	           : n - cg_arch_chunk_bytes(t, B, cg_arch_chunk_of(B, chunk));
}

/* A batch, or a chunk of one, whole (cgan_distill chunks). */
static int
cgan_distill_run(struct cg_model *m, const struct cg_distill *d,
                 const struct cg_shard *s, const uint64_t *ex, int B,
                 uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cg_model *t = d->teacher;
	struct cgan_ws *w = get_ws(m, B), *tw;
	struct cg_cgan_loss loss;

	if (w == NULL || (tw = get_ws(t, B)) == NULL)
		return -1;
	fill_batch(w, s, ex, B, noise_seed);
	/* the teacher's images into its own x, which it reads not */
	if (cg_cgan_generate(&tw->c, t->params, tw->ws, w->z, w->cond, B,
	                     tw->x) != 0 ||
	    cg_cgan_distill_forward_backward(&w->c, m->params, w->ws, w->x,
	                                     w->cond, w->z, tw->x, d->alpha, B,
	                                     grad, &loss) != 0)
		return -1;
	put_metrics(out, &loss, B);
	out->data = loss.g;
	out->teacher = loss.teacher;
	return 0;
}

static int
cgan_distill(struct cg_model *m, const struct cg_distill *d,
             const struct cg_shard *s, const uint64_t *ex, int B,
             uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	if (d->tau != 1)
		return cg_seterr("cgan: --teacher-temp %g: the teacher term "
		                 "compares images, and has no temperature",
		                 d->tau);
	return cg_arch_chunked_distill(m, cgan_distill_run, d, s, ex, B,
	                               noise_seed, grad, out);
}

/* The convolutional generator checkpoints; the MLPs' activations are a
 * few rows of hidden, nothing worth recomputing. */
static int
cgan_can_checkpoint(const struct cg_model *m)
{
	struct cg_cgan_config c;

	if (get_config(m, &c) != 0)
		return 0;
	if (c.conv == 0) {
		cg_seterr("cgan: the MLP has no activation checkpointing "
		          "(the convolutional nets, --conv, have)");
		return 0;
	}
	return 1;
}

static int
cgan_sample_image(struct cg_model *m, const int *cond, int n,
                  double temperature, struct cg_rng *r, float *out)
{
	struct cgan_ws *w = get_ws(m, n);

	if (w == NULL)
		return -1;
	for (size_t i = 0; i < (size_t)n * w->c.latent; i++)
		w->z[i] = (float)(temperature * cg_rng_normal(r));
	return cg_cgan_generate(&w->c, m->params, w->ws, w->z, cond, n, out);
}

/* cg-init's options; their keys follow in_dim and ncond in the config. */
static const struct cg_arch_opt cgan_opts[] = {
    {"latent", CG_ARCH_OPT_INT, 64, 1, 1 << 20, "width of the noise z"},
    {"hidden", CG_ARCH_OPT_INT, 512, 1, 1 << 20, "hidden width of both nets"},
    {"layers", CG_ARCH_OPT_INT, 2, 1, 64, "hidden layers of each net"},
    {"sn-iters", CG_ARCH_OPT_INT, 5, 1, CG_CGAN_MAX_ITERS,
     "power iterations per spectral norm, from a fixed start"},
    {"conv", CG_ARCH_OPT_INT, 0, 0, CG_CGAN_MAX_CONV,
     "convolutional nets of this many channels (0: the MLPs)"},
    {"r1", CG_ARCH_OPT_FLOAT, 0, 0, CG_CGAN_MAX_R1,
     "R1 penalty gamma/2 |grad_x D|^2 on the reals (0: none)"},
    {"disc-kernel", CG_ARCH_OPT_INT, 3, 3, 4,
     "--conv: side of D's two kernels at stride 2"},
    {"aux", CG_ARCH_OPT_FLOAT, 0, 0, CG_CGAN_MAX_AUX,
     "weight of an auxiliary classifier (AC-GAN; 0: none)"},
};

/* Left out of a model's config at its default: a model made before it
 * is byte for byte one made after. */
static const char *const cgan_quiet[] = {"disc-kernel", "aux", NULL};

/* What the keys alone say: the convolutional nets' image shape is the
 * manifest's, which get_config adds and checks. */
static int
check_config(const void *config)
{
	struct cg_cgan_config c = *(const struct cg_cgan_config *)config;

	if (c.conv == 0 && c.disc_kernel != 3)
		return cg_seterr("cgan: disc-kernel = %d without conv: the "
		                 "MLP discriminator has no kernel",
		                 c.disc_kernel);
	if (cg_arch_conv_keys("cgan", "conv", &c.conv, CG_CGAN_MAX_CONV,
	                      c.height) < 0)
		return -1;
	return cg_cgan_check_config(&c);
}

#define KEY(name, field)                                                       \
	{name, offsetof(struct cg_cgan_config, field), 1, CG_CGAN_MAX_DIM, 0, 0}
static const struct cg_arch_key cgan_keys[] = {
    KEY("in_dim", in_dim),
    KEY("ncond", ncond),
    KEY("latent", latent),
    KEY("hidden", hidden),
    KEY("layers", layers),
    KEY("sn-iters", sn_iters),
    {"conv", offsetof(struct cg_cgan_config, conv), 0, CG_CGAN_MAX_CONV, 1, 0},
    /* nor a penalty */
    {"r1", offsetof(struct cg_cgan_config, r1), 0, CG_CGAN_MAX_R1, 1, 0},
    /* nor a kernel of 4 */
    {"disc-kernel", offsetof(struct cg_cgan_config, disc_kernel), 3, 4, 1,
     3},
    /* nor a classifier */
    {"aux", offsetof(struct cg_cgan_config, aux), 0, CG_CGAN_MAX_AUX, 1, 0},
};
#undef KEY

const struct cg_arch cg_arch_cgan = {
    .name = "cgan",
    .summary = "conditional GAN (MLP or CNN, projection discriminator, "
               "hinge loss)",
    .loss_name = "d_hinge",
    .part_names = {"d_real", "d_fake", "g"},
    .opts = cgan_opts,
    .nopts = sizeof(cgan_opts) / sizeof(cgan_opts[0]),
    .keys = cgan_keys,
    .nkeys = sizeof(cgan_keys) / sizeof(cgan_keys[0]),
    .quiet = cgan_quiet,
    .config_size = sizeof(struct cg_cgan_config),
    .check_config = check_config,
    .config_from_shard = cg_arch_image_from_shard,
    .nconds = cg_arch_image_nconds,
    .image_shape = cg_arch_image_sample_shape,
    .layout = cgan_layout,
    .init = cgan_init,
    .check_data = cg_arch_image_check,
    .batch = cgan_batch,
    .ws_bytes = cgan_ws_bytes,
    .checkpoints = 1,
    .can_checkpoint = cgan_can_checkpoint,
    .sample_image = cgan_sample_image,
    .adversarial = 1,
    .free_ws = cgan_free_ws,
    .check_teacher = cgan_check_teacher,
    .distill = cgan_distill,
    .teacher_bytes = cgan_teacher_bytes,
    .keeps = cgan_keeps,
};

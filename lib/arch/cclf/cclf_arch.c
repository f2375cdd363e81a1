/*
 * arch/cclf/cclf_arch.c - the cclf architecture (an image classifier) as the
 * model layer sees it.  A CNN's image shape is the manifest's "image".
 *
 * Binds lib/arch/cclf/cclf.c to struct cg_arch: config from JSON, the shard's
 * bytes read as intensities (pixel / 255) and its conditions as the
 * labels.  It generates nothing (no sample hook); it classifies
 * (struct cg_arch's classify), which is what makes a cclf model a judge
 * for cg-eval --judge.  It draws no randomness: noise_seed is unused.
 *
 * Distillation (cclf_distill): the teacher, a cclf of the same
 * conditions and images but of any size or kind (an MLP or a CNN),
 * classifies the very images of the student's batch, in the student's
 * chunks; its class distribution at the temperature is the soft target
 * of cg_cclf_distill_forward_backward.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/cclf/cclf.h"
#include "arch/common.h"
#include "model/model.h"
#include "nn/transformer.h"

struct cclf_ws {
	struct cg_cclf_config c;
	struct cg_cclf_ws *ws;
	int cap;
	float *x;
	int *cond;
	float *tlogp; /* a teacher's: log softmax(logits / tau) [cap,
	               * ncond], or NULL */
};

extern const struct cg_arch cg_arch_cclf;

/*
 * m's config: its keys, and for the CNN the image's shape from the
 * manifest, then checked whole.
 */
static int
get_config(const struct cg_model *m, struct cg_cclf_config *c)
{
	if (cg_arch_read_config(&cg_arch_cclf, m->config, c) != 0)
		return -1;
	if (c->conv == 0)
		return 0;
	if (cg_arch_image_hwc(m, c->in_dim, &c->height, &c->width,
	                      &c->channels) != 0)
		return -1;
	return cg_cclf_check_config(c);
}

static int
cclf_layout(struct cg_model *m)
{
	struct cg_cclf_config c;
	int nv;

	if (get_config(m, &c) != 0)
		return -1;
	m->nparams = cg_cclf_nparams(&c);
	nv = 2 * (c.layers + 1 + (c.conv ? CG_CCLF_STAGES : 0));
	if ((m->views = calloc((size_t)nv, sizeof(*m->views))) == NULL)
		return cg_seterr("out of memory");
	if ((m->nviews = cg_cclf_views(&c, m->views, nv)) < 0)
		return -1;
	return 0;
}

static void
cclf_init(struct cg_model *m, struct cg_rng *r)
{
	struct cg_cclf_config c;

	if (get_config(m, &c) == 0)
		cg_cclf_init(&c, m->params, r);
}

static int
cclf_config_from_shard(const struct cg_arch *a, const struct cg_shard *s,
                       cJSON *config, cJSON *extra)
{
	(void)a;
	if (s->nconditions < 2)
		return cg_seterr("cclf needs data of at least 2 conditions");
	return cg_arch_image_config("cclf", s, config, extra);
}

static int
cclf_nfeatures(const struct cg_model *m)
{
	struct cg_cclf_config c;

	return get_config(m, &c) != 0 ? -1 : c.hidden;
}

static void
cclf_free_ws(struct cg_model *m)
{
	struct cclf_ws *w = m->ws;

	if (w == NULL)
		return;
	cg_cclf_ws_free(w->ws);
	free(w->x);
	free(w->cond);
	free(w->tlogp);
	free(w);
	m->ws = NULL;
	m->ws_batch = 0;
}

static struct cclf_ws *
get_ws(struct cg_model *m, int B)
{
	struct cclf_ws *w = m->ws;

	if (w && w->cap >= B)
		return w;
	cclf_free_ws(m);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	m->ws = w;
	if (get_config(m, &w->c) != 0 ||
	    (w->ws = cg_cclf_ws_new(&w->c, B)) == NULL ||
	    (m->stored != NULL &&
	     cg_cclf_ws_set_mats(w->ws, m->stored, m->nviews) != 0) ||
	    (w->x = cg_alloc((size_t)B * w->c.in_dim * sizeof(float))) ==
	        NULL ||
	    (w->cond = cg_alloc((size_t)B * sizeof(int))) == NULL) {
		cclf_free_ws(m);
		return NULL;
	}
	w->cap = m->ws_batch = B;
	return w;
}

/* Every weight (the even views: convolutions' and Linear layers') stays
 * as stored, in any float dtype: the passes multiply it so or decode it
 * one layer at a time (cg_cclf_ws_set_mats); the biases are decoded. */
static int
cclf_keeps(const struct cg_model *m, int i, enum cg_dtype dt)
{
	(void)m;
	(void)dt;
	return i % 2 == 0 ? CG_KEEP_ANY : CG_KEEP_NONE;
}

/* Examples ex [B] of s into w's inputs (pixels in [0, 1]) and labels. */
static void
load_batch(struct cclf_ws *w, const struct cg_shard *s, const uint64_t *ex,
           int B)
{
	const int D = w->c.in_dim;

	for (int b = 0; b < B; b++) {
		uint64_t len;
		const uint8_t *px = cg_shard_example(s, ex[b], &len);

		for (int i = 0; i < D; i++)
			w->x[(size_t)b * D + i] = px[i] * (1.0f / 255.0f);
		w->cond[b] = (int)s->cond[ex[b]];
	}
}

/* A batch, or a chunk of one, whole (cclf_batch chunks). */
static int
cclf_run(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cclf_ws *w = get_ws(m, B);
	double loss, acc;

	(void)noise_seed;
	if (w == NULL)
		return -1;
	load_batch(w, s, ex, B);
	if (cg_cclf_forward_backward(&w->c, m->params, w->ws, w->x, w->cond, B,
	                             grad, &loss, &acc) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->part[0] = acc;
	out->n = (uint64_t)B;
	return 0;
}

static int
cclf_dp_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
              int B, uint64_t noise_seed, double clip, float *grad,
              struct cg_metrics *out)
{
	struct cclf_ws *w = get_ws(m, B);
	double loss, acc;

	(void)noise_seed;
	if (w == NULL)
		return -1;
	load_batch(w, s, ex, B);
	if (cg_cclf_dp_forward_backward(&w->c, m->params, w->ws, w->x, w->cond,
	                                B, clip, grad, &loss, &acc, NULL) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->part[0] = acc;
	out->n = (uint64_t)B;
	return 0;
}

static int
cclf_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	return cg_arch_chunked(m, cclf_run, s, ex, B, noise_seed, grad, out);
}

/* Its workspace for batches of B in chunks of chunk: the kernels', a
 * chunk's inputs, and the chunks' gradient.  No checkpointing. */
static size_t
cclf_ws_bytes(struct cg_model *m, int B, int chunk, int checkpoint)
{
	struct cg_cclf_config c;
	const int cap = cg_arch_chunk_of(B, chunk);
	size_t n;

	(void)checkpoint;
	if (get_config(m, &c) != 0 || (n = cg_cclf_ws_bytes(&c, cap)) == 0)
		return 0;
	return n + sizeof(struct cclf_ws) +
	       (size_t)cap * ((size_t)c.in_dim * sizeof(float) + sizeof(int)) +
	       cg_arch_chunk_bytes(m, B, cap);
}

/* ------------------------------------------------------- distillation */

/*
 * A teacher must classify the student's images into its conditions: the
 * same conditions (model.c compares their names), the same image shape
 * (a CNN reads it from the manifest; an MLP of another shape of as many
 * pixels would read the pixels in another order of meaning).  Its size
 * and kind are its own.
 */
static int
cclf_check_teacher(const struct cg_model *m, const struct cg_model *t)
{
	struct cg_cclf_config c, ct;

	if (get_config(m, &c) != 0 || get_config(t, &ct) != 0)
		return -1;
	return cg_arch_same_images(m, t, c.ncond, ct.ncond, c.in_dim,
	                           ct.in_dim, "reads");
}

/* The teacher's workspace for batches of B in chunks of chunk: its
 * forward pass's and its log-probabilities. */
static size_t
cclf_teacher_bytes(struct cg_model *t, int B, int chunk)
{
	struct cg_cclf_config ct;
	const int cap = cg_arch_chunk_of(B, chunk);
	size_t n;

	if (get_config(t, &ct) != 0 || (n = cg_cclf_ws_bytes(&ct, cap)) == 0)
		return 0;
	return n + sizeof(struct cclf_ws) +
	       (size_t)cap * ((size_t)ct.in_dim * sizeof(float) + sizeof(int) +
	                      (size_t)ct.ncond * sizeof(float));
}

/* A batch, or a chunk of one, whole (cclf_distill chunks). */
static int
cclf_distill_run(struct cg_model *m, const struct cg_distill *d,
                 const struct cg_shard *s, const uint64_t *ex, int B,
                 uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cg_model *t = d->teacher;
	struct cclf_ws *w = get_ws(m, B), *tw;
	double loss, acc, data, teach;

	(void)noise_seed;
	if (w == NULL || (tw = get_ws(t, B)) == NULL)
		return -1;
	if (tw->tlogp == NULL &&
	    (tw->tlogp = cg_alloc((size_t)tw->cap * tw->c.ncond *
	                          sizeof(float))) == NULL)
		return -1;
	load_batch(w, s, ex, B);
	if (cg_cclf_forward_backward(&tw->c, t->params, tw->ws, w->x, NULL, B,
	                             NULL, NULL, NULL) != 0)
		return -1;
	cg_log_softmax_forward(tw->tlogp, cg_cclf_logits(tw->ws), (float)d->tau,
	                       (size_t)B, tw->c.ncond);
	if (cg_cclf_distill_forward_backward(
	        &w->c, m->params, w->ws, w->x, w->cond, tw->tlogp, d->alpha,
	        d->tau, B, grad, &loss, &acc, &data, &teach) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->part[0] = acc;
	out->data = data;
	out->teacher = teach;
	out->n = (uint64_t)B;
	return 0;
}

static int
cclf_distill(struct cg_model *m, const struct cg_distill *d,
             const struct cg_shard *s, const uint64_t *ex, int B,
             uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	return cg_arch_chunked_distill(m, cclf_distill_run, d, s, ex, B,
	                               noise_seed, grad, out);
}

static int
cclf_classify(struct cg_model *m, const float *x, int n, float *logits,
              float *feat)
{
	struct cclf_ws *w = get_ws(m, n);

	if (w == NULL ||
	    cg_cclf_forward_backward(&w->c, m->params, w->ws, x, NULL, n, NULL,
	                             NULL, NULL) != 0)
		return -1;
	if (logits)
		memcpy(logits, cg_cclf_logits(w->ws),
		       (size_t)n * w->c.ncond * sizeof(float));
	if (feat) {
		/* The features are the leading n rows of the last hidden
		 * layer's buffer: contiguous. */
		memcpy(feat, cg_cclf_features(w->ws),
		       (size_t)n * w->c.hidden * sizeof(float));
	}
	return 0;
}

/* cg-init's options; their keys follow in_dim and ncond in the config. */
static const struct cg_arch_opt cclf_opts[] = {
    {"hidden", CG_ARCH_OPT_INT, 1024, 1, 1 << 20,
     "hidden width (the judge's features)"},
    {"layers", CG_ARCH_OPT_INT, 2, 1, 64, "hidden layers"},
    {"conv", CG_ARCH_OPT_INT, 0, 0, CG_CCLF_MAX_CONV,
     "a CNN trunk's first channels (0: none, the MLP)"},
};

/* What the keys alone say: the CNN's image shape is the manifest's,
 * which get_config adds and checks. */
static int
check_config(const void *config)
{
	struct cg_cclf_config c = *(const struct cg_cclf_config *)config;

	if (cg_arch_conv_keys("cclf", "conv", &c.conv, CG_CCLF_MAX_CONV,
	                      c.height) < 0)
		return -1;
	return cg_cclf_check_config(&c);
}

#define KEY(name, field)                                                       \
	{name, offsetof(struct cg_cclf_config, field), 1, CG_CCLF_MAX_DIM, 0, 0}
static const struct cg_arch_key cclf_keys[] = {
    KEY("in_dim", in_dim),
    KEY("ncond", ncond),
    KEY("hidden", hidden),
    KEY("layers", layers),
    {"conv", offsetof(struct cg_cclf_config, conv), 0, CG_CCLF_MAX_CONV, 1,
     0},
};
#undef KEY

const struct cg_arch cg_arch_cclf = {
    .name = "cclf",
    .summary = "image classifier (MLP or CNN) of the conditions: "
               "cg-eval's judge",
    .loss_name = "xent",
    .part_names = {"acc", NULL, NULL},
    .opts = cclf_opts,
    .nopts = sizeof(cclf_opts) / sizeof(cclf_opts[0]),
    .keys = cclf_keys,
    .nkeys = sizeof(cclf_keys) / sizeof(cclf_keys[0]),
    .config_size = sizeof(struct cg_cclf_config),
    .check_config = check_config,
    .config_from_shard = cclf_config_from_shard,
    .nconds = cg_arch_image_nconds,
    .image_shape = cg_arch_image_sample_shape,
    .layout = cclf_layout,
    .init = cclf_init,
    .check_data = cg_arch_image_check,
    .batch = cclf_batch,
    .dp_batch = cclf_dp_batch,
    .ws_bytes = cclf_ws_bytes,
    .free_ws = cclf_free_ws,
    .classify = cclf_classify,
    .nfeatures = cclf_nfeatures,
    .check_teacher = cclf_check_teacher,
    .distill = cclf_distill,
    .teacher_bytes = cclf_teacher_bytes,
    .keeps = cclf_keeps,
};

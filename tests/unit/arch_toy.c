/*
 * arch_toy.c - a test-only architecture: independent logistic pixels per
 * condition.
 *
 * It shows that an architecture is its own file and nothing else: it is
 * not in lib/arch/all.c's table and no program names it, yet the copies of
 * cg-init, cg-train-step, cg-apply, cg-eval and cg-sample that the suite
 * links with this file (tests/toy/, never installed) handle it, because
 * the constructor below registers it with cg_arch_register().
 *
 * The model: pixel i of an image of condition k is on with probability
 * sigmoid(z[k, i]), z[k, i] = L[k, i] (+ S[i] with the option --shared),
 * independently of the other pixels.  The targets are the pixels scaled
 * to [0, 1], x = byte / 255, and the loss of an example is the Bernoulli
 * cross-entropy summed over its pixels,
 *
 *     loss = sum_i softplus(z_i) - x_i z_i,   d loss / d z_i = sigmoid(z_i) -
 * x_i,
 *
 * reported as the mean over the batch ("nll", nats per image).  Weights
 * start as --spread times standard normal draws (S at zero).  Sampling
 * draws each pixel on (1) or off (0) with probability sigmoid(z / T) at
 * temperature T (T = 0: on where z > 0).  Config keys: in_dim and ncond
 * (from the shard, by cg_arch_image_config), then spread and shared.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/common.h"
#include "model/model.h"
#include "nn/gemm.h"

#define TOY_MAX_PARAMS ((uint64_t)1 << 26)

struct toy_config {
	int in_dim, ncond, shared;
	double spread;
};

static int
get_config(const cJSON *j, struct toy_config *c)
{
	static const char *keys[] = {"in_dim", "ncond", "shared"};
	int *dst[] = {&c->in_dim, &c->ncond, &c->shared};
	const int lo[] = {1, 1, 0}, hi[] = {1 << 24, 1 << 16, 1};
	const cJSON *v;

	for (int i = 0; i < 3; i++)
		if (cg_arch_config_int(j, keys[i], lo[i], hi[i], dst[i]) != 0)
			return -1;
	v = cJSON_GetObjectItemCaseSensitive(j, "spread");
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 10)
		return cg_seterr("config: \"spread\" missing or out of range");
	c->spread = v->valuedouble;
	if ((uint64_t)c->ncond * c->in_dim + c->in_dim > TOY_MAX_PARAMS)
		return cg_seterr("toy: %d x %d logits: too many", c->ncond,
		                 c->in_dim);
	return 0;
}

static int
toy_nconds(const struct cg_model *m)
{
	struct toy_config c;

	return get_config(m->config, &c) != 0 ? -1 : c.ncond;
}

static int
toy_image_shape(const struct cg_model *m, int shape[3])
{
	struct toy_config c;

	if (get_config(m->config, &c) != 0)
		return -1;
	return cg_arch_image_shape(m, (uint64_t)c.in_dim, shape);
}

/* Views: "cond.logit" [ncond, in_dim], then "shared.logit" [in_dim]. */
static int
toy_layout(struct cg_model *m)
{
	struct toy_config c;
	struct cg_view *v;

	if (get_config(m->config, &c) != 0)
		return -1;
	if ((m->views = v = calloc(2, sizeof(*v))) == NULL)
		return cg_seterr("out of memory");
	snprintf(v[0].name, sizeof(v[0].name), "cond.logit");
	v[0].n = (size_t)c.ncond * c.in_dim;
	v[0].ndim = 2;
	v[0].shape[0] = (uint64_t)c.ncond;
	v[0].shape[1] = (uint64_t)c.in_dim;
	m->nviews = 1;
	m->nparams = v[0].n;
	if (c.shared) {
		snprintf(v[1].name, sizeof(v[1].name), "shared.logit");
		v[1].off = v[0].n;
		v[1].n = (size_t)c.in_dim;
		v[1].ndim = 1;
		v[1].shape[0] = (uint64_t)c.in_dim;
		m->nviews = 2;
		m->nparams += v[1].n;
	}
	return 0;
}

static void
toy_init(struct cg_model *m, struct cg_rng *r)
{
	struct toy_config c;

	if (get_config(m->config, &c) != 0)
		return;
	for (size_t i = 0; i < (size_t)c.ncond * c.in_dim; i++)
		m->params[i] = (float)(c.spread * cg_rng_normal(r));
}

static int
toy_check_data(struct cg_model *m, const struct cg_shard *s)
{
	struct toy_config c;

	if (get_config(m->config, &c) != 0)
		return -1;
	return cg_arch_check_image_data("toy", m, s, c.in_dim, c.ncond);
}

/* The logit of pixel i for condition k. */
static double
logit(const struct cg_model *m, const struct toy_config *c, int k, int i)
{
	double z = m->params[(size_t)k * c->in_dim + i];

	return c->shared ? z + m->params[(size_t)c->ncond * c->in_dim + i] : z;
}

/* log(1 + e^z) without overflow. */
static double
softplus(double z)
{
	return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
}

static int
toy_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
          int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct toy_config c;
	double loss = 0;

	(void)noise_seed; /* the toy draws nothing while it learns */
	if (get_config(m->config, &c) != 0)
		return -1;
	if (B < 1)
		return cg_seterr("toy: batch %d: not positive", B);
	for (int b = 0; b < B; b++) {
		uint64_t len;
		const uint8_t *px;
		int k;

		if (ex[b] >= s->n)
			return cg_seterr(
			    "toy: example %llu: the shard has %llu",
			    (unsigned long long)ex[b],
			    (unsigned long long)s->n);
		px = cg_shard_example(s, ex[b], &len);
		k = (int)s->cond[ex[b]];
		for (int i = 0; i < c.in_dim; i++) {
			double z = logit(m, &c, k, i), x = px[i] / 255.0;
			/* times f16's loss scale, as every arch's seed */
			double g = cg_loss_scale() *
			           ((1.0 / (1.0 + exp(-z)) - x) / B);

			loss += softplus(z) - x * z;
			if (grad == NULL)
				continue;
			grad[(size_t)k * c.in_dim + i] += (float)g;
			if (c.shared)
				grad[(size_t)c.ncond * c.in_dim + i] +=
				    (float)g;
		}
	}
	memset(out, 0, sizeof(*out));
	out->loss = loss / B;
	out->n = (uint64_t)B;
	return 0;
}

static int
toy_sample_image(struct cg_model *m, const int *cond, int n, double temperature,
                 struct cg_rng *r, float *out)
{
	struct toy_config c;

	if (get_config(m->config, &c) != 0)
		return -1;
	for (int j = 0; j < n; j++) {
		if (cond[j] < 0 || cond[j] >= c.ncond)
			return cg_seterr("toy: condition %d out of range",
			                 cond[j]);
		for (int i = 0; i < c.in_dim; i++) {
			double z = logit(m, &c, cond[j], i);
			double p = temperature > 0
			               ? 1.0 / (1.0 + exp(-z / temperature))
			               : z > 0;
			out[(size_t)j * c.in_dim + i] =
			    cg_rng_uniform(r) < p ? 1.0f : 0.0f;
		}
	}
	return 0;
}

static const struct cg_arch_opt toy_opts[] = {
    {"spread", CG_ARCH_OPT_FLOAT, 0.5, 0, 10,
     "standard deviation of the initial logits"},
    {"shared", CG_ARCH_OPT_BOOL, 0, 0, 1,
     "add a logit per pixel that all conditions share"},
};

const struct cg_arch cg_arch_toy = {
    .name = "toy",
    .summary = "independent logistic pixels per condition (tests only)",
    .loss_name = "nll",
    .part_names = {NULL, NULL, NULL},
    .opts = toy_opts,
    .nopts = sizeof(toy_opts) / sizeof(toy_opts[0]),
    .config_from_shard = cg_arch_image_from_shard,
    .nconds = toy_nconds,
    .image_shape = toy_image_shape,
    .layout = toy_layout,
    .init = toy_init,
    .check_data = toy_check_data,
    .batch = toy_batch,
    .sample_image = toy_sample_image,
};

/* The registration hook: runs before main, so the program finds "toy"
 * like any architecture of the table. */
__attribute__((constructor)) static void
register_toy(void)
{
	if (cg_arch_register(&cg_arch_toy) != 0) {
		fprintf(stderr, "arch_toy: %s\n", cg_errmsg());
		abort();
	}
}

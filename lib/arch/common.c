/*
 * arch/common.c - what the architectures share: whole numbers of a
 * config, and the image archs' config, image shape and data checks.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/common.h"
#include "core/util.h"
#include "data/image.h"
#include "model/model.h"

int
cg_arch_image_config(const char *arch, const struct cg_shard *s, cJSON *config,
                     cJSON *extra)
{
	cJSON *img;

	if (s->kind != CG_PAYLOAD_IMAGE)
		return cg_seterr("%s needs image data", arch);
	if ((img = cJSON_AddObjectToObject(extra, "image")) == NULL ||
	    !cJSON_AddNumberToObject(img, "height", s->height) ||
	    !cJSON_AddNumberToObject(img, "width", s->width) ||
	    !cJSON_AddNumberToObject(img, "channels", s->channels) ||
	    !cJSON_AddNumberToObject(
	        config, "in_dim", (double)s->height * s->width * s->channels) ||
	    !cJSON_AddNumberToObject(config, "ncond", (double)s->nconditions))
		return cg_seterr("out of memory");
	return 0;
}

int
cg_arch_config_int(const cJSON *obj, const char *key, int lo, int hi, int *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi ||
	    v->valuedouble != (int)v->valuedouble)
		return cg_seterr("config: \"%s\" missing or out of range", key);
	*out = (int)v->valuedouble;
	return 0;
}

/* A positive whole number under key of obj, at most max; else -1. */
static int
json_int(const cJSON *obj, const char *key, int max)
{
	int v;

	return cg_arch_config_int(obj, key, 1, max, &v) != 0 ? -1 : v;
}

int
cg_arch_check_image_data(const char *arch, const struct cg_model *m,
                         const struct cg_shard *s, int in_dim, int ncond)
{
	if (s->kind != CG_PAYLOAD_IMAGE)
		return cg_seterr("%s needs image data", arch);
	if ((uint64_t)s->height * s->width * s->channels != (uint64_t)in_dim)
		return cg_seterr("images of %ux%ux%u do not fit a model of "
		                 "%d inputs",
		                 s->height, s->width, s->channels, in_dim);
	if (s->nconditions != (size_t)ncond)
		return cg_seterr("%zu conditions in the data, %d in the model%s",
		                 s->nconditions, ncond,
		                 m->arch->recondition
		                     ? " (cg-init --from MODEL -d SHARD makes "
		                       "it over for the data's)"
		                     : "");
	return cg_model_check_conditions(m, s);
}

int
cg_arch_image_shape(const struct cg_model *m, uint64_t in_dim, int shape[3])
{
	const cJSON *img =
	    cJSON_GetObjectItemCaseSensitive(m->manifest, "image");
	int h, w, c;

	if ((h = json_int(img, "height", CG_IMAGE_MAX_SIDE)) < 0 ||
	    (w = json_int(img, "width", CG_IMAGE_MAX_SIDE)) < 0 ||
	    (c = json_int(img, "channels", 4)) < 0)
		return cg_seterr("manifest: no valid \"image\" "
		                 "{height, width, channels}");
	if (in_dim != (uint64_t)h * w * c)
		return cg_seterr("manifest: images of %dx%dx%d, but the model "
		                 "makes %llu values per image",
		                 h, w, c, (unsigned long long)in_dim);
	shape[0] = h;
	shape[1] = w;
	shape[2] = c;
	return 0;
}

int
cg_arch_same_images(const struct cg_model *m, const struct cg_model *t,
                    int ncond, int t_ncond, int in_dim, int t_in_dim,
                    const char *verb)
{
	int sm[3], st[3];

	if (ncond != t_ncond)
		return cg_seterr("the teacher has %d conditions, the model %d",
		                 t_ncond, ncond);
	if (in_dim != t_in_dim)
		return cg_seterr("the teacher's images have %d values, the "
		                 "model's %d",
		                 t_in_dim, in_dim);
	/* where both manifests give a shape, it is the same */
	if (cg_arch_image_shape(m, (uint64_t)in_dim, sm) == 0 &&
	    cg_arch_image_shape(t, (uint64_t)t_in_dim, st) == 0 &&
	    (sm[0] != st[0] || sm[1] != st[1] || sm[2] != st[2]))
		return cg_seterr("the teacher %s images of %dx%dx%d, the "
		                 "model %dx%dx%d",
		                 verb, st[0], st[1], st[2], sm[0], sm[1], sm[2]);
	return 0;
}

int
cg_arch_image_hwc(const struct cg_model *m, int in_dim, int *h, int *w,
                  int *ch)
{
	int shape[3];

	if (in_dim < 1 || cg_arch_image_shape(m, (uint64_t)in_dim, shape) != 0)
		return in_dim < 1 ? cg_seterr("config: in_dim %d", in_dim) : -1;
	*h = shape[0];
	*w = shape[1];
	*ch = shape[2];
	return 0;
}

int
cg_arch_conv_keys(const char *arch, const char *key, int *conv, int max,
                  int height)
{
	if (*conv <= 0 || height != 0)
		return 0;
	if (*conv > max)
		return cg_seterr("%s: %s = %d: not in [0, %d]", arch, key,
		                 *conv, max);
	*conv = 0;
	return 1;
}

/* The in_dim and ncond of m's config, as m->arch reads its config (its
 * key table, then its check). */
static int
image_dims(const struct cg_model *m, int *in_dim, int *ncond)
{
	_Alignas(max_align_t) unsigned char c[CG_ARCH_MAX_CONFIG];
	const struct cg_arch *a = m->arch;
	int found = 0;

	if (cg_arch_read_config(a, m->config, c) != 0)
		return -1;
	for (int i = 0; i < a->nkeys; i++)
		if (strcmp(a->keys[i].name, "in_dim") == 0)
			memcpy(in_dim, c + a->keys[i].offset, sizeof(int)),
			    found |= 1;
		else if (strcmp(a->keys[i].name, "ncond") == 0)
			memcpy(ncond, c + a->keys[i].offset, sizeof(int)),
			    found |= 2;
	if (found != 3)
		return cg_seterr("arch %s: no in_dim or ncond key", a->name);
	return 0;
}

int
cg_arch_image_nconds(const struct cg_model *m)
{
	int in_dim, ncond;

	return image_dims(m, &in_dim, &ncond) != 0 ? -1 : ncond;
}

int
cg_arch_image_sample_shape(const struct cg_model *m, int shape[3])
{
	int in_dim, ncond;

	if (image_dims(m, &in_dim, &ncond) != 0)
		return -1;
	return cg_arch_image_shape(m, (uint64_t)in_dim, shape);
}

int
cg_arch_image_check(struct cg_model *m, const struct cg_shard *s)
{
	int in_dim, ncond;

	if (image_dims(m, &in_dim, &ncond) != 0)
		return -1;
	return cg_arch_check_image_data(m->arch->name, m, s, in_dim, ncond);
}

int
cg_arch_image_from_shard(const struct cg_arch *a, const struct cg_shard *s,
                         cJSON *config, cJSON *extra)
{
	return cg_arch_image_config(a->name, s, config, extra);
}

/* ------------------------------------------------------------- chunks */

int
cg_arch_chunk_of(int B, int chunk)
{
	if (chunk <= 0 || chunk >= B)
		return B;
	int n = (B + chunk - 1) / chunk;
	return (B + n - 1) / n;
}

size_t
cg_arch_chunk_bytes(const struct cg_model *m, int B, int cap)
{
	return cap < B ? m->nparams * sizeof(float) : 0;
}

/* cg_arch_chunked's loop, over run or, with d, rund. */
static int
chunked(struct cg_model *m, cg_arch_batch_fn run, cg_arch_distill_fn rund,
        const struct cg_distill *d, const struct cg_shard *s,
        const uint64_t *ex, int B, uint64_t noise_seed, float *grad,
        struct cg_metrics *out)
{
	const int cap = cg_arch_chunk_of(B, m->chunk);
	float *g = NULL;
	struct cg_metrics sum = {0}, part;

	if (cap >= B)
		return d ? rund(m, d, s, ex, B, noise_seed, grad, out)
		         : run(m, s, ex, B, noise_seed, grad, out);
	if (grad &&
	    (g = cg_alloc((size_t)m->nparams * sizeof(float))) == NULL)
		return -1;
	for (int at = 0; at < B; at += cap) {
		const int n = B - at < cap ? B - at : cap;
		const double share = (double)n / B;

		if (g)
			memset(g, 0, (size_t)m->nparams * sizeof(float));
		if ((d ? rund(m, d, s, ex + at, n, noise_seed, g, &part)
		       : run(m, s, ex + at, n, noise_seed, g, &part)) != 0) {
			free(g);
			return -1;
		}
		if (g) {
			const float f = (float)share;
			for (size_t i = 0; i < m->nparams; i++)
				grad[i] += f * g[i];
		}
		sum.loss += share * part.loss;
		for (int k = 0; k < 3; k++)
			sum.part[k] += share * part.part[k];
		sum.bits_per += share * part.bits_per;
		sum.data += share * part.data;
		sum.teacher += share * part.teacher;
	}
	free(g);
	sum.n = (uint64_t)B;
	*out = sum;
	return 0;
}

int
cg_arch_chunked(struct cg_model *m, cg_arch_batch_fn run,
                const struct cg_shard *s, const uint64_t *ex, int B,
                uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	return chunked(m, run, NULL, NULL, s, ex, B, noise_seed, grad, out);
}

int
cg_arch_chunked_distill(struct cg_model *m, cg_arch_distill_fn run,
                        const struct cg_distill *d, const struct cg_shard *s,
                        const uint64_t *ex, int B, uint64_t noise_seed,
                        float *grad, struct cg_metrics *out)
{
	if (d == NULL)
		return cg_seterr("%s: distillation without a teacher",
		                 m->arch->name);
	return chunked(m, NULL, run, d, s, ex, B, noise_seed, grad, out);
}

/* ------------------------------------------------ structured pruning */

int
cg_arch_removed(double remove, int n)
{
	int k = (int)floor(remove * n + 0.5);

	if (k > n - 1)
		k = n - 1;
	return k < 0 ? 0 : k;
}

void
cg_arch_least(unsigned char *keep, const double *score, int n, int k)
{
	for (int i = 0; i < n; i++)
		keep[i] = 1;
	for (int r = 0; r < k; r++) {
		int best = -1;
		double bs = 0;
		for (int i = 0; i < n; i++) {
			double s = score[i] == score[i] ? score[i] : 0;
			if (keep[i] && (best < 0 || s < bs))
				best = i, bs = s;
		}
		if (best >= 0)
			keep[best] = 0;
	}
}

void
cg_arch_sub(float *dst, float *src, size_t R, size_t K,
            const unsigned char *kr, const unsigned char *kc)
{
	for (size_t r = 0; r < R; r++) {
		float *row = src + r * K;
		int rk = kr == NULL || kr[r];
		for (size_t j = 0; j < K; j++) {
			int ck = kc == NULL || kc[j];
			if (dst == NULL) {
				if (!rk || !ck)
					row[j] = 0;
			} else if (rk && ck)
				*dst++ = row[j];
		}
	}
}

double
cg_arch_norm(const float *x, size_t R, size_t K, long r, long col)
{
	double s = 0;

	if (col < 0)
		for (size_t j = 0; j < K; j++)
			s += (double)x[r * K + j] * x[r * K + j];
	else
		for (size_t i = 0; i < R; i++)
			s += (double)x[i * K + col] * x[i * K + col];
	return sqrt(s);
}

int
cg_arch_view(const struct cg_model *m, const char *name)
{
	for (int i = 0; i < m->nviews; i++)
		if (strcmp(m->views[i].name, name) == 0)
			return i;
	return -1;
}

/*
 * eval/judge.c - a classifier's verdict on an image generator.
 *
 * Condition by condition: the shard's images of the condition through
 * the judge (features into that condition's and the overall real
 * moments), then the generator's n images of it (into the generated
 * ones), and the condition's Fréchet distance; the overall distance at
 * the end.  No feature vector is kept, only the moments (lib/eval/frechet.h):
 * memory is a few d x d matrices whatever the shard's size.  Each real
 * image is classified once, so the work is the shard's and n per
 * condition's images through the judge, n per condition through the
 * generator, and 2 K + 2 of the moments' d x d eigenproblems.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "eval/frechet.h"
#include "eval/judge.h"
#include "model/cond.h"
#include "model/draw.h"

/* ------------------------------------------------------------- checks */

int
cg_judge_check(const struct cg_model *judge, const struct cg_model *m)
{
	const char **nj = NULL, **nm = NULL;
	int sj[3], sm[3], kj, km, f = 0;

	if (judge->arch->classify == NULL)
		return cg_seterr("the judge is a %s model, not a classifier",
		                 judge->arch->name);
	if (m->arch->sample_image == NULL)
		return cg_seterr("the model is a %s model, which draws no "
		                 "images",
		                 m->arch->name);
	if (judge->arch->image_shape(judge, sj) != 0) {
		cg_errprefix("the judge");
		return -1;
	}
	if (m->arch->image_shape(m, sm) != 0) {
		cg_errprefix("the model");
		return -1;
	}
	if (memcmp(sj, sm, sizeof(sj)) != 0)
		return cg_seterr("the judge reads images of %dx%dx%d, the "
		                 "model draws %dx%dx%d",
		                 sj[0], sj[1], sj[2], sm[0], sm[1], sm[2]);
	if ((kj = judge->arch->nconds(judge)) < 0 ||
	    (km = m->arch->nconds(m)) < 0)
		return -1;
	if (kj != km)
		return cg_seterr("the judge knows %d conditions, the model %d",
		                 kj, km);
	if (cg_model_conditions(judge, 0, &nj, &kj) != 0 ||
	    cg_model_conditions(m, 0, &nm, &km) != 0) {
		free(nj);
		return -1;
	}
	for (int i = 0; nj && nm && i < kj; i++)
		if (strcmp(nj[i], nm[i]) != 0) {
			cg_seterr("condition %d is \"%.64s\" to the judge but "
			          "\"%.64s\" to the model",
			          i, nj[i], nm[i]);
			f = -1;
			break;
		}
	free(nj);
	free(nm);
	if (f == -1)
		return -1;
	if ((f = judge->arch->nfeatures(judge)) < 0)
		return -1;
	if (f < 1 || f > CG_FRECHET_MAX_DIM)
		return cg_seterr("the judge has %d features: not in [1, %d]", f,
		                 CG_FRECHET_MAX_DIM);
	return 0;
}

/* ------------------------------------------------------------ scoring */

/* What one evaluation works in. */
struct work {
	struct cg_model *m, *judge;
	const struct cg_judge_opts *o;
	int K, D, F, B;
	float *x;      /* [B, D] images */
	float *feat;   /* [B, F] */
	float *logits; /* [B, K] */
	int *cond;     /* [B] */
	double *mu1, *mu2, *cov1, *cov2;
	struct cg_moments real, drawn;   /* overall */
	struct cg_moments creal, cdrawn; /* the condition's */
	int done, total;
};

/* Classify x's first n images with the judge; their features into the
 * moments a and b, and the count whose first largest logit is c.
 * -1 on the judge's failure. */
static int
judge_rows(struct work *w, int n, int c, struct cg_moments *a,
           struct cg_moments *b, uint64_t *right)
{
	if (w->judge->arch->classify(w->judge, w->x, n, w->logits, w->feat) !=
	    0)
		return -1;
	for (int i = 0; i < n; i++) {
		const float *l = w->logits + (size_t)i * w->K;
		int arg = 0;
		for (int k = 1; k < w->K; k++)
			if (l[k] > l[arg])
				arg = k;
		*right += arg == c;
	}
	cg_moments_add(a, w->feat, (size_t)n);
	cg_moments_add(b, w->feat, (size_t)n);
	w->done += n;
	if (w->o->progress)
		w->o->progress(w->o->progress_ctx, w->done, w->total, 0);
	return 0;
}

/* The distance between the Gaussians of a and b into *out; NAN when
 * either has fewer than 2 vectors.  -1 on failure. */
static int
distance(struct work *w, const struct cg_moments *a, const struct cg_moments *b,
         double *out)
{
	*out = NAN;
	if (a->n < 2 || b->n < 2)
		return 0;
	if (cg_moments_gauss(a, w->mu1, w->cov1) != 0 ||
	    cg_moments_gauss(b, w->mu2, w->cov2) != 0)
		return -1;
	return cg_frechet(out, w->mu1, w->cov1, w->mu2, w->cov2, w->F);
}

/* The shard's images of condition c, then n drawn for it. */
static int
one_condition(struct work *w, const struct cg_shard *s, int c,
              struct cg_judge_cond *jc)
{
	const struct cg_judge_opts *o = w->o;
	struct cg_rng rng;
	uint64_t i = 0;

	cg_moments_free(&w->creal);
	cg_moments_free(&w->cdrawn);
	if (cg_moments_init(&w->creal, w->F) != 0 ||
	    cg_moments_init(&w->cdrawn, w->F) != 0)
		return -1;
	while (i < s->n) {
		int n = 0;
		for (; i < s->n && n < w->B; i++) {
			uint64_t len;
			const uint8_t *px;
			if (s->cond[i] != (uint32_t)c)
				continue;
			px = cg_shard_example(s, i, &len);
			if (px == NULL || len < (uint64_t)w->D)
				return cg_seterr("example %llu: not an image "
				                 "of %d values",
				                 (unsigned long long)i, w->D);
			for (int j = 0; j < w->D; j++)
				w->x[(size_t)n * w->D + j] =
				    px[j] * (1.0f / 255.0f);
			n++;
		}
		if (n > 0 && judge_rows(w, n, c, &w->creal, &w->real,
		                        &jc->real_right) != 0)
			return -1;
		jc->real += (uint64_t)n;
	}
	/* As cg-sample draws condition c's images: one stream from
	 * (seed, c), consumed in order, whatever the chunks. */
	cg_draw_rng(&rng, o->seed, c, 0);
	for (int left = o->samples; left > 0;) {
		int n = left < w->B ? left : w->B;
		for (int j = 0; j < n; j++)
			w->cond[j] = c;
		if (w->m->arch->sample_image(w->m, w->cond, n, o->temperature,
		                             &rng, w->x) != 0)
			return -1;
		/* As an image file holds it: 8 bits, rounded as
		 * lib/data/image.c writes one. */
		for (size_t j = 0; j < (size_t)n * w->D; j++) {
			float v = w->x[j];
			w->x[j] = !(v > 0) ? 0
			          : v >= 1
			              ? 1
			              : (float)(uint8_t)(v * 255.0f + 0.5f) *
			                    (1.0f / 255.0f);
		}
		if (judge_rows(w, n, c, &w->cdrawn, &w->drawn, &jc->right) != 0)
			return -1;
		left -= n;
	}
	jc->drawn = (uint64_t)o->samples;
	jc->acc = (double)jc->right / (double)jc->drawn;
	jc->real_acc =
	    jc->real ? (double)jc->real_right / (double)jc->real : NAN;
	return distance(w, &w->cdrawn, &w->creal, &jc->frechet);
}

int
cg_judge_eval(struct cg_model *m, struct cg_model *judge,
              const struct cg_shard *s, const struct cg_judge_opts *o,
              struct cg_judge_result *r)
{
	struct work w = {0};
	int shape[3], rc = -1;

	memset(r, 0, sizeof(*r));
	if (o->samples < 2 || o->samples > CG_JUDGE_MAX_SAMPLES || o->batch < 1)
		return cg_seterr("judge: %d images per condition, batch %d",
		                 o->samples, o->batch);
	if (cg_judge_check(judge, m) != 0)
		return -1;
	if (judge->arch->check_data(judge, s) != 0) {
		cg_errprefix("the judge");
		return -1;
	}
	if (judge->arch->image_shape(judge, shape) != 0)
		return -1;
	w.m = m;
	w.judge = judge;
	w.o = o;
	w.K = judge->arch->nconds(judge);
	w.D = shape[0] * shape[1] * shape[2];
	w.F = judge->arch->nfeatures(judge);
	w.B = o->batch;
	if ((uint64_t)w.K * o->samples + s->n > INT32_MAX)
		return cg_seterr("judge: %d conditions of %d images and %llu "
		                 "real ones: too many",
		                 w.K, o->samples, (unsigned long long)s->n);
	w.total = w.K * o->samples + (int)s->n;
	const size_t F = w.F;
	if ((w.x = cg_alloc((size_t)w.B * w.D * sizeof(float))) == NULL ||
	    (w.feat = cg_alloc((size_t)w.B * F * sizeof(float))) == NULL ||
	    (w.logits = cg_alloc((size_t)w.B * w.K * sizeof(float))) == NULL ||
	    (w.cond = cg_alloc((size_t)w.B * sizeof(int))) == NULL ||
	    (w.mu1 = malloc(F * sizeof(double))) == NULL ||
	    (w.mu2 = malloc(F * sizeof(double))) == NULL ||
	    (w.cov1 = malloc(F * F * sizeof(double))) == NULL ||
	    (w.cov2 = malloc(F * F * sizeof(double))) == NULL ||
	    (r->cond = calloc((size_t)w.K, sizeof(*r->cond))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	if (cg_moments_init(&w.real, w.F) != 0 ||
	    cg_moments_init(&w.drawn, w.F) != 0)
		goto out;
	r->ncond = w.K;
	r->nfeatures = w.F;
	for (int c = 0; c < w.K; c++) {
		struct cg_judge_cond *jc = &r->cond[c];
		if (one_condition(&w, s, c, jc) != 0)
			goto out;
		r->drawn += jc->drawn;
		r->right += jc->right;
		r->real += jc->real;
		r->real_right += jc->real_right;
	}
	r->acc = (double)r->right / (double)r->drawn;
	r->real_acc = r->real ? (double)r->real_right / (double)r->real : NAN;
	if (r->real < 2) {
		cg_seterr("%llu real images: the Fréchet distance needs 2",
		          (unsigned long long)r->real);
		goto out;
	}
	if (distance(&w, &w.drawn, &w.real, &r->frechet) != 0)
		goto out;
	rc = 0;
out:
	if (rc != 0)
		cg_judge_result_free(r);
	free(w.x);
	free(w.feat);
	free(w.logits);
	free(w.cond);
	free(w.mu1);
	free(w.mu2);
	free(w.cov1);
	free(w.cov2);
	cg_moments_free(&w.real);
	cg_moments_free(&w.drawn);
	cg_moments_free(&w.creal);
	cg_moments_free(&w.cdrawn);
	return rc;
}

void
cg_judge_result_free(struct cg_judge_result *r)
{
	if (r == NULL)
		return;
	free(r->cond);
	memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------ reports */

void
cg_judge_table(FILE *fp, const struct cg_model *m,
               const struct cg_judge_result *r)
{
	fprintf(fp, "%-16s %10s %10s %10s %10s %12s\n", "condition", "drawn",
	        "acc", "real", "real_acc", "frechet");
	for (int c = 0; c <= r->ncond; c++) {
		const int all = c == r->ncond;
		const struct cg_judge_cond *jc = all ? NULL : &r->cond[c];
		const char *name = all ? "all" : cg_conds_name(m, c);
		double f = all ? r->frechet : jc->frechet;
		double ra = all ? r->real_acc : jc->real_acc;
		char idx[16];

		if (name == NULL) {
			snprintf(idx, sizeof(idx), "%d", c);
			name = idx;
		}
		fprintf(fp, "%-16s %10llu %10.4f %10llu", name,
		        (unsigned long long)(all ? r->drawn : jc->drawn),
		        all ? r->acc : jc->acc,
		        (unsigned long long)(all ? r->real : jc->real));
		if (isnan(ra))
			fprintf(fp, " %10s", "-");
		else
			fprintf(fp, " %10.4f", ra);
		if (isnan(f))
			fprintf(fp, " %12s\n", "-");
		else
			fprintf(fp, " %12.4f\n", f);
	}
}

/* A figure, or null where there is none (NAN). */
static void
add_figure(cJSON *j, const char *key, double v)
{
	if (isnan(v))
		cJSON_AddNullToObject(j, key);
	else
		cJSON_AddNumberToObject(j, key, v);
}

void
cg_judge_json(cJSON *j, const struct cg_model *m,
              const struct cg_judge_result *r)
{
	cJSON *arr;

	add_figure(j, "cond_acc", r->acc);
	add_figure(j, "judge_real_acc", r->real_acc);
	add_figure(j, "frechet", r->frechet);
	if ((arr = cJSON_AddArrayToObject(j, "per_condition")) == NULL)
		return;
	for (int c = 0; c < r->ncond; c++) {
		const struct cg_judge_cond *jc = &r->cond[c];
		cJSON *e = cJSON_CreateObject();
		const char *name = cg_conds_name(m, c);

		if (e == NULL || !cJSON_AddItemToArray(arr, e)) {
			cJSON_Delete(e);
			return;
		}
		if (name)
			cJSON_AddStringToObject(e, "cond", name);
		else
			cJSON_AddNumberToObject(e, "cond", c);
		cJSON_AddNumberToObject(e, "drawn", (double)jc->drawn);
		add_figure(e, "acc", jc->acc);
		cJSON_AddNumberToObject(e, "real", (double)jc->real);
		add_figure(e, "real_acc", jc->real_acc);
		add_figure(e, "frechet", jc->frechet);
	}
}

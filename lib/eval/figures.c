/*
 * eval/figures.c - a scored shard's figures as a table row or JSON.
 *
 * What each kind of model reports is decided in three small rules
 * (the objective's name, whether bits/dim restates it, the text
 * figures) that the row and the object share, so that the two never
 * disagree on a column.
 */
#include <math.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "eval/figures.h"

/* ------------------------------------------------------------ the rules */

/* The arch's name for its objective (the cvae's: the negative ELBO). */
static const char *
loss_name(const struct cg_model *m)
{
	return m->arch->loss_name ? m->arch->loss_name : "loss";
}

/* Whether an image model's loss is a bound in nats per image, which
 * bits/dim restates: not a classifier's cross-entropy, a diffusion
 * model's mean squared error, nor an adversarial loss. */
static int
nats_per_image(const struct cg_model *m)
{
	return m->arch->classify == NULL && !m->arch->diffusion &&
	       !m->arch->adversarial;
}

/* Bits per dimension: the objective per pixel value. */
static double
bits_per_dim(const struct cg_shard *s, const struct cg_metrics *r)
{
	double dims = (double)s->height * s->width * s->channels;

	return r->loss / (M_LN2 * dims);
}

/*
 * The figures of a text shard.  A text arch's loss is in nats per scored
 * token, and it counts end-of-text as a byte (struct cg_metrics, model.h),
 * so that a model is also scored on where a text ends: bits_per is then
 * per token and per byte at once.
 */
struct text_figures {
	double nats; /* per token */
	double bpb;  /* bits per byte */
	double ppl;  /* perplexity per byte, 2^bpb */
};

static void
text_figures(const struct cg_metrics *r, struct text_figures *t)
{
	t->bpb = r->bits_per;
	t->nats = r->loss;
	t->ppl = exp2(t->bpb);
}

static const char *
sampler_name(const struct cg_diffusion_opts *d)
{
	return d->sampler == CG_SAMPLER_DDPM ? "ddpm" : "ddim";
}

/* ------------------------------------------------------------ the table */

/* The judge's line (the call: its images, seed, features, a diffusion
 * model's sampler), then its table (cg_judge_table). */
static void
judge_table(FILE *fp, const struct cg_figures *f)
{
	const struct cg_diffusion_opts *d = f->diffusion;

	fprintf(fp, "judge %s (%d images per condition, seed %llu, %d features",
	        f->judge, f->judge_samples, (unsigned long long)f->seed,
	        f->jr->nfeatures);
	if (f->judge_temperature != 1.0)
		fprintf(fp, "; temperature %g", f->judge_temperature);
	if (f->m->arch->diffusion) {
		fprintf(fp, "; guidance %g", d->guidance);
		if (d->interval)
			fprintf(fp, " at t/T in [%g, %g]", d->glo, d->ghi);
		fprintf(fp, ", %s", sampler_name(d));
		if (d->steps > 0)
			fprintf(fp, ", %d steps", d->steps);
		else
			fprintf(fp, ", its default steps");
	}
	fprintf(fp, ")\n");
	cg_judge_table(fp, f->m, f->jr);
}

void
cg_figures_table(FILE *fp, const struct cg_figures *f, int *header)
{
	const struct cg_model *m = f->m;
	const struct cg_metrics *r = f->r;
	const struct cg_gen_result *g = f->gen;
	const int text = f->s->kind == CG_PAYLOAD_TEXT;
	const int w = text ? 14 : 10; /* room for "nats_per_token" */
	struct text_figures t;

	if (!*header) {
		fprintf(fp, "%10s %*s", "examples", w,
		        text ? "nats_per_token" : loss_name(m));
		for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
			fprintf(fp, " %10s", m->arch->part_names[i]);
		if (text)
			fprintf(fp, " %10s %10s", "bpb", "ppl");
		else if (nats_per_image(m))
			fprintf(fp, " %10s", "bits/dim");
		if (g)
			fprintf(fp, " %10s %10s", "bleu", "rouge_l");
		fprintf(fp, "  data\n");
		*header = 1;
	}
	text_figures(r, &t);
	fprintf(fp, "%10llu %*.4f", (unsigned long long)r->n, w,
	        text ? t.nats : r->loss);
	for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
		fprintf(fp, " %10.4f", r->part[i]);
	if (text)
		fprintf(fp, " %10.4f %10.4f", t.bpb, t.ppl);
	else if (nats_per_image(m))
		fprintf(fp, " %10.4f", bits_per_dim(f->s, r));
	if (g)
		fprintf(fp, " %10.4f %10.4f", g->bleu, g->rouge_l);
	fprintf(fp, "  %s\n", f->data);
	if (f->jr) {
		judge_table(fp, f);
		*header = 0;
	}
}

/* ------------------------------------------------------------- the JSON */

/* --judge's call into j, then its figures (cg_judge_json). */
static void
judge_json(cJSON *j, const struct cg_figures *f)
{
	const struct cg_diffusion_opts *d = f->diffusion;

	cJSON_AddStringToObject(j, "judge", f->judge);
	cJSON_AddNumberToObject(j, "judge_samples", f->judge_samples);
	cJSON_AddNumberToObject(j, "judge_features", f->jr->nfeatures);
	cJSON_AddNumberToObject(j, "temperature", f->judge_temperature);
	if (f->m->arch->diffusion) {
		cJSON_AddNumberToObject(j, "guidance", d->guidance);
		if (d->interval) {
			const double iv[2] = {d->glo, d->ghi};
			cJSON_AddItemToObject(j, "guidance_interval",
			                      cJSON_CreateDoubleArray(iv, 2));
		}
		cJSON_AddStringToObject(j, "sampler", sampler_name(d));
		if (d->steps > 0)
			cJSON_AddNumberToObject(j, "steps", d->steps);
		else
			cJSON_AddNullToObject(j, "steps");
	}
	cg_judge_json(j, f->m, f->jr);
}

struct cJSON *
cg_figures_json(const struct cg_figures *f)
{
	const struct cg_model *m = f->m;
	const struct cg_metrics *r = f->r;
	const struct cg_gen_result *g = f->gen;
	cJSON *j;

	if ((j = cJSON_CreateObject()) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_AddStringToObject(j, "model", f->model);
	cJSON_AddStringToObject(j, "data", f->data);
	cJSON_AddStringToObject(j, "arch", m->arch->name);
	cJSON_AddNumberToObject(j, "step", (double)m->step);
	cJSON_AddNumberToObject(j, "seed", (double)f->seed);
	if (f->deterministic)
		cJSON_AddBoolToObject(j, "deterministic", 1);
	cJSON_AddNumberToObject(j, "examples", (double)r->n);
	cJSON_AddNumberToObject(j, loss_name(m), r->loss);
	for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
		cJSON_AddNumberToObject(j, m->arch->part_names[i], r->part[i]);
	if (f->s->kind == CG_PAYLOAD_IMAGE) {
		if (nats_per_image(m))
			cJSON_AddNumberToObject(j, "bits_per_dim",
			                        bits_per_dim(f->s, r));
	} else {
		struct text_figures t;

		text_figures(r, &t);
		cJSON_AddNumberToObject(j, "nats_per_token", t.nats);
		cJSON_AddNumberToObject(j, "bpb", t.bpb);
		cJSON_AddNumberToObject(j, "ppl", t.ppl);
	}
	if (g) {
		cJSON_AddNumberToObject(j, "generated", (double)g->n);
		cJSON_AddNumberToObject(j, "generated_bytes", (double)g->bytes);
		cJSON_AddNumberToObject(j, "temperature",
		                        f->sampler->temperature);
		cJSON_AddNumberToObject(j, "top_k", f->sampler->top_k);
		cJSON_AddNumberToObject(j, "top_p", f->sampler->top_p);
		cJSON_AddNumberToObject(j, "bleu", g->bleu);
		cJSON_AddNumberToObject(j, "rouge_l", g->rouge_l);
	}
	if (f->jr)
		judge_json(j, f);
	return j;
}

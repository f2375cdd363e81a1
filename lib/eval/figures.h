/*
 * eval/figures.h - a scored shard's figures as cg-eval reports them.
 *
 * One shard scored by cg_eval_shard (train/train.h), with what
 * --generate (eval/evalgen.h) and --judge (eval/judge.h) added, as a
 * row of the table, the judge's table after it, or one JSON object.
 * Images: the objective, its named parts, and bits per dimension where
 * the objective is a bound in nats per image.  Text: nats per token,
 * the parts, bits per byte and the perplexity per byte, 2^bpb (a text
 * arch counts end-of-text as a byte, struct cg_metrics in
 * model/registry.h), then bleu and rouge_l with --generate.  The
 * figures are only written out here; nothing is computed again.
 */
#ifndef CG_FIGURES_H
#define CG_FIGURES_H

#include <stdint.h>
#include <stdio.h>

#include "data/shard.h"
#include "eval/evalgen.h"
#include "eval/judge.h"
#include "model/model.h"

/* One shard's figures and the call that made them; the caller owns all. */
struct cg_figures {
	const char *model; /* the model's name as given (-m) */
	const char *data;  /* the shard's name as given */
	uint64_t seed;
	int deterministic;
	const struct cg_model *m;
	const struct cg_shard *s;
	const struct cg_metrics *r;
	/* With --generate, else gen NULL: how it drew and what it scored. */
	const struct cg_sampler *sampler;
	const struct cg_gen_result *gen;
	/* With --judge, else jr NULL: the classifier's name as given, the
	 * images drawn per condition and the scale of their noise, a
	 * diffusion model's sampler. */
	const char *judge;
	int judge_samples;
	double judge_temperature;
	const struct cg_diffusion_opts *diffusion;
	const struct cg_judge_result *jr;
};

/*
 * f's row of the table on fp, the header line before it when *header is
 * 0 (then set); with a judge, the judge's line and table after it, and
 * *header set to 0 again, since the next row needs its own.  The shards
 * of one call are all of the model's kind, so one header serves.
 */
void cg_figures_table(FILE *fp, const struct cg_figures *f, int *header);

/*
 * f as a new JSON object (model, data, arch, step, seed, examples, the
 * objective by its arch's name and the parts, then the kind's figures,
 * --generate's and --judge's), owned by the caller; NULL with a message
 * when out of memory.
 */
struct cJSON *cg_figures_json(const struct cg_figures *f);

#endif

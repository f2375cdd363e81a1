/*
 * eval/judge.h - score an image generator with a classifier (cg-eval --judge).
 *
 * The judge is a model whose arch classifies (struct cg_arch's classify,
 * e.g. cclf) trained on the generator's data.  The generator draws n
 * images of each condition as cg-sample draws them (the noise of
 * condition c from (seed, c), at a temperature), each rounded to 8 bits
 * as an image file holds it; the judge classifies them and maps them to
 * its features, and the same for the real images of a held-out shard.
 * Reported: the conditional accuracy (the share of the images drawn for
 * a condition that the judge classifies as it), and the Fréchet distance
 * between the Gaussians fitted to the judge's features of generated and
 * of real images (lib/eval/frechet.h; FID's measure in another network's
 * features), overall and per condition; and, as the yardstick, the
 * judge's own accuracy on the real images.
 */
#ifndef CG_JUDGE_H
#define CG_JUDGE_H

#include <stdint.h>
#include <stdio.h>

#include "data/shard.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most images drawn per condition. */
#define CG_JUDGE_MAX_SAMPLES (1 << 20)

struct cg_judge_opts {
	int samples;        /* images drawn per condition, >= 2 */
	uint64_t seed;      /* of the generator's noise */
	double temperature; /* of the generator's noise (cg-sample's: 1) */
	int batch;          /* images through a model at once */
	/* Called as work is done (may be NULL): done of total images. */
	void (*progress)(void *ctx, int done, int total, double loss);
	void *progress_ctx;
};

/* One condition's figures. */
struct cg_judge_cond {
	uint64_t drawn, right; /* generated; classified as their condition */
	uint64_t real, real_right; /* the shard's; classified right */
	double acc;                /* right / drawn */
	double real_acc;           /* real_right / real; NAN without any */
	double frechet;            /* NAN with fewer than 2 real images */
};

struct cg_judge_result {
	int ncond;
	int nfeatures;
	uint64_t drawn, right, real, real_right;
	double acc, real_acc, frechet;
	struct cg_judge_cond *cond; /* [ncond], owned */
};

/*
 * Whether judge can score m: judge classifies, m draws images, of the
 * same shape, the same number of conditions and the same condition
 * names where both have them.  Returns 0, or -1 with a message that
 * says which model is at fault ("the judge ...", "the model ...").
 */
int cg_judge_check(const struct cg_model *judge, const struct cg_model *m);

/*
 * Score m with judge (cg_judge_check passed) against the real images of
 * shard s, which must fit the judge.  Fills *r (free with
 * cg_judge_result_free).  Returns 0, or -1 with a message (the data
 * does not fit, out of memory, a model's failure); *r then holds
 * nothing to free.
 */
int cg_judge_eval(struct cg_model *m, struct cg_model *judge,
                  const struct cg_shard *s, const struct cg_judge_opts *o,
                  struct cg_judge_result *r);

void cg_judge_result_free(struct cg_judge_result *r);

/*
 * r's figures, for people, on fp: a header, then a row per condition of
 * m (by name, or index where m has none) and one "all": images drawn,
 * conditional accuracy, real images, the judge's accuracy on them and
 * the Fréchet distance ("-" for a figure that is NAN).  Write errors are
 * fp's (ferror).
 */
void cg_judge_table(FILE *fp, const struct cg_model *m,
                    const struct cg_judge_result *r);
/*
 * The same into JSON object j: "cond_acc", "judge_real_acc", "frechet",
 * then "per_condition", an object per condition ("cond" its name or
 * index, "drawn", "acc", "real", "real_acc", "frechet"); a NAN figure is
 * null.  Out of memory, what did not fit is left out.
 */
void cg_judge_json(struct cJSON *j, const struct cg_model *m,
                   const struct cg_judge_result *r);

#ifdef __cplusplus
}
#endif
#endif

/*
 * eval/evalgen.h - score what a text model generates against held-out texts.
 *
 * For each example of a text shard, the model continues the example's
 * condition and prompt; the continuation is compared with the example's
 * own text (the payload after the prompt) by corpus BLEU and mean
 * ROUGE-L F1 (textmetrics.h), both in [0, 1].
 */
#ifndef CG_EVALGEN_H
#define CG_EVALGEN_H

#include <stdint.h>

#include "data/shard.h"
#include "model/model.h"

#define CG_GEN_EXTRA 16 /* default budget: the reference's bytes + this */
#define CG_GEN_CAP 1024 /* ... but no more than this */

struct cg_gen_opts {
	/* How each byte is picked; max_bytes 0: for each example its
	 * reference's length + CG_GEN_EXTRA, at most CG_GEN_CAP. */
	struct cg_sampler sampler;
	uint64_t limit; /* the first limit examples only; 0: all */
	uint64_t seed;  /* example i draws from (seed, its index[i]) */
	/* Called after each example (may be NULL): examples done of total,
	 * and NAN for the loss, which generation has none of. */
	void (*progress)(void *ctx, int done, int total, double loss);
	void *progress_ctx;
};

struct cg_gen_result {
	uint64_t n;     /* examples generated */
	uint64_t bytes; /* bytes generated, over all of them */
	double bleu;    /* corpus BLEU of the continuations, in [0, 1] */
	double rouge_l; /* mean ROUGE-L F1 over the examples, in [0, 1] */
};

/*
 * Generate for the examples of s with m (which must have a sample_text
 * hook and fit s) and score the continuations.  Randomness comes only
 * from o->seed and each example's index in the input, so an example's
 * continuation does not depend on --limit or on the shard it sits in.
 * Returns 0 with *out filled, or -1 with a message.
 */
int cg_eval_generate(struct cg_model *m, const struct cg_shard *s,
                     const struct cg_gen_opts *o, struct cg_gen_result *out);

#endif

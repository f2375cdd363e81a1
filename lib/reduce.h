/*
 * reduce.h - combining gradients and deltas, one input at a time.
 */
#ifndef CG_REDUCE_H
#define CG_REDUCE_H

#include "cg.h"

enum cg_reduce_op { CG_REDUCE_MEAN, CG_REDUCE_SUM };

/*
 * A running reduction.  Inputs are added one at a time and released, so
 * memory is one accumulator plus one input whatever their number.  An
 * input weighs its manifest's "weight" (scored tokens for text, samples
 * otherwise), or its "samples" when it has no weight.  The result is a
 * valid input again: a mean carries its total weight and sample count,
 * so reducing partial means gives the mean of everything.
 */
struct cg_reducer {
	enum cg_reduce_op op;
	struct cg_file *acc; /* first input's layout, data = running sums */
	double weight;	     /* total weight */
	double samples;	     /* total samples */
	double loss;	     /* weighted loss sum */
	uint64_t inputs;
	char base[65];	    /* base digest every input must share */
	uint64_t base_step;
	char kind[16];
};

void cg_reducer_init(struct cg_reducer *r, enum cg_reduce_op op);
/*
 * Add f (taken over and freed in all cases).  Returns 0, or -1 with a
 * message when f is not a grad or delta, comes from another base model,
 * or its tensors differ from the first input's.
 */
int cg_reducer_add(struct cg_reducer *r, struct cg_file *f);
/* The result (the reducer gives it up; the caller frees it), or NULL with
 * a message when nothing was added. */
struct cg_file *cg_reducer_finish(struct cg_reducer *r);
void cg_reducer_free(struct cg_reducer *r);

/* The base digest and step of a grad or delta file; -1 if absent. */
int cg_update_base(const struct cg_file *f, char hex[65], uint64_t *step);

#endif

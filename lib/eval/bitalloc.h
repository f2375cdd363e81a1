/*
 * eval/bitalloc.h - a per-tensor choice of quantized types under a budget
 * of bits per weight, by each tensor's measured sensitivity (what
 * cg-quantize --bits-per-weight does).
 *
 * The types are a ladder, narrowest first: q2_0 (2.5 bits a weight),
 * q4_0 (4.5), q8_0 (8.5), f16 (16).  Each tensor the rule lets take a
 * type (cg_quant_choose: the weight matrices, --keep and --all heeded)
 * is measured alone: the held-out loss of the model with only that
 * tensor quantized to each type of the ladder (model/qat.h: the weights
 * the quantized file will hold, in f32), less the loss of the f32
 * model.  Its sensitivity is that change at the narrowest type per
 * weight: widening a tensor costs bits in proportion to its weights, so
 * a small tensor that matters as much as a large one is the better buy.
 *
 * The choice keeps the order of sensitivity: a tensor is never narrower
 * than a less sensitive one.  Among such choices that meet the budget
 * (bits over the measured tensors, as stored: the blocks' scales
 * counted) it takes the one whose predicted loss change, the sum of the
 * tensors' measured changes, is least; a tensor's change at a type is
 * taken as at least its change at any wider one, so that a wider type
 * is never predicted worse.  Losses of the tensors are assumed to add;
 * the file's loss, measured afterwards, says how well they did.
 */
#ifndef CG_BITALLOC_H
#define CG_BITALLOC_H

#include <stdint.h>

#include "data/shard.h"
#include "eval/quantize.h"
#include "model/model.h"

/* Types of the ladder, narrowest first. */
#define CG_BITALLOC_RUNGS 4
extern const enum cg_dtype cg_bitalloc_ladder[CG_BITALLOC_RUNGS];

struct cg_bitalloc_view {
	int view;                          /* its index in the model's views */
	uint64_t n;                        /* weights */
	uint64_t bytes[CG_BITALLOC_RUNGS]; /* stored at each type */
	double delta[CG_BITALLOC_RUNGS];   /* held-out loss change, alone */
	enum cg_dtype type;                /* the choice */
};

struct cg_bitalloc {
	double base;                /* held-out loss of the f32 model */
	int n;                      /* tensors measured */
	struct cg_bitalloc_view *v; /* [n], most sensitive first */
	/* of the choice: bits per weight over the n tensors, and the
	 * predicted loss change */
	double bits, predicted;
};

/* Bits a weight of the narrowest and the widest type of the ladder. */
double cg_bitalloc_min_bits(void);
double cg_bitalloc_max_bits(void);

/*
 * Measure the tensors of m that rule r (its type ignored; the ladder's
 * narrowest in its place) lets take a type, on shard s in batches of B,
 * the model's noise from seed (cg_eval_shard); m's weights are left as
 * they were.  Returns 0 and fills *a (cg_bitalloc_free), or -1 with a
 * message: no tensor to measure, a shard the model cannot read, a loss
 * that is not finite.
 */
int cg_bitalloc_measure(struct cg_model *m, const struct cg_shard *s,
                        const struct cg_quant_rule *r, int B, uint64_t seed,
                        struct cg_bitalloc *a);
/*
 * Choose each measured tensor's type under budget bpw bits per weight
 * (a->v[].type, a->bits, a->predicted), and types [m->nviews] for
 * cg_quantize's rule (CG_F32 for the others).  Returns 0, or -1 with a
 * message when bpw is below the narrowest type's bits.
 */
int cg_bitalloc_choose(struct cg_bitalloc *a, const struct cg_model *m,
                       double bpw, enum cg_dtype *types);
void cg_bitalloc_free(struct cg_bitalloc *a);

#endif

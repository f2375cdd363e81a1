/*
 * exchange/apply.h - applying an update to a model: the one place where a
 * gradient meets the optimizer and a delta meets the outer step.
 */
#ifndef CG_APPLY_H
#define CG_APPLY_H

#include "exchange/update.h"
#include "model/model.h"
#include "nn/optim.h"

struct cg_stage;

/* How a delta is applied. */
enum cg_outer {
	CG_OUTER_AVG,     /* add it as it is: model averaging */
	CG_OUTER_NESTEROV /* DiLoCo's outer step (cg_outer_nesterov) */
};

/* "avg", "nesterov"; -1 with a message otherwise. */
int cg_outer_parse(const char *s, enum cg_outer *out);

struct cg_apply_opts {
	/* gradients */
	struct cg_optim opt;
	double clip; /* the gradient's norm limit; 0: none */
	/* deltas */
	enum cg_outer outer;
	float outer_lr, outer_mu;
	/* A stale update: the model it was computed from (borrowed), named
	 * base_name in messages; NULL: the update must be computed from the
	 * model it is applied to.  delay_comp: DC-ASGD's lambda for a
	 * gradient (stale.h's cg_delay_comp), 0: none. */
	const struct cg_model *base;
	const char *base_name;
	double delay_comp;
	/* > 0: refuse an update whose differential privacy release would
	 * bring the model's epsilon past this (model/privacy.h) */
	double target_epsilon;
	/* m is a pipeline stage (model/stage.h: cg_stage_read), which only
	 * an update of that very stage fits; NULL: a whole model, which
	 * no stage's update fits.  No stale base and no clip with a stage
	 * (the norm that clip limits is the whole gradient's). */
	const struct cg_stage *stage;
};

/* Defaults: Adam with PyTorch's settings, no clip; avg, outer lr 0.7 and
 * momentum 0.9 (DiLoCo's). */
void cg_apply_defaults(struct cg_apply_opts *o);

/*
 * Apply u to m in place, m named mname in messages.  First the update's
 * base must be m (cg_update_check_base) and its tensors m's views; or,
 * given o->base, the update's base must be o->base (digests equal), of
 * m's tensors, and m's step or an earlier one (cg_update_staleness): a
 * stale update, whose gradient is first corrected by DC-ASGD when
 * o->delay_comp > 0, and which the manifest's "stale" records (its
 * staleness, base and lambda; removed by an apply without o->base).  A
 * gradient then steps the optimizer o->opt on every group that is not
 * frozen, each with its own step count, after clipping its norm (over
 * the groups that step) to o->clip; the moments are allocated when
 * missing.  A delta is added as it is (avg) or through the outer
 * Nesterov step (outer.mom allocated when missing), frozen groups left
 * as they are.  Either way m->step goes up by one, the manifest's
 * "samples" by u's and its "loss" becomes u's; an update noised for
 * differential privacy appends its release to the manifest's "dp"
 * (model/privacy.h), refused first when at another delta than the
 * model's record or, with o->target_epsilon > 0, when it would bring
 * the epsilon past that (an update without a record is refused then
 * too).  A step that leaves a
 * weight or a moment not finite is refused ("the new model is not
 * finite: tensor NAME: element I is inf ...").  Returns 0, or -1 with a
 * message (m is then unchanged unless the failure came after the step:
 * a model not finite, or an allocation in the manifest; write nothing
 * of it then).
 */
int cg_apply_update(struct cg_model *m, const char *mname,
                    const struct cg_update *u, const struct cg_apply_opts *o);

/*
 * The downlink: apply u to m as cg_apply_update does, then publish the
 * change of m compressed under s, so that a worker holding the model m
 * was rebuilds the model m becomes, bit for bit (same digest), by
 * applying the change with --outer avg.
 *
 * The change is the new parameters minus the old plus, with feedback,
 * m's residual "ef.down" (what earlier changes did not carry); it is
 * encoded under s (fitted to budget bytes when budget > 0) into *change,
 * a delta whose base is m as it was and whose samples, weight, loss and
 * inputs are u's.  m then becomes the old parameters plus the decoded
 * change, added as a worker adds it, and the residual keeps the rest:
 * the coordinator's model is the published one.  Frozen groups stay as
 * they are.  Returns 0, or -1 with a message (m, half-updated, is then
 * not to be written).
 */
int cg_apply_publish(struct cg_model *m, const char *mname,
                     const struct cg_update *u, const struct cg_apply_opts *o,
                     const struct cg_uspec *s, uint64_t budget, int feedback,
                     struct cg_file **change);
#endif

/*
 * train/encode.c - a worker's update encoded, its residual and its codec's
 * state kept in the worker's state.
 *
 * Error feedback on the worker's side: what a lossy codec did not send
 * is kept ("ef.residual") and added to the next update, so that it
 * arrives late rather than never.  A masked update (secure aggregation)
 * is exact after the sum and keeps none.  The coordinator's side is
 * exchange/apply.c's cg_apply_publish; both use exchange/feedback.h.
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/feedback.h"
#include "train/encode.h"

struct cg_file *
cg_train_encode(const struct cg_model *m, const struct cg_shard *s,
                struct cg_state *st, float *buf,
                const struct cg_train_result *res, const struct cg_train_enc *e)
{
	const uint64_t P = m->nparams;
	struct cg_uview *v = NULL;
	struct cg_uenc enc = {0};
	struct cg_file *f = NULL;
	float *left = NULL;
	unsigned char id[32];
	uint64_t nq, seedmix;
	int nv;

	if (cg_update_views_of(m, e->frozen, &v, &nv) != 0)
		return NULL;
	/* stochastic rounding and a first low-rank factor: a function of
	 * the seed, the model's step and the shard */
	cg_state_identity(s->file, id);
	seedmix = cg_get_le64(id); /* the same on every host */
	cg_rng_derive(&enc.rng, e->seed, m->step, seedmix);
	nq = cg_uspec_state_floats(e->spec, v, nv);
	if (st && nq &&
	    (enc.warm = cg_state_put(st, cg_uspec_state_name(e->spec), CG_F32,
	                             nq)) == NULL)
		goto out;
	if (st && e->no_feedback) {
		/* a residual kept by earlier calls is dropped, not left to
		 * be added by a later call with feedback */
		void *old;
		if (cg_state_get(st, "ef.residual", CG_F32, P, &old) == 1)
			memset(old, 0, P * sizeof(float));
	}
	enc.mask = e->mask;
	enc.mask_weight = e->mask_weight;
	if (st && !e->no_feedback && !cg_uspec_lossless(e->spec) && !e->mask) {
		void *kept;
		int had = cg_state_get(st, "ef.residual", CG_F32, P, &kept);
		if (had < 0)
			goto out;
		left = had ? kept : cg_state_put(st, "ef.residual", CG_F32, P);
		if (left == NULL)
			goto out;
		/* a new residual is zero: nothing to add */
		if (had)
			cg_feedback_add(buf, left, P, (float)e->decay);
	}
	/* the residual becomes what was not sent */
	f = cg_update_encode_part(m, e->base, e->kind, buf,
	                          (double)res->samples, res->weight,
	                          res->mean.loss, e->spec, &enc, NULL, left,
	                          e->frozen);
	/* what a code puts at a pruned weight the coordinator zeroes:
	 * nothing there is owed to the next call */
	if (f && left)
		cg_model_mask(m, left);
out:
	free(v);
	return f;
}
